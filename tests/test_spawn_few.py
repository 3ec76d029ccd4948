"""``spawn_batch`` of a few entities whose component types have stores skips the general
checks (``World._spawn_few``): it must leave exactly the state the general path leaves,
and hand everything it does not cover (errors included) to that path untouched."""

from __future__ import annotations

import random
import warnings
from typing import Any
from unittest import mock

import numpy as np
import pytest

import ecs_engine.world as world_module
from ecs_engine import World, component, field
from ecs_engine.component import component_values, schema_of
from ecs_engine.hierarchy import ChildOf


@component
class Pos:
    x: np.float64 = 0.0
    y: np.float64 = 0.0


@component
class Vel:
    dx: np.float32 = 0.0


@component
class Hp:
    hp: np.int16 = 5
    alive: bool = True


@component
class Tag: ...


def program(world: World) -> list[list[int]]:
    """Spawns of 1-4 entities mixing batched, scalar and default components, some of
    them joining the (Pos, Vel) group, with despawns between."""
    world.group(Pos, Vel)
    world.spawn_batch(Pos(), Vel(), Hp(), Tag(), count=6)  # (creates every store)
    made = []
    for k in (1, 2, 3, 4, 1, 3):
        xs = np.arange(k, dtype=np.float64) + 10 * k
        made.append(world.spawn_batch(Pos(x=xs, y=-1.0), Vel(dx=np.full(k, 0.5, np.float32)),
                                      Hp(hp=np.arange(k, dtype=np.int16)), count=k).tolist())
        made.append(world.spawn_batch(Pos(y=xs), Tag()).tolist())  # count from the batch
        made.append(world.spawn_batch(Vel(dx=2.0), Hp(alive=False), count=k).tolist())
        world.despawn_batch(made[-3][:1])
    return made


