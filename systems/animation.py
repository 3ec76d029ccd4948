"""Animation and facing from the columns: one vectorised pass per tick over ``Sprite``.

Bodies with ``Velocity`` and ``Grounded`` pick a state from their motion: on the ground and
moving is a walk (the frame counts up from ``FRAME_WALK`` at :data:`WALK_FPS`), in the air
rising is a jump and sinking a fall, else idle. Anything with ``Velocity`` faces the way it
moves (``Sprite.flip`` when going left; standing still keeps the last facing). Sprites
without ``Velocity`` (flags, effects) run their cycle from their clock. Entities with
``Health`` blink while invulnerable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ecs_engine import World
from ecs_engine.components import Grounded, Health, Sprite, Velocity
from ecs_engine.components.render import FRAME_FALL, FRAME_IDLE, FRAME_JUMP, FRAME_WALK
from ecs_engine.entity import key_slots
from ecs_engine.storage import ComponentStore
from ecs_engine.systems.versioned import derived

__all__ = ["BLINK_HZ", "WALK_FPS", "animate"]

WALK_FPS = 12.0  # animation frames per second of a walk or an effect cycle
BLINK_HZ = 10.0  # faded/shown switches per second while invulnerable
MOVING = 0.1  # units/s: slower than this counts as standing still


CACHE_KEY = "systems.animation.rows"  # world.caches: which Sprite rows animate how


@dataclass(frozen=True)
class _Rows:
    """Sprite rows by how they animate, besides the bodies (Velocity and Grounded), with
    the rows of the columns they read. Which entities have which components changes
    only with a layout, so a tick reuses them (cached by the layout versions they were
    read at): one pass over the Sprite column instead of a query per kind."""

    cycling: slice | np.ndarray  # no Velocity or no Grounded: run the cycle
    facing: np.ndarray  # a Velocity but no Grounded: also face the way they move ...
    facing_velocity: np.ndarray  # ... their Velocity rows
    blinking: np.ndarray  # a Health: blink while invulnerable ...
    blinking_health: np.ndarray  # ... their Health rows


def _as_slice(rows: np.ndarray) -> slice | np.ndarray:
    """Consecutive rows as a slice (the usual case: a store holds the bodies first)."""
    if len(rows) == 0:
        return slice(0, 0)
    if rows[-1] - rows[0] + 1 == len(rows):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


def _rows(world: World) -> _Rows:
    stores = [world.store(t) for t in (Sprite, Velocity, Grounded, Health)]
    key = tuple(s.layout_version for s in stores)
    return derived(world, CACHE_KEY, key, lambda: _find_rows(stores))


def _find_rows(stores: list[ComponentStore]) -> _Rows:
    sprites = stores[0]
    slots = key_slots(sprites.entities[: sprites.n])
    vel_rows, ground_rows, health_rows = (s.rows_of(slots) for s in stores[1:])
    moving = vel_rows >= 0
    facing = (moving & (ground_rows < 0)).nonzero()[0]
    blinking = (health_rows >= 0).nonzero()[0]
    return _Rows(_as_slice((~(moving & (ground_rows >= 0))).nonzero()[0]), facing,
                 vel_rows[facing], blinking, health_rows[blinking])


def animate(world: World, dt: float) -> None:
    """Set ``Sprite.frame``, ``flip``, ``blink`` and ``clock`` for this tick."""
    step = np.float32(dt)
    with world.query(Sprite, Velocity, Grounded, readonly=(Velocity, Grounded)) as q:
        if len(q):
            sprite, vel, ground = q[Sprite], q[Velocity], q[Grounded]
            walking = ground["on_ground"] & (np.abs(vel["x"]) > MOVING)
            # The walk clock runs only while walking, so every walk starts on its first frame.
            sprite["clock"] = np.where(walking, sprite["clock"] + step, 0)
            cycle = _frames(sprite["clock"])
            airborne = np.where(vel["y"] > 0, FRAME_JUMP, FRAME_FALL)
            sprite["frame"] = np.where(walking, FRAME_WALK + cycle,
                                       np.where(ground["on_ground"], FRAME_IDLE, airborne))
            _face(sprite, vel)
    rows = _rows(world)
    with world.query(Sprite) as q:  # every other kind of row, in one pass
        sprite = q[Sprite]
        cycling = rows.cycling
        clock = sprite["clock"]
        clock[cycling] = ticked = clock[cycling] + step
        sprite["frame"][cycling] = FRAME_WALK + _frames(ticked)
        if len(rows.facing):
            vx = world.store(Velocity).columns["x"][rows.facing_velocity]
            flip = sprite["flip"]
            flip[rows.facing] = np.where(vx < -MOVING, True,
                                         np.where(vx > MOVING, False, flip[rows.facing]))
        if len(rows.blinking):
            left = world.store(Health).columns["invulnerable"][rows.blinking_health]
            sprite["blink"][rows.blinking] = (left > 0) & (
                (left * BLINK_HZ).astype(np.int32) % 2 == 0)


def _frames(clock: np.ndarray) -> np.ndarray:
    """Frames elapsed at :data:`WALK_FPS`, modulo 2520 (a multiple of every cycle length up
    to 10 and of 12), so the uint16 frame never overflows on a long-running clock."""
    return (np.floor(clock * WALK_FPS) % 2520).astype(np.uint16)


def _face(sprite: np.ndarray, vel: np.ndarray) -> None:
    vx = vel["x"]
    sprite["flip"] = np.where(vx < -MOVING, True, np.where(vx > MOVING, False, sprite["flip"]))
