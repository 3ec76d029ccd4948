"""The stock platformer schedule: every system in the order one tick needs."""

from __future__ import annotations

from ecs_engine import World
from ecs_engine.components import Collider, Gravity, Grounded, Position, Velocity
from ecs_engine.systems.animation import animate
from ecs_engine.systems.collision import collide
from ecs_engine.systems.effects import spawn_effects
from ecs_engine.systems.events import clear_events
from ecs_engine.systems.gameplay import (
    bounce,
    camera_follow,
    lifetimes,
    patrol,
    pickups,
    player_control,
    projectile_hits,
    reach_goal,
    spawners,
    touch_damage,
)
from ecs_engine.systems.physics import gravity, integrate
from ecs_engine.systems.transform import follow_parents

# (follow_parents after everything that moves bodies: children drawn this frame stand
# where their parents ended it)
PLATFORMER_SYSTEMS = (clear_events, player_control, patrol, bounce, spawners, gravity, integrate,
                      collide, projectile_hits, touch_damage, pickups, reach_goal, lifetimes,
                      spawn_effects, animate, follow_parents, camera_follow)


MOVING_BODY = (Position, Velocity, Collider, Grounded, Gravity)
"""The columns of a falling, colliding body, kept aligned by one owning group: collision
(Position, Velocity, Collider, Grounded) and gravity (Velocity, Gravity) both read a prefix
of it, with no gather, while every such body has all five."""


def add_platformer_systems(world: World) -> None:
    """Register the stock systems on ``world`` and group the hot moving-body columns."""
    if all(world.store(t).owner is None for t in MOVING_BODY):
        world.group(*MOVING_BODY)
    for system in PLATFORMER_SYSTEMS:
        world.add_system(system)
