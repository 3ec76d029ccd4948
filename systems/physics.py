"""Gravity and free integration. Units: world units, seconds."""

from __future__ import annotations

import numpy as np

from ecs_engine import World
from ecs_engine.components import Collider, Gravity, Position, Velocity

TERMINAL_SPEED = 40.0  # units/s: caps falling so a body never skips a 1-unit tile per tick


def gravity(world: World, dt: float) -> None:
    """Accelerate every body with ``Gravity``; clamp the fall speed."""
    with world.query(Velocity, Gravity, readonly=(Gravity,)) as q:
        vel = q[Velocity]
        vel["y"] += q[Gravity]["ay"] * np.float32(dt)
        # clip, not np.maximum: the same values, several times faster on a strided column
        np.clip(vel["y"], -TERMINAL_SPEED, np.inf, out=vel["y"])


def integrate(world: World, dt: float) -> None:
    """Move bodies that have no ``Collider`` (colliding bodies move in ``collide``)."""
    with world.query(Position, Velocity, without=(Collider,), readonly=(Velocity,)) as q:
        if len(q) == 0:
            return  # (the stock game: every moving thing collides)
        pos = q.unstructured(Position)  # (n, 2): x and y in one numpy call
        pos += q.unstructured(Velocity) * np.float32(dt)
