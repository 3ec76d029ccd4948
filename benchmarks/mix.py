"""The entity mix every contender gets, built in this engine.

Positions and velocities on all entities, health on half, and on a tenth a ``Target``
holding a reference to a random other entity. Also: writing new values into every column
(so a snapshot cannot share an unchanged store) and structural churn (so it must copy the
layout too).
"""

from __future__ import annotations

import numpy as np

from ecs_engine import NULL, Entity, World, component
from ecs_engine.components import Health, Position, Velocity
from ecs_engine.memcopy import as_bytes

__all__ = ["MIX_TYPES", "Target", "build_world", "churn", "mutate_values", "spawn_mix",
           "touch_everything", "twin_world"]


@component(name="Target")
class Target:
    """A reference to another entity (survives snapshots and saves)."""

    entity: Entity = NULL


MIX_TYPES = (Position, Velocity, Health, Target)


def spawn_mix(world: World, count: int, rng: np.random.Generator,
              targets: np.ndarray | None = None) -> np.ndarray:
    """Spawn ``count`` entities of the mix in three bulk spawns; returns their keys.

    ``targets`` are keys the new ``Target`` components point at (default: each other).
    """
    n_target = count // 10
    n_health = count // 2 - n_target
    n_plain = count - n_target - n_health
    parts = []
    if n_target:
        pool = targets if targets is not None and len(targets) else None
        refs = (rng.choice(pool, n_target) if pool is not None
                else np.zeros(n_target, np.uint64))
        parts.append(world.spawn_batch(*_motion(n_target, rng), Health(hp=3, max_hp=3),
                                       Target(entity=refs)))
    if n_health:
        parts.append(world.spawn_batch(*_motion(n_health, rng), Health(hp=3, max_hp=3)))
    if n_plain:
        parts.append(world.spawn_batch(*_motion(n_plain, rng)))
    keys = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    if targets is None and n_target:  # point the first batch at random members of the mix
        with world.query(Target) as q:
            tail = q[Target]["entity"][-n_target:]
            tail[:] = rng.choice(keys, n_target)
    return keys


def _motion(count: int, rng: np.random.Generator) -> tuple[Position, Velocity]:
    xy = rng.random((4, count), dtype=np.float32)
    return (Position(x=xy[0] * 1000, y=xy[1] * 1000),
            Velocity(x=xy[2] - 0.5, y=xy[3] - 0.5))


def build_world(n: int, seed: int = 1) -> tuple[World, np.random.Generator]:
    """A world holding ``n`` entities of the mix (stores created in a fixed order)."""
    world = World(seed=seed)
    world.register(*MIX_TYPES)
    rng = np.random.default_rng(seed)
    spawn_mix(world, n, rng)
    return world, rng


def mutate_values(world: World, step: int) -> None:
    """Write new values into every column of every store (no structural change)."""
    delta = np.float32(0.5 + (step % 7))
    with world.query(Position) as q:
        q[Position]["x"] += delta
        q[Position]["y"] -= delta
    with world.query(Velocity) as q:
        q[Velocity]["x"] *= np.float32(-1)
        q[Velocity]["y"] += delta
    with world.query(Health) as q:
        as_bytes(q[Health])[:] += np.uint8(1 + step % 5)  # every byte of every field
    with world.query(Target) as q:
        refs = q[Target]["entity"]
        refs[:] = np.roll(refs, 1 + step % 3)


def churn(world: World, rng: np.random.Generator, fraction: float) -> None:
    """Despawn ``fraction`` of the live entities at random and spawn as many new ones."""
    keys = world.entities()
    count = int(len(keys) * fraction)
    if count == 0:
        return
    doomed = rng.choice(keys, count, replace=False)
    world.despawn_batch(doomed)
    spawn_mix(world, count, rng, targets=keys[:: max(1, len(keys) // 1000)])


def twin_world(columns: tuple[np.ndarray, ...], seed: int = 1) -> World:
    """The engine's copy of a baseline's entities: the same positions and velocities (as
    float32) in the same order, health on the first half, a ``Target`` on the first tenth.
    """
    x, y, vx, vy = columns
    n = len(x)
    world = World(seed=seed)
    world.register(*MIX_TYPES)
    bounds = (0, n // 10, n // 2, n)
    for part, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        if hi <= lo:
            continue
        comps: list[object] = [Position(x=x[lo:hi], y=y[lo:hi]),
                               Velocity(x=vx[lo:hi], y=vy[lo:hi])]
        if part < 2:
            comps.append(Health(hp=3, max_hp=3))
        if part == 0:
            comps.append(Target(entity=np.zeros(hi - lo, np.uint64)))
        world.spawn_batch(*comps)
    return world


def touch_everything(world: World) -> None:
    """Make every store and the slot table count as changed without changing a value, so
    the next snapshot or restore copies every array (as after churn) while the state stays
    comparable with a baseline's. Uses engine internals: benchmark-only."""
    for store in world._stores.values():
        store.touch_layout()
    world._slots.version = next(world._versions)
