"""Static collision broad phases against brute force.

The tile grid (pixel-aligned geometry) and the general grid (any boxes) must stop every
moving box exactly where a plain loop over the static boxes does: the furthest move along
an axis before a box whose near face is at or beyond the mover's centre, minus the skin.
The tile grid's boxes are the runs of solid cells along the axis of motion.
"""

from __future__ import annotations

import os
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecs_engine.systems import grid as grid_module
from ecs_engine.systems.colliders import LevelColliders
from ecs_engine.systems.grid import StaticGrid
from ecs_engine.systems.tilegrid import TileGrid, aligned_mask

SKIN = 1e-3
EXAMPLES = int(os.environ.get("DETERMINISM_EXAMPLES", "1000"))
SETTINGS = settings(max_examples=max(30, EXAMPLES // 5), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def brute_limits(boxes: np.ndarray, axis: str, lo: np.ndarray, hi: np.ndarray,
                 olo: np.ndarray, ohi: np.ndarray,
                 move: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The collision rule as a loop over every (mover, box) pair. ``boxes``: rows of
    (left, bottom, right, top)."""
    fwd = np.full(len(lo), np.inf)
    back = np.full(len(lo), -np.inf)
    a0, a1, c0, c1 = (0, 2, 1, 3) if axis == "x" else (1, 3, 0, 2)
    for i in range(len(lo)):
        if move[i] == 0:
            continue
        new_lo, new_hi = lo[i] + move[i], hi[i] + move[i]
        centre = (lo[i] + hi[i]) * 0.5
        for box in boxes:
            b_lo, b_hi = float(box[a0]), float(box[a1])
            overlap = (new_lo < b_hi and new_hi > b_lo and olo[i] < box[c1]
                       and ohi[i] > box[c0])
            if not overlap:
                continue
            if move[i] > 0 and b_lo >= centre:
                fwd[i] = min(fwd[i], b_lo - hi[i] - SKIN)
            if move[i] < 0 and b_hi <= centre:
                back[i] = max(back[i], b_hi - lo[i] + SKIN)
    return fwd, back


def runs(solid: np.ndarray, ox: int, oy: int, axis: str) -> np.ndarray:
    """Runs of solid cells along ``axis`` as boxes (left, bottom, right, top)."""
    out = []
    grid = solid if axis == "x" else solid.T
    for r, line in enumerate(grid):
        c = 0
        while c < len(line):
            if line[c]:
                s = c
                while c < len(line) and line[c]:
                    c += 1
                out.append((s, r, c, r + 1) if axis == "x" else (r, s, r + 1, c))
            else:
                c += 1
    arr = np.array(out, np.float64).reshape(-1, 4)
    arr[:, [0, 2]] += ox
    arr[:, [1, 3]] += oy
    return arr


def cell_boxes(solid: np.ndarray, ox: int, oy: int, rng: np.random.Generator) -> np.ndarray:
    """Aligned boxes covering ``solid`` (random rectangles, overlapping, plus single cells)."""
    boxes = []
    h, w = solid.shape
    for r, c in zip(*np.nonzero(solid), strict=True):
        # grow right/up while solid, by a random amount: boxes overlap and vary in size
        cw = 1
        while c + cw < w and solid[r, c + cw] and rng.random() < 0.6:
            cw += 1
        boxes.append((c, r, c + cw, r + 1))
    arr = np.array(boxes, np.float64).reshape(-1, 4)
    arr[:, [0, 2]] += ox
    arr[:, [1, 3]] += oy
    return arr


@st.composite
def levels(draw: st.DrawFn) -> tuple[np.ndarray, int, int, np.random.Generator]:
    w, h = draw(st.integers(1, 14)), draw(st.integers(1, 10))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    solid = rng.random((h, w)) < draw(st.floats(0.05, 0.9))
    if not solid.any():
        solid[rng.integers(h), rng.integers(w)] = True
    return solid, draw(st.integers(-5, 5)), draw(st.integers(-5, 5)), rng


def movers(rng: np.random.Generator, n: int, x0: float, x1: float, y0: float,
           y1: float) -> tuple[np.ndarray, ...]:
    """Boxes around the level (some on exact cell edges), moves below one unit."""
    x = rng.uniform(x0 - 2, x1 + 2, n)
    y = rng.uniform(y0 - 2, y1 + 2, n)
    snap = rng.random(n) < 0.3
    x[snap] = np.round(x[snap] * 2) / 2  # centres and edges on whole / half units
    y[snap] = np.round(y[snap] * 2) / 2
    hw = rng.choice([0.15, 0.5, 0.4, 1.0, 1.3], n)
    hh = rng.choice([0.15, 0.5, 0.8, 1.0, 2.2], n)
    move = rng.uniform(-0.99, 0.99, n)
    move[rng.random(n) < 0.1] = 0.0
    return x, y, hw, hh, move


@SETTINGS
@given(levels(), st.sampled_from(["x", "y"]))
def test_tile_grid_matches_brute_force(level: tuple, axis: str) -> None:
    solid, ox, oy, rng = level
    boxes = cell_boxes(solid, ox, oy, rng)
    grid = TileGrid.build(*boxes.T)
    assert grid is not None
    dx, dy = grid.origin_x - ox, grid.origin_y - oy  # the grid spans the boxes' bounds
    painted = np.zeros_like(solid)
    painted[dy : dy + grid.height, dx : dx + grid.width] = grid.solid
    assert np.array_equal(painted, solid)
    h, w = solid.shape
    x, y, hw, hh, move = movers(rng, 60, ox, ox + w, oy, oy + h)
    if axis == "x":
        args = (x - hw, x + hw, y - hh, y + hh, move)
    else:
        args = (y - hh, y + hh, x - hw, x + hw, move)
    fwd, back = np.full(60, np.inf), np.full(60, -np.inf)
    grid.limits(axis, *args, SKIN, fwd, back)
    # The grid covers the boxes' bounding box: compare with the runs of what it painted.
    want = brute_limits(runs(grid.solid, grid.origin_x, grid.origin_y, axis), axis, *args)
    np.testing.assert_array_equal(fwd, want[0])
    np.testing.assert_array_equal(back, want[1])
    # overlaps: any solid cell under the open box
    left, bottom, right, top = x - hw, y - hh, x + hw, y + hh
    cells = runs(grid.solid, grid.origin_x, grid.origin_y, "x")
    expect = [any(lf < cr and rt > cl and bt < ct and tp > cb for cl, cb, cr, ct in cells)
              for lf, bt, rt, tp in zip(left, bottom, right, top, strict=True)]
    assert grid.overlaps(left, bottom, right, top).tolist() == expect


# The general grid finds (mover, box) pairs by testing each pair when there are few and
# through its cells otherwise: both ways are checked (0 forces the cell search).
PAIR_SEARCHES = pytest.mark.parametrize("brute_force_pairs",
                                        [0, grid_module.BRUTE_FORCE_PAIRS],
                                        ids=["cells", "every-pair"])


@PAIR_SEARCHES
@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from(["x", "y"]), st.integers(1, 40))
def test_general_grid_matches_brute_force(brute_force_pairs: int, seed: int, axis: str,
                                          n_boxes: int) -> None:
    with mock.patch.object(grid_module, "BRUTE_FORCE_PAIRS", brute_force_pairs):
        check_general_grid(seed, axis, n_boxes)


def check_general_grid(seed: int, axis: str, n_boxes: int) -> None:
    rng = np.random.default_rng(seed)
    left = rng.uniform(-10, 10, n_boxes)
    bottom = rng.uniform(-10, 10, n_boxes)
    boxes = np.stack([left, bottom, left + rng.uniform(0.05, 6, n_boxes),
                      bottom + rng.uniform(0.05, 6, n_boxes)], axis=1)
    left_, bottom_, right_, top_ = boxes.T
    grid = StaticGrid.build(left_, bottom_, right_, top_, cell=float(rng.choice([0.5, 2.0, 4.0])))
    x, y, hw, hh, move = movers(rng, 50, -10, 16, -10, 16)
    move *= rng.choice([1.0, 5.0])  # the general rule holds for long moves too
    args = ((x - hw, x + hw, y - hh, y + hh, move) if axis == "x"
            else (y - hh, y + hh, x - hw, x + hw, move))
    fwd, back = np.full(50, np.inf), np.full(50, -np.inf)
    grid.limits(axis, *args, SKIN, fwd, back)
    want = brute_limits(boxes, axis, *args)
    np.testing.assert_array_equal(fwd, want[0])
    np.testing.assert_array_equal(back, want[1])


@PAIR_SEARCHES
@SETTINGS
@given(levels(), st.integers(0, 6), st.sampled_from(["x", "y"]))
def test_mixed_level_splits_aligned_and_unaligned_boxes(brute_force_pairs: int, level: tuple,
                                                        n_odd: int, axis: str) -> None:
    with mock.patch.object(grid_module, "BRUTE_FORCE_PAIRS", brute_force_pairs):
        check_mixed_level(level, n_odd, axis)


def check_mixed_level(level: tuple, n_odd: int, axis: str) -> None:
    solid, ox, oy, rng = level
    aligned = cell_boxes(solid, ox, oy, rng)
    h, w = solid.shape
    l0 = rng.uniform(ox, ox + w, n_odd)
    b0 = rng.uniform(oy, oy + h, n_odd)
    odd = np.stack([l0, b0, l0 + rng.uniform(0.2, 3, n_odd), b0 + rng.uniform(0.2, 3, n_odd)],
                   axis=1)
    boxes = np.concatenate([aligned, odd])
    assert aligned_mask(*boxes.T).tolist() == [True] * len(aligned) + [
        bool(aligned_mask(*row[:, None])[0]) for row in odd]
    level_colliders = LevelColliders.build(*boxes.T)
    assert level_colliders.tiles is not None
    x, y, hw, hh, move = movers(rng, 40, ox, ox + w, oy, oy + h)
    args = ((x - hw, x + hw, y - hh, y + hh, move) if axis == "x"
            else (y - hh, y + hh, x - hw, x + hw, move))
    fwd, back = level_colliders.limits(axis, *args, SKIN)
    tiles = level_colliders.tiles
    rest = boxes[~aligned_mask(*boxes.T)]
    want = brute_limits(np.concatenate([runs(tiles.solid, tiles.origin_x, tiles.origin_y,
                                             axis), rest]), axis, *args)
    np.testing.assert_array_equal(fwd, want[0])
    np.testing.assert_array_equal(back, want[1])


def brute_move(boxes_x: np.ndarray, boxes_y: np.ndarray, x: np.ndarray, y: np.ndarray,
               hw: np.ndarray, hh: np.ndarray, mx: np.ndarray,
               my: np.ndarray) -> tuple[np.ndarray, ...]:
    """The two-pass platformer move (x against ``boxes_x``, then y from the moved x against
    ``boxes_y``) with brute-force limits: (x, y, wall side, floor side)."""
    x, y = x.copy(), y.copy()
    sides = []
    for axis, boxes in (("x", boxes_x), ("y", boxes_y)):
        c, half, o, o_half, move = (x, hw, y, hh, mx) if axis == "x" else (y, hh, x, hw, my)
        fwd, back = brute_limits(boxes, axis, c - half, c + half, o - o_half, o + o_half, move)
        stop_fwd, stop_back = move > fwd, move < back
        c += np.where(stop_fwd, fwd, np.where(stop_back, back, move))
        sides.append(stop_fwd.astype(np.int8) - stop_back.astype(np.int8))
    return x, y, sides[0], sides[1]


@SETTINGS
@given(levels(), st.integers(0, 4))
def test_move_boxes_matches_brute_force_through_both_grids(level: tuple, n_odd: int) -> None:
    """A whole move (x pass, then y pass): through the tile grid it is the rule applied to
    the runs of solid cells (and the unaligned boxes), through the general grid the rule
    applied box by box; bodies still clear of every box after the x pass (as a game keeps
    them) end in exactly the same place either way. Moving the rows in two sets at once
    changes nothing."""
    from ecs_engine.systems.collision import _move, move_boxes

    solid, ox, oy, rng = level
    h, w = solid.shape
    l0, b0 = rng.uniform(ox, ox + w, n_odd), rng.uniform(oy, oy + h, n_odd)
    odd = np.stack([l0, b0, l0 + rng.uniform(0.2, 3, n_odd), b0 + rng.uniform(0.2, 3, n_odd)],
                   axis=1)
    boxes = np.concatenate([cell_boxes(solid, ox, oy, rng), odd]).astype(np.float32)
    left, bottom, right, top = boxes.T
    tiles = LevelColliders.build(left, bottom, right, top)
    general = LevelColliders.build(left, bottom, right, top, use_tiles=False)
    assert tiles.tiles is not None
    x, y, hw, hh, _ = movers(rng, 60, ox, ox + w, oy, oy + h)
    clear = ~general.overlaps(x - hw, y - hh, x + hw, y + hh)  # where games keep bodies
    pos = np.zeros(int(clear.sum()), [("x", np.float32), ("y", np.float32)])
    vel, col = pos.copy(), np.zeros(len(pos), [("w", np.float32), ("h", np.float32)])
    pos["x"], pos["y"] = x[clear], y[clear]
    col["w"], col["h"] = hw[clear] * 2, hh[clear] * 2
    dt = 1 / 60
    vel["x"] = rng.uniform(-59, 59, len(pos))  # up to about a unit per tick
    vel["y"] = rng.uniform(-59, 59, len(pos))
    vel["x"][rng.random(len(pos)) < 0.1] = 0
    f64 = np.float64
    start = (pos["x"].astype(f64), pos["y"].astype(f64), col["w"].astype(f64) * 0.5,
             col["h"].astype(f64) * 0.5, vel["x"].astype(f64) * dt, vel["y"].astype(f64) * dt)
    grid = tiles.tiles
    rest = boxes[~aligned_mask(*boxes.T)].astype(f64)
    runs_x = np.concatenate([runs(grid.solid, grid.origin_x, grid.origin_y, "x"), rest])
    runs_y = np.concatenate([runs(grid.solid, grid.origin_x, grid.origin_y, "y"), rest])
    results = []
    for colliders, (boxes_x, boxes_y) in ((tiles, (runs_x, runs_y)),
                                          (general, (boxes.astype(f64),) * 2)):
        p, v = pos.copy(), vel.copy()
        wall, floor = move_boxes(colliders, p, v, col, dt)
        want = brute_move(boxes_x, boxes_y, *start)
        np.testing.assert_array_equal(p["x"], want[0].astype(np.float32))
        np.testing.assert_array_equal(p["y"], want[1].astype(np.float32))
        np.testing.assert_array_equal(wall, want[2])
        np.testing.assert_array_equal(floor, want[3])
        np.testing.assert_array_equal(v["x"] == 0, (vel["x"] == 0) | (wall != 0))
        np.testing.assert_array_equal(v["y"] == 0, (vel["y"] == 0) | (floor != 0))
        results.append((p, v, wall, floor))
    # Clear after the x pass (a body as wide as its gap stops a skin inside the far wall,
    # where runs and single boxes differ): both grids agree.
    moved_x = brute_move(runs_x, runs_y, *start[:5], np.zeros(len(pos)))[0]
    still_clear = ~general.overlaps(moved_x - start[2], start[1] - start[3],
                                    moved_x + start[2], start[1] + start[3])
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a[still_clear], b[still_clear])
    # Work buffers kept between calls: what a previous call left in them never matters.
    from ecs_engine.systems.scratch import Scratch

    scratch = Scratch()
    for poison in (None, 0x7F, 0xFF):
        if poison is not None:
            for arr in scratch._arrays.values():
                arr.view(np.uint8).fill(poison)
        p, v = pos.copy(), vel.copy()
        got = move_boxes(tiles, p, v, col, dt, scratch)
        for a, b in zip(results[0], (p, v, *got), strict=True):
            np.testing.assert_array_equal(a, b)
    # Two sets of rows in one pass: the same moves, hits numbered through both sets.
    p, v, wall, floor = results[0]
    cut = len(pos) // 3
    parts = [(pos[:cut].copy(), vel[:cut].copy(), col[:cut]),
             (pos[cut:].copy(), vel[cut:].copy(), col[cut:])]
    wall_rows, wall_side, floor_rows, floor_side = _move(tiles, parts, dt, None)
    np.testing.assert_array_equal(np.concatenate([parts[0][0], parts[1][0]]), p)
    np.testing.assert_array_equal(np.concatenate([parts[0][1], parts[1][1]]), v)
    both = np.zeros(len(pos), np.int8)
    both[wall_rows] = wall_side
    np.testing.assert_array_equal(both, wall)
    both[:] = 0
    both[floor_rows] = floor_side
    np.testing.assert_array_equal(both, floor)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.integers(1, 60))
def test_the_general_grids_cell_search_overlaps_as_every_pair_does(seed: int, n_boxes: int,
                                                                   n_queries: int) -> None:
    """Query boxes given with left > right or bottom > top, and with nan or infinite edges:
    the cell search raised on a negative repeat count (or cast a nan to int64) where the
    every-pair test answers; both now give the same mask (the open test: a box given
    backwards overlaps the boxes that hold it from right to left)."""
    rng = np.random.default_rng(seed)
    left, bottom = rng.uniform(-10, 10, n_boxes), rng.uniform(-10, 10, n_boxes)
    grid = StaticGrid.build(left, bottom, left + rng.uniform(0.05, 6, n_boxes),
                            bottom + rng.uniform(0.05, 6, n_boxes),
                            cell=float(rng.choice([0.5, 2.0, 4.0])))
    edges = rng.uniform(-14, 14, (4, n_queries))
    odd = rng.random((4, n_queries))
    edges[odd < 0.05] = np.nan
    edges[(odd >= 0.05) & (odd < 0.08)] = np.inf
    edges[(odd >= 0.08) & (odd < 0.1)] = -np.inf
    with mock.patch.object(grid_module, "BRUTE_FORCE_PAIRS", 10**9):
        want = grid.overlaps(*edges)
    with mock.patch.object(grid_module, "BRUTE_FORCE_PAIRS", 0), np.errstate(invalid="ignore"):
        got = grid.overlaps(*edges)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("origin", [2**20, 2**23, -(2**23), 2**29])
def test_a_level_far_from_the_origin_moves_the_same_every_way(origin: int) -> None:
    """The tile grid's index arithmetic is int32: a level at 2**23 made it overflow (an
    OverflowError from the vectorised move, where the loops moved the bodies). Such a
    level now goes to the general grid when its indices would not fit, and every path
    moves its bodies alike."""
    from ecs_engine.systems import collision_few
    from ecs_engine.systems.collision import _move

    o = float(origin)
    colliders = LevelColliders.build(*np.array([[o, o, o + 200, o + 1]], np.float32).T)
    dtype = [("x", np.float32), ("y", np.float32)]
    moved = []
    for few in (collision_few.FEW_BODIES, 0):
        pos = np.array([(o + 2, o + 3), (o + 150, o + 1.4)], dtype)
        vel = np.array([(0, -60), (30, -5)], dtype)
        col = np.array([(1, 1), (0.5, 0.75)], [("w", np.float32), ("h", np.float32)])
        with mock.patch.object(collision_few, "FEW_BODIES", few):
            hits = _move(colliders, [(pos, vel, col)], 1 / 60, None)
        moved.append(([h.tolist() for h in hits], pos.tobytes(), vel.tobytes()))
    assert moved[0] == moved[1]
