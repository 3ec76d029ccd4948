"""The few-bodies loops in C (``systems/_fewbodies.c``) against the Python loops they
repeat and the vectorised collision: the same Position and Velocity bytes, the same hit
rows and sides in the same order, the same overlap masks; and the same calls declined."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ecs_engine.systems import collision_few, overlaps_few
from ecs_engine.systems.colliders import LevelColliders
from ecs_engine.systems.collision import SKIN
from tests.test_collision_few import (
    assert_same_moves,
    bodies,
    level_with_odd_boxes,
    moved_by_each,
    python_loops,
)
from tests.test_collision_grids import SETTINGS, cell_boxes, levels
from tests.test_overlaps_few import level_and_probes

C_MOVE = collision_few._C_MOVE
C_OVERLAP = overlaps_few._C_OVERLAP
needs_c = pytest.mark.skipif(C_MOVE is None or C_OVERLAP is None,
                             reason="systems._fewbodies not built (or ECS_NO_C set)")


@needs_c
@SETTINGS
@given(levels(), st.integers(0, 2), st.integers(collision_few.FEW_BODIES_PYTHON + 1, 400))
def test_the_c_loop_moves_more_bodies_exactly_as_the_vectorised_move(
        level: tuple, n_odd: int, n: int) -> None:
    """Beyond the Python loop's few the C loop alone runs (up to FEW_BODIES_C)."""
    solid, ox, oy, rng = level
    h, w = solid.shape
    colliders = level_with_odd_boxes(level, n_odd)
    parts = [bodies(rng, n, ox, ox + w, oy, oy + h)]
    ways = moved_by_each(colliders, parts, 1 / 60)
    assert ways["python"][0] is None  # (more than the Python loop takes)
    if ways["c"][0] is not None:
        assert_same_moves(ways["vectorised"], ways["c"])


@needs_c
def test_a_declined_call_writes_nothing() -> None:
    """A body near an unaligned box or a non-finite value: the C loop returns None before
    writing, so the vectorised move starts from the rows as they were."""
    solid = np.ones((3, 8), np.bool_)
    rng = np.random.default_rng(2)
    boxes = np.concatenate([cell_boxes(solid, 0, 0, rng),
                            [[20.2, 0.3, 21.7, 1.1]]]).astype(np.float32)
    colliders = LevelColliders.build(*boxes.T)
    assert colliders.c_rest_bounds is not None
    for case in ("near", "inf", "nan"):
        pos, vel, col = bodies(rng, 5, 0, 8, 0, 3)
        if case == "near":
            pos["x"][3], pos["y"][3] = 20.5, 2.0
        else:
            vel["x"][2] = np.inf if case == "inf" else np.nan
        before = pos.tobytes(), vel.tobytes()
        assert C_MOVE is not None
        tiles = colliders.tiles
        assert tiles is not None
        got = C_MOVE(tiles._x.c_args, tiles._y.c_args, colliders.c_rest_bounds,
                     [(pos, vel, col)], 1 / 60, SKIN)
        assert got is None, case
        assert (pos.tobytes(), vel.tobytes()) == before


@needs_c
def test_arrays_the_c_loop_does_not_cover_go_to_the_python_loop() -> None:
    """float64 fields, a read-only Velocity, a Position with a third field, rows of
    unequal length: the C loop declines each (None, nothing written); the Python loop
    then moves what it can exactly as the vectorised move does."""
    solid = np.ones((3, 8), np.bool_)
    rng = np.random.default_rng(3)
    colliders = LevelColliders.build(*cell_boxes(solid, 0, 0, rng).astype(np.float32).T)
    tiles = colliders.tiles
    assert tiles is not None and C_MOVE is not None
    pos, vel, col = bodies(rng, 6, -2, 10, -2, 6)
    wide = np.zeros(6, [("x", np.float64), ("y", np.float64)])
    wide["x"], wide["y"] = pos["x"], pos["y"]
    three = np.zeros(6, [("x", np.float32), ("z", np.float32), ("y", np.float32)])
    three["x"], three["y"], three["z"] = pos["x"], pos["y"], 7
    frozen = vel.copy()
    frozen.flags.writeable = False
    for parts in ([(wide, vel, col)], [(pos, frozen, col)], [(pos, vel[:5], col)],
                  [(pos.reshape(2, 3), vel.reshape(2, 3), col.reshape(2, 3))]):
        before = [(p.tobytes(), v.tobytes()) for p, v, _ in parts]
        assert C_MOVE(tiles._x.c_args, tiles._y.c_args, None, parts, 1 / 60, SKIN) is None
        assert [(p.tobytes(), v.tobytes()) for p, v, _ in parts] == before
    # A third field: C reads the fields by name (as the vectorised move does); the
    # Python loop now does too (it unpacked whole rows, and raised).
    ways = moved_by_each(colliders, [(three, vel, col)], 1 / 60)
    assert ways["c"][0] is not None and ways["python"][0] is not None
    assert_same_moves(ways["vectorised"], ways["c"])
    assert_same_moves(ways["vectorised"], ways["python"])
    assert (ways["c"][1][0][0]["z"] == 7).all()
    # float64 fields: the Python loop takes them.
    ways = moved_by_each(colliders, [(wide, vel, col)], 1 / 60)
    assert ways["python"][0] is not None
    assert_same_moves(ways["vectorised"], ways["c"])


@needs_c
@SETTINGS
@given(levels(), st.integers(0, 4), st.one_of(st.integers(0, overlaps_few.FEW_BOXES_PYTHON),
                                              st.integers(0, 300)),
       st.sampled_from([np.float32, np.float64]), st.booleans())
