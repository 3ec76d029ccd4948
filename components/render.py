"""Render components: what the arcade bridge draws for an entity."""

from __future__ import annotations

import numpy as np

from ecs_engine import component, field


@component
class Color:
    """Flat colour of the entity's box, RGBA 0-255."""

    rgba: np.ndarray = field(np.uint8, shape=4, default=255, label="color")


@component
class Layer:
    """Draw order: higher z is drawn later (on top)."""

    z: np.int8 = 0
