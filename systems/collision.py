"""Platformer collision: moving boxes against the static level boxes, one axis at a time."""

from __future__ import annotations

import numpy as np

from ecs_engine import World
from ecs_engine.components import Collider, Grounded, Position, Velocity
from ecs_engine.systems.grid import StaticGrid, static_grid

SKIN = 1e-3  # units: bodies stop this far from a wall so the next tick starts clear of it


def _resolve_axis(grid: StaticGrid, lo: np.ndarray, hi: np.ndarray, other_lo: np.ndarray,
                  other_hi: np.ndarray, move: np.ndarray, axis: str) -> tuple[np.ndarray, ...]:
    """Move boxes [lo, hi] by ``move`` along one axis and stop them at static boxes.

    Returns (applied move, hit side: -1 hit below/left, +1 above/right, 0 none).
    """
    new_lo, new_hi = lo + move, hi + move
    if axis == "x":
        qi, bi = grid.pairs(new_lo, other_lo, new_hi, other_hi)
        box_lo, box_hi = grid.left[bi], grid.right[bi]
    else:
        qi, bi = grid.pairs(other_lo, new_lo, other_hi, new_hi)
        box_lo, box_hi = grid.bottom[bi], grid.top[bi]
    applied = move.copy()
    side = np.zeros(len(lo), np.int8)
    if len(qi) == 0:
        return applied, side
    forward = move[qi] > 0
    backward = move[qi] < 0
    # A box stops us if its near face is beyond our centre: boxes we were clear of, and
    # boxes we sink into by less than half our size (a body spawned or restored slightly
    # inside the floor is pushed out instead of falling through).
    centre = (lo + hi)[qi] * 0.5
    ahead = forward & (box_lo >= centre)
    behind = backward & (box_hi <= centre)
    limit_fwd = np.full(len(lo), np.inf, np.float64)
    np.minimum.at(limit_fwd, qi[ahead], (box_lo[ahead] - hi[qi[ahead]] - SKIN))
    limit_back = np.full(len(lo), -np.inf, np.float64)
    np.maximum.at(limit_back, qi[behind], (box_hi[behind] - lo[qi[behind]] + SKIN))
    stop_fwd = np.isfinite(limit_fwd) & (move > limit_fwd)
    stop_back = np.isfinite(limit_back) & (move < limit_back)
    applied[stop_fwd] = limit_fwd[stop_fwd]
    applied[stop_back] = limit_back[stop_back]
    side[stop_fwd] = 1
    side[stop_back] = -1
    return applied, side


def move_boxes(grid: StaticGrid, pos: np.ndarray, vel: np.ndarray, col: np.ndarray,
               dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Move rows of Position by Velocity*dt, stopping at static boxes; zero the blocked
    velocity. Returns (wall side per row, floor side per row): -1, 0 or +1."""
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
    grid = static_grid(world)
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
    grid = static_grid(world)
    e = 1e-4
    return grid.overlaps(x - e, y - e, x + e, y + e)

