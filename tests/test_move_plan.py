"""``move_plan`` (the permutation behind group entry and exit) against a plain model."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ecs_engine.storage import move_plan


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
