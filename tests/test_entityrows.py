"""One entity's rows added or removed in one C call (``_entityrows.c``: ``spawn``,
``spawn_batch`` of a few, ``despawn`` of one) against the Python methods it replaces: two
worlds run the same random program, one with the extension and one without, and must
agree on every row's bytes and key, every index entry, every group's size and every
version and chunk mark after every step (a world's layout, versions and state hash may
not depend on whether the extension was built). Stores that are not as ComponentStore
keeps them are left to the Python path, unchanged."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ecs_engine.world as world_module
from ecs_engine import World, component, field, storage
from ecs_engine.native import c_module
from tests.test_nested_groups import A, B, C, D, E
from tests.world_state import check_invariants, world_state

entityrows = c_module("_entityrows")
needs_c = pytest.mark.skipif(entityrows is None, reason="ecs_engine._entityrows was not built")


@component(name="RowsOdd")
class Odd:
    v: np.int32 = 0
    w: np.uint8 = 0  # 5-byte rows


@component(name="RowsPair")
class Pair:
    x: np.float32 = 0.0
    y: np.float64 = 0.0


@component(name="RowsTag")
class Tag:
    pass


@component(name="RowsShaped")
class Shaped:
    v: np.int16 = 0
    path: np.ndarray = field(np.float64, shape=3)  # per-row shape: written by _write_row


TYPES: tuple[type, ...] = (A, B, C, D, E, Odd, Pair, Tag, Shaped)
CHAIN = ((A, B), (A, B, C), (A, B, C, D), (A, B, C, D, E))
SECOND: tuple[tuple[type, ...], ...] = ((), (Odd, Pair), (Tag, Odd), (Pair, Shaped))


@contextlib.contextmanager
def python_rows() -> Iterator[None]:
    """The Python methods only (as without the extension)."""
    saved = world_module._insert_entity, world_module._remove_entity
    world_module._insert_entity = world_module._remove_entity = None
    try:
        yield
    finally:
        world_module._insert_entity, world_module._remove_entity = saved


def internals(world: World) -> dict[str, Any]:
    """Everything the row moves touch, beyond ``world_state``: indexes, versions, chunk
    marks, group sizes and the layout clock."""
    out: dict[str, Any] = {"state": world_state(world), "hash": world.state_hash()}
    for store in world._stores.values():
        out[store.schema.name] = (store.n, store.group_size, store.sparse.tobytes(),
                                  store.entities[: store.n].tobytes(),
                                  store.data[: store.n].tobytes(), store.layout_version,
                                  store.data_version, store.chunk_versions.tobytes())
    out["groups"] = [(g.size, tuple(s.schema.name for s in g.stores)) for g in world._groups]
    out["clock"] = next(iter(world._stores.values())).clock.stamp
    return out


def make(mix: list[type], value: int, batch: int | None) -> list[Any]:
    """Components of ``mix`` with values from ``value`` (a batch of ``batch`` rows, or
    single components)."""
    comps: list[Any] = []
    for i, t in enumerate(mix):
        if t is Tag:
            comps.append(Tag())
            continue
        v = value + 10 * i
        if batch is not None:
            vs = np.arange(batch) + v
            if t is Pair:
                comps.append(Pair(x=vs.astype(np.float32) / 4, y=vs / 3))
            elif t is Odd:
                comps.append(Odd(v=vs.astype(np.int32), w=(vs % 256).astype(np.uint8)))
            elif t is Shaped:
                comps.append(Shaped(v=vs.astype(np.int16)))  # path: the default
            else:
                comps.append(t(v=vs))
        elif t is Pair:
            comps.append(Pair(x=v / 4, y=v / 3) if v % 2 else Pair(y=v / 7))
        elif t is Odd:
            comps.append(Odd(v=v, w=v % 256) if v % 3 else Odd())
        elif t is Shaped:
            comps.append(Shaped(v=v % 1000, path=[v, 1.0, 2.0]) if v % 2 else Shaped(v=1))
        else:
            comps.append(t(v=v))
    return comps


step = st.one_of(
    st.tuples(st.just("spawn"), st.lists(st.sampled_from(TYPES), min_size=1, unique=True),
              st.integers(-500, 500)),
    st.tuples(st.just("spawn_batch"), st.lists(st.sampled_from(TYPES), min_size=1,
                                                unique=True),
              st.integers(-500, 500), st.integers(1, world_module.SMALL_SPAWN)),
    st.tuples(st.just("many"), st.lists(st.sampled_from(TYPES), min_size=1, unique=True),
              st.integers(-500, 500), st.integers(5, 40)),
    st.tuples(st.just("despawn"), st.integers(0, 10**6)),
    st.tuples(st.just("despawn_batch"), st.integers(0, 10**6)),
)


def run(world: World, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "spawn":
        world.spawn(*make(op[1], op[2], None))
    elif kind in ("spawn_batch", "many"):
        world.spawn_batch(*make(op[1], op[2], op[3]), count=op[3])
    else:
        live = sorted(world.entities().tolist())
        if not live:
            return
        key = live[op[1] % len(live)]
        if kind == "despawn":
            world.despawn(key)
        else:
            world.despawn_batch(np.array([key], np.uint64))


def fresh(levels: int, second: tuple[type, ...]) -> World:
    world = World(seed=3, auto_group=False)
    world.register(*TYPES)
    for level in CHAIN[:levels]:
        world.group(*level)
    if second:
        world.group(*second)
    return world


@needs_c
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(levels=st.sampled_from([0, 1, 2, 3, 4, 4]), second=st.sampled_from(SECOND),
       program=st.lists(step, min_size=1, max_size=40), small_chunks=st.booleans())
def test_one_entity_in_c_moves_the_rows_python_moves(
        levels: int, second: tuple[type, ...], program: list[tuple[Any, ...]],
        small_chunks: bool) -> None:
    with pytest.MonkeyPatch.context() as mp:
        if small_chunks:  # (rows in several chunks: every moved row's chunk is marked)
            mp.setattr(storage, "CHUNK_ROWS", 4)
            mp.setattr(world_module, "CHUNK_ROWS", 4)
        with_c, without = fresh(levels, second), fresh(levels, second)
        for op in program:
            run(with_c, op)
            with python_rows():
                run(without, op)
            assert internals(with_c) == internals(without), op
        check_invariants(with_c)


@needs_c
def test_the_c_calls_are_taken() -> None:
    """The spawn and despawn of one entity reach the extension (not only its fallback)."""
    calls: list[str] = []
    insert, remove = entityrows.insert_entity, entityrows.remove_entity  # type: ignore[union-attr]

    def counted_insert(*args: Any) -> bool:
        calls.append("insert")
        done: bool = insert(*args)
        assert done
        return done

    def counted_remove(*args: Any) -> bool:
        calls.append("remove")
        done: bool = remove(*args)
        assert done
        return done

    world = fresh(4, (Odd, Pair))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(world_module, "_insert_entity", counted_insert)
        mp.setattr(world_module, "_remove_entity", counted_remove)
        e = world.spawn(*make([A, B, C, Tag, Shaped], 5, None))
        keys = world.spawn_batch(*make([E, Shaped], 7, 2), count=2)  # (row by row)
        one = world.spawn_batch(*make([A, B, C, D], 9, 1), count=1)
        world.despawn(e)
        world.despawn_batch(keys[:1])
        world.despawn_batch(one)
    assert calls == ["insert"] * 4 + ["remove"] * 3
    assert world.get(int(keys[1]), E)["v"] == 8 and world.get(int(keys[1]), Shaped)["v"] == 18


class FakeStore:
    """Attributes named as ComponentStore's, but not its arrays."""

    def __init__(self) -> None:
        self.n = 1
        self.data = [1, 2, 3]
        self.entities = np.zeros(4, np.uint64)
        self.sparse = np.full(4, -1, np.int32)
        self._chunk_versions = np.zeros(1, np.int64)
        self.owner = None
        self.group_size = 0


