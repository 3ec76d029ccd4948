"""``spawn_batch`` of a few entities whose component types have stores skips the general
checks (``World._spawn_few``): it must leave exactly the state the general path leaves,
and hand everything it does not cover (errors included) to that path untouched."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ecs_engine.world as world_module
from ecs_engine import World, component
from ecs_engine.component import component_values
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
