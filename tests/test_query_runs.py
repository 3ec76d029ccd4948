"""A gathered query's columns whose rows are one run of consecutive rows (a player's one
row, say) are views of the store instead of gathered copies: the same values in the same
order as the copies; read-only ones touch nothing, and writable ones touch exactly the
rows the block changed (as a gathered column's write-back does)."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ecs_engine import World, component
from ecs_engine import query as query_module
from ecs_engine.query import _RUN, _as_run


@component
class A:
    v: np.int64 = 0


@component
class B:
    v: np.float32 = 0.0


@component
class C:
    v: np.int16 = 0


def test_as_run_finds_increasing_runs_only() -> None:
    assert _as_run(np.array([3])) == slice(3, 4, _RUN)
    assert _as_run(np.array([2, 3, 4])) == slice(2, 5, _RUN)
    for not_a_run in ([0, 2, 1, 3], [5, 4], [1, 3], [2, 2], []):
        rows = np.array(not_a_run, np.intp)
        assert _as_run(rows) is rows


def columns(world: World, types: tuple[type, ...], readonly: tuple[type, ...],
            without: tuple[type, ...]) -> tuple[np.ndarray, list[np.ndarray], list[bool]]:
    """(keys, a copy of each column, whether each column shares the store's memory)."""
    with world.query(*types, readonly=readonly, without=without) as q:
        cols = [q[t] for t in types]
        shared = [bool(np.shares_memory(c, world.store(t).data)) for c, t in
                  zip(cols, types, strict=True)]
        for c, t in zip(cols, types, strict=True):
            if t in readonly:
                assert not c.flags.writeable
        return q.entities.copy(), [c.copy() for c in cols], shared


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1,
                max_size=30),
       st.lists(st.integers(0, 29), max_size=8), st.integers(0, 3))
def test_runs_read_what_gathered_copies_read(have: list[tuple[bool, bool, bool]],
                                             gone: list[int], shape: int) -> None:
    world = world_with(have, gone)
    types, readonly, without = [((A, B), (A, B), ()), ((B, C), (B,), ()),
                                ((A, C), (A, C), (B,)), ((C, A, B), (C, A, B), ())][shape]
    versions = [world.store(t).data_version for t in types]
    got = columns(world, types, readonly, without)
    assert [world.store(t).data_version for t in types if t in readonly] == \
        [v for v, t in zip(versions, types, strict=True) if t in readonly]
    with mock.patch.object(query_module, "_as_run", lambda rows: rows):
        world._plans.clear()  # resolve again without runs
        want = columns(world, types, readonly, without)
    np.testing.assert_array_equal(got[0], want[0])
    for mine, theirs in zip(got[1], want[1], strict=True):
        assert mine.tobytes() == theirs.tobytes()
    for keyed, t in enumerate(types):  # the model: each key's own values
        for row, key in enumerate(got[0]):
            assert got[1][keyed][row]["v"] == world.get(int(key), t)["v"]
    assert all(g or not w for g, w in zip(got[2], want[2], strict=True))  # runs add views


def test_a_single_entity_query_reads_views() -> None:
    """One entity with A and B among others with only one of them: its rows are runs of
    one row, so both read-only columns are views (no copy per block)."""
    world = World(auto_group=False)
    world.spawn(A(v=1))
    world.spawn(B(v=2.0))
    world.spawn(A(v=3), B(v=4.0))
    keys, cols, shared = columns(world, (A, B), (A, B), ())
    assert len(keys) == 1 and cols[0]["v"][0] == 3 and cols[1]["v"][0] == 4.0
    assert shared == [True, True]


def world_with(have: list[tuple[bool, bool, bool]], gone: list[int]) -> World:
    world = World(auto_group=False)
    keys = []
    for i, (a, b, c) in enumerate(have):
        parts = ([A(v=i)] if a else []) + ([B(v=i / 3)] if b else []) + (
            [C(v=-i)] if c else [])
        keys.append(world.spawn(*parts) if parts else world.spawn())
    for i in gone:
        if i < len(keys) and world.is_alive(keys[i]):
            world.despawn(keys[i])
    return world


def write_some(world: World, types: tuple[type, ...], readonly: tuple[type, ...],
               picks: list[int]) -> tuple[list[bytes], list[bool]]:
    """Write rows ``picks`` (mod the query's length; -1: write a row's own value again)
    of every writable column in one block; (each store's live bytes, whether its data
    version moved)."""
    before = [world.store(t).data_version for t in types]
    with world.query(*types, readonly=readonly) as q:
        for t in types:
            if t in readonly or not len(q):
                continue
            col = q[t]["v"]
            for p in picks:
                row = abs(p) % len(q)
                col[row] = col[row] if p < 0 else col[row] + 7
    stores = [world.store(t) for t in types]
    return ([s.data[: s.n].tobytes() for s in stores],
            [s.data_version != v for s, v in zip(stores, before, strict=True)])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1,
                max_size=30),
       st.lists(st.integers(0, 29), max_size=8), st.integers(0, 2),
       st.lists(st.integers(-40, 40), max_size=4))
def test_written_runs_keep_what_gathered_columns_keep(have: list[tuple[bool, bool, bool]],
                                                      gone: list[int], shape: int,
                                                      picks: list[int]) -> None:
    """The same stores and the same versions moved (only where a block changed a row)
    whether the columns are runs or gathered copies."""
    types, readonly = [((A, B), ()), ((B, C), (B,)), ((C, A, B), (A,))][shape]
    with_runs = write_some(world_with(have, gone), types, readonly, picks)
    with mock.patch.object(query_module, "_as_run", lambda rows: rows):
        gathered = write_some(world_with(have, gone), types, readonly, picks)
    assert with_runs == gathered


def test_a_single_entity_query_writes_through_a_view() -> None:
    """The one matching entity's writable column is a view; a block that only reads
    moves no version, one that writes moves it, and the store holds the write."""
    world = World(auto_group=False)
    world.spawn(A(v=1))
    world.spawn(B(v=2.0))
    key = world.spawn(A(v=3), B(v=4.0))
    store = world.store(A)
    version = store.data_version
    with world.query(A, B, readonly=(B,)) as q:
        assert np.shares_memory(q[A], store.data)
        assert q[A]["v"][0] == 3
    assert store.data_version == version
    with world.query(A, B, readonly=(B,)) as q:
        q[A]["v"] += 1
    assert store.data_version != version
    assert world.get(key, A)["v"] == 4
    snap = world.snapshot()
    assert snap.store("A").data["v"].tolist().count(4) == 1


def test_unstructured_over_a_run_keeps_the_change_tracking() -> None:
    """``q.unstructured`` of a run column is the run's view reshaped: a write reaches the
    store and moves its version; a read moves nothing."""
    world = World(auto_group=False)
    world.spawn(B(v=1.0))
    world.spawn(A(v=1))
    key = world.spawn(A(v=2), B(v=5.0))
    store = world.store(B)
    version = store.data_version
    with world.query(A, B, readonly=(A,)) as q:
        flat = q.unstructured(B)
        assert flat.shape == (1, 1) and np.shares_memory(flat, store.data)
        assert flat[0, 0] == 5.0
    assert store.data_version == version
    with world.query(A, B, readonly=(A,)) as q:
        q.unstructured(B)[:] *= 2
    assert store.data_version != version
    assert world.get(key, B)["v"] == 10.0
