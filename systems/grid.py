"""A uniform-grid broad phase over static boxes, built from the columns in bulk."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ecs_engine import World
from ecs_engine.components import Collider, Position, Solid

CACHE_KEY = "systems.static_grid"
# ``StaticGrid.pairs`` tests every (query, box) pair directly up to this many pairs: the
# same pairs as the cell search, in far fewer numpy calls. Tests set it to 0 to cover the
# cell search with small cases.
BRUTE_FORCE_PAIRS = 1 << 14


def box_edges(pos: np.ndarray,
              col: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(left, bottom, right, top) in world units of boxes from Position (centre) and
    Collider (full size) rows."""
    x, y = pos["x"], pos["y"]  # (each field access builds a view: once each)
    hw, hh = col["w"] * 0.5, col["h"] * 0.5
    return x - hw, y - hh, x + hw, y + hh


def _expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For runs of ``counts``: (run index, offset within the run) per element."""
    owner = np.repeat(np.arange(len(counts)), counts)
    offsets = np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, offsets


def spread_limits(rows: np.ndarray, limit: np.ndarray, move: np.ndarray,
                  limit_fwd: np.ndarray, limit_back: np.ndarray) -> None:
    """Fold the sparse ``(rows, limit)`` of a ``stops`` call into per-box limits: lower
    ``limit_fwd`` where the box moves forward, raise ``limit_back`` where it moves back."""
    fwd = move[rows] > 0
    ahead, behind = rows[fwd], rows[~fwd]
    limit_fwd[ahead] = np.minimum(limit_fwd[ahead], limit[fwd])
    limit_back[behind] = np.maximum(limit_back[behind], limit[~fwd])


@dataclass(frozen=True)
class StaticGrid:
    """Static boxes (left, bottom, right, top in world units) bucketed into square cells."""

    left: np.ndarray
    bottom: np.ndarray
    right: np.ndarray
    top: np.ndarray
    origin_x: float
    origin_y: float
    cell: float
    width: int  # cells
    height: int
    cell_start: np.ndarray  # CSR: boxes of cell c are items[cell_start[c]:cell_start[c+1]]
    items: np.ndarray
    version: int

    @classmethod
    def build(cls, left: np.ndarray, bottom: np.ndarray, right: np.ndarray, top: np.ndarray,
              cell: float = 4.0, version: int = 0) -> StaticGrid:
        if len(left) == 0:
            empty = np.zeros(0, np.float32)
            return cls(empty, empty, empty, empty, 0.0, 0.0, cell, 1, 1,
                       np.zeros(2, np.int64), np.zeros(0, np.int64), version)
        ox, oy = float(left.min()), float(bottom.min())
        width = int((right.max() - ox) // cell) + 1
        height = int((top.max() - oy) // cell) + 1
        cx0, cx1, cy0, cy1 = cls._cell_range(left, bottom, right, top, ox, oy, cell, width,
                                             height)
        wc = cx1 - cx0 + 1
        counts = wc * (cy1 - cy0 + 1)
        box, k = _expand(counts)
        cells = (cy0[box] + k // wc[box]) * width + cx0[box] + k % wc[box]
        order = np.argsort(cells, kind="stable")
        cell_start = np.zeros(width * height + 1, np.int64)
        np.cumsum(np.bincount(cells, minlength=width * height), out=cell_start[1:])
        return cls(left, bottom, right, top, ox, oy, cell, width, height, cell_start,
                   box[order], version)

    @staticmethod
    def _cell_range(left: np.ndarray, bottom: np.ndarray, right: np.ndarray, top: np.ndarray,
                    ox: float, oy: float, cell: float, width: int,
                    height: int) -> tuple[np.ndarray, ...]:
        # (fmin/fmax clamps: a nan edge lands in the grid instead of in an int64 cast)
        def cells(edge: np.ndarray, origin: float, count: int) -> np.ndarray:
            return np.fmax(np.fmin(np.floor((edge - origin) / cell), count - 1),
                           0).astype(np.int64)

        return (cells(left, ox, width), cells(right, ox, width), cells(bottom, oy, height),
                cells(top, oy, height))

    def pairs(self, left: np.ndarray, bottom: np.ndarray, right: np.ndarray,
              top: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query index, box index) for every query box that overlaps a static box
        (open intervals: touching edges do not count). A pair may repeat."""
        if len(self.left) == 0 or len(left) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        if len(left) * len(self.left) <= BRUTE_FORCE_PAIRS:
            # Few queries against few boxes (the odd unaligned boxes of a tile level):
            # testing every pair is a handful of numpy calls, the cell search dozens.
            hit = ((left[:, None] < self.right) & (right[:, None] > self.left)
                   & (bottom[:, None] < self.top) & (top[:, None] > self.bottom))
            qi, bi = np.nonzero(hit)
            return qi, bi
        # The cells between each box's edges, in either order: a box given with left >
        # right overlaps, by the open test below (and the brute force above), the boxes
        # that hold it from right to left, which sit in those cells.
        x_lo, x_hi = np.fmin(left, right), np.fmax(left, right)
        y_lo, y_hi = np.fmin(bottom, top), np.fmax(bottom, top)
        cx0, cx1, cy0, cy1 = self._cell_range(x_lo, y_lo, x_hi, y_hi, self.origin_x,
                                              self.origin_y, self.cell, self.width, self.height)
        outside = ((x_hi < self.origin_x) | (y_hi < self.origin_y)
                   | (x_lo > self.origin_x + self.width * self.cell)
                   | (y_lo > self.origin_y + self.height * self.cell))
        wc = cx1 - cx0 + 1
        counts = np.where(outside, 0, wc * (cy1 - cy0 + 1))
        query, k = _expand(counts)
        cells = (cy0[query] + k // wc[query]) * self.width + cx0[query] + k % wc[query]
        starts = self.cell_start[cells]
        per_cell = self.cell_start[cells + 1] - starts
        pair_owner, j = _expand(per_cell)
        qi = query[pair_owner]
        bi = self.items[starts[pair_owner] + j]
        hit = ((left[qi] < self.right[bi]) & (right[qi] > self.left[bi])
               & (bottom[qi] < self.top[bi]) & (top[qi] > self.bottom[bi]))
        return qi[hit], bi[hit]

    def stops(self, axis: str, centre: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              other_lo: np.ndarray, other_hi: np.ndarray, move: np.ndarray,
              skin: float) -> tuple[np.ndarray, np.ndarray]:
        """The boxes [lo, hi] x [other_lo, other_hi] (centre ``centre`` along ``axis``)
        moving by ``move`` that a static box stops: (rows, limit), each row once. A static
        box the moved box overlaps stops it if the box's near face is at or beyond the
        moving box's centre (boxes it sinks into by less than half its size push it out
        instead); the limit is the furthest move, ``face - hi - skin`` forward and
        ``face - lo + skin`` backward, over every such box."""
        if len(self.left) == 0 or len(lo) == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        # Only movers whose swept box reaches the grid's bounds (few, when the grid holds
        # the odd unaligned boxes of a tile level) go through the pair search (or, few
        # movers against few boxes, one matrix of every pair).
        x0, x1 = self.origin_x, self.origin_x + self.width * self.cell
        y0, y1 = self.origin_y, self.origin_y + self.height * self.cell
        a0, a1, b0, b1 = (x0, x1, y0, y1) if axis == "x" else (y0, y1, x0, x1)
        reach_lo = lo + np.clip(move, -np.inf, 0.0)  # (clip: np.minimum's values, faster)
        reach_hi = hi + np.clip(move, 0.0, np.inf)
        moving = ((move != 0) & (reach_lo < a1) & (reach_hi > a0)
                  & (other_lo < b1) & (other_hi > b0)).nonzero()[0]
        if len(moving) == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        m_lo, m_hi, o_lo, o_hi, mv = (a[moving] for a in (lo, hi, other_lo, other_hi, move))
        new_lo, new_hi = m_lo + mv, m_hi + mv
        if len(moving) * len(self.left) <= BRUTE_FORCE_PAIRS:
            found, limit = self._dense_limits(axis, centre[moving], m_lo, m_hi, new_lo, new_hi,
                                              o_lo, o_hi, mv, skin)
            return moving[found], limit
        if axis == "x":
            qi, bi = self.pairs(new_lo, o_lo, new_hi, o_hi)
            box_lo, box_hi = self.left[bi], self.right[bi]
        else:
            qi, bi = self.pairs(o_lo, new_lo, o_hi, new_hi)
            box_lo, box_hi = self.bottom[bi], self.top[bi]
        if len(qi) == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        c = centre[moving][qi]
        ahead = (mv[qi] > 0) & (box_lo >= c)
        behind = (mv[qi] < 0) & (box_hi <= c)
        # Forward limits are minimised, backward ones maximised: one minimum over both
        # with the backward ones negated.
        limit = np.full(len(moving), np.inf)
        np.minimum.at(limit, qi[ahead], box_lo[ahead] - m_hi[qi[ahead]] - skin)
        np.minimum.at(limit, qi[behind], -(box_hi[behind] - m_lo[qi[behind]] + skin))
        found = (limit < np.inf).nonzero()[0]
        limit = limit[found]
        back = mv[found] < 0
        limit[back] = -limit[back]
        return moving[found], limit

    def _dense_limits(self, axis: str, c: np.ndarray, m_lo: np.ndarray, m_hi: np.ndarray,
                      new_lo: np.ndarray, new_hi: np.ndarray, o_lo: np.ndarray,
                      o_hi: np.ndarray, mv: np.ndarray,
                      skin: float) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`stops` for few movers against few boxes: every (mover, box) pair as one
        matrix, no pair lists. Returns (which movers stop, their limits)."""
        if axis == "x":
            b_lo, b_hi, b_olo, b_ohi = self.left, self.right, self.bottom, self.top
        else:
            b_lo, b_hi, b_olo, b_ohi = self.bottom, self.top, self.left, self.right
        over = ((new_lo[:, None] < b_hi) & (new_hi[:, None] > b_lo)
                & (o_lo[:, None] < b_ohi) & (o_hi[:, None] > b_olo))
        fwd = mv > 0
        ahead = over & fwd[:, None] & (b_lo >= c[:, None])
        behind = over & ~fwd[:, None] & (b_hi <= c[:, None])  # (movers only: mv != 0)
        limit = np.where(fwd, np.where(ahead, b_lo - m_hi[:, None] - skin, np.inf).min(axis=1),
                         np.where(behind, b_hi - m_lo[:, None] + skin, -np.inf).max(axis=1))
        found = np.isfinite(limit).nonzero()[0]
        return found, limit[found]

    def limits(self, axis: str, lo: np.ndarray, hi: np.ndarray, other_lo: np.ndarray,
               other_hi: np.ndarray, move: np.ndarray, skin: float,
               limit_fwd: np.ndarray, limit_back: np.ndarray) -> None:
        """Lower ``limit_fwd`` / raise ``limit_back`` (moves along ``axis``, world units) of
        boxes [lo, hi] x [other_lo, other_hi] moving by ``move``: :meth:`stops` with the
        centre between lo and hi, spread out to one entry per box."""
        rows, limit = self.stops(axis, (lo + hi) * 0.5, lo, hi, other_lo, other_hi, move,
                                 skin)
        spread_limits(rows, limit, move, limit_fwd, limit_back)

    def overlaps(self, left: np.ndarray, bottom: np.ndarray, right: np.ndarray,
                 top: np.ndarray) -> np.ndarray:
        """Boolean mask: does each query box overlap any static box?"""
        if len(self.left) and len(left) * len(self.left) <= BRUTE_FORCE_PAIRS:
            # (pairs' every-pair test, reduced per query box without listing the pairs)
            hit = ((left[:, None] < self.right) & (right[:, None] > self.left)
                   & (bottom[:, None] < self.top) & (top[:, None] > self.bottom))
            return np.logical_or.reduce(hit, axis=1)
        qi, _ = self.pairs(left, bottom, right, top)
        mask = np.zeros(len(left), np.bool_)
        mask[qi] = True
        return mask


def static_grid(world: World, cell: float = 4.0) -> StaticGrid:
    """The grid of ``Solid`` boxes, rebuilt when the set of solids changes (also after a
    restore that changes it). Solids are static: call ``invalidate_static_grid`` after
    moving one."""
    store = world.store(Solid)
    version = store.layout_version
    cached = world.caches.get(CACHE_KEY)
    if isinstance(cached, StaticGrid) and cached.version == version and cached.cell == cell:
        return cached
    with world.query(Solid, Position, Collider, readonly=(Solid, Position, Collider)) as q:
        grid = StaticGrid.build(*box_edges(q[Position], q[Collider]), cell=cell,
                                version=version)
    world.caches[CACHE_KEY] = grid
    return grid


def invalidate_static_grid(world: World) -> None:
    """Forget the cached static collision structures (after moving a ``Solid``)."""
    world.caches.pop(CACHE_KEY, None)
    world.caches.pop("systems.level_colliders", None)  # systems.colliders' cache
