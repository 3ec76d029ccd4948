"""Physics components. World units: 1 unit = one geometry pixel of a level; y points up."""

from __future__ import annotations

import numpy as np

from ecs_engine import component, field


@component
class Position:
    """Centre of the entity, in world units."""

    x: np.float32 = 0.0
    y: np.float32 = 0.0


@component
class Velocity:
    """Units per second."""

    x: np.float32 = field(label="vx")
    y: np.float32 = field(label="vy")


@component
class Collider:
    """Axis-aligned box centred on Position: width and height in world units."""

    w: np.float32 = 1.0
    h: np.float32 = 1.0


@component
class Solid:
    """Static level geometry that moving colliders cannot pass (a tag)."""


@component
class Tile:
    """Which tile type a static collider came from (an index into the level's tile table)."""

    kind: np.uint16 = field(label="tile")


@component
class Gravity:
    """Acceleration in units/s^2 (negative pulls down)."""

    ay: np.float32 = field(default=-60.0, label="gravity")


@component
class Grounded:
    """Set by collision each tick: standing on something, touching a wall."""

    on_ground: np.bool_ = field(editable=False)
    wall: np.int8 = field(editable=False)  # -1 left, 1 right
