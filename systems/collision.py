"""Platformer collision: moving boxes against the static level boxes, one axis at a time.

Pixel-aligned level boxes are looked up in a tile grid (``systems.tilegrid``), the others in
the general uniform grid (``systems.grid``)."""

from __future__ import annotations

import numpy as np

from ecs_engine import World
from ecs_engine.components import Collider, Grounded, Position, Velocity
from ecs_engine.systems.colliders import LevelColliders, level_colliders
from ecs_engine.systems.grid import StaticGrid

SKIN = 1e-3  # units: bodies stop this far from a wall so the next tick starts clear of it


def _resolve_axis(colliders: LevelColliders, lo: np.ndarray, hi: np.ndarray,
                  other_lo: np.ndarray, other_hi: np.ndarray, move: np.ndarray,
                  axis: str) -> tuple[np.ndarray, np.ndarray]:
    """Move boxes [lo, hi] by ``move`` along one axis and stop them at static boxes.

    A box stops us if its near face is at or beyond our centre: boxes we were clear of,
    and boxes we sink into by less than half our size (a body spawned or restored slightly
    inside the floor is pushed out instead of falling through).
    Returns (applied move, hit side: -1 hit below/left, +1 above/right, 0 none).
    """
    limit_fwd, limit_back = colliders.limits(axis, lo, hi, other_lo, other_hi, move, SKIN)
    stop_fwd = move > limit_fwd
    stop_back = move < limit_back
    applied = np.where(stop_fwd, limit_fwd, np.where(stop_back, limit_back, move))
    side = stop_fwd.astype(np.int8) - stop_back.astype(np.int8)
    return applied, side


def move_boxes(grid: LevelColliders | StaticGrid, pos: np.ndarray, vel: np.ndarray,
               col: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Move rows of Position by Velocity*dt, stopping at static boxes; zero the blocked
    velocity. Returns (wall side per row, floor side per row): -1, 0 or +1."""
    if isinstance(grid, StaticGrid):  # a bare general grid: no tile part
        grid = LevelColliders(None, grid, grid.version)
    hw = col["w"].astype(np.float64) * 0.5
    hh = col["h"].astype(np.float64) * 0.5
    x, y = pos["x"].astype(np.float64), pos["y"].astype(np.float64)
    dx, wall = _resolve_axis(grid, x - hw, x + hw, y - hh, y + hh,
                             vel["x"].astype(np.float64) * dt, "x")
    x += dx
    dy, floor = _resolve_axis(grid, y - hh, y + hh, x - hw, x + hw,
                              vel["y"].astype(np.float64) * dt, "y")
    y += dy
    pos["x"], pos["y"] = x, y
    vel["x"][wall != 0] = 0
    vel["y"][floor != 0] = 0
    return wall, floor


def collide(world: World, dt: float) -> None:
    """Move every body with Position, Velocity and Collider through the static level.

    Sets ``Grounded`` (standing on something, touching a wall) where the body has it.
    Solids (the level) must not have a Velocity.
    """
    grid = level_colliders(world)
    with world.query(Position, Velocity, Collider, Grounded, readonly=(Collider,)) as q:
        wall, floor = move_boxes(grid, q[Position], q[Velocity], q[Collider], dt)
        ground = q[Grounded]
        ground["on_ground"] = floor == -1
        ground["wall"] = wall
    with world.query(Position, Velocity, Collider, without=(Grounded,),
                     readonly=(Collider,)) as q:
        move_boxes(grid, q[Position], q[Velocity], q[Collider], dt)


def solid_at(world: World, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Boolean mask: is each world point inside a static box?"""
    grid = level_colliders(world)
    e = 1e-4
    return grid.overlaps(x - e, y - e, x + e, y + e)

