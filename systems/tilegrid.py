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
    _x_faces: np.ndarray  # x_next stacked on -x_prev: one table for both directions
    _y_faces: np.ndarray

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
        x_next, x_prev = _next_start(solid, ox), _prev_end(solid, ox)
        y_next, y_prev = _next_start(solid.T, oy), _prev_end(solid.T, oy)
        return cls(ox, oy, width, height, solid, prefix, x_next, x_prev, y_next, y_prev,
                   np.concatenate([x_next, -x_prev]), np.concatenate([y_next, -y_prev]))

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
        runs of solid cells in their way.

        Forward and backward movers go through one pass: the tables are stacked, with the
        backward faces negated, so "nearest face" is a minimum for both."""
        if len(lo) == 0:
            return
        if axis == "x":
            table, origin, across_origin, n_across = (self._x_faces, self.origin_x,
                                                      self.origin_y, self.height)
        else:
            table, origin, across_origin, n_across = (self._y_faces, self.origin_y,
                                                      self.origin_x, self.width)
        stride = self.width + 1 if axis == "x" else self.height + 1
        back_offset = n_across * stride  # the negated run-end table follows the starts
        forward = move > 0
        centre = (lo + hi) * 0.5  # world units, rounded before the origin shift
        # Forward: faces at or beyond the centre, columns >= ceil(centre); backward: faces
        # at or before it, columns <= floor(centre) (none when that is left of the grid).
        col = np.where(forward, np.ceil(centre), np.floor(centre)) - origin
        nowhere = col < 0
        np.clip(col, 0, stride - 1, out=col)
        base = col.astype(np.int64)
        base += np.where(forward, 0, back_offset)
        first = np.floor(other_lo).astype(np.int64) - across_origin
        last = np.ceil(other_hi).astype(np.int64) - (across_origin + 1)
        np.maximum(first, 0, out=first)
        np.minimum(last, n_across - 1, out=last)
        flat = table.reshape(-1)
        best = np.full(len(lo), np.inf, np.float32)
        span = last - first  # rows beyond the first; most bodies span one or two rows
        row = np.minimum(first, n_across - 1)
        for j in range(2):
            ok = span >= j
            face = flat[np.where(ok, row + j, row) * stride + base]
            np.minimum(best, np.where(ok, face, np.inf), out=best)
        tall = np.flatnonzero(span >= 2)
        for j in range(2, int(span.max(initial=0)) + 1):
            tall = tall[span[tall] >= j]
            face = flat[(row[tall] + j) * stride + base[tall]]
            best[tall] = np.minimum(best[tall], face)
        face = best.astype(np.float64)  # forward: the nearest run start
        stop = forward & (face < hi + move)
        np.minimum(limit_fwd, np.where(stop, face - hi - skin, np.inf), out=limit_fwd)
        face = -face  # backward: the nearest run end (stored negated)
        stop = (move < 0) & ~nowhere & (face > lo + move)
        np.maximum(limit_back, np.where(stop, face - lo + skin, -np.inf), out=limit_back)

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