def test_few_spawns_leave_the_state_the_general_path_leaves(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fast = World(seed=3)
    calls = []
    original = World._spawn_few

    def counted(self: World, components: tuple[Any, ...], count: Any) -> Any:
        out = original(self, components, count)
        calls.append(out is not None)
        return out

    with monkeypatch.context() as patch:
        patch.setattr(World, "_spawn_few", counted)
        made_fast = program(fast)
    assert calls and all(calls[1:])  # every call after the first took the fast path
    with monkeypatch.context() as patch:
        patch.setattr(world_module, "SMALL_SPAWN", 0)  # everything through numpy
        general = World(seed=3)
        made_general = program(general)
    assert made_fast == made_general
    assert fast.state_hash() == general.state_hash()
    with fast.query(Pos, Vel) as q:
        assert q.aligned and len(q) == fast.count(Vel) - 14  # (Vel-only: 1+2+3+4+1+3)


def test_what_the_fast_path_does_not_cover_still_works_or_raises() -> None:
    world = World()
    world.spawn_batch(Pos(), Hp(), count=2)
    assert world.spawn_batch(Pos(), count=0).tolist() == []
    keys = world.spawn_batch(Pos(x=[1.0, 2.0]), count=np.int64(2))  # type: ignore[arg-type]  # numpy
    assert world.get_batch(keys, Pos)["x"].tolist() == [1.0, 2.0]
    fresh = world.spawn_batch(Vel(dx=1.0), count=2)  # a type with no store yet
    assert world.count(Vel) == 2 and len(fresh) == 2
    with pytest.raises(ValueError, match="count=3 but the batch has 2"):
        world.spawn_batch(Pos(x=np.zeros(2)), count=3)
    with pytest.raises(ValueError, match="batch lengths differ"):
        world.spawn_batch(Pos(x=np.zeros(2)), Hp(hp=np.zeros(3, np.int16)))
    with pytest.raises(ValueError, match="given twice"):
        world.spawn_batch(Pos(), Pos(), count=1)
    with pytest.raises(ValueError, match="give count="):
        world.spawn_batch(Pos())
    with pytest.raises(TypeError, match="count must be an int"):
        world.spawn_batch(Pos(), count=1.5)  # type: ignore[arg-type]
    parent = world.spawn(Hp())
    child = world.spawn_batch(ChildOf(parent=parent), Pos(), count=1)  # a parent link
    assert world.parent(int(child[0])) == parent
    assert len(world) == 2 + 2 + 2 + 1 + 1


def test_batched_fields_of_their_own_dtype_are_kept_as_given() -> None:
    """Converters take a 1-d array of the field's dtype as the batch without numpy's
    checks; arrays of other dtypes or shapes are still checked."""
    xs = np.arange(3, dtype=np.float64)
    _, values, batch = component_values(Pos(x=xs))
    assert batch == 3 and values["x"] is xs
    assert component_values(Hp(alive=np.array([True, False])))[2] == 2
    assert component_values(Hp(hp=np.arange(4, dtype=np.int16)))[2] == 4
    with pytest.raises(ValueError, match="out of range"):
        Hp(hp=np.array([1, 40_000]))  # int64: range-checked
    with pytest.raises(ValueError, match="overflows float32"):
        Vel(dx=np.array([1e39]))  # float64 into float32: range-checked
    with pytest.raises(ValueError, match="does not fit"):
        Pos(x=np.zeros((2, 2)))  # 2-d for a one-value field
    assert component_values(Pos(x=np.float64(2.5)))[2] is None  # a 0-d value: no batch


@component
class SmallInts:
    v: np.int8 = 0
    u: np.uint16 = 0


@component
class Floats:
    x: np.float32 = 0.0
    y: np.float64 = 0.0


@component
class Flag:
    b: np.bool_ = False


@component
class Ref:
    e: np.uint64 = 0


@component
class Slots:
    a: np.ndarray = field(np.int32, shape=3)
    c: np.int32 = 0


_MIXED = (SmallInts, Floats, Flag, Ref, Slots, Tag)
# scalars in and out of range, floats for ints, nan, numpy scalars, and batches: arrays of
# the field's own dtype (the converters' fast path), of other dtypes, and lists
_VALUES: tuple[Any, ...] = (
    0, 1, -1, 127, 128, -129, 255, 65535, 65536, 2**63, -2**63, 2**64, 1.5, 2.0,
    float("nan"), float("inf"), -0.0, True, False, 1e39, np.int8(5), np.uint16(7),
    np.float32(1.5), np.float64(2.5), np.int64(300), np.bool_(True),
    "own", np.int64, np.float64, np.bool_, "nan", "list")


def _random_component(rnd: random.Random, ctype: type, n: int) -> Any:
    values: dict[str, Any] = {}
    for spec in schema_of(ctype).fields:
        if rnd.random() < 0.4:
            continue
        value = rnd.choice(_VALUES)
        if isinstance(value, str) or isinstance(value, type):
            rows = n if rnd.random() < 0.9 else n + 1  # (sometimes a length mismatch)
            base = [rnd.choice([0, 1, 2, 100, -3, 1e20, 0.5]) for _ in range(rows)]
            if value == "nan":
                base[0], value = float("nan"), np.float64
            if value == "list":
                value = base
            else:
                with np.errstate(all="ignore"):
                    value = np.array(base).astype(spec.dtype if value == "own" else value)
                if spec.shape and rnd.random() < 0.5:
                    value = np.repeat(value[:, None], 3, axis=1)
        values[spec.name] = value
    return ctype(**values)


def _mixed_program(seed: int) -> list[Any]:
    """Random few-entity spawn_batch calls (conversions that pass and fail, count= that
    agrees or not, groups): each call's keys or its error, whether a failed call left the
    state unchanged, and the final state hash."""
    rnd = random.Random(seed)
    world = World(seed=1, auto_group=False)
    world.register(*_MIXED)
    if rnd.random() < 0.5:
        world.group(SmallInts, Floats)
    if rnd.random() < 0.3:
        world.group(Flag, Tag)
    world.spawn_batch(SmallInts(v=1), Floats(), count=3)
    out: list[Any] = []
    for _ in range(8):
        n = rnd.randint(1, 5)
        types = [t for t in _MIXED if rnd.random() < 0.5]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                comps = [_random_component(rnd, t, n) for t in types]
        except (ValueError, TypeError) as exc:
            out.append(("refused by the constructor", type(exc).__name__))
            continue
        count = rnd.choice([None, n, n + 1, 0, -1, 2.0, np.int64(n)])
        before = world.state_hash()
        try:
            keys = world.spawn_batch(*comps, count=count)  # type: ignore[arg-type]
        except (ValueError, TypeError) as exc:
            out.append((type(exc).__name__, str(exc), world.state_hash() == before))
        else:
            out.append(keys.tolist())
    out.append(world.state_hash())
    return out


@pytest.mark.parametrize("seed", range(40))
def test_few_spawns_of_mixed_values_match_the_batch_path(seed: int) -> None:
    """Keys, errors (and a world unchanged by each) and the final state equal the batch
    path's (SMALL_SPAWN = 0: neither the few-spawn path nor the row-by-row spawn)."""
    few = _mixed_program(seed)
    with mock.patch.object(world_module, "SMALL_SPAWN", 0):
        general = _mixed_program(seed)
    assert few == general
    assert all(entry[2] for entry in few if isinstance(entry, tuple) and len(entry) == 3)
