"""Platformer collision: moving boxes against the static level boxes, one axis at a time.

Pixel-aligned level boxes are looked up in a tile grid (``systems.tilegrid``), the others in
the general uniform grid (``systems.grid``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ecs_engine import World
from ecs_engine.components import Collider, Grounded, Position, Velocity
from ecs_engine.entity import key_slots
from ecs_engine.systems import collision_few
from ecs_engine.systems.colliders import LevelColliders, level_colliders
from ecs_engine.systems.grid import StaticGrid
from ecs_engine.systems.scratch import Scratch, world_scratch

SKIN = 1e-3  # units: bodies stop this far from a wall so the next tick starts clear of it
SCRATCH_KEY = "systems.collision.scratch"  # world.caches: collide's work arrays


def _sweep(colliders: LevelColliders, axis: str, centre: np.ndarray, lo: np.ndarray,
           hi: np.ndarray, other_lo: np.ndarray, other_hi: np.ndarray, move: np.ndarray,
           scratch: Scratch, near: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Move boxes [lo, hi] (centre ``centre``, moved in place) by ``move`` along one axis
    and stop them at static boxes.

    A box stops us if its near face is at or beyond our centre: boxes we were clear of,
    and boxes we sink into by less than half our size (a body spawned or restored slightly
    inside the floor is pushed out instead of falling through).
    Returns the stopped rows and their hit side (int8: -1 hit below/left, +1 above/right):
    few, so everything after the face lookups works on them only.
    """
    rows, limit = colliders.stops(axis, centre, lo, hi, other_lo, other_hi, move, SKIN,
                                  scratch, near)
    if len(rows) == 0:  # nothing in the way (the x pass, most ticks): just move
        centre += move
        return rows, np.zeros(0, np.int8)
    wanted = move[rows]
    fwd = wanted > 0
    stop = np.where(fwd, wanted > limit, wanted < limit)
    rows, limit, fwd = rows[stop], limit[stop], fwd[stop]
    before = centre[rows]
    centre += move
    centre[rows] = before + limit
    return rows, np.where(fwd, np.int8(1), np.int8(-1))


Bodies = tuple[np.ndarray, np.ndarray, np.ndarray]  # Position, Velocity, Collider rows


