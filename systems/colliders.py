"""The level's static colliders for collision: a tile grid for the pixel-aligned boxes
and the general grid for the rest."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ecs_engine import World
from ecs_engine.components import Collider, Position, Solid
from ecs_engine.systems.grid import StaticGrid, box_edges, spread_limits
from ecs_engine.systems.overlaps_few import overlaps_few
from ecs_engine.systems.scratch import Scratch
from ecs_engine.systems.tilegrid import TileGrid, aligned_mask

CACHE_KEY = "systems.level_colliders"


@dataclass(frozen=True)
class LevelColliders:
    """Static boxes split by kind: ``tiles`` holds the boxes on whole world units (None
    when there are none), ``rest`` the others (unaligned, fractional sizes)."""

    tiles: TileGrid | None
    rest: StaticGrid
    version: int

    @classmethod
    def build(cls, left: np.ndarray, bottom: np.ndarray, right: np.ndarray, top: np.ndarray,
              version: int = 0, use_tiles: bool = True) -> LevelColliders:
        aligned = aligned_mask(left, bottom, right, top) if use_tiles else np.zeros(
            len(left), np.bool_)
        tiles = TileGrid.build(left[aligned], bottom[aligned], right[aligned],
                               top[aligned]) if aligned.any() else None
        if tiles is None:
            aligned[:] = False  # too large for a tile grid: every box goes to the grid
        rest = ~aligned
        return cls(tiles, StaticGrid.build(left[rest], bottom[rest], right[rest], top[rest],
                                           version=version), version)

    def stops(self, axis: str, centre: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              other_lo: np.ndarray, other_hi: np.ndarray, move: np.ndarray, skin: float,
              scratch: Scratch | None = None,
              near: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(rows, limit) of the boxes a static box stops, each row once, with the nearest
        limit of either part (see ``TileGrid.stops``). ``near``: the only rows that can
        reach the unaligned boxes (see :meth:`near`); None checks every row."""
        parts = []
        if self.tiles is not None:
            parts.append(self.tiles.stops(axis, centre, lo, hi, other_lo, other_hi, move,
                                          skin, scratch))
        if len(self.rest.left) and (near is None or len(near)):
            if near is None:
                parts.append(self.rest.stops(axis, centre, lo, hi, other_lo, other_hi, move,
                                             skin))
            else:
                rows, limit = self.rest.stops(axis, centre[near], lo[near], hi[near],
                                              other_lo[near], other_hi[near], move[near],
                                              skin)
                parts.append((near[rows], limit))
        parts = [p for p in parts if len(p[0])]
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0)
        if len(parts) == 1:
            return parts[0]
        (tile_rows, tile_limit), (rest_rows, rest_limit) = parts
        # A row both parts stop keeps the nearer limit (the smaller one moving forward,
        # the larger one moving back). The general grid's rows come out sorted.
        k = np.minimum(np.searchsorted(rest_rows, tile_rows), len(rest_rows) - 1)
        both = (rest_rows[k] == tile_rows).nonzero()[0]
        if len(both):
            k = k[both]
            fwd = move[rest_rows[k]] > 0
            mine, theirs = tile_limit[both], rest_limit[k]
            rest_limit[k] = np.where(fwd, np.minimum(mine, theirs), np.maximum(mine, theirs))
            tile_rows, tile_limit = np.delete(tile_rows, both), np.delete(tile_limit, both)
        return (np.concatenate([tile_rows, rest_rows]),
                np.concatenate([tile_limit, rest_limit]))

    def near(self, x: np.ndarray, y: np.ndarray, half_w: np.ndarray, half_h: np.ndarray,
             move_x: np.ndarray, move_y: np.ndarray) -> np.ndarray | None:
        """Rows of boxes (centre x, y, half sizes, this tick's moves) that may touch an
        unaligned box this tick, in either axis pass; None when every row may (no tile
        part). Conservative: it keeps every box whose swept box can reach the bounds of
        the unaligned boxes in the x pass or, moved along x, in the y pass."""
        if self.tiles is None:
            return None
        if len(self.rest.left) == 0 or len(x) == 0:
            return np.zeros(0, np.int64)
        left, bottom, right, top = self.rest_bounds
        # Along an axis a box moves by at most its move, or (pushed out of a face) by its
        # half size plus the skin; 0.01 units of slack cover rounding and the skin. First
        # the rows within the narrower band around the boxes (one margin for all), then
        # the other axis on those few (each row its own margin).
        band = ((x, half_w, move_x, left, right), (y, half_h, move_y, bottom, top))
        if self.narrow_axis == "y":
            band = band[::-1]
        (c, half, move, lo, hi), (c2, half2, move2, lo2, hi2) = band
        margin = 2 * float(half.max()) + max(float(move.max()), -float(move.min())) + 0.01
        rows = ((c > lo - margin) & (c < hi + margin)).nonzero()[0]
        if len(rows) == 0:
            return rows  # (most ticks: every body is far from the unaligned boxes)
        margin2 = 2 * half2[rows] + np.abs(move2[rows]) + 0.01
        inside = c2[rows]
        return rows[(inside > lo2 - margin2) & (inside < hi2 + margin2)]

    @cached_property
    def narrow_axis(self) -> str:
        """The axis along which the unaligned boxes' bounds cover less of the tile grid
        (:meth:`near` filters along it first)."""
        tiles = self.tiles
        left, bottom, right, top = self.rest_bounds
        if tiles is None or not np.isfinite(left):
            return "x"
        return "x" if (right - left + 2) / tiles.width <= (top - bottom + 2) / tiles.height \
            else "y"

    @cached_property
    def rest_bounds(self) -> tuple[float, float, float, float]:
        """(left, bottom, right, top) around the unaligned boxes (world units)."""
        rest = self.rest
        if len(rest.left) == 0:
            return (np.inf, np.inf, -np.inf, -np.inf)
        return (float(rest.left.min()), float(rest.bottom.min()), float(rest.right.max()),
                float(rest.top.max()))

    @cached_property
    def c_rest_bounds(self) -> tuple[float, float, float, float, bool] | None:
        """:attr:`rest_bounds` and whether :attr:`narrow_axis` is y, as
        ``systems/_fewbodies.c`` takes them (None: no unaligned boxes)."""
        if len(self.rest.left) == 0:
            return None
        return (*self.rest_bounds, self.narrow_axis == "y")

    @cached_property
    def c_rest_boxes(self) -> np.ndarray:
        """The unaligned boxes' (left, bottom, right, top), one box after another, as one
        flat float64 array (as ``systems/_fewbodies.c`` takes them)."""
        rest = self.rest
        return np.stack([rest.left, rest.bottom, rest.right, rest.top], axis=1).astype(
            np.float64).reshape(-1)

    def limits(self, axis: str, lo: np.ndarray, hi: np.ndarray, other_lo: np.ndarray,
               other_hi: np.ndarray, move: np.ndarray,
               skin: float) -> tuple[np.ndarray, np.ndarray]:
        """(furthest forward move, furthest backward move) per box before it hits a static
        box (``inf`` / ``-inf`` where nothing is in the way): :meth:`stops` with the
        centre between lo and hi, spread out to one entry per box."""
        limit_fwd = np.full(len(lo), np.inf)
        limit_back = np.full(len(lo), -np.inf)
        rows, limit = self.stops(axis, (lo + hi) * 0.5, lo, hi, other_lo, other_hi, move,
                                 skin)
        spread_limits(rows, limit, move, limit_fwd, limit_back)
        return limit_fwd, limit_back

    def overlaps(self, left: np.ndarray, bottom: np.ndarray, right: np.ndarray,
                 top: np.ndarray) -> np.ndarray:
        """Boolean mask: does each box (open) overlap a static box?"""
        few = overlaps_few(self, left, bottom, right, top)
        if few is not None:
            return few
        hit = self.rest.overlaps(left, bottom, right, top)
        if self.tiles is not None:
            hit |= self.tiles.overlaps(left, bottom, right, top)
        return hit


def level_colliders(world: World) -> LevelColliders:
    """The ``Solid`` boxes as :class:`LevelColliders`, rebuilt when the set of solids
    changes (also after a restore that changes it). Solids are static: call
    ``invalidate_level_colliders`` after moving one."""
    version = world.store(Solid).layout_version
    cached = world.caches.get(CACHE_KEY)
    if isinstance(cached, LevelColliders) and cached.version == version:
        return cached
    with world.query(Solid, Position, Collider, readonly=(Solid, Position, Collider)) as q:
        edges = box_edges(q[Position], q[Collider])
    colliders = LevelColliders.build(*edges, version=version)
    world.caches[CACHE_KEY] = colliders
    return colliders


def invalidate_level_colliders(world: World) -> None:
    world.caches.pop(CACHE_KEY, None)
