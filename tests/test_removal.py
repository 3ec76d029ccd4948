"""Removing many entities' rows from a store in one pass in C (``_removal.c``): the rows
that move, and where to, must be exactly ``storage.removal_plan``'s as ``remove_runs``
applies them (a world's layout, and so its state hash, may not depend on whether the
extension was built), and bad input must change nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecs_engine import World, component, storage
from ecs_engine.component import schema_of
from ecs_engine.storage import ComponentStore, removal_plan

needs_c = pytest.mark.skipif(not storage.REMOVES_IN_C, reason="the C removal was not built")


@component(name="RemovalByte")
class OneByte:
    v: np.uint8 = 0


@component(name="RemovalOdd")
class FiveBytes:
    v: np.int32 = 0
    w: np.uint8 = 0


@component(name="RemovalPair")
class Pair:
    x: np.float64 = 0.0
    y: np.float64 = 0.0


@component(name="RemovalTag")
class Tag:
    pass


KINDS = (OneByte, FiveBytes, Pair, Tag)


def store_with(ctype: type, slots: list[int], capacity: int) -> ComponentStore:
    """A store whose row i holds the key of ``slots[i]`` (generation 1 + i % 3) and
    distinct bytes."""
    store = ComponentStore(schema_of(ctype), capacity)
    keys = np.array([(1 + i % 3) << 32 | s for i, s in enumerate(slots)], np.uint64)
    store.append(keys)
    if store.data.itemsize:  # (a tag's rows hold no bytes)
        raw = store.data.view(np.uint8)
        raw[: len(slots) * store.data.itemsize] = np.arange(
            len(slots) * store.data.itemsize, dtype=np.int64) % 251
    return store


def state(store: ComponentStore) -> tuple[Any, ...]:
    n = store.n
    return (n, store.data[:n].tobytes(), store.entities[:n].tolist(), store.sparse.tolist())


@st.composite
def cases(draw: st.DrawFn) -> tuple[type, list[int], list[int], list[int], int]:
    ctype = draw(st.sampled_from(KINDS))
    n = draw(st.integers(0, 60))
    capacity = n + draw(st.integers(0, 40))
    slots = draw(st.permutations(list(range(capacity))))[:n]
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
    bounds = [*cuts, n]
    gone = draw(st.lists(st.sampled_from(range(capacity)), unique=True, max_size=capacity)
                if capacity else st.just([]))
    return ctype, slots, bounds, gone, capacity


@needs_c
@settings(max_examples=400, deadline=None)
@given(cases())
def test_the_same_rows_move_as_with_the_numpy_plan(
        case: tuple[type, list[int], list[int], list[int], int]) -> None:
    ctype, slots, bounds, gone, capacity = case
    in_c, in_numpy = store_with(ctype, slots, capacity), store_with(ctype, slots, capacity)
    gone_slots = np.array(gone, np.int64)
    cut = in_c.remove_slots(gone_slots, list(bounds))
    rows = in_numpy.rows_of(gone_slots)
    held = rows >= 0
    if not held.any():
        assert cut is None and state(in_c) == state(in_numpy)
        return
    plan = removal_plan(rows[held], list(bounds))
    in_numpy.remove_runs(gone_slots[held], list(bounds), plan)
    assert cut == plan[2]
    assert state(in_c) == state(in_numpy)


@needs_c
@pytest.mark.parametrize("bad", ["outside", "wrong row", "twice", "descending", "dtype"])
def test_bad_input_changes_nothing(bad: str) -> None:
    store = store_with(Pair, [3, 1, 4, 0, 5, 9], 12)
    before = state(store)
    slots = np.array([1, 5], np.int64)
    bounds = [6]
    if bad == "outside":
        slots = np.array([1, 12], np.int64)
    elif bad == "wrong row":
        store.sparse[7] = 2  # slot 7 claims row 2, which holds slot 4
        before = state(store)
        slots = np.array([1, 7], np.int64)
    elif bad == "twice":
        slots = np.array([1, 1], np.int64)
    elif bad == "descending":
        bounds = [4, 2, 6]
    else:
        slots = slots.astype(np.int32)
    with pytest.raises(ValueError):
        store.remove_slots(slots, bounds)
    assert state(store) == before


@needs_c
def test_a_world_despawns_to_the_same_layout_with_or_without_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Random batch despawns from worlds with nested groups, in C and in numpy, in
    step: the same state hash after every one."""
    rng = np.random.default_rng(7)

    def build() -> World:
        world = World(seed=1)
        world.group(Pair, FiveBytes)
        world.group(Pair, FiveBytes, OneByte)
        for kinds in ((Pair, FiveBytes, OneByte), (Pair, FiveBytes), (Pair, Tag), (OneByte,),
                      (FiveBytes, OneByte, Tag), (Tag,)):
            world.spawn_batch(*(k() for k in kinds), count=300)
        return world

    worlds = {True: build(), False: build()}
    for _ in range(25):
        doomed = rng.choice(worlds[True].entities(), rng.integers(3, 120), replace=False)
        fresh = KINDS[: rng.integers(1, 5)]
        for in_c, world in worlds.items():
            monkeypatch.setattr(storage, "REMOVES_IN_C", in_c)
            world.despawn_batch(doomed)
            world.spawn_batch(*(k() for k in fresh), count=40)
        assert worlds[True].state_hash() == worlds[False].state_hash()
    with worlds[True].query(Pair, FiveBytes, OneByte) as q:
        assert q.aligned


