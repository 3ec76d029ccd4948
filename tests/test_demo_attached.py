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


def test_parent_links_are_written_only_through_set_parent() -> None:
    import pytest

    from ecs_engine import World
    from ecs_engine.hierarchy import ChildOf

    world = World()
    a, b = world.spawn(Position()), world.spawn(Position())
    world.set_parent(b, a)
    with pytest.raises(TypeError, match="set_parent"):
        world.get(b, ChildOf)["parent"] = b  # would make b its own parent
    with pytest.raises(TypeError, match="set_parent"):
        world.set_batch([b], ChildOf, {"depth": 7})
    assert world.parent(b) == a
    with pytest.raises(ValueError):
        world.set_parent(a, b)  # the checked path still refuses the cycle
