"""Static collision against pixel-aligned level geometry as table lookups.

Level geometry is made of boxes whose edges sit on whole world units (one geometry pixel
each). Their union is a bitmap of solid cells; along each axis, the faces a moving box can
hit are the ends of the runs of solid cells in its rows (for x) or columns (for y). For
every row (and every pair of adjacent rows) and every column position the tables hold the
nearest run start at or after it and the nearest run end at or before it, so stopping a
body costs one lookup per direction (a body over more than two rows, one per row),
whatever the number of static boxes. Lookups run over all moving bodies at once in reused
scratch buffers; only the few bodies that reach a face go on to the limit arithmetic.

The rule is the platformer collision rule of :mod:`systems.collision`, with runs as the
boxes: moving forward, a run stops the body if its near face is at or beyond the body's
centre and the moved body reaches past it; the limit is that face minus ``SKIN``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ecs_engine.systems.grid import spread_limits
from ecs_engine.systems.scratch import Scratch

MAX_CELLS = 1 << 22  # larger levels use the general grid: tables cost 32 bytes per cell

_EDGE_MAX = float(2**62)  # box edges are clamped to +-this before an int64 cast


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
    return out + origin


def _prev_end(solid: np.ndarray, origin: float) -> np.ndarray:
    """(rows, cols + 1): world coordinate of the last run end e <= k (-inf if none), where
    a run of cells [s, e) ends at e."""
    rows, cols = solid.shape
    end = np.zeros((rows, cols + 1), np.bool_)
    end[:, 1:] = solid
    end[:, 1:-1] &= ~solid[:, 1:]
    idx = np.where(end, np.arange(cols + 1, dtype=np.float64), -np.inf)
    return np.maximum.accumulate(idx, axis=1) + origin


def _pair_rows(table: np.ndarray, empty: float, nearest: Any) -> np.ndarray:
    """Interleave single rows and adjacent pairs of rows of a (rows, cols) face table,
    padded with an empty row on each side: row 2p is padded row p, row 2p + 1 the nearer
    face of padded rows p and p + 1. A box over rows a..b (b - a <= 1) reads row a + b."""
    rows, cols = table.shape
    padded = np.full((rows + 2, cols), empty)
    padded[1:-1] = table
    out = np.empty((2 * rows + 3, cols), np.float32)  # whole coordinates: exact
    out[0::2] = padded
    out[1::2] = nearest(padded[:-1], padded[1:])
    return out.reshape(-1)


@dataclass(frozen=True)
class _AxisTables:
    """Face lookup for motion along one axis. Table rows run across the motion (one per
    cell of the other axis), columns along it; see :func:`_pair_rows` for the row layout.

    Both tables are read at the column of ``floor(centre)``: column ``j`` stands for world
    coordinate ``k = origin + j - 1`` (``k = origin - 1`` and ``origin + width`` catch
    everything beyond the grid). ``ends[j]`` is the nearest run end at or before ``k`` and
    ``starts[j]`` the nearest run start at or after ``k + 1``, which is ``ceil(centre)``
    unless the centre is a whole number (then the start at ``k`` itself counts too: read
    ``starts[j - 1]``)."""

    starts: np.ndarray  # flat float32 (+inf: none)
    ends: np.ndarray  # flat float32 (-inf: none)
    stride: int  # columns per table row (cells along the motion + 2)
    origin: int  # world coordinate of the grid's first cell along the motion
    across: int  # world coordinate of the first grid row across the motion
    rows: int  # grid rows across the motion (without the padding)

    @cached_property
    def clip_lo(self) -> np.ndarray:
        """Lower clip bounds of (first row, last row, floor(centre)) in world units."""
        return np.array([[self.across - 1], [self.across - 1], [self.origin - 1]], np.float64)

    @cached_property
    def clip_hi(self) -> np.ndarray:
        """Upper clip bounds of (first row, last row, floor(centre)) in world units."""
        top = self.across + self.rows
        return np.array([[top], [top], [self.origin + self.stride - 2]], np.float64)

    @cached_property
    def face_views(self) -> tuple[memoryview, memoryview]:
        """``starts`` and ``ends`` as memoryviews, for loops over a few boxes: indexing one
        gives a Python float (an array's ``item`` costs about twice as much)."""
        return self.starts.data, self.ends.data

    @cached_property
    def c_args(self) -> tuple[np.ndarray, np.ndarray, int, int, int, int]:
        """The tables as ``systems/_fewbodies.c`` takes them."""
        return self.starts, self.ends, self.stride, self.origin, self.across, self.rows

    @classmethod
    def build(cls, solid: np.ndarray, origin: int, across: int) -> _AxisTables:
        rows, cols = solid.shape
        starts = np.full((rows, cols + 2), np.inf)
        starts[:, :-1] = _next_start(solid, origin)
        ends = np.full((rows, cols + 2), -np.inf)
        ends[:, 1:] = _prev_end(solid, origin)
        return cls(_pair_rows(starts, np.inf, np.minimum),
                   _pair_rows(ends, -np.inf, np.maximum), cols + 2, origin, across, rows)

    def single_row(self, padded_row: np.ndarray, col: np.ndarray,
                   table: np.ndarray) -> np.ndarray:
        """Faces of one padded row (0 = the empty row before the grid) per box."""
        return table[2 * padded_row * self.stride + col]


def _int32_indices(origin: int, across: int, cells: int, rows: int) -> bool:
    """Whether every step of :meth:`TileGrid.stops`' table index for motion along an axis
    (``cells`` cells from ``origin``, ``rows`` grid rows across it from ``across``) fits
    int32, the index arithmetic's type: (first + last row) * stride, plus the column, plus
    the shift back to the table's first row."""
    stride = cells + 2
    biggest = 2 * (abs(across) + rows + 1) * stride + abs(origin) + stride + 2
    return biggest < 2**31


@dataclass(frozen=True)
class TileGrid:
    """Solid cells of aligned static boxes and the run-face tables of both axes."""

    origin_x: int
    origin_y: int
    width: int  # cells
    height: int
    solid: np.ndarray  # (height, width) bool
    prefix: np.ndarray  # (height + 1, width + 1) int32 summed-area table of ``solid``
    _x: _AxisTables  # moving along x: rows are the grid's rows
    _y: _AxisTables  # moving along y: rows are the grid's columns

    @classmethod
    def build(cls, left: np.ndarray, bottom: np.ndarray, right: np.ndarray,
              top: np.ndarray) -> TileGrid | None:
        """The grid of aligned boxes (see :func:`aligned_mask`; pass only those), or None
        when there are none or the level needs more than ``MAX_CELLS`` cells."""
        if len(left) == 0:
            return None
        ox, oy = int(left.min()), int(bottom.min())
        width, height = int(right.max()) - ox, int(top.max()) - oy
        if (width * height > MAX_CELLS or max(abs(ox), abs(oy)) + width + height > 1 << 30
                or not (_int32_indices(ox, oy, width, height)
                        and _int32_indices(oy, ox, height, width))):
            return None  # (table indices are int32 arithmetic)
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
        return cls(ox, oy, width, height, solid, prefix, _AxisTables.build(solid, ox, oy),
                   _AxisTables.build(solid.T, oy, ox))

    def stops(self, axis: str, centre: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              other_lo: np.ndarray, other_hi: np.ndarray, move: np.ndarray, skin: float,
              scratch: Scratch | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The boxes [lo, hi] x [other_lo, other_hi] (centre ``centre`` along ``axis``)
        moving by ``move`` whose moved box reaches a face of a run of solid cells in their
        way: (rows, limit), each row once. Moving forward, the nearest run start at or
        beyond the centre, if below ``hi + move``, gives limit ``face - hi - skin``;
        backward, the nearest run end at or before the centre, if above ``lo + move``,
        gives ``face - lo + skin``.

        Every box costs one index and two table reads (one per direction) whatever its
        size: the table row for a box over grid rows a..b is a + b, which holds the nearer
        face of both rows when b = a + 1 (the few boxes over more rows, or none, are fixed
        up after). Index arithmetic runs in float64 and int32 (cheap casts) in ``scratch``
        buffers, so a call allocates only its (few) results."""
        n = len(centre)
        if n == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        t = self._x if axis == "x" else self._y
        s = scratch if scratch is not None else Scratch()
        # Three rounded coordinates per box, clipped and cast in one call each: the first
        # and last grid row across the motion that the open interval (other_lo, other_hi)
        # overlaps (within the grid and its empty padding rows), and floor(centre) along
        # the motion (within the table's columns).
        f = s.get("tile.f", 3 * n).reshape(3, n)
        np.floor(other_lo, out=f[0])
        np.ceil(other_hi, out=f[1])
        f[1] -= 1
        np.floor(centre, out=f[2])
        # (one clip, not maximum then minimum: two passes cost 4x at 100k bodies)
        np.clip(f, t.clip_lo, t.clip_hi, out=f)
        cells = s.get("tile.cells", 3 * n, np.int32).reshape(3, n)
        np.copyto(cells, f, casting="unsafe")
        first, last, col = cells
        # Table row a + b for padded rows a, b; column relative to the padding column.
        index32 = np.add(first, last, out=s.get("tile.index32", n, np.int32))
        index32 *= t.stride
        index32 += col
        index32 += -2 * (t.across - 1) * t.stride - t.origin + 1
        index = s.get("tile.index", n, np.int64)
        np.copyto(index, index32)
        face_fwd = s.get("tile.face_fwd", n, np.float32)
        face_back = s.get("tile.face_back", n, np.float32)
        t.starts.take(index, out=face_fwd, mode="wrap")  # (the method: no Python wrapper)
        t.ends.take(index, out=face_back, mode="wrap")
        # Fixed up after: whole-number centres (moving forward, a run starting at the centre
        # counts: one more read) and the few boxes over no grid row or more than two (read
        # again row by row).
        span = np.subtract(last, first, out=s.get("tile.span", n, np.int32))  # rows - 1
        special = np.greater(span.view(np.uint32), 1, out=s.get("tile.special", n, np.bool_))
        special |= np.equal(f[2], centre, out=s.get("tile.whole", n, np.bool_))
        odd = special.nonzero()[0]  # (flatnonzero's result, without its Python wrapper)
        if len(odd):
            over = span[odd].view(np.uint32) > 1
            whole = odd[~over]  # a run starting at column floor(centre) = centre counts
            whole = whole[f[2][whole] >= t.origin]  # (left of the grid: nothing to add)
            face_fwd[whole] = t.starts[index[whole] - 1]
            odd = odd[over]
            if len(odd):
                self._rows_one_by_one(t, odd, centre, first, span, face_fwd, face_back)
        # Which boxes stop: reading the faces was the bulk; what follows is per stopper.
        reach = s.get("tile.reach", n)
        ahead = np.less(face_fwd, np.add(hi, move, out=reach), out=s.get("tile.ahead", n,
                                                                          np.bool_))
        behind = np.greater(face_back, np.add(lo, move, out=reach),
                            out=s.get("tile.behind", n, np.bool_))
        hit = np.logical_or(ahead, behind, out=special).nonzero()[0]
        if len(hit) == 0:
            return hit, np.zeros(0)
        wanted = move[hit]
        fwd = hit[(wanted > 0) & ahead[hit]]
        back = hit[(wanted < 0) & behind[hit]]
        limit = np.concatenate([face_fwd[fwd].astype(np.float64) - hi[fwd] - skin,
                                face_back[back].astype(np.float64) - lo[back] + skin])
        return np.concatenate([fwd, back]), limit

    @staticmethod
    def _rows_one_by_one(t: _AxisTables, odd: np.ndarray, centre: np.ndarray,
                         first: np.ndarray, span: np.ndarray, face_fwd: np.ndarray,
                         face_back: np.ndarray) -> None:
        """Faces of the boxes ``odd`` (over no grid row, or more than two) row by row.
        ``span``: grid rows spanned - 1 (-1: none)."""
        c = centre[odd]
        end = t.origin + t.stride - 1
        col_fwd = np.clip(np.ceil(c), t.origin, end).astype(np.int64) - t.origin
        col_back = np.clip(np.floor(c), t.origin - 1, end - 1).astype(np.int64) - t.origin + 1
        start = first[odd].astype(np.int64) - (t.across - 1)  # padded row
        last = span[odd].astype(np.int64)  # rows beyond the first (-1: none)
        best_fwd = np.full(len(odd), np.inf, np.float32)
        best_back = np.full(len(odd), -np.inf, np.float32)
        for j in range(int(last.max()) + 1):
            on = np.flatnonzero(last >= j)
            padded = start[on] + j
            best_fwd[on] = np.minimum(best_fwd[on], t.single_row(padded, col_fwd[on], t.starts))
            best_back[on] = np.maximum(best_back[on],
                                       t.single_row(padded, col_back[on], t.ends))
        face_fwd[odd] = best_fwd
        face_back[odd] = best_back

    def limits(self, axis: str, lo: np.ndarray, hi: np.ndarray, other_lo: np.ndarray,
               other_hi: np.ndarray, move: np.ndarray, skin: float,
               limit_fwd: np.ndarray, limit_back: np.ndarray) -> None:
        """Lower ``limit_fwd`` / raise ``limit_back`` (moves along ``axis``, world units) of
        the boxes [lo, hi] x [other_lo, other_hi] moving by ``move`` at the faces of the
        runs of solid cells in their way (:meth:`stops` with the centre between lo and
        hi, spread out to one entry per box)."""
        rows, limit = self.stops(axis, (lo + hi) * 0.5, lo, hi, other_lo, other_hi, move,
                                 skin)
        spread_limits(rows, limit, move, limit_fwd, limit_back)

    @cached_property
    def _origin(self) -> np.ndarray:
        """(x, y) of the grid's first cell, as a column (one row per axis)."""
        return np.array([[self.origin_x], [self.origin_y]], np.int64)

    @cached_property
    def _origin_next(self) -> np.ndarray:
        """``_origin + 1``."""
        return self._origin + 1

    @cached_property
    def _minus_origin_next(self) -> np.ndarray:
        """``-(_origin + 1)``."""
        return -self._origin_next

    @cached_property
    def _last_cell(self) -> np.ndarray:
        """(x, y) index of the grid's last cell, as a column."""
        return np.array([[self.width - 1], [self.height - 1]], np.int64)

    @cached_property
    def prefix_view(self) -> memoryview:
        """The summed-area table flattened (row stride ``width + 1``) as a memoryview, for
        loops over a few boxes: indexing one gives a Python int."""
        return self.prefix.reshape(-1).data

    @cached_property
    def c_args(self) -> tuple[np.ndarray, int, int, int, int]:
        """The summed-area table as ``systems/_fewbodies.c`` takes it: flat, with the
        grid's origin and size."""
        return (self.prefix.reshape(-1), self.origin_x, self.origin_y, self.width,
                self.height)

    @cached_property
    def _flat(self) -> tuple[np.ndarray, np.ndarray]:
        """The summed-area table flattened, and the column (1, row stride) that turns
        (column, row) pairs into flat indices."""
        return self.prefix.reshape(-1), np.array([[1], [self.width + 1]], np.int64)

    def overlaps(self, left: np.ndarray, bottom: np.ndarray, right: np.ndarray,
                 top: np.ndarray) -> np.ndarray:
        """Boolean mask: does each box (open) overlap a solid cell?"""
        # Both axes in one array (row 0: x, row 1: y), so each step is one call for both.
        # Round in world units, then shift by the (whole) origin: subtracting the origin
        # first could round a coordinate just below a cell edge onto it.
        shape = left.shape if isinstance(left, np.ndarray) else np.shape(left)
        # (scalars and any shape in, the same shape out)
        # Edges beyond +-2**62 (and inf, nan) are clamped before the int64 cast, which
        # would wrap them (a box at x = 1e19 or nan read as overlapping). The high edges
        # go in negated (ceil(v) = -floor(-v)), so one floor and one clamp cover all four
        # and a nan edge of either kind becomes +max there: a low edge past the grid, a
        # high edge before it (an empty box, as open comparisons with nan are false).
        edges = np.array((left, bottom, right, top), np.float64).reshape(4, -1)
        np.negative(edges[2:], out=edges[2:])
        np.floor(edges, out=edges)
        np.fmax(np.fmin(edges, _EDGE_MAX, out=edges), -_EDGE_MAX, out=edges)  # (nan: max)
        cells = edges.astype(np.int64)
        first = cells[:2]
        first -= self._origin
        last = np.subtract(self._minus_origin_next, cells[2:])
        np.maximum(first, 0, out=first)
        np.minimum(last, self._last_cell, out=last)
        within = last >= first
        ok = within[0] & within[1]
        first *= ok  # boxes off the grid read cell (0, 0), then count as no overlap
        last *= ok
        last += 1
        # The four corners' entries in one read: flat (row * stride + column) indices of
        # [[(r1, c1), (r1, c0)], [(r0, c1), (r0, c0)]].
        table, scale = self._flat
        first *= scale
        last *= scale
        corners = table.take(np.array((last[1], first[1]))[:, None, :]
                             + np.array((last[0], first[0]))[None, :, :])
        count = corners[0, 0] - corners[1, 0] - corners[0, 1] + corners[1, 1]
        return (ok & (count > 0)).reshape(shape)
