"""Animation and facing from the columns: one vectorised pass per tick over ``Sprite``.

Bodies with ``Velocity`` and ``Grounded`` pick a state from their motion: on the ground and
moving is a walk (the frame counts up from ``FRAME_WALK`` at :data:`WALK_FPS`), in the air
rising is a jump and sinking a fall, else idle. Anything with ``Velocity`` faces the way it
moves (``Sprite.flip`` when going left; standing still keeps the last facing). Sprites
without ``Velocity`` (flags, effects) run their cycle from their clock. Entities with
``Health`` blink while invulnerable.
"""

from __future__ import annotations

import numpy as np

from ecs_engine import World
from ecs_engine.components import Grounded, Health, Sprite, Velocity
from ecs_engine.components.render import FRAME_FALL, FRAME_IDLE, FRAME_JUMP, FRAME_WALK

__all__ = ["BLINK_HZ", "WALK_FPS", "animate"]

WALK_FPS = 12.0  # animation frames per second of a walk or an effect cycle
BLINK_HZ = 10.0  # faded/shown switches per second while invulnerable
MOVING = 0.1  # units/s: slower than this counts as standing still


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
    with world.query(Sprite, Velocity, without=(Grounded,), readonly=(Velocity,)) as q:
        if len(q):
            _cycle(q[Sprite], step)
            _face(q[Sprite], q[Velocity])
    with world.query(Sprite, without=(Velocity,)) as q:
        if len(q):
            _cycle(q[Sprite], step)
    with world.query(Sprite, Health, readonly=(Health,)) as q:
        if len(q):
            left = q[Health]["invulnerable"]
            q[Sprite]["blink"] = (left > 0) & ((left * BLINK_HZ).astype(np.int32) % 2 == 0)


def _cycle(sprite: np.ndarray, step: np.float32) -> None:
    sprite["clock"] += step
    sprite["frame"] = FRAME_WALK + _frames(sprite["clock"])


def _frames(clock: np.ndarray) -> np.ndarray:
    """Frames elapsed at :data:`WALK_FPS`, modulo 2520 (a multiple of every cycle length up
    to 10 and of 12), so the uint16 frame never overflows on a long-running clock."""
    return (np.floor(clock * WALK_FPS) % 2520).astype(np.uint16)


def _face(sprite: np.ndarray, vel: np.ndarray) -> None:
    vx = vel["x"]
    sprite["flip"] = np.where(vx < -MOVING, True, np.where(vx > MOVING, False, sprite["flip"]))
