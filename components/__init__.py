"""Reusable game components (physics, gameplay, render) and the stock prefabs."""

from ecs_engine.components.gameplay import (
    Ammo,
    Bouncer,
    Enemy,
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
from ecs_engine.components.render import Color, Layer

__all__ = [
    "TILE_RGBA", "Ammo", "Bouncer", "Collider", "Color", "Enemy", "Gravity", "Grounded", "Health",
    "Layer", "Lifetime", "Patrol", "Pickup", "Player", "Position", "Projectile", "Score",
    "Solid", "Spawner", "Tile", "Velocity", "stock_prefabs",
]
