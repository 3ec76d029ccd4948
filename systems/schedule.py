"""The stock platformer schedule: every system in the order one tick needs."""

from __future__ import annotations

from ecs_engine import World
from ecs_engine.components import Collider, Grounded, Position, Velocity
from ecs_engine.systems.collision import collide
from ecs_engine.systems.gameplay import (
    bounce,
    camera_follow,
    lifetimes,
    patrol,
    pickups,
    player_control,
    projectile_hits,
    spawners,
    touch_damage,
)
from ecs_engine.systems.physics import gravity, integrate

PLATFORMER_SYSTEMS = (player_control, patrol, bounce, spawners, gravity, integrate, collide,
                      projectile_hits, touch_damage, pickups, lifetimes, camera_follow)


def add_platformer_systems(world: World) -> None:
    """Register the stock systems on ``world`` and group the hot moving-body columns."""
    if all(world.store(t).owner is None for t in (Position, Velocity, Collider, Grounded)):
        world.group(Position, Velocity, Collider, Grounded)
    for system in PLATFORMER_SYSTEMS:
        world.add_system(system)
