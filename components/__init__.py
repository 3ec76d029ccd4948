"""Reusable game components (physics, gameplay, render) and the stock prefabs."""

from ecs_engine.components.gameplay import (
    Ammo,
    Bouncer,
    Enemy,
    Goal,
    Health,
    Lifetime,
    Patrol,
    Pickup,
    Player,
    Projectile,
    Score,
    Spawner,
)
from ecs_engine.components.physics import (
    Collider,
    Gravity,
    Grounded,
    Position,
    Solid,
    Tile,
    Velocity,
)
from ecs_engine.components.prefabs import TILE_RGBA, stock_prefabs
from ecs_engine.components.render import SHEETS, Color, Layer, Sprite, sheet_index
from ecs_engine.components.transform import LocalOffset

__all__ = [
    "SHEETS", "TILE_RGBA", "Ammo", "Bouncer", "Collider", "Color", "Enemy", "Goal", "Gravity",
    "Grounded", "Health", "Layer", "Lifetime", "LocalOffset", "Patrol", "Pickup", "Player",
    "Position", "Projectile", "Score", "Solid", "Spawner", "Sprite", "Tile", "Velocity",
    "sheet_index", "stock_prefabs",
]
