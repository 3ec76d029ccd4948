"""Reusable systems: physics, platformer collision, gameplay (no arcade here; the arcade
bridge is ``systems.render_gl``, imported on its own)."""

from ecs_engine.systems.animation import animate
from ecs_engine.systems.colliders import (
    LevelColliders,
    invalidate_level_colliders,
    level_colliders,
)
from ecs_engine.systems.collision import collide, move_boxes, solid_at
from ecs_engine.systems.effects import spawn_effects
from ecs_engine.systems.events import clear_events, emit, events
from ecs_engine.systems.gameplay import (
    bounce,
    camera_follow,
    input_state,
    lifetimes,
    overlap_matrix,
    patrol,
    pickups,
    player_control,
    projectile_hits,
    reach_goal,
    spawn_projectiles,
    spawners,
    touch_damage,
)
from ecs_engine.systems.grid import StaticGrid, box_edges, invalidate_static_grid, static_grid
from ecs_engine.systems.physics import gravity, integrate
from ecs_engine.systems.schedule import PLATFORMER_SYSTEMS, add_platformer_systems
from ecs_engine.systems.tilegrid import TileGrid
from ecs_engine.systems.transform import follow_parents

__all__ = [
    "PLATFORMER_SYSTEMS", "LevelColliders", "StaticGrid", "TileGrid", "add_platformer_systems",
    "animate", "bounce", "box_edges", "camera_follow", "clear_events", "collide", "emit",
    "events", "follow_parents", "gravity", "input_state", "integrate",
    "invalidate_level_colliders", "invalidate_static_grid", "level_colliders", "lifetimes",
    "move_boxes", "overlap_matrix", "patrol", "pickups", "player_control", "projectile_hits",
    "reach_goal", "solid_at", "spawn_effects", "spawn_projectiles", "spawners", "static_grid",
    "touch_damage",
]
