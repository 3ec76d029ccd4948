"""``move_plan`` (the permutation behind group entry and exit) against a plain model."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ecs_engine import component, schema_of
from ecs_engine.entity import key_slots
from ecs_engine.storage import ComponentStore, move_plan


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
