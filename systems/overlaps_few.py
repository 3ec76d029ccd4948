"""Static-box overlap tests for a few query boxes, one box at a time.

``LevelColliders.overlaps`` (the stock ``solid_at``: patrols probe for ledges every tick)
costs some thirty numpy calls whatever the number of boxes; for a handful a loop over the
boxes is cheaper: in C (``systems/_fewbodies.c``) where it is built, else in Python
numbers. Both read the same summed-area table and compare the same values as the
vectorised test, so all three give the same mask (``tests/test_overlaps_few.py`` and
``tests/test_fewbodies.py`` check them against each other).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ecs_engine.native import c_function

if TYPE_CHECKING:
    from ecs_engine.systems.colliders import LevelColliders

__all__ = ["FEW_BOXES", "FEW_BOXES_PYTHON", "FEW_PAIRS", "FEW_PAIRS_PYTHON", "overlaps_few"]

# The loop in C (systems/_fewbodies.c; None where not built or ECS_NO_C is set)
_C_OVERLAP = c_function("systems._fewbodies", "overlap_boxes")

# Query boxes up to which each loop runs, and (query boxes x unaligned boxes) pairs it
# tests one by one. Measured on the demo level's colliders (point probes), against the
# vectorised test's fixed ~25 us: the Python loop took 0.35x its time at 4 boxes, 0.5x at
# 8, 0.8x at 16, 1.4x at 32 (about 1 us a box); the C loop 0.02x at 8 boxes, 0.2x at 256,
# 0.5x at 1,024 and about even at 4,096 (about 20 ns a box).
FEW_BOXES_PYTHON = 16
FEW_PAIRS_PYTHON = 256
FEW_BOXES = 2048 if _C_OVERLAP is not None else FEW_BOXES_PYTHON
FEW_PAIRS = 32768 if _C_OVERLAP is not None else FEW_PAIRS_PYTHON


def overlaps_few(colliders: LevelColliders, left: np.ndarray, bottom: np.ndarray,
                 right: np.ndarray, top: np.ndarray) -> np.ndarray | None:
    """``colliders.overlaps`` for up to :data:`FEW_BOXES` boxes given as 1-D arrays of
    equal length; None when it does not apply (more boxes, other shapes, too many
    unaligned boxes, a non-finite coordinate)."""
    if _C_OVERLAP is not None and left.__class__ is np.ndarray and left.ndim == 1:
        tiles = colliders.tiles
        mask = np.empty(len(left), np.bool_)
        if _C_OVERLAP(tiles.c_args if tiles is not None else None, colliders.c_rest_boxes,
                      left, bottom, right, top, mask, FEW_BOXES, FEW_PAIRS):
            return mask
    n = left.shape[0] if left.__class__ is np.ndarray and left.ndim == 1 else -1
    if not 0 <= n <= min(FEW_BOXES, FEW_BOXES_PYTHON) or any(
            a.__class__ is not np.ndarray or a.shape != (n,) or a.dtype.kind != "f"
            for a in (left, bottom, right, top)):
        return None  # (integers: exact here, rounded to float64 by the vectorised test)
    rest = colliders.rest
    if n * len(rest.left) > min(FEW_PAIRS, FEW_PAIRS_PYTHON):
        return None
    ls, bs, rs, ts = left.tolist(), bottom.tolist(), right.tolist(), top.tolist()
    if not math.isfinite(sum(ls) + sum(bs) + sum(rs) + sum(ts)):
        return None  # (floor() of inf or nan raises)
    hits = [False] * n
    if len(rest.left):
        boxes = list(zip(rest.left.tolist(), rest.bottom.tolist(), rest.right.tolist(),
                         rest.top.tolist(), strict=True))
        for i in range(n):
            le, bo, ri, to = ls[i], bs[i], rs[i], ts[i]
            for b_left, b_bottom, b_right, b_top in boxes:
                if le < b_right and ri > b_left and bo < b_top and to > b_bottom:
                    hits[i] = True
                    break
    tiles = colliders.tiles
    if tiles is not None:
        table = tiles.prefix_view
        stride = tiles.width + 1
        ox, oy = tiles.origin_x, tiles.origin_y
        last_x, last_y = tiles.width - 1, tiles.height - 1
        for i in range(n):
            if hits[i]:
                continue
            # TileGrid.overlaps: cells [c0, c1] x [r0, r1], clipped to the grid.
            c0 = max(math.floor(ls[i]) - ox, 0)
            r0 = max(math.floor(bs[i]) - oy, 0)
            c1 = min(math.ceil(rs[i]) - (ox + 1), last_x)
            r1 = min(math.ceil(ts[i]) - (oy + 1), last_y)
            if c1 < c0 or r1 < r0:
                continue
            c1 += 1
            r1 += 1
            count = (table[r1 * stride + c1] - table[r0 * stride + c1]
                     - table[r1 * stride + c0] + table[r0 * stride + c0])
            hits[i] = count > 0
    return np.array(hits, np.bool_)
