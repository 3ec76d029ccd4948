"""The stock prefabs: tiles, player, enemies, pickups, turrets, projectiles, the goal flag.

Tile prefabs are static boxes: the level loader sets ``x, y, w, h`` per rectangle. Every
prefab has a ``Color`` (its flat colour, which is also the colour level authors paint it
with) and a ``Sprite`` (its picture: a renderer with an atlas draws that instead).
"""

from __future__ import annotations

from ecs_engine import PrefabRegistry
from ecs_engine.components.gameplay import (
    Ammo,
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
from ecs_engine.components.render import Color, Layer, Sprite, sheet_index

PLAYER_RGBA = (40, 120, 255, 255)
ENEMY_RGBA = (220, 40, 40, 255)
COIN_RGBA = (255, 210, 0, 255)
HEART_RGBA = (255, 105, 180, 255)
TURRET_RGBA = (120, 120, 130, 255)
PROJECTILE_RGBA = (255, 140, 0, 255)
FLAG_RGBA = (40, 200, 90, 255)
AMMO_RGBA = (60, 140, 255, 255)
TILE_RGBA = {"ground": (139, 90, 43, 255), "grass": (60, 160, 60, 255),
             "brick": (170, 70, 50, 255), "stone": (110, 110, 120, 255)}


def stock_prefabs() -> PrefabRegistry:
    """A new registry with the stock prefabs (a fresh one each call: no shared state)."""
    reg = PrefabRegistry()
    for kind, (name, rgba) in enumerate(TILE_RGBA.items()):
        reg.register(name, Position(), Collider(), Solid(), Tile(kind=kind), Color(rgba=rgba),
                     Sprite(sheet=sheet_index(name)), Layer(z=0),
                     aliases=(f"{name}1", f"{name}_tile"))
    reg.register("player", Position(), Velocity(), Collider(w=0.8, h=1.6), Gravity(),
                 Grounded(), Player(), Health(hp=5, max_hp=5), Ammo(kinds=[1, 1, 1, 0, 0, 0, 0, 0],
                 count=20), Score(), Color(rgba=PLAYER_RGBA), Sprite(sheet=sheet_index("player")),
                 Layer(z=3),
                 aliases=("player_start", "start"))
    # The thesis' level files name C# serializer classes (Figure 4.2.5: ImpulsePlayerSerializer;
    # the .lvl reader drops the "Serializer" suffix).
    reg.alias("player", "ImpulsePlayer")
    reg.register("enemy", Position(), Velocity(), Collider(w=0.9, h=0.9), Gravity(),
                 Grounded(), Enemy(), Patrol(), Health(hp=2, max_hp=2),
                 Color(rgba=ENEMY_RGBA), Sprite(sheet=sheet_index("enemy")), Layer(z=2),
                 aliases=("walker", "enemy1"))
    reg.register("coin", Position(), Collider(w=0.6, h=0.6), Pickup(kind=2, amount=1),
                 Color(rgba=COIN_RGBA), Sprite(sheet=sheet_index("coin")), Layer(z=1),
                 aliases=("pickup",))
    reg.register("heart", Position(), Collider(w=0.6, h=0.6), Pickup(kind=0, amount=1),
                 Color(rgba=HEART_RGBA), Sprite(sheet=sheet_index("heart")), Layer(z=1),
                 aliases=("health",))
    reg.register("ammo", Position(), Collider(w=0.6, h=0.6), Pickup(kind=1, amount=10),
                 Color(rgba=AMMO_RGBA), Sprite(sheet=sheet_index("ammo")), Layer(z=1),
                 aliases=("ammo_pack",))
    reg.register("turret", Position(), Collider(w=1.0, h=1.0), Solid(), Spawner(),
                 Color(rgba=TURRET_RGBA), Sprite(sheet=sheet_index("turret")), Layer(z=1),
                 aliases=("spawner",))
    reg.register("projectile", Position(), Velocity(), Collider(w=0.4, h=0.4), Projectile(),
                 Lifetime(), Color(rgba=PROJECTILE_RGBA), Sprite(sheet=sheet_index("projectile")),
                 Layer(z=2), aliases=("bullet",))
    reg.register("flag", Position(), Collider(w=1.0, h=2.0), Goal(), Color(rgba=FLAG_RGBA),
                 Sprite(sheet=sheet_index("flag")), Layer(z=1), aliases=("goal", "exit"))
    return reg
