"""spawn_effects spawns a lone event's effect with one ``world.spawn`` of scalar
components: the same entity, rows and state hash as the batch it replaces."""

from __future__ import annotations

from typing import Any

import pytest

from ecs_engine import World
from ecs_engine.components import Collider, Layer, Lifetime, Position, Sprite
from ecs_engine.systems import effects
from ecs_engine.systems.effects import EFFECTS, spawn_effects
from ecs_engine.systems.events import EVENTS


def _world() -> World:
    w = World(seed=3)
    for t in (Position, Collider, Sprite, Lifetime, Layer):
        w.register(t)
    w.spawn(Position(x=1, y=1), Layer(z=1))  # a row already there: the new rows follow it
    gone = w.spawn(Position(), Lifetime())
    w.despawn(gone)  # a free slot: the effect must reuse it the same way
    return w


@pytest.mark.parametrize("kind", sorted(EFFECTS))
@pytest.mark.parametrize("xy", [(3.25, 4.5), (0.1, -7.333), (1e6 + 0.123, 2.0000001)])
def test_a_lone_effect_is_the_batch_of_one(kind: str, xy: tuple[float, float],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    single, batch = _world(), _world()
    event: list[Any] = [kind, *xy]
    single.resources[EVENTS] = [list(event)]
    batch.resources[EVENTS] = [list(event)]
    batched: list[int] = []
    real = single.spawn_batch

    def spy(*components: Any, count: Any = None) -> Any:
        batched.append(1)
        return real(*components, count=count)

    monkeypatch.setattr(single, "spawn_batch", spy)
    spawn_effects(single, 1 / 60)
    assert batched == []  # the one-spawn path ran
    effects._spawn_batch(batch, [list(event)])
    assert single.state_hash() == batch.state_hash()
