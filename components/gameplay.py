"""Gameplay components: players, enemies, projectiles, pickups, health, ammo."""

from __future__ import annotations

import numpy as np

from ecs_engine import NULL, Entity, component, field


@component
class Player:
    """Controlled by the input resource. Speeds in units/s."""

    run_speed: field(np.float32, default=12.0, label="speed")  # type: ignore[valid-type]
    jump_speed: field(np.float32, default=26.0, label="jump")  # type: ignore[valid-type]
    facing: field(np.int8, default=1, editable=False)  # type: ignore[valid-type]
    shoot_cooldown: field(np.float32, editable=False)  # type: ignore[valid-type]


@component
class Enemy:
    """Hurts the player on touch; ``damage`` in hit points."""

    damage: np.int16 = 1


@component
class Patrol:
    """Walks left and right at ``speed`` units/s, turning at walls and ledges."""

    speed: np.float32 = 4.0
    direction: field(np.int8, default=1, label="dir")  # type: ignore[valid-type]


@component
class Projectile:
    """Flies until it hits something; ``owner`` is the entity that fired it."""

    damage: np.int16 = 1
    owner: Entity = NULL


@component
class Lifetime:
    """Seconds left before the entity despawns."""

    remaining: field(np.float32, default=2.0, label="lifetime")  # type: ignore[valid-type]


@component
class Spawner:
    """Fires a projectile every ``interval`` seconds at ``speed`` units/s along ``dir``."""

    interval: np.float32 = 1.5
    speed: np.float32 = 14.0
    direction: field(np.int8, default=-1, label="dir")  # type: ignore[valid-type]
    cooldown: field(np.float32, editable=False)  # type: ignore[valid-type]


@component
class Pickup:
    """Collected on touch. ``kind``: 0 = health, 1 = ammo, 2 = coin."""

    kind: np.uint8 = 2
    amount: np.int16 = 1


@component
class Health:
    """Hit points; the entity despawns at 0 (the player respawns instead)."""

    hp: np.int16 = 3
    max_hp: field(np.int16, default=3, label="max_hp")  # type: ignore[valid-type]
    invulnerable: field(np.float32, editable=False)  # type: ignore[valid-type]  # seconds


@component
class Ammo:
    """A fixed-size magazine of projectile kinds (0 = empty slot) and a count."""

    kinds: field(np.uint8, shape=8)  # type: ignore[valid-type]
    count: np.uint8 = 0


@component
class Score:
    """Coins collected."""

    coins: field(np.int32, editable=False)  # type: ignore[valid-type]


@component
class Bouncer:
    """Jumps again at a random speed (units/s) whenever it lands (the stress bodies)."""

    min_speed: np.float32 = 8.0
    max_speed: np.float32 = 24.0
