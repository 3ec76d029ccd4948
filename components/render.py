"""Render components: what the arcade bridge draws for an entity.

An entity with ``Color`` draws as a flat box; one with ``Sprite`` draws a picture from the
renderer's texture atlas instead. ``Sprite.sheet`` indexes :data:`SHEETS` (names, so art can
change without touching saves); ``Sprite.frame`` is the animation frame, laid out the same for
every sheet: :data:`FRAME_IDLE`, :data:`FRAME_JUMP`, :data:`FRAME_FALL`, then a walk cycle
from :data:`FRAME_WALK` on (the renderer wraps it to the sheet's length).
"""

from __future__ import annotations

import numpy as np

from ecs_engine import component, field

__all__ = ["FRAME_FALL", "FRAME_IDLE", "FRAME_JUMP", "FRAME_WALK", "SHEETS", "Color", "Layer",
           "Sprite", "sheet_index"]

# The stock sprite sheets, by index. Append only: saves store the index.
SHEETS = ("ground", "grass", "brick", "stone", "player", "enemy", "coin", "heart", "turret",
          "projectile", "flag", "sparkle", "burst", "ammo")
FRAME_IDLE, FRAME_JUMP, FRAME_FALL, FRAME_WALK = 0, 1, 2, 3


def sheet_index(name: str) -> int:
    """The index of a stock sheet by name (``KeyError`` naming the sheets if unknown)."""
    try:
        return SHEETS.index(name)
    except ValueError:
        raise KeyError(f"no sprite sheet {name!r}; sheets are {list(SHEETS)}") from None


@component
class Color:
    """Flat colour of the entity's box, RGBA 0-255."""

    rgba: np.ndarray = field(np.uint8, shape=4, default=255, label="color")


@component
class Layer:
    """Draw order: higher z is drawn later (on top)."""

    z: np.int8 = 0


@component
class Sprite:
    """A picture from the atlas instead of a flat box.

    ``sheet``: index into :data:`SHEETS`; ``frame``: animation frame (see the module doc);
    ``flip``: mirrored left-right (facing left); ``blink``: drawn faded this tick (the
    flash while invulnerable); ``clock``: seconds into the current animation.
    """

    sheet: np.uint16 = field(label="sheet", prefab=True)  # art is prefab data
    frame: np.uint16 = field(editable=False)
    flip: np.bool_ = field(editable=False)
    blink: np.bool_ = field(editable=False)
    clock: np.float32 = field(editable=False)
