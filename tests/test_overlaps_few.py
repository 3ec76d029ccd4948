"""The overlap loop for a few query boxes (``systems.overlaps_few``) against the vectorised
test: on random levels with unaligned boxes, the same mask for the same boxes."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ecs_engine.systems import overlaps_few
from ecs_engine.systems.colliders import LevelColliders
from tests.test_collision_grids import SETTINGS, cell_boxes, levels


def level_and_probes(level: tuple, n_odd: int, n: int,
                     dtype: type) -> tuple[LevelColliders, list[np.ndarray]]:
    """The level's cells as boxes plus ``n_odd`` unaligned boxes, and ``n`` query boxes
    (left, bottom, right, top) of ``dtype`` around it: some with edges on cell edges, some
    touching an unaligned box's edge."""
    solid, ox, oy, rng = level
    h, w = solid.shape
    l0, b0 = rng.uniform(ox, ox + w, n_odd), rng.uniform(oy, oy + h, n_odd)
    odd = np.stack([l0, b0, l0 + rng.uniform(0.2, 3, n_odd), b0 + rng.uniform(0.2, 3, n_odd)],
                   axis=1)
    boxes = np.concatenate([cell_boxes(solid, ox, oy, rng), odd]).astype(np.float32)
    colliders = LevelColliders.build(*boxes.T)
    x = rng.uniform(ox - 3, ox + w + 3, n)
    y = rng.uniform(oy - 3, oy + h + 3, n)
    snap = rng.random(n) < 0.4
    x[snap], y[snap] = np.round(x[snap]), np.round(y[snap])  # edges on cell edges
    half_w = rng.choice([1e-4, 0.25, 0.5, 1.0, 2.5], n)
    half_h = rng.choice([1e-4, 0.25, 0.5, 1.0, 2.5], n)
    query = [a.astype(dtype) for a in (x - half_w, y - half_h, x + half_w, y + half_h)]
    if n_odd and n:  # some boxes touching an unaligned box's edge (open: no overlap)
        k = rng.integers(n_odd, size=n)
        edge = rng.random(n) < 0.3
        query[0][edge] = odd[k[edge], 2].astype(np.float32)
        query[2][edge] = query[0][edge] + 1
        query[1][edge] = odd[k[edge], 1].astype(np.float32)
        query[3][edge] = odd[k[edge], 3].astype(np.float32)
    return colliders, query


@SETTINGS
@given(levels(), st.integers(0, 4), st.integers(0, overlaps_few.FEW_BOXES),
       st.sampled_from([np.float32, np.float64]))
def test_few_boxes_overlap_exactly_as_the_vectorised_test(level: tuple, n_odd: int, n: int,
                                                          dtype: type) -> None:
    colliders, query = level_and_probes(level, n_odd, n, dtype)
    with mock.patch.object(overlaps_few, "FEW_BOXES", -1):
        want = colliders.overlaps(*query)
    assert overlaps_few.overlaps_few(colliders, *query) is not None  # the loop applies
    got = colliders.overlaps(*query)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


# (the vectorised test casts the non-finite edges to ints, which numpy warns about)
@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
def test_a_non_finite_box_takes_the_vectorised_test() -> None:
    """floor() of inf or nan raises: the loop declines and the vectorised test runs."""
    solid = np.ones((2, 6), np.bool_)
    colliders = LevelColliders.build(
        *cell_boxes(solid, 0, 0, np.random.default_rng(0)).astype(np.float32).T)
    for bad in (np.inf, -np.inf, np.nan):
        query = [np.array([1.0, 2.0, bad], np.float32) + k for k in (0.0, 0.0, 0.5, 0.5)]
        assert overlaps_few.overlaps_few(colliders, *query) is None
        with mock.patch.object(overlaps_few, "FEW_BOXES", -1):
            want = colliders.overlaps(*query)
        np.testing.assert_array_equal(colliders.overlaps(*query), want)


def test_far_and_non_finite_boxes_overlap_nothing_either_way() -> None:
    """Edges past the int64 range: the vectorised test cast floor(1e19), inf and nan to
    int64, which wraps, and read such boxes as overlapping the level (so the answer for
    a box at x = 1e19 depended on whether 16 or 17 boxes were asked about). Edges are
    clamped first now: the loop and the vectorised test both say no, and an infinite
    box still overlaps."""
    solid = np.ones((3, 4), np.bool_)
    colliders = LevelColliders.build(
        *cell_boxes(solid, 0, 0, np.random.default_rng(0)).astype(np.float32).T)
    for far in (1e19, -1e19, 1e25, 9.3e18, np.inf, -np.inf, np.nan):
        for dtype in (np.float32, np.float64):
            for n in (2, overlaps_few.FEW_BOXES + 1):  # the loop, then the vectorised test
                query = [np.full(n, v, dtype) for v in (far, 1.0, far + 0.5, 1.5)]
                query[0][0], query[2][0] = 1.0, 1.5  # and one box inside the level
                got = colliders.overlaps(*query)
                assert got.tolist() == [True] + [False] * (n - 1), (far, dtype, n)
    everything = [np.array([v], np.float64) for v in (-np.inf, -np.inf, np.inf, np.inf)]
    assert colliders.overlaps(*everything).tolist() == [True]
    assert colliders.tiles is not None
    assert colliders.tiles.overlaps(*everything).tolist() == [True]