@needs_c
def test_stores_it_does_not_know_are_left_to_python() -> None:
    assert entityrows is not None
    fake = FakeStore()
    assert entityrows.insert_entity([fake], 1 << 32 | 2, 2, [(1,)], 0, 4) is False
    assert fake.n == 1 and fake.sparse.tolist() == [-1] * 4
    assert entityrows.remove_entity([fake], 2, 4) is True  # (not in it: nothing to do)
    fake.sparse[2], fake.entities[0] = 0, 1 << 32 | 2
    assert entityrows.remove_entity([fake], 2, 4) is False
    assert fake.n == 1 and fake.sparse[2] == 0
    world = World()
    key = world.spawn(A(v=1))
    store = world._stores[A]
    store.sparse = store.sparse.astype(np.int64)  # not the index's dtype
    assert entityrows.remove_entity([store], key & 0xFFFFFFFF, 4) is False
    assert store.n == 1 and store.sparse[key & 0xFFFFFFFF] == 0
    store.sparse = store.sparse.astype(np.int32)
    world.despawn(key)  # (the C call again, now that the index is one)
    assert store.n == 0 and not world.is_alive(key)


@needs_c
def test_bad_calls_raise() -> None:
    assert entityrows is not None
    with pytest.raises(TypeError, match="takes 6 arguments"):
        entityrows.insert_entity([], 1, 1)
    with pytest.raises(TypeError, match="lists of one length"):
        entityrows.insert_entity([], 1 << 32 | 1, 1, [()], 0, 4)
    with pytest.raises(ValueError, match="the key's slot"):
        entityrows.insert_entity([], 1 << 32 | 1, 2, [], 0, 4)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        entityrows.remove_entity([], 1)
    with pytest.raises(ValueError, match="bad slot"):
        entityrows.remove_entity([], -1, 4)


