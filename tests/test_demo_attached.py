"""The demo shows the hierarchy: every enemy carries a coin that follows it and dies with it."""

from __future__ import annotations

import numpy as np

from ecs_engine.components import Enemy, LocalOffset, Position
from ecs_engine.demo.game import Game


def test_bounties_ride_on_their_enemies_and_go_with_them() -> None:
    game = Game("demo")
    world = game.world
    with world.query(Enemy, readonly=(Enemy,)) as q:
        enemies = q.entities.copy()
    assert enemies.size > 0
    for _ in range(30):  # enemies patrol: the coins must move with them
        game.tick()
    for enemy in enemies[:3]:
        (coin,) = world.children(int(enemy))
        offset = float(world.get(coin, LocalOffset)["y"])
        ex, ey = (float(world.get(int(enemy), Position)[f]) for f in ("x", "y"))
        cx, cy = (float(world.get(coin, Position)[f]) for f in ("x", "y"))
        np.testing.assert_allclose([cx, cy], [ex, ey + offset], atol=1e-5)
    victim = int(enemies[0])
    (coin,) = world.children(victim)
    world.despawn(victim)
    assert not world.is_alive(coin)  # despawn takes the whole subtree
