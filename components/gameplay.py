"""Gameplay components: players, enemies, projectiles, pickups, health, ammo.

Tuning values (speeds, damage, intervals, max hp) are prefab data (``field(prefab=True)``):
a save keeps them only where an entity differs from its prefab, so a re-balanced prefab in
a game update reaches old saves; hp, positions and cooldowns are instance data.
"""

from __future__ import annotations

import numpy as np

from ecs_engine import NULL, Entity, component, field


@component
class Player:
    """Controlled by the input resource. Speeds in units/s."""

    run_speed: np.float32 = field(default=12.0, label="speed", prefab=True)
    jump_speed: np.float32 = field(default=26.0, label="jump", prefab=True)
    facing: np.int8 = field(default=1, editable=False)
    shoot_cooldown: np.float32 = field(editable=False)


@component
class Enemy:
    """Hurts the player on touch; ``damage`` in hit points (prefab data)."""

    damage: np.int16 = field(default=1, prefab=True)


@component
class Patrol:
    """Walks left and right at ``speed`` units/s, turning at walls and ledges."""

    speed: np.float32 = field(default=4.0, prefab=True)
    direction: np.int8 = field(default=1, label="dir")


@component
class Projectile:
    """Flies until it hits something; ``owner`` is the entity that fired it."""

    damage: np.int16 = 1
    owner: Entity = NULL


@component
class Lifetime:
    """Seconds left before the entity despawns."""

    remaining: np.float32 = field(default=2.0, label="lifetime")


@component
class Spawner:
    """Fires a projectile every ``interval`` seconds at ``speed`` units/s along ``dir``."""

    interval: np.float32 = field(default=1.5, prefab=True)
    speed: np.float32 = field(default=14.0, prefab=True)
    direction: np.int8 = field(default=-1, label="dir")
    cooldown: np.float32 = field(editable=False)


@component
class Pickup:
    """Collected on touch. ``kind``: 0 = health, 1 = ammo, 2 = coin."""

    kind: np.uint8 = 2
    amount: np.int16 = field(default=1, prefab=True)


@component
class Health:
    """Hit points; the entity despawns at 0 (a player stays, down: the game decides what
    follows; the demo shows game over)."""

    hp: np.int16 = 3
    max_hp: np.int16 = field(default=3, label="max_hp", prefab=True)
    invulnerable: np.float32 = field(editable=False)  # seconds


@component
class Ammo:
    """A fixed-size magazine of projectile kinds (0 = empty slot) and a count."""

    kinds: np.ndarray = field(np.uint8, shape=8)
    count: np.uint8 = 0


@component
class Score:
    """Coins collected."""

    coins: np.int32 = field(editable=False)


@component
class Bouncer:
    """Jumps again at a random speed (units/s) whenever it lands (the stress bodies)."""

    min_speed: np.float32 = field(default=8.0, prefab=True)
    max_speed: np.float32 = field(default=24.0, prefab=True)


@component
class Goal:
    """Reaching it wins the level (a tag: the flag)."""
