"""The one-pass key checks in C (``_keyindex.c``) against the numpy passes they replace.

Loads take the C checks where the extension was built and the numpy ones elsewhere; both
must give the same answers for every slot table and every key, hostile ones included.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecs_engine import SaveFileError, World, component, snapshot
from ecs_engine.slotmap import SlotTable
from ecs_engine.snapshot import KeyIndex, live_keys


@component
class Tag:
    n: np.int32 = 0


needs_c = pytest.mark.skipif(snapshot._index_in_one_pass is None,
                             reason="ecs_engine._keyindex was not built (no C compiler)")


def test_ci_builds_the_c_key_check() -> None:
    """CI sets ECS_REQUIRE_C=1: a build that silently fell back to numpy fails there."""
    if snapshot._index_in_one_pass is None and os.environ.get("ECS_REQUIRE_C"):
        pytest.fail("ecs_engine._keyindex is missing: `pip install -e .` did not build "
                    "it (is a C compiler installed?)")


def build_both(keys: np.ndarray, live: np.ndarray, capacity: int,
               monkeypatch: pytest.MonkeyPatch) -> tuple[KeyIndex, KeyIndex]:
    in_c = KeyIndex.build(keys, live, capacity)
    with monkeypatch.context() as m:
        m.setattr(snapshot, "_index_in_one_pass", None)
        in_numpy = KeyIndex.build(keys, live, capacity)
    return in_c, in_numpy


@st.composite
def tables_and_keys(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A slot table (generations, free slots) and stored keys: live ones, in any order,
    some repeated, and maybe a dead, stale, past-the-table or extreme one."""
    slots = draw(st.integers(1, 40))
    generations = np.array(draw(st.lists(st.integers(0, 2**32 - 1), min_size=slots,
                                         max_size=slots)), np.uint32)
    free = np.array(sorted(draw(st.sets(st.integers(0, slots - 1)))), np.int64)
    live = live_keys(generations, free)
    alive = [int(k) for i, k in enumerate(live) if i not in set(free.tolist())]
    keys: list[int] = []
    if alive:
        keys = draw(st.lists(st.sampled_from(alive), unique=True))
    if draw(st.booleans()) and keys:
        keys.append(draw(st.sampled_from(keys)))  # a repeated entity
    if draw(st.booleans()):
        slot = draw(st.integers(0, slots + 3))
        odd = draw(st.sampled_from([
            0, 2**64 - 1, slot,  # NULL, all ones, generation 0
            (int(generations[min(slot, slots - 1)]) + 1) % 2**32 << 32 | slot,  # stale
            draw(st.integers(0, 2**64 - 1))]))
        keys.insert(draw(st.integers(0, len(keys))), odd)
    return generations, free, np.array(keys, np.uint64)


@needs_c
@settings(max_examples=400, deadline=None)
@given(tables_and_keys())
def test_c_and_numpy_agree(case: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    generations, free, keys = case
    live = live_keys(generations, free)
    with pytest.MonkeyPatch.context() as monkeypatch:
        in_c, in_numpy = build_both(keys, live, len(live) + 5, monkeypatch)
    assert (in_c.alive, in_c.unique) == (in_numpy.alive, in_numpy.unique)
    if in_c.unique:  # the index is used only then
        assert np.array_equal(in_c.sparse, in_numpy.sparse)
        rows = in_c.sparse[keys.astype(np.int64) & 0xFFFF_FFFF]
        assert np.array_equal(rows, np.arange(len(keys)))


@needs_c
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 2**32 - 1), min_size=1, max_size=50), st.data())
def test_live_key_tables_agree(generations: list[int], data: st.DataObject) -> None:
    free = data.draw(st.lists(st.integers(0, len(generations) - 1), unique=True))
    gens, free_slots = np.array(generations, np.uint32), np.array(free, np.int64)
    in_c = live_keys(gens, free_slots)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(snapshot, "_fill_in_one_pass", None)
        assert np.array_equal(in_c, live_keys(gens, free_slots))


@needs_c
def test_a_free_list_outside_the_table_is_refused_as_numpy_refuses_it() -> None:
    with pytest.raises(IndexError):
        live_keys(np.ones(3, np.uint32), np.array([3], np.int64))
    check = snapshot._fill_in_one_pass
    assert check is not None
    with pytest.raises(ValueError, match="differ in length"):
        check(np.ones(3, np.uint32), np.zeros(0, np.int64), np.empty(2, np.uint64))
    with pytest.raises(ValueError, match="generations must be a 1-d array of native 4-byte"):
        check(np.ones(3, np.uint64), np.zeros(0, np.int64), np.empty(3, np.uint64))


