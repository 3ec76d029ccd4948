"""The level's static colliders for collision: a tile grid for the pixel-aligned boxes
and the general grid for the rest."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ecs_engine import World
from ecs_engine.components import Collider, Position, Solid
from ecs_engine.systems.grid import StaticGrid, box_edges
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

    def limits(self, axis: str, lo: np.ndarray, hi: np.ndarray, other_lo: np.ndarray,
               other_hi: np.ndarray, move: np.ndarray,
               skin: float) -> tuple[np.ndarray, np.ndarray]:
        """(furthest forward move, furthest backward move) per box before it hits a static
        box (``inf`` / ``-inf`` where nothing is in the way)."""
        limit_fwd = np.full(len(lo), np.inf)
        limit_back = np.full(len(lo), -np.inf)
        if self.tiles is not None:
            self.tiles.limits(axis, lo, hi, other_lo, other_hi, move, skin, limit_fwd,
                              limit_back)
        self.rest.limits(axis, lo, hi, other_lo, other_hi, move, skin, limit_fwd, limit_back)
        return limit_fwd, limit_back

    def overlaps(self, left: np.ndarray, bottom: np.ndarray, right: np.ndarray,
                 top: np.ndarray) -> np.ndarray:
        """Boolean mask: does each box (open) overlap a static box?"""
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