def _move(grid: LevelColliders | StaticGrid, parts: Sequence[Bodies], dt: float,
          scratch: Scratch | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`move_boxes` over several sets of rows at once (one pass, however many
    sets) with the hits as (wall rows, wall sides, floor rows, floor sides) numbered
    through the sets in order: the few rows that hit something, not one entry per row."""
    if isinstance(grid, StaticGrid):  # a bare general grid: no tile part
        grid = LevelColliders(None, grid, grid.version)
    s = scratch if scratch is not None else Scratch()
    n = sum(len(pos) for pos, _, _ in parts)
    if n == 0:
        none = np.zeros(0, np.int64), np.zeros(0, np.int8)
        return (*none, *none)
    if n <= collision_few.FEW_BODIES:
        few = collision_few.move_few(grid, parts, dt, SKIN)
        if few is not None:
            return few
    f64 = np.float64
    x, y = s.get("x", n), s.get("y", n)
    hw, hh = s.get("hw", n), s.get("hh", n)
    mx, my = s.get("mx", n), s.get("my", n)
    spans = []
    start = 0
    for pos, vel, col in parts:
        rows = slice(start, start + len(pos))
        spans.append(rows)
        start = rows.stop
        np.copyto(x[rows], pos["x"])
        np.copyto(y[rows], pos["y"])
        np.multiply(col["w"], 0.5, out=hw[rows], dtype=f64)
        np.multiply(col["h"], 0.5, out=hh[rows], dtype=f64)
        np.multiply(vel["x"], dt, out=mx[rows], dtype=f64)
        np.multiply(vel["y"], dt, out=my[rows], dtype=f64)
    near = grid.near(x, y, hw, hh, mx, my)
    # x first: the box's own extent along x, its y extent across (also the y pass's own).
    lo, hi = np.subtract(x, hw, out=s.get("lo", n)), np.add(x, hw, out=s.get("hi", n))
    bottom, top = np.subtract(y, hh, out=s.get("bottom", n)), np.add(y, hh, out=s.get("top", n))
    wall = _sweep(grid, "x", x, lo, hi, bottom, top, mx, s, near)
    np.subtract(x, hw, out=lo)  # the moved x extent, across the y pass
    np.add(x, hw, out=hi)
    floor = _sweep(grid, "y", y, bottom, top, lo, hi, my, s, near)
    for (pos, vel, _), rows in zip(parts, spans, strict=True):
        pos["x"] = x[rows]
        pos["y"] = y[rows]
        for field, hit in (("x", wall[0]), ("y", floor[0])):
            if len(hit) == 0:
                continue  # (walls: most ticks)
            if len(spans) > 1:
                hit = hit[(hit >= rows.start) & (hit < rows.stop)] - rows.start
            vel[field][hit] = 0
    return (*wall, *floor)


def move_boxes(grid: LevelColliders | StaticGrid, pos: np.ndarray, vel: np.ndarray,
               col: np.ndarray, dt: float,
               scratch: Scratch | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Move rows of Position by Velocity*dt, stopping at static boxes (x first, then y);
    zero the blocked velocity. Returns (wall side per row, floor side per row): -1, 0 or
    +1. ``scratch`` keeps the work arrays between calls (see ``systems.scratch``)."""
    wall_rows, wall_side, floor_rows, floor_side = _move(grid, [(pos, vel, col)], dt, scratch)
    wall = np.zeros(len(pos), np.int8)
    floor = np.zeros(len(pos), np.int8)
    wall[wall_rows] = wall_side
    floor[floor_rows] = floor_side
    return wall, floor


def collide(world: World, dt: float) -> None:
    """Move every body with Position, Velocity and Collider through the static level.

    Sets ``Grounded`` (standing on something, touching a wall) where the body has it.
    Up to :data:`FEW_GROUNDED` such bodies only the rows whose value changed are
    written: most ticks none did, and an unwritten store is one snapshots, rollback and
    the state hash need not copy again.
    Solids (the level) must not have a Velocity. Bodies with and without ``Grounded``
    move in one pass (their queries are open together).
    """
    grid = level_colliders(world)
    scratch = world_scratch(world, SCRATCH_KEY)
    changed: tuple[np.ndarray, np.ndarray] | None = None
    # (many bodies: some land or take off every tick, so every row is written)
    compare = world.count(Grounded) <= FEW_GROUNDED
    with world.query(Position, Velocity, Collider, Grounded,
                     readonly=(Collider, Grounded) if compare else (Collider,)) as q, \
            world.query(Position, Velocity, Collider, without=(Grounded,),
                        readonly=(Collider,)) as other:
        parts = [(q[Position], q[Velocity], q[Collider])]
        if len(other):
            parts.append((other[Position], other[Velocity], other[Collider]))
        wall_rows, wall_side, floor_rows, floor_side = _move(grid, parts, dt, scratch)
        n = len(q)
        if len(parts) > 1:  # hits of the Grounded rows only (they come first)
            if len(wall_rows):
                mine = wall_rows < n
                wall_side, wall_rows = wall_side[mine], wall_rows[mine]
            mine = floor_rows < n
            floor_side, floor_rows = floor_side[mine], floor_rows[mine]
        standing = floor_rows[floor_side < 0]
        if not compare:
            _set_grounded(q[Grounded], standing, wall_rows, wall_side)
        else:
            changed = _grounded_changes(q[Grounded], standing, wall_rows, wall_side)
            if changed is not None:
                changed = q.entities[changed[0]].copy(), changed[1]
    if changed is not None:
        # (the store's rows of the few that changed, written in place and marked: what
        # set_batch does, without its per-call checks, ~15 us)
        keys, values = changed
        store = world.store(Grounded)
        rows = store.rows_of(key_slots(keys))
        store.data[rows] = values
        store.touch(rows)


# Grounded's rows as one little-endian word each: on_ground the low byte, wall the high one
_GROUNDED_WORD = np.dtype("<u2")
# Bodies with Grounded up to which collide compares before writing. Measured interleaved
# on the demo level with bouncing stress bodies: comparing cost +2% of a tick at 10k
# bodies, +3.5-5% at 100k, where some body lands in every tick anyway.
FEW_GROUNDED = 256


def _set_grounded(ground: np.ndarray, standing: np.ndarray, wall_rows: np.ndarray,
                  wall_side: np.ndarray) -> None:
    """Write every row of ``ground`` (a writable Grounded column): on the ground in rows
    ``standing``, touching a wall at ``wall_rows``, 0 elsewhere."""
    if ground.dtype.itemsize == 2 and ground.flags.c_contiguous:
        ground.view(np.uint16).fill(0)  # both one-byte fields, one word per row
    else:
        ground["on_ground"] = False
        ground["wall"] = 0
    ground["on_ground"][standing] = True
    if len(wall_rows):
        ground["wall"][wall_rows] = wall_side


def _grounded_changes(ground: np.ndarray, standing: np.ndarray, wall_rows: np.ndarray,
                      wall_side: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows of ``ground`` (Grounded) whose bytes differ from this tick's value (on the
    ground in rows ``standing``, touching a wall at ``wall_rows``, 0 elsewhere) and those
    rows' new values; None when none differs (most ticks)."""
    word = np.zeros(len(ground), _GROUNDED_WORD)
    word[standing] = 1
    if len(wall_rows):
        word[wall_rows] |= wall_side.view(np.uint8).astype(_GROUNDED_WORD) << 8
    rows = (np.ascontiguousarray(ground).view(_GROUNDED_WORD) != word).nonzero()[0]
    return (rows, word[rows].view(ground.dtype)) if len(rows) else None


def solid_at(world: World, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Boolean mask: is each world point inside a static box?"""
    grid = level_colliders(world)
    e = 1e-4
    return grid.overlaps(x - e, y - e, x + e, y + e)