def test_the_c_overlap_loop_gives_the_python_loops_mask(level: tuple, n_odd: int, n: int,
                                                        dtype: type, strided: bool) -> None:
    colliders, query = level_and_probes(level, n_odd, n, dtype)
    if strided:  # every other item of a longer array
        query = [np.repeat(a, 2)[::2] for a in query]
    hits = np.zeros(n, np.bool_)
    assert C_OVERLAP is not None
    tiles = colliders.tiles
    took = C_OVERLAP(tiles.c_args if tiles is not None else None, colliders.c_rest_boxes,
                     *query, hits, overlaps_few.FEW_BOXES, overlaps_few.FEW_PAIRS)
    with python_loops():
        looped = overlaps_few.overlaps_few(colliders, *query)
    with mock.patch.object(overlaps_few, "FEW_BOXES", -1):
        want = colliders.overlaps(*query)
    assert took  # (finite boxes, within both bounds)
    np.testing.assert_array_equal(hits, want)
    if n <= overlaps_few.FEW_BOXES_PYTHON and n * n_odd <= overlaps_few.FEW_PAIRS_PYTHON:
        assert looped is not None
        np.testing.assert_array_equal(hits, looped)
    else:
        assert looped is None  # (more than the Python loop takes: the vectorised test)


@needs_c
def test_the_c_overlap_loop_declines_what_it_does_not_cover() -> None:
    """Integer edges, too many boxes, a non-finite edge, edges of unequal length: None,
    and the answer comes from the Python loop or the vectorised test, still right."""
    solid = np.ones((3, 4), np.bool_)
    colliders = LevelColliders.build(
        *cell_boxes(solid, 0, 0, np.random.default_rng(0)).astype(np.float32).T)
    assert colliders.tiles is not None and C_OVERLAP is not None
    tiles = colliders.tiles.c_args
    n = overlaps_few.FEW_BOXES + 1
    cases = {"ints": [np.array([1, 5]), np.array([1, 1]), np.array([2, 6]), np.array([2, 2])],
             "many": [np.full(n, v) for v in (1.0, 1.0, 1.5, 1.5)],
             "nan": [np.array([1.0, np.nan]) + k for k in (0.0, 0.0, 0.5, 0.5)],
             "ragged": [np.array([1.0, 2.0]), np.array([1.0]), np.array([1.5, 2.5]),
                        np.array([1.5])]}
    for name, query in cases.items():
        hits = np.zeros(len(query[0]), np.bool_)
        assert C_OVERLAP(tiles, colliders.c_rest_boxes, *query, hits,
                         overlaps_few.FEW_BOXES, overlaps_few.FEW_PAIRS) is None, name
        assert not hits.any()
    assert colliders.overlaps(*cases["ints"]).tolist() == [True, False]
    assert colliders.overlaps(*cases["many"]).all()


@needs_c
def test_arguments_that_could_reach_past_the_arrays_are_declined() -> None:
    """An outside review's crashes, each now a None (nothing read or written): rows whose
    count overflowed the work buffer's size (stride-0 views of 2**59 rows), a field name
    whose == frees the arrays mid-call (a str subclass), a table whose size check
    overflowed; and values the loops leave to Python: a dt float() refuses here, a
    masked Position."""
    from numpy.lib.stride_tricks import as_strided

    from ecs_engine.systems import _fewbodies

    colliders = LevelColliders.build(*np.array([[0, 0, 4, 1]], np.float32).T)
    tiles = colliders.tiles
    assert tiles is not None and C_MOVE is not None
    pos_t = np.dtype([("x", "<f4"), ("y", "<f4")])
    size_t = np.dtype([("w", "<f4"), ("h", "<f4")])

    def endless(n: int) -> tuple[np.ndarray, ...]:
        return tuple(as_strided(np.zeros(1, d), (n,), (0,)) for d in (pos_t, pos_t, size_t))

    assert C_MOVE(tiles._x.c_args, tiles._y.c_args, None,
                  [endless(1 << 59), endless(1 << 59), endless(1)], 1 / 60, SKIN) is None

    parts: list[Any] = [(np.zeros(1 << 16, pos_t), np.zeros(1 << 16, pos_t),
                         np.ones(1 << 16, size_t))]

    class Name(str):
        __hash__ = str.__hash__

        def __eq__(self, other: object) -> bool:
            parts.clear()
            return str.__eq__(self, other)

    odd = np.dtype([(Name("x"), "<f4"), ("y", "<f4")])
    parts.append((np.zeros(1, odd), np.zeros(1, pos_t), np.ones(1, size_t)))
    assert C_MOVE(tiles._x.c_args, tiles._y.c_args, None, parts, 1 / 60, SKIN) is None

    probe = [np.array([v]) for v in (0.5, 0.5, 1.5, 1.5)]
    hits = np.zeros(1, np.bool_)
    for width, height in (((1 << 62) - 1, 3), (2**32 - 1, 2**32 - 1)):
        assert _fewbodies.overlap_boxes((np.zeros(0, np.int32), 0, 0, width, height),
                                        np.zeros(0), probe[0], probe[1], probe[2], probe[3],
                                        hits, 10, 10) is None

    pos, vel, col = (np.zeros(2, pos_t), np.zeros(2, pos_t), np.ones(2, size_t))
    assert C_MOVE(tiles._x.c_args, tiles._y.c_args, None, [(pos, vel, col)], "1/60",
                  SKIN) is None
    masked = np.ma.masked_array(pos, mask=[(True, False), (False, False)])
    assert C_MOVE(tiles._x.c_args, tiles._y.c_args, None, [(masked, vel, col)], 1 / 60,
                  SKIN) is None
    with python_loops():  # (and the Python loop leaves it to the vectorised move)
        assert collision_few.move_few(colliders, [(masked, vel, col)], 1 / 60, SKIN) is None
