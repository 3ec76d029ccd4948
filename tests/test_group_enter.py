"""A batch spawn's fresh keys enter the groups whose every store they got through
``Group.enter_appended`` (no index lookups); it must leave exactly the state the general
``Group.enter`` leaves, whatever rows the stores hold past the group's prefix."""

from __future__ import annotations

import numpy as np
import pytest

from ecs_engine import World, component
from ecs_engine.group import Group


@component
class A:
    v: np.int64 = 0


@component
class B:
    v: np.float64 = 0.0


@component
class C:
    v: np.int32 = 0


@component
class D:
    v: np.int16 = 0


def run(world: World, seed: int) -> None:
    """Batches of random type mixes (in and out of the groups) and random despawns."""
    rng = np.random.default_rng(seed)
    world.group(A, B)
    world.group(C, D)
    mixes = [(A, B), (A,), (B, C), (A, B, C, D), (C, D), (D,), (A, B, D)]
    for step in range(80):
        types = mixes[int(rng.integers(len(mixes)))]
        count = int(rng.integers(0, 40))
        world.spawn_batch(*(t(v=np.arange(count) + step) for t in types), count=count)
        live = world.entities()
        if len(live) and rng.random() < 0.6:
            doomed = rng.choice(live, int(rng.integers(1, min(len(live), 30) + 1)),
                                replace=False)
            world.despawn_batch(doomed)


def general_enter(self: Group, count: int) -> None:
    """What enter_appended replaces: the general enter of the fresh keys (each store's
    last ``count`` rows, in key order)."""
    first = self.stores[0]
    self.enter(first.entities[first.n - count : first.n].copy())


@pytest.mark.parametrize("seed", range(6))
def test_enter_appended_leaves_the_state_general_enter_leaves(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = World(seed=1)
    run(fast, seed)
    with monkeypatch.context() as patch:
        patch.setattr(Group, "enter_appended", general_enter)
        slow = World(seed=1)
        run(slow, seed)
    assert fast.state_hash() == slow.state_hash()
    for world in (fast, slow):
        for group in world._groups:
            lead = group.stores[0].entities[: group.size]
            for store in group.stores[1:]:
                assert np.array_equal(store.entities[: group.size], lead)
            members = [k for k in world.entities().tolist()
                       if all(world.has(k, t) for t in group.types)]
            assert sorted(lead.tolist()) == sorted(members)
