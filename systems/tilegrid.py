"""Static collision against pixel-aligned level geometry as table lookups.

Level geometry is made of boxes whose edges sit on whole world units (one geometry pixel
each). Their union is a bitmap of solid cells; along each axis, the faces a moving box can
hit are the ends of the runs of solid cells in its rows (for x) or columns (for y). For
every row and every column position the tables hold the nearest run start at or after it
and the nearest run end at or before it, so stopping a body costs one lookup per row it
spans, whatever the number of static boxes.

The rule is the platformer collision rule of :mod:`systems.collision`, with runs as the
boxes: moving forward, a run stops the body if its near face is at or beyond the body's
centre and the moved body reaches past it; the limit is that face minus ``SKIN``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_CELLS = 1 << 22  # larger levels use the general grid: tables cost 16 bytes per cell


def aligned_mask(left: np.ndarray, bottom: np.ndarray, right: np.ndarray,
                 top: np.ndarray) -> np.ndarray:
    """Boxes whose four edges are whole world units and that are at least one unit wide
    and high (the ones a tile grid represents exactly)."""
    edges = np.stack([left, bottom, right, top]).astype(np.float64)
    whole = (np.floor(edges) == edges).all(axis=0)
    return whole & (right - left >= 1) & (top - bottom >= 1)


def _next_start(solid: np.ndarray, origin: float) -> np.ndarray:
    """(rows, cols + 1): world coordinate of the first run start at column >= c (+inf
    if none). A run starts at a solid cell whose left neighbour is empty."""
    rows, cols = solid.shape
    start = solid.copy()
    start[:, 1:] &= ~solid[:, :-1]
    idx = np.where(start, np.arange(cols, dtype=np.float64), np.inf)
    out = np.full((rows, cols + 1), np.inf)
    out[:, :cols] = np.minimum.accumulate(idx[:, ::-1], axis=1)[:, ::-1]
    return (out + origin).astype(np.float32)


def _prev_end(solid: np.ndarray, origin: float) -> np.ndarray:
    """(rows, cols + 1): world coordinate of the last run end e <= k (-inf if none), where
    a run of cells [s, e) ends at e."""
    rows, cols = solid.shape
    end = np.zeros((rows, cols + 1), np.bool_)
    end[:, 1:] = solid
    end[:, 1:-1] &= ~solid[:, 1:]
    idx = np.where(end, np.arange(cols + 1, dtype=np.float64), -np.inf)
    return (np.maximum.accumulate(idx, axis=1) + origin).astype(np.float32)


@dataclass(frozen=True)
class TileGrid:
    """Solid cells of aligned static boxes and the run-face tables of both axes."""

    origin_x: int
    origin_y: int
    width: int  # cells
    height: int
    solid: np.ndarray  # (height, width) bool
    prefix: np.ndarray  # (height + 1, width + 1) int32 summed-area table of ``solid``
    x_next: np.ndarray  # (height, width + 1) float32, see _next_start
    x_prev: np.ndarray  # (height, width + 1) float32, see _prev_end
    y_next: np.ndarray  # (width, height + 1) float32: the same along columns
    y_prev: np.ndarray  # (width, height + 1) float32

    @classmethod
    def build(cls, left: np.ndarray, bottom: np.ndarray, right: np.ndarray,
              top: np.ndarray) -> TileGrid | None:
        """The grid of aligned boxes (see :func:`aligned_mask`; pass only those), or None
        when there are none or the level needs more than ``MAX_CELLS`` cells."""
        if len(left) == 0:
            return None
        ox, oy = int(left.min()), int(bottom.min())
        width, height = int(right.max()) - ox, int(top.max()) - oy
        if width * height > MAX_CELLS:
            return None
        x0, x1 = left.astype(np.int64) - ox, right.astype(np.int64) - ox
        y0, y1 = bottom.astype(np.int64) - oy, top.astype(np.int64) - oy
        # Paint every box at once: +1/-1 at its corners, then a 2D prefix sum.
        marks = np.zeros((height + 1, width + 1), np.int32)
        np.add.at(marks, (y0, x0), 1)
        np.add.at(marks, (y0, x1), -1)
        np.add.at(marks, (y1, x0), -1)
        np.add.at(marks, (y1, x1), 1)
        solid = marks.cumsum(axis=0).cumsum(axis=1)[:height, :width] > 0
        prefix = np.zeros((height + 1, width + 1), np.int32)
        prefix[1:, 1:] = solid.cumsum(axis=0, dtype=np.int32).cumsum(axis=1, dtype=np.int32)
        return cls(ox, oy, width, height, solid, prefix,
                   _next_start(solid, ox), _prev_end(solid, ox),
                   _next_start(solid.T, oy), _prev_end(solid.T, oy))

    def _cells(self, lo: np.ndarray, hi: np.ndarray, origin: int) -> tuple[np.ndarray, ...]:
        """First and last cell index (inclusive) that the open intervals (lo, hi) overlap."""
        # Round in world units, then shift by the (whole) origin: subtracting the origin
        # first could round a coordinate just below a cell edge onto it.
        first = np.floor(lo).astype(np.int64) - origin
        last = np.ceil(hi).astype(np.int64) - (origin + 1)
        return first, last

    def limits(self, axis: str, lo: np.ndarray, hi: np.ndarray, other_lo: np.ndarray,
               other_hi: np.ndarray, move: np.ndarray, skin: float,
               limit_fwd: np.ndarray, limit_back: np.ndarray) -> None:
        """Lower ``limit_fwd`` / raise ``limit_back`` (moves along ``axis``, world units) of
        the boxes [lo, hi] x [other_lo, other_hi] moving by ``move`` at the faces of the
        runs of solid cells in their way."""
        if axis == "x":
            nxt, prv, origin, across_origin, n_across = (self.x_next, self.x_prev,
                                                         self.origin_x, self.origin_y,
                                                         self.height)
        else:
            nxt, prv, origin, across_origin, n_across = (self.y_next, self.y_prev,
                                                         self.origin_y, self.origin_x,
                                                         self.width)
        stride = nxt.shape[1]
        for forward in (True, False):
            idx = np.flatnonzero(move > 0) if forward else np.flatnonzero(move < 0)
            if len(idx) == 0:
                continue
            b_lo, b_hi, mv = lo[idx], hi[idx], move[idx]
            centre = (b_lo + b_hi) * 0.5  # world units, rounded before the origin shift
            if forward:  # faces at or beyond the centre: columns >= ceil(centre)
                col = np.clip(np.ceil(centre) - origin, 0, stride - 1).astype(np.int64)
                table, reach = nxt, b_hi + mv
            else:  # faces at or before the centre: columns <= floor(centre)
                col = np.floor(centre) - origin
                gone = col < 0  # every face would be left of the grid
                col = np.clip(col, 0, stride - 1).astype(np.int64)
                table, reach = prv, b_lo + mv
            first, last = self._cells(other_lo[idx], other_hi[idx], across_origin)
            first = np.maximum(first, 0)
            last = np.minimum(last, n_across - 1)
            best = np.full(len(idx), np.inf if forward else -np.inf)
            sel = np.flatnonzero(last >= first)
            row = first[sel]
            flat = table.reshape(-1)
            while len(sel):
                face = flat[row * stride + col[sel]]
                if forward:
                    best[sel] = np.minimum(best[sel], face)
                else:
                    best[sel] = np.maximum(best[sel], face)
                keep = row < last[sel]
                sel, row = sel[keep], row[keep] + 1
            if forward:
                hit = best < reach
                cand = best - b_hi - skin
                np.minimum(limit_fwd[idx], np.where(hit, cand, np.inf), out=cand)
                limit_fwd[idx] = cand
            else:
                hit = (best > reach) & ~gone
                cand = best - b_lo + skin
                np.maximum(limit_back[idx], np.where(hit, cand, -np.inf), out=cand)
                limit_back[idx] = cand

    def overlaps(self, left: np.ndarray, bottom: np.ndarray, right: np.ndarray,
                 top: np.ndarray) -> np.ndarray:
        """Boolean mask: does each box (open) overlap a solid cell?"""
        c0, c1 = self._cells(left, right, self.origin_x)
        r0, r1 = self._cells(bottom, top, self.origin_y)
        c0, r0 = np.maximum(c0, 0), np.maximum(r0, 0)
        c1, r1 = np.minimum(c1, self.width - 1), np.minimum(r1, self.height - 1)
        ok = (c1 >= c0) & (r1 >= r0)
        c0, c1, r0, r1 = (np.where(ok, v, 0) for v in (c0, c1, r0, r1))
        p = self.prefix
        count = p[r1 + 1, c1 + 1] - p[r0, c1 + 1] - p[r1 + 1, c0] + p[r0, c0]
        return ok & (count > 0)
