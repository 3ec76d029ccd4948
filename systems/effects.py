"""Short visual effects for this tick's events: a sparkle where a pickup was taken, a burst
where something was hit. Each effect is a small entity with a ``Lifetime``, so the stock
``lifetimes`` system removes it and snapshots, rewind and saves show it like anything else.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ecs_engine import World
from ecs_engine.components import Collider, Layer, Lifetime, Position, Sprite
from ecs_engine.components.render import sheet_index
from ecs_engine.systems.events import EVENTS

__all__ = ["EFFECT_SECONDS", "EFFECTS", "spawn_effects"]

# event kind -> (sheet, size in world units)
EFFECTS = {"coin": ("sparkle", 1.4), "heart": ("sparkle", 1.6), "ammo": ("sparkle", 1.4),
           "hit": ("burst", 1.2), "hurt": ("burst", 1.8), "defeat": ("burst", 1.8)}
EFFECT_SECONDS = 0.3  # how long an effect shows


def spawn_effects(world: World, dt: float) -> None:
    """Spawn one effect entity per effect-worthy event of this tick (in one batch; a lone
    event's as one spawn)."""
    del dt
    rows = [e for e in world.resources.get(EVENTS) or () if e[0] in EFFECTS]
    if not rows:
        return
    if len(rows) == 1:  # (most such ticks): one spawn of scalar components, the same
        # entity a batch of one makes, without the batch's array conversions (~20 us)
        kind, x, y = rows[0]
        sheet, size = EFFECTS[kind]
        world.spawn(Position(x=x, y=y), Collider(w=size, h=size),
                    Sprite(sheet=sheet_index(sheet)), Lifetime(remaining=EFFECT_SECONDS),
                    Layer(z=5))
        return
    _spawn_batch(world, rows)


def _spawn_batch(world: World, rows: list[list[Any]]) -> None:
    """The effects of these ``[kind, x, y]`` events, in one ``spawn_batch``."""
    sheets = np.array([sheet_index(EFFECTS[k][0]) for k, _, _ in rows], np.uint16)
    size = np.array([EFFECTS[k][1] for k, _, _ in rows], np.float32)
    xy = np.array([(x, y) for _, x, y in rows], np.float32)
    n = len(rows)
    world.spawn_batch(Position(x=xy[:, 0], y=xy[:, 1]), Collider(w=size, h=size),
                      Sprite(sheet=sheets), Lifetime(remaining=np.full(n, EFFECT_SECONDS)),
                      Layer(z=5), count=n)