@pytest.mark.parametrize("in_c", [True, False])
@pytest.mark.parametrize("generations, why", [
    (np.array([1, 2**32], np.int64), "past 2\\*\\*32 - 1"),
    (np.array([1, -1], np.int64), "generation 0 is reserved"),
    (np.array([1.0, 2.0]), "generations must be a 1-d array of integers"),
])
def test_a_foreign_slot_table_with_generations_out_of_range_is_refused(
        in_c: bool, generations: np.ndarray, why: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The C path reads generations as uint32: a wider table must not wrap into a
    generation 0 slot (or another entity's key) on the way."""
    if in_c and snapshot._fill_in_one_pass is None:
        pytest.skip("no C key checks in this build")
    if not in_c:
        monkeypatch.setattr(snapshot, "_fill_in_one_pass", None)
        monkeypatch.setattr(snapshot, "_index_in_one_pass", None)
    source = World()
    keys = source.spawn_batch(Tag(n=7), count=2)
    snap = source.snapshot()
    bad = dataclasses.replace(snap, slots=SlotTable(generations, snap.slots.alive,
                                                    snap.slots.free))
    world = World()
    kept = world.spawn(Tag(n=1))
    with pytest.raises(SaveFileError, match=why):
        world.restore(bad)
    assert world.get(kept, Tag)["n"] == 1 and len(world) == 1
    del keys


@pytest.mark.parametrize("in_c", [True, False])
def test_a_free_slot_outside_the_table_is_refused_on_both_paths(
        in_c: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if in_c and snapshot._fill_in_one_pass is None:
        pytest.skip("no C key checks in this build")
    if not in_c:
        monkeypatch.setattr(snapshot, "_fill_in_one_pass", None)
    for free in ([-1], [3], [0, 5]):
        with pytest.raises(IndexError, match="a free slot outside the slot table"):
            live_keys(np.ones(3, np.uint32), np.array(free, np.int64))


@needs_c
def test_a_million_keys_in_any_order(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    generations = rng.integers(0, 9, 1_000_000).astype(np.uint32)
    free = np.flatnonzero(rng.random(1_000_000) < 0.1)
    live = live_keys(generations, free)
    keys = np.delete(live, free)[rng.permutation(1_000_000 - len(free))]
    in_c, in_numpy = build_both(keys, live, 1 << 21, monkeypatch)
    assert in_c.alive and in_c.unique
    assert np.array_equal(in_c.sparse, in_numpy.sparse)
    with monkeypatch.context() as m:
        m.setattr(snapshot, "_fill_in_one_pass", None)
        assert np.array_equal(live, live_keys(generations, free))
    keys[-1] = live[free[0]] if len(free) else 0  # the last key dead: found at the end
    in_c, in_numpy = build_both(keys, live, 1 << 21, monkeypatch)
    assert not in_c.alive and not in_numpy.alive


@needs_c
def test_strided_and_signed_keys_are_checked_as_their_values() -> None:
    live = live_keys(np.arange(8, dtype=np.uint32), np.zeros(0, np.int64))
    every_other = np.repeat(live, 2)[::2]  # a strided view: copied to a contiguous one
    index = KeyIndex.build(every_other, live, 8)
    assert index.alive and index.unique
    assert np.array_equal(index.sparse, np.arange(8))
    index = KeyIndex.build(live.view(np.int64), live, 8)  # int64 keys, as some files have
    assert index.alive and index.unique


@needs_c
def test_the_c_check_refuses_wrong_arrays() -> None:
    check = snapshot._index_in_one_pass
    assert check is not None
    live = live_keys(np.zeros(4, np.uint32), np.zeros(0, np.int64))
    with pytest.raises(ValueError, match="sparse is shorter"):
        check(live, live, np.full(3, -1, np.int32))
    with pytest.raises(ValueError, match="keys must be a 1-d array of native 8-byte unsigned"):
        check(live.astype(np.uint32), live, np.full(4, -1, np.int32))
    with pytest.raises(ValueError, match="sparse must be a 1-d array of native 4-byte signed"):
        check(live, live, np.full(4, -1, np.int64))
    for wrong in (np.empty(4, object), np.ones(4, np.float64), live.astype(">u8"),
                  live.view(np.int64)):  # (an object array's slots are pointers)
        with pytest.raises(ValueError, match="live must be a 1-d array of native 8-byte"):
            check(live, wrong, np.full(4, -1, np.int32))
        with pytest.raises(ValueError, match="live must be a 1-d array of native 8-byte"):
            fill = snapshot._fill_in_one_pass
            assert fill is not None
            fill(np.ones(4, np.uint32), np.zeros(0, np.int64), wrong)
    with pytest.raises(ValueError, match="read-only"):  # read-only memory: not the index
        sparse = np.full(4, -1, np.int32)
        sparse.flags.writeable = False
        check(live, live, sparse)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        check(live, live)  # type: ignore[call-arg]
