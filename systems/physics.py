"""Gravity and free integration. Units: world units, seconds."""

from __future__ import annotations

import numpy as np

from ecs_engine import ComponentStore, World
from ecs_engine.components import Collider, Gravity, Position, Velocity
from ecs_engine.entity import key_slots
from ecs_engine.systems.versioned import derived

TERMINAL_SPEED = 40.0  # units/s: caps falling so a body never skips a 1-unit tile per tick
FREE_MOVERS = "systems.physics.free_movers"  # world.caches: does anything move freely?


def gravity(world: World, dt: float) -> None:
    """Accelerate every body with ``Gravity``; clamp the fall speed."""
    with world.query(Velocity, Gravity, readonly=(Gravity,)) as q:
        vel = q[Velocity]
        vel["y"] += q[Gravity]["ay"] * np.float32(dt)
        # clip, not np.maximum: the same values, several times faster on a strided column
        np.clip(vel["y"], -TERMINAL_SPEED, np.inf, out=vel["y"])


def integrate(world: World, dt: float) -> None:
    """Move bodies that have no ``Collider`` (colliding bodies move in ``collide``)."""
    if _none_free(world):
        return  # (the stock game: every moving thing collides)
    with world.query(Position, Velocity, without=(Collider,), readonly=(Velocity,)) as q:
        if len(q) == 0:
            return  # (the stock game: every moving thing collides)
        pos = q.unstructured(Position)  # (n, 2): x and y in one numpy call
        pos += q.unstructured(Velocity) * np.float32(dt)


def _none_free(world: World) -> bool:
    """True when no entity has Position and Velocity but no Collider, and integrate's
    query could not make a group either (Position's store has an owner): the query would
    find nothing and change nothing, so it is not opened (~5 us a tick). Kept per layout
    of the three stores; a store that is missing counts as empty (and is not made)."""
    count = world.count
    if not (count(Position) and count(Velocity)):
        return False  # (the query makes the stores the first time: let it)
    pos, vel = world.store(Position), world.store(Velocity)
    if pos.owner is None:
        return False
    col = world.store(Collider) if count(Collider) else None
    layout = (pos.layout_version, vel.layout_version, 0 if col is None else col.layout_version)
    return derived(world, FREE_MOVERS, layout, lambda: not _any_free(pos, vel, col))


def _any_free(pos: ComponentStore, vel: ComponentStore, col: ComponentStore | None) -> bool:
    slots = key_slots(vel.entities[: vel.n])
    free = pos.rows_of(slots) >= 0
    if col is not None:
        free &= col.rows_of(slots) < 0
    return bool(np.count_nonzero(free))