@needs_c
def test_the_private_functions_refuse_arrays_they_cannot_move_as_bytes() -> None:
    from ecs_engine._removal import move_block, remove_slots

    keys = np.array([1 << 32 | 0, 1 << 32 | 1], np.uint64)
    sparse = np.array([0, 1], np.int32)
    slots = np.array([0], np.int64)
    objects = np.array([object(), object()], dtype=object)
    with pytest.raises(ValueError, match="plain values"):
        remove_slots(objects, keys, sparse, slots, [2])  # (references moved uncounted)
    with pytest.raises(ValueError, match="move_block: data must be a numpy array of plain"):
        move_block(objects, keys, sparse, 1, 0, 1)
    shared = np.zeros(4, np.uint64)
    with pytest.raises(ValueError, match="overlap"):
        remove_slots(shared.view(np.uint8), shared[2:], sparse, slots, [2])
    with pytest.raises(ValueError, match="move_block: the arrays overlap"):
        move_block(shared.view(np.uint8), shared[2:], sparse, 1, 0, 1)
    assert keys.tolist() == [1 << 32, 1 << 32 | 1] and sparse.tolist() == [0, 1]


def test_despawning_nothing_moves_nothing_on_either_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty batch (here deferred inside a block) changes no version on either path
    (the numpy path once moved every grouped store's versions for it)."""
    for in_c in (True, False) if storage.REMOVES_IN_C else (False,):
        monkeypatch.setattr(storage, "REMOVES_IN_C", in_c)
        world = World(seed=1)
        world.group(Pair, FiveBytes)
        world.spawn_batch(Pair(), FiveBytes(), count=30)
        store = world._stores[Pair]
        before = (store.layout_version, store.data_version, world._layout_clock.stamp)
        with world.query(OneByte) as q:
            world.despawn_batch([])
            assert len(q) == 0
        assert (store.layout_version, store.data_version,
                world._layout_clock.stamp) == before


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.sampled_from(KINDS), st.integers(1, 60), st.data())
def test_a_block_moves_as_with_numpy(ctype: type, n: int, data: st.DataObject) -> None:
    """ComponentStore.move_block in C (a run of fresh rows into a group's prefix) and in
    numpy: the same rows, keys and index, whether the runs lie apart, touch or overlap."""
    count = data.draw(st.integers(0, n - 1))
    start = data.draw(st.integers(1, n - count)) if n - count >= 1 else 0
    to = data.draw(st.integers(0, start - 1)) if start else 0
    if start == 0:
        return
    slots = data.draw(st.permutations(list(range(n + 5))))[:n]
    stores = store_with(ctype, slots, n + 5), store_with(ctype, slots, n + 5)
    stores[0].move_block(start, to, count)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(storage, "_move_block", None)
        stores[1].move_block(start, to, count)
    assert state(stores[0]) == state(stores[1])
    assert stores[0].layout_version == stores[1].layout_version


@needs_c
def test_a_block_outside_the_rows_changes_nothing() -> None:
    store = store_with(Pair, [3, 1, 2, 0], 8)
    before = state(store)
    for start, to, count in ((2, 2, 1), (15, 0, 2), (1, -1, 1), (17, 0, 1)):  # (16 rows)
        with pytest.raises(ValueError, match="outside the arrays"):
            storage._move_block(store.data, store.entities, store.sparse,  # type: ignore[misc]
                                start, to, count)
    store.entities[3] = 1 << 32 | 50  # a key outside the index
    with pytest.raises(ValueError, match="outside the index"):
        storage._move_block(store.data, store.entities, store.sparse, 2, 0, 2)  # type: ignore[misc]
    store.entities[3] = 1 << 32 | 0
    assert state(store) == before