def twins(run: Callable[[World], None]) -> tuple[World, World]:
    """``run`` on a fresh world with the extension and on one without."""
    with_c, without = World(seed=1), World(seed=1)
    run(with_c)
    with python_rows():
        run(without)
    return with_c, without


def numbered(prefix: str, count: int) -> list[type]:
    """``count`` one-field component types named ``prefix0``, ``prefix1``, ..."""
    return [component(name=f"{prefix}{i}")(
        type(f"{prefix}{i}", (), {"__annotations__": {"v": np.int32}, "v": 0}))
        for i in range(count)]


@needs_c
def test_more_levels_than_the_c_call_holds_go_to_python() -> None:
    """17 nested levels (more than the C insert holds): the spawn falls back to Python
    with nothing changed, and the world ends as it does without the extension."""
    types = numbered("Deep", 18)

    def run(world: World) -> None:
        for k in range(2, 19):
            world.group(*types[:k])
        world.spawn(*[t(v=1) for t in types])
        keys = world.spawn_batch(*[t(v=2) for t in types], count=2)
        world.despawn(int(keys[0]))

    with_c, without = twins(run)
    assert len(with_c) == 2
    assert internals(with_c) == internals(without)


@needs_c
def test_a_group_too_big_for_the_c_call_changes_nothing_before_python_removes() -> None:
    """A group of 65 types (more stores than the C removal holds) whose entity also has
    a store that comes first in the world: the despawn must not remove that store's row
    and then give up; it is left whole to Python."""
    types = numbered("Wide", 65)

    @component(name="AnExtra")  # (stores go in name order: this one first)
    class Extra:
        v: np.int32 = 0

    def run(world: World) -> None:
        world.spawn(Extra(v=1))  # (Extra's store first in the world's stores)
        world.group(*types)
        first = world.spawn(Extra(v=5), *[t(v=i) for i, t in enumerate(types)])
        world.spawn(Extra(v=6), *[t(v=i) for i, t in enumerate(types)])
        world.despawn(first)

    with_c, without = twins(run)
    assert len(with_c) == 2
    assert internals(with_c) == internals(without)
    check_invariants(with_c)
