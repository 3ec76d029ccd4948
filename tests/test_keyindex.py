"""The one-pass key check in C (``_keyindex.c``) against the numpy passes it replaces.

Loads take the C check where the extension was built and the numpy one elsewhere; both
must give the same answers for every slot table and every key, hostile ones included.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecs_engine import SaveFileError, World, component, snapshot
from ecs_engine.entity import key_slots
from ecs_engine.slotmap import SlotMap, SlotTable
from ecs_engine.snapshot import KeyIndex, LiveSlots, live_keys


@component
class Tag:
    n: np.int32 = 0


needs_c = pytest.mark.skipif(snapshot._index_in_one_pass is None,
                             reason="ecs_engine._keyindex was not built (no C compiler)")


def test_ci_builds_the_c_key_check() -> None:
    """CI sets ECS_REQUIRE_C=1: a build that silently fell back to numpy fails there."""
    if not os.environ.get("ECS_REQUIRE_C"):
        pytest.skip("the C key check is optional here (ECS_REQUIRE_C is not set)")
    for name in ("_keyindex", "_queryblock", "_removal", "_entityrows",
                 "systems._fewbodies"):
        try:
            importlib.import_module(f"ecs_engine.{name}")
        except ImportError as exc:
            pytest.fail(f"ecs_engine.{name} is missing: `pip install -e .` did not build "
                        f"it (is a C compiler installed?): {exc}")


def slots_of(generations: np.ndarray, free: np.ndarray) -> LiveSlots:
    alive = np.ones(len(generations), np.bool_)
    alive[free] = False
    return LiveSlots.of(generations, alive, free)


def build_both(keys: np.ndarray, generations: np.ndarray, free: np.ndarray, capacity: int,
               monkeypatch: pytest.MonkeyPatch) -> tuple[KeyIndex, KeyIndex]:
    in_c = KeyIndex.build(keys, slots_of(generations, free), capacity)
    with monkeypatch.context() as m:
        m.setattr(snapshot, "_index_in_one_pass", None)
        in_numpy = KeyIndex.build(keys, slots_of(generations, free), capacity)
    return in_c, in_numpy


@st.composite
def tables_and_keys(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A slot table (generations, free slots) and stored keys: live ones, in any order,
    some repeated, and maybe a dead, stale, past-the-table or extreme one."""
    slots = draw(st.integers(0, 40))
    generations = np.array(draw(st.lists(st.integers(1, 2**32 - 1), min_size=slots,
                                         max_size=slots)), np.uint32)
    free = np.array(sorted(draw(st.sets(st.integers(0, max(slots - 1, 0)))))
                    if slots else [], np.int64)
    dead = set(free.tolist())
    alive = [int(g) << 32 | i for i, g in enumerate(generations) if i not in dead]
    keys: list[int] = []
    if alive:
        keys = draw(st.lists(st.sampled_from(alive), unique=True))
    if draw(st.booleans()) and keys:
        keys.append(draw(st.sampled_from(keys)))  # a repeated entity
    if draw(st.booleans()):
        slot = draw(st.integers(0, slots + 3))
        generation = int(generations[slot]) if slot < slots else 1
        odd = draw(st.sampled_from([
            0, 2**64 - 1, slot,  # NULL, all ones, generation 0
            (generation % (2**32 - 1) + 1) << 32 | slot,  # stale (or a dead slot's)
            generation << 32 | slot,  # the slot's own generation: alive unless free
            draw(st.integers(0, 2**64 - 1))]))
        keys.insert(draw(st.integers(0, len(keys))), odd)
    return generations, free, np.array(keys, np.uint64)


