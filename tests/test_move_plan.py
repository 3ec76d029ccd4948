"""``move_plan`` (the permutation behind group entry and exit) against a plain model."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ecs_engine import component, schema_of
from ecs_engine.entity import key_slots
from ecs_engine.storage import ComponentStore, move_plan, removal_plan


def model(current: list[int], t0: int) -> dict[int, int] | None:
    """Row -> the row it moves to: ``current[j]`` to ``t0 + j``; rows displaced from the
    target range take the vacated rows, both in ascending order."""
    targets = list(range(t0, t0 + len(current)))
    if current == targets:
        return None
    moves = dict(zip(current, targets, strict=True))
    displaced = sorted(set(targets) - set(current))
    vacated = sorted(set(current) - set(targets))
    moves.update(zip(displaced, vacated, strict=True))
    return moves


@given(st.integers(1, 60).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))),
       st.data())
def test_move_plan_matches_the_model(case: tuple[int, list[int]], data: st.DataObject) -> None:
    n, current = case
    t0 = data.draw(st.integers(0, n - len(current)))
    plan = move_plan(np.array(current, np.int64), np.arange(t0, t0 + len(current)))
    want = model(current, t0)
    if want is None:
        assert plan is None
        return
    assert plan is not None
    dst, src = plan
    assert dict(zip(src.tolist(), dst.tolist(), strict=True)) == want
    assert sorted(dst.tolist()) == sorted(src.tolist())  # a permutation of the same rows


@component(name="MoveBlockRow")
class _Row:
    a: np.int16 = 0
    b: np.float32 = 0.0
    c: np.uint8 = 0  # 7-byte rows: copied as voids


@component(name="MoveBlockTag")
class _Tag: ...


def _store(ctype: type, n: int) -> ComponentStore:
    store = ComponentStore(schema_of(ctype), n + 8)
    keys = (np.arange(n, dtype=np.uint64) + 3) | (np.uint64(5) << np.uint64(32))
    rows = store.append(keys)
    if store.schema.field_names:
        store.data["a"][rows] = np.arange(n)
        store.data["b"][rows] = np.arange(n) / 4
        store.data["c"][rows] = np.arange(n) % 251
    return store


@given(st.integers(1, 80).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))),
       st.data(), st.sampled_from([_Row, _Tag]))
def test_move_block_matches_move_rows(case: tuple[int, int], data: st.DataObject,
                                      ctype: type) -> None:
    """The run ``[start, start + count)`` to ``[to, to + count)``: the same rows, keys and
    index as ``move_rows`` of the same run, apart or overlapping."""
    n, count = case
    start = data.draw(st.integers(1, n - count)) if n > count else 0
    to = data.draw(st.integers(0, max(0, start - 1)))
    if start == 0:
        return  # (nothing before the run to move it to)
    fast, slow = _store(ctype, n), _store(ctype, n)
    fast.move_block(start, to, count)
    slow.move_rows(np.arange(start, start + count), np.arange(to, to + count))
    assert fast.entities[:n].tolist() == slow.entities[:n].tolist()
    assert fast.data[:n].tobytes() == slow.data[:n].tobytes()
    assert np.array_equal(fast.sparse, slow.sparse)
    assert fast.rows_of(key_slots(fast.entities[:n])).tolist() == list(range(n))


def removal_model(n: int, bounds: list[int], removed: set[int]) -> list[int]:
    """The row order after removing ``removed`` from rows ``0..n-1`` kept as runs ending
    at ``bounds`` (the last is ``n``): each run's survivors, in run order, where every
    run's holes below its new end take its survivors past that end, both ascending (rows
    that need not move stay)."""
    order: list[int] = []
    start = 0
    for bound in bounds:
        survivors = [r for r in range(start, bound) if r not in removed]
        new_start, new_end = len(order), len(order) + len(survivors)
        place: dict[int, int] = {r: r for r in survivors if new_start <= r < new_end}
        free = [p for p in range(new_start, new_end) if p not in place]
        movers = [r for r in survivors if r not in place]
        place.update(zip(movers, free, strict=True))
        order += sorted(survivors, key=place.__getitem__)
        start = bound
    return order


@given(st.lists(st.integers(0, 12), min_size=1, max_size=4), st.data())
def test_removal_plan_matches_the_model(lengths: list[int], data: st.DataObject) -> None:
    bounds = np.cumsum(lengths).tolist()
    n = bounds[-1]
    removed = data.draw(st.sets(st.integers(0, max(0, n - 1)), max_size=n)) if n else set()
    rows = data.draw(st.permutations(sorted(removed)))
    holes, sources, cut = removal_plan(np.array(rows, np.int64), bounds)
    assert cut == [sum(1 for r in removed if r < b) for b in bounds]
    assert holes.tolist() == sorted(holes.tolist()) and sources.tolist() == sorted(sources.tolist())
    moved = dict(zip(holes.tolist(), sources.tolist(), strict=True))
    after = [moved.get(p, p) for p in range(n - len(removed))]  # row p held row p
    assert after == removal_model(n, bounds, removed)


def test_remove_runs_keeps_the_index_and_values() -> None:
    store = _store(_Row, 20)  # runs [0, 5), [5, 12), [12, 20)
    before = dict(zip(store.entities[:20].tolist(), store.data["a"][:20].tolist(), strict=True))
    first = {int(k) for k in store.entities[[1, 2, 3]]}  # the first run's survivors
    second = {int(k) for k in store.entities[[5, 6, 8, 9, 10]]}
    doomed = np.array([0, 4, 7, 11, 12, 19], np.int64)
    slots = key_slots(store.entities[doomed])
    plan = removal_plan(doomed, [5, 12, 20])
    store.remove_runs(slots, [5, 12, 20], plan)
    assert plan[2] == [2, 4, 6] and store.n == 14
    keys = store.entities[: store.n]
    assert [before[k] for k in keys.tolist()] == store.data["a"][: store.n].tolist()
    assert (store.sparse[key_slots(keys)] == np.arange(store.n)).all()
    assert (store.sparse[slots] == -1).all()
    # every run keeps its own rows: [0, 3) from [0, 5), [3, 8) from [5, 12), the rest
    assert {int(k) for k in keys[:3]} == first and {int(k) for k in keys[3:8]} == second
