"""despawn_batch goes key by key for small batches and through numpy for big ones (a
group left once, its permutation planned once, rows removed with the keys' slots). Both
must leave the same entities, values, free list and aligned groups."""

from __future__ import annotations

import numpy as np
import pytest

import ecs_engine.world as world_module
from ecs_engine import World, component


@component
class A:
    v: np.int64 = 0


@component
class B:
    v: np.float64 = 0.0


@component
class C:
    v: np.int32 = 0


def contents(world: World) -> dict[int, tuple[object, ...]]:
    """Each live key's component values (None where it lacks one)."""
    return {k: tuple(world.get(k, t)["v"].item() if world.has(k, t) else None
                     for t in (A, B, C))
            for k in world.entities().tolist()}


def run(world: World, seed: int) -> None:
    rng = np.random.default_rng(seed)
    world.group(A, B)
    mixes = [(A, B), (A,), (B, C), (A, B, C), (C,)]
    for step in range(40):
        types = mixes[int(rng.integers(len(mixes)))]
        count = int(rng.integers(0, 30))
        world.spawn_batch(*(t(v=np.arange(count) + 100 * step) for t in types), count=count)
        live = world.entities()
        if len(live):
            doomed = rng.choice(live, int(rng.integers(1, min(len(live), 20) + 1)),
                                replace=False)
            world.despawn_batch(doomed)
        group = world._groups[0]
        lead = group.stores[0].entities[: group.size]
        assert np.array_equal(group.stores[1].entities[: group.size], lead)
        members = {k for k in world.entities().tolist() if world.has(k, A) and world.has(k, B)}
        assert set(lead.tolist()) == members


@pytest.mark.parametrize("seed", range(6))
def test_numpy_and_key_by_key_despawns_agree(seed: int,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    few = World(seed=1)
    run(few, seed)
    with monkeypatch.context() as patch:
        patch.setattr(world_module, "SMALL_DESPAWN", 0)
        batched = World(seed=1)
        run(batched, seed)
    assert contents(few) == contents(batched)
    assert few.slot_table().free.tolist() == batched.slot_table().free.tolist()