@needs_c
@settings(max_examples=500, deadline=None)
@given(tables_and_keys())
def test_c_and_numpy_agree(case: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    generations, free, keys = case
    with pytest.MonkeyPatch.context() as monkeypatch:
        in_c, in_numpy = build_both(keys, generations, free, len(generations) + 5,
                                    monkeypatch)
    assert (in_c.alive, in_c.unique) == (in_numpy.alive, in_numpy.unique)
    if in_c.unique:  # the index is used only then
        assert np.array_equal(in_c.sparse, in_numpy.sparse)
        rows = in_c.sparse[keys.astype(np.int64) & 0xFFFF_FFFF]
        assert np.array_equal(rows, np.arange(len(keys)))
        assert np.count_nonzero(in_c.sparse >= 0) == len(keys)


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
    if in_c and snapshot._index_in_one_pass is None:
        pytest.skip("no C key checks in this build")
    if not in_c:
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


def test_the_numpy_live_key_table_refuses_a_free_slot_outside_the_table() -> None:
    """(numpy would wrap -1 round to the last slot)"""
    for free in ([-1], [3], [0, 5]):
        with pytest.raises(IndexError, match="a free slot outside the slot table"):
            live_keys(np.ones(3, np.uint32), np.array(free, np.int64))


@needs_c
def test_a_million_keys_in_any_order(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    generations = rng.integers(1, 9, 1_000_000).astype(np.uint32)
    free = np.flatnonzero(rng.random(1_000_000) < 0.1)
    live = live_keys(generations, free)
    keys = np.delete(live, free)[rng.permutation(1_000_000 - len(free))]
    in_c, in_numpy = build_both(keys, generations, free, 1 << 21, monkeypatch)
    assert in_c.alive and in_c.unique
    assert np.array_equal(in_c.sparse, in_numpy.sparse)
    keys[-1] = keys[-1] + (1 << 32)  # the last key stale: found at the very end
    in_c, in_numpy = build_both(keys, generations, free, 1 << 21, monkeypatch)
    assert not in_c.alive and not in_numpy.alive


@needs_c
def test_strided_and_signed_keys_are_checked_as_their_values() -> None:
    generations = np.arange(1, 9, dtype=np.uint32)
    slots = slots_of(generations, np.zeros(0, np.int64))
    live = live_keys(generations, np.zeros(0, np.int64))
    every_other = np.repeat(live, 2)[::2]  # a strided view: copied to a contiguous one
    index = KeyIndex.build(every_other, slots, 8)
    assert index.alive and index.unique
    assert np.array_equal(index.sparse, np.arange(8))
    index = KeyIndex.build(live.view(np.int64), slots, 8)  # int64 keys, as some files have
    assert index.alive and index.unique


@needs_c
def test_the_c_check_refuses_wrong_arrays() -> None:
    check = snapshot._index_in_one_pass
    assert check is not None
    generations, alive = np.ones(4, np.uint32), np.ones(4, np.bool_)
    keys = live_keys(generations, np.zeros(0, np.int64))
    sparse = np.empty(4, np.int32)
    assert check(keys, generations, alive, sparse) == 1
    with pytest.raises(ValueError, match="sparse is shorter"):
        check(keys, generations, alive, np.empty(3, np.int32))
    with pytest.raises(ValueError, match="alive and generations differ"):
        check(keys, generations, alive[:3], sparse)
    cases: list[tuple[int, np.ndarray, str]] = [
            (0, keys.astype(np.uint32), "keys must be a 1-d array of native uint64"),
            (0, keys.view(np.int64), "keys must be a 1-d array of native uint64"),
            (0, np.empty(4, object), "keys must be a 1-d array of native uint64"),
            (0, keys.astype(">u8"), "keys must be a 1-d array of native uint64"),
            (1, generations.astype(np.uint64), "generations must be a 1-d array of native "
                                               "uint32"),
            (1, generations.astype(np.float32), "generations must be a 1-d array of native "
                                                "uint32"),
            (2, alive.view(np.uint8), "alive must be a 1-d array of bools"),
            (3, np.empty(4, np.int64), "sparse must be a 1-d array of native int32"),
            (3, np.empty((2, 2), np.int32), "sparse must be a 1-d array of native int32")]
    for i, wrong, message in cases:
        args = [keys, generations, alive, sparse]
        args[i] = wrong
        with pytest.raises(ValueError, match=message):
            check(*args)
    with pytest.raises(ValueError, match="read-only"):  # read-only memory: not the index
        sparse.flags.writeable = False
        check(keys, generations, alive, sparse)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        check(keys, generations, alive)  # type: ignore[call-arg]


def test_the_load_and_query_tests_pass_on_the_numpy_path_too() -> None:
    """Installs without a C compiler take the numpy passes and the Python query methods
    (ECS_NO_C=1 forces both)."""
    tests = Path(__file__).parent
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-k", "not numpy_path",  # (not this test again, in a loop)
         *(str(tests / name) for name in (
             "test_lookahead.py", "test_load_memory.py", "test_keyindex.py",
             "test_savefile.py", "test_query.py", "test_query_reuse.py",
             "test_deferred_model.py", "test_queryblock.py", "test_removal.py",
             "test_despawn_runs_review.py", "test_entityrows.py", "test_fewbodies.py",
             "test_collision_few.py", "test_overlaps_few.py"))],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "ECS_NO_C": "1"}, cwd=tests.parent)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "skipped" in proc.stdout  # (the C-only tests)


