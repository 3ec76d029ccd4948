"""Platformer collision for a few bodies: one body at a time.

Every numpy call costs about a microsecond whatever its length, and the vectorised move
(``systems.collision._move``) makes well over a hundred of them per tick. Below
:data:`FEW_BODIES` bodies a loop over the bodies is cheaper (the demo level moves about a
dozen): in C (``systems/_fewbodies.c``) where it is built, else in Python floats. Both
repeat the vectorised move step for step: the same float64 arithmetic in the same order,
the same tile-table reads, the same rows in the same order, so all three give identical
results (``tests/test_collision_few.py`` and ``tests/test_fewbodies.py`` check them
against each other on random levels and bodies). Cases the loops do not cover return None
and take the vectorised move: no tile grid, a body that may reach an unaligned box this
tick, a non-finite value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ecs_engine.native import c_function
from ecs_engine.systems.tilegrid import TileGrid, _AxisTables

if TYPE_CHECKING:
    from ecs_engine.systems.colliders import LevelColliders

__all__ = ["FEW_BODIES", "FEW_BODIES_C", "FEW_BODIES_PYTHON", "move_few"]

# The loop in C (systems/_fewbodies.c; None where not built or ECS_NO_C is set)
_C_MOVE = c_function("systems._fewbodies", "move_bodies")

# Bodies up to which each loop runs. Measured on the demo level's colliders (bodies in
# open space), against the vectorised move's fixed 50-80 us: the Python loop took 0.34x
# its time at 4 bodies, 0.43x at 8, 0.74x at 16, 1.2x at 32 (about 2.5 us a body); the C
# loop 0.06x at 8 and 20 bodies, 0.08x at 100, 0.2x at 500, 0.45x at 2,000, 0.7x at
# 4,000, about even at 8,000 and 1.3-1.5x beyond (about 25 ns a body, more once the rows
# leave the cache).
FEW_BODIES_PYTHON = 20
FEW_BODIES_C = 2048
FEW_BODIES = FEW_BODIES_C if _C_MOVE is not None else FEW_BODIES_PYTHON

Bodies = tuple[np.ndarray, np.ndarray, np.ndarray]  # Position, Velocity, Collider rows
Hits = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def move_few(colliders: LevelColliders, parts: Sequence[Bodies], dt: float,
             skin: float) -> Hits | None:
    """``_move`` for a few bodies: moves them (Position written, blocked Velocity zeroed)
    and returns (wall rows, wall sides, floor rows, floor sides) numbered through the sets
    in order, exactly as ``_move`` does; None (nothing written) when it does not apply."""
    tiles = colliders.tiles
    if tiles is None:
        return None
    if _C_MOVE is not None:
        done = _C_MOVE(tiles._x.c_args, tiles._y.c_args, colliders.c_rest_bounds, parts,
                       dt, skin)
        if done is not None:
            wall_rows, wall_sides, floor_rows, floor_sides = done
            return (np.array(wall_rows, np.int64), np.array(wall_sides, np.int8),
                    np.array(floor_rows, np.int64), np.array(floor_sides, np.int8))
    if sum(len(pos) for pos, _, _ in parts) > FEW_BODIES_PYTHON or any(
            a.__class__ is not np.ndarray for part in parts for a in part):
        return None  # (more than the Python loop is worth, or arrays that may mean more
        # than their values, such as a mask: the vectorised move)
    # A numpy scalar dt (np.float32(1 / 60)) would make every move below a numpy scalar,
    # and numpy computes a Python float with a float32 in float32; the vectorised move
    # casts dt to float64 (np.multiply(..., dtype=float64)), as float() does.
    dt = float(dt)
    # Each field in one call: exact Python floats.
    xs: list[float] = []
    ys: list[float] = []
    ws: list[float] = []
    hs: list[float] = []
    vxs: list[float] = []
    vys: list[float] = []
    for pos, vel, col in parts:
        xs += pos["x"].tolist()
        ys += pos["y"].tolist()
        ws += col["w"].tolist()
        hs += col["h"].tolist()
        vxs += vel["x"].tolist()
        vys += vel["y"].tolist()
    hws = [w * 0.5 for w in ws]
    hhs = [h * 0.5 for h in hs]
    mxs = [vx * dt for vx in vxs]
    mys = [vy * dt for vy in vys]
    # One sum of everything: inf or nan anywhere (floor() of either raises, numpy's clip
    # copes) makes it non-finite; finite float32 values cannot overflow it.
    if not math.isfinite(sum(xs) + sum(ys) + sum(hws) + sum(hhs) + sum(mxs) + sum(mys)):
        return None
    if _any_near(colliders, xs, ys, hws, hhs, mxs, mys):
        return None
    # x pass: the box's own extent along x, its y extent across.
    bottoms = [y - hh for y, hh in zip(ys, hhs, strict=True)]
    tops = [y + hh for y, hh in zip(ys, hhs, strict=True)]
    wall_rows, wall_sides = _sweep(tiles, tiles._x, xs, hws, bottoms, tops, mxs, skin)
    # y pass: across it, the moved x extent.
    lefts = [x - hw for x, hw in zip(xs, hws, strict=True)]
    rights = [x + hw for x, hw in zip(xs, hws, strict=True)]
    floor_rows, floor_sides = _sweep(tiles, tiles._y, ys, hhs, lefts, rights, mys, skin)
    start = 0
    for pos, vel, _ in parts:
        stop = start + len(pos)
        pos["x"] = xs[start:stop]
        pos["y"] = ys[start:stop]
        for field, hit in (("x", wall_rows), ("y", floor_rows)):
            mine = [r - start for r in hit if start <= r < stop]
            if mine:
                vel[field][mine] = 0
        start = stop
    return (np.array(wall_rows, np.int64), np.array(wall_sides, np.int8),
            np.array(floor_rows, np.int64), np.array(floor_sides, np.int8))


def _any_near(colliders: LevelColliders, xs: list[float], ys: list[float], hws: list[float],
              hhs: list[float], mxs: list[float], mys: list[float]) -> bool:
    """Whether ``LevelColliders.near`` would name any body (the same margins, in the same
    float64 arithmetic): those go through the general grid, which this loop leaves to
    the vectorised move."""
    if len(colliders.rest.left) == 0 or not xs:
        return False
    left, bottom, right, top = colliders.rest_bounds
    band = ((xs, hws, mxs, left, right), (ys, hhs, mys, bottom, top))
    if colliders.narrow_axis == "y":
        band = band[::-1]
    (c, half, move, lo, hi), (c2, half2, move2, lo2, hi2) = band
    margin = 2 * max(half) + max(max(move), -min(move)) + 0.01
    lo, hi = lo - margin, hi + margin
    for i, ci in enumerate(c):
        if lo < ci < hi:
            margin2 = 2 * half2[i] + abs(move2[i]) + 0.01
            if lo2 - margin2 < c2[i] < hi2 + margin2:
                return True
    return False


def _sweep(tiles: TileGrid, t: _AxisTables, centres: list[float], halves: list[float],
           other_lo: list[float], other_hi: list[float], moves: list[float],
           skin: float) -> tuple[list[int], list[int]]:
    """One axis pass (``collision._sweep`` through ``TileGrid.stops``): moves ``centres``
    in place; returns the stopped rows (forward stops first, then backward ones, each in
    row order) and their sides (+1 forward, -1 backward)."""
    starts, ends = t.face_views
    size = len(starts)
    stride, origin, across = t.stride, t.origin, t.across
    row_lo, row_hi = across - 1, across + t.rows
    col_lo, col_hi = origin - 1, origin + stride - 2
    shift = -2 * (across - 1) * stride - origin + 1
    floor, ceil = math.floor, math.ceil
    fwd_rows: list[int] = []
    back_rows: list[int] = []
    # (clamps as comparisons: min(max(...)) costs two calls a value)
    for i, (centre, half, move, across_lo, across_hi) in enumerate(
            zip(centres, halves, moves, other_lo, other_hi, strict=True)):
        first = floor(across_lo)
        first = row_lo if first < row_lo else row_hi if first > row_hi else first
        last = ceil(across_hi) - 1
        last = row_lo if last < row_lo else row_hi if last > row_hi else last
        col = floor(centre)
        col = col_lo if col < col_lo else col_hi if col > col_hi else col
        index = ((first + last) * stride + col + shift) % size  # (take's mode="wrap")
        face_fwd: float = starts[index]
        face_back: float = ends[index]
        span = last - first
        if span < 0 or span > 1:
            face_fwd, face_back = _rows_one_by_one(t, starts, ends, centre, first, span)
        elif col == centre and col >= origin:
            face_fwd = starts[index - 1]  # a run starting at the centre counts too
        if move > 0:
            hi = centre + half
            if face_fwd < hi + move:
                limit = face_fwd - hi - skin
                if move > limit:
                    centres[i] = centre + limit
                    fwd_rows.append(i)
                    continue
        elif move < 0:
            lo = centre - half
            if face_back > lo + move:
                limit = face_back - lo + skin
                if move < limit:
                    centres[i] = centre + limit
                    back_rows.append(i)
                    continue
        centres[i] = centre + move
    return fwd_rows + back_rows, [1] * len(fwd_rows) + [-1] * len(back_rows)


def _rows_one_by_one(t: _AxisTables, starts: memoryview, ends: memoryview, centre: float,
                     first: int, span: int) -> tuple[float, float]:
    """``TileGrid._rows_one_by_one`` for one box over no grid row or more than two."""
    end = t.origin + t.stride - 1
    col_fwd = min(max(math.ceil(centre), t.origin), end) - t.origin
    col_back = min(max(math.floor(centre), t.origin - 1), end - 1) - t.origin + 1
    start = first - (t.across - 1)
    best_fwd, best_back = math.inf, -math.inf
    for j in range(span + 1):
        row = 2 * (start + j) * t.stride
        best_fwd = min(best_fwd, float(starts[row + col_fwd]))
        best_back = max(best_back, float(ends[row + col_back]))
    return best_fwd, best_back
