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


@component
class Flags:
    on: bool = False
    count: np.int16 = 3
    scale: np.float32 = 0.5


def run_small(world: World, seed: int) -> None:
    """Small batches (row by row at the default threshold) of random type mixes, some
    joining a group whose stores hold non-members past the prefix, some with defaults
    only, and random despawns."""
    rng = np.random.default_rng(seed)
    world.group(A, B)
    mixes = [(A, B), (A,), (B, Flags), (A, B, Flags), (Flags,), (A, B, C, D)]
    for step in range(120):
        types = mixes[int(rng.integers(len(mixes)))]
        count = int(rng.integers(0, 5))
        comps: list[object] = []
        for t in types:
            if t is not Flags:
                comps.append(t(v=np.arange(count) + step))  # type: ignore[call-arg]
            elif step % 2:
                comps.append(Flags(on=np.arange(count) % 2 == 0, scale=np.arange(count) / 4))
            else:
                comps.append(Flags())  # defaults only
        world.spawn_batch(*comps, count=count)
        live = world.entities()
        if len(live) and rng.random() < 0.5:
            world.despawn_batch(rng.choice(live, int(rng.integers(1, min(len(live), 4) + 1)),
                                           replace=False))


@pytest.mark.parametrize("seed", range(6))
def test_row_by_row_spawns_leave_the_state_batch_spawns_leave(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small spawn_batch calls go row by row (each entity inserted after a group's
    prefix); the numpy path appends and enters the group. Same keys, values and rows."""
    import ecs_engine.world as world_module

    rows = World(seed=1)
    run_small(rows, seed)
    with monkeypatch.context() as patch:
        patch.setattr(world_module, "SMALL_SPAWN", 0)
        batched = World(seed=1)
        run_small(batched, seed)
    assert rows.state_hash() == batched.state_hash()