def test_ecs_no_c_takes_the_numpy_path() -> None:
    code = ("from ecs_engine import snapshot, world; "
            "print(snapshot._index_in_one_pass, world.QUERY_BLOCKS_IN_C, "
            "world.storage.REMOVES_IN_C, world._insert_entity, world._remove_entity); "
            "from ecs_engine.systems import collision_few, overlaps_few; "
            "print(collision_few._C_MOVE, overlaps_few._C_OVERLAP, collision_few.FEW_BODIES)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "ECS_NO_C": "1"}, check=True).stdout
    assert out.split() == ["None", "False", "False", "None", "None", "None", "None", "20"]


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_batchs_key_check_in_c_matches_numpy(data: st.DataObject) -> None:
    """World._check_alive_batch with the one-pass C check and without it: the same keys
    back, or the same error (alive and distinct; dead, stale, foreign, repeated keys)."""
    from ecs_engine import world as world_module

    world = World(seed=1)
    count = data.draw(st.integers(1, 300))
    keys = world.spawn_batch(Tag(n=np.zeros(count, np.int32)), count=count).tolist()
    dead = data.draw(st.lists(st.sampled_from(keys), unique=True, max_size=count // 2))
    world.despawn_batch(dead)
    pool = keys + [k + (1 << 32) for k in keys[:5]] + [len(keys) + 7, 1 << 40]
    batch = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=400))
    if data.draw(st.booleans()):  # (a big batch: the C bitmap instead of a sort)
        live = [k for k in keys if k not in set(dead)]
        batch = live + data.draw(st.lists(st.sampled_from(live), max_size=2)) if live else batch
    arr = np.array(batch, np.uint64)

    def outcome(check: Any) -> Any:
        world_module._live_distinct = check
        try:
            return world._check_alive_batch(arr, "despawn_batch").tolist()
        except (KeyError, ValueError) as exc:
            return type(exc), str(exc)

    in_c = world_module._live_distinct
    try:
        assert outcome(in_c) == outcome(None)
    finally:
        world_module._live_distinct = in_c


@needs_c
def test_the_batch_key_check_refuses_what_it_cannot_read() -> None:
    from ecs_engine._keyindex import live_distinct

    gens = np.ones(4, np.uint32)
    alive = np.ones(4, np.bool_)
    keys = np.array([1 << 32 | 1, 1 << 32 | 2], np.uint64)
    assert live_distinct(keys, gens, alive, 4) == 1
    assert live_distinct(keys[[0, 0]].copy(), gens, alive, 4) == 2
    assert live_distinct(keys, gens, alive, 2) == 0  # slot 2 past the high water
    with pytest.raises(ValueError, match="high_water"):
        live_distinct(keys, gens, alive, 5)
    with pytest.raises(ValueError, match="uint64"):
        live_distinct(keys.astype(np.int32), gens, alive, 4)


@needs_c
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 40), st.randoms(use_true_random=False)),
                max_size=30))
def test_batch_allocate_and_release_in_c_match_numpy(
        program: list[tuple[bool, int, Any]]) -> None:
    """SlotMap.allocate and release of batches in C (``allocate_slots``, ``release_slots``)
    and in numpy: the same keys, generations, alive flags and free stack after every
    step (growing the table, reusing slots LIFO, generations wrapping past 2**32 - 1)."""
    from ecs_engine import slotmap

    maps = SlotMap(capacity=8), SlotMap(capacity=8)
    live: list[list[int]] = [[], []]

    def state(m: SlotMap) -> tuple[Any, ...]:
        hw = m.high_water
        return (m.generations[:hw].tolist(), m.alive[:hw].tolist(),
                m.free[: m.n_free].tolist(), m.n_free, m.n_alive, hw)

    for m in maps:
        m.generations[:4] = 0xFFFF_FFFE  # (near the wrap)
    for allocate, count, rnd in program:
        gone = rnd.sample(live[0], min(count, len(live[0])))
        for which, m in enumerate(maps):
            with pytest.MonkeyPatch.context() as mp:
                if which:
                    mp.setattr(slotmap, "_allocate_slots", None)
                    mp.setattr(slotmap, "_release_slots", None)
                if allocate:
                    live[which] += m.allocate(count).tolist()
                else:
                    for key in gone:
                        live[which].remove(key)
                    m.release(key_slots(np.array(gone, np.uint64)))
        assert live[0] == live[1]
        assert state(maps[0]) == state(maps[1])


@needs_c
def test_bad_slot_batches_change_nothing() -> None:
    from ecs_engine._keyindex import allocate_slots, release_slots

    m = SlotMap(capacity=8)
    m.allocate(3)
    before: tuple[np.ndarray, ...] = (m.generations.copy(), m.alive.copy(), m.free.copy())
    args = (m.generations, m.alive, m.free)
    with pytest.raises(ValueError, match="outside the used table"):
        release_slots(np.array([1, 5], np.int64), *args, m.n_free, m.high_water)
    with pytest.raises(ValueError, match="no room"):
        allocate_slots(np.empty(6, np.uint64), *args, m.n_free, m.high_water)
    with pytest.raises(ValueError, match="do not agree"):
        release_slots(np.array([1], np.int64), *args, 4, 3)
    with pytest.raises(ValueError, match="int64"):
        release_slots(np.array([1], np.int32), *args, m.n_free, m.high_water)
    with pytest.raises(TypeError, match="takes 6 arguments"):
        release_slots(np.array([1], np.int64), *args)  # type: ignore[call-arg]
    after: tuple[np.ndarray, ...] = (m.generations, m.alive, m.free)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
