"""Determinism: ``ops1; s = snapshot(); ops2; restore(s); ops2`` repeats the first ``ops2``
exactly (keys handed out, column contents and row order, rng draws), and so does loading
``s`` from bytes into a fresh world. Programs are random (hypothesis)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecs_engine import NULL, Entity, Snapshot, World, component, field
from tests.world_state import check_invariants, world_state


@component
class Pos:
    x: np.float64 = 0.0
    y: np.float64 = 0.0


@component
class Vel:
    dx: np.float32 = 0.0


@component
class Link:
    to: Entity = NULL


@component
class Bag:
    items: np.ndarray = field(np.int16, shape=3)


@component
class Flag: ...


TYPES = (Pos, Vel, Link, Bag, Flag)


def make(ctype: type, value: float, count: int | None = None) -> Any:
    """An instance of ``ctype`` built from one number (a batch when ``count`` is given)."""
    v = value if count is None else np.full(count, value)
    if ctype is Pos:
        return Pos(x=v, y=-v if count is None else -v)
    if ctype is Vel:
        return Vel(dx=v)
    if ctype is Link:
        return Link()
    if ctype is Bag:
        return Bag(items=[int(value) % 100, 1, 2])
    return Flag()


def pick(world: World, index: int) -> int | None:
    keys = world.entities()
    return int(keys[index % len(keys)]) if len(keys) else None


def types_of(mask: int) -> list[type]:
    return [t for i, t in enumerate(TYPES) if mask >> i & 1]


def run(world: World, program: list[tuple[Any, ...]]) -> list[Any]:
    """Apply ``program``; return everything observable along the way."""
    trace: list[Any] = []
    for op, *args in program:
        if op == "spawn":
            mask, value = args
            trace.append(int(world.spawn(*(make(t, value) for t in types_of(mask)))))
        elif op == "spawn_batch":
            mask, count, value = args
            keys = world.spawn_batch(*(make(t, value, count) for t in types_of(mask)),
                                     count=count)
            trace.append(keys.tolist())
        elif op == "despawn":
            key = pick(world, args[0])
            if key is not None:
                world.despawn(key)
        elif op == "despawn_batch":
            keys = world.entities()
            start, count = args
            if len(keys):
                chosen = np.unique(keys[(start + np.arange(count)) % len(keys)])
                world.despawn_batch(chosen)
        elif op == "add":
            index, type_index, value = args
            key = pick(world, index)
            if key is not None:
                world.add(key, make(TYPES[type_index], value))
        elif op == "remove":
            index, type_index = args
            key = pick(world, index)
            if key is not None and world.has(key, TYPES[type_index]):
                world.remove(key, TYPES[type_index])
        elif op == "write":
            mask, value = args
            types = types_of(mask) or [Pos]
            with world.query(*types) as q:  # several types: an owning group appears
                trace.append(q.entities.tolist())
                if Pos in types:
                    q[Pos]["x"] += value
                if Vel in types:
                    q[Vel]["dx"] = q[Vel]["dx"] * 2 + value
                if Link in types and len(q):
                    q[Link]["to"] = np.roll(q.entities, 1)
                if Bag in types:
                    q[Bag]["items"][:, 0] += 1
        elif op == "write_without":
            with world.query(Pos, without=(Vel,)) as q:
                trace.append(q.entities.tolist())
                q[Pos]["y"] = world.rng.random(len(q))
        elif op == "spawn_in_query":
            with world.query(Pos) as q:  # structural changes deferred to the block's end
                world.spawn(Vel(dx=len(q)))
                if len(q):
                    world.despawn(q.entities[0])
        elif op == "rng":
            trace.append(world.rng.random(args[0]).tolist())
            trace.append(int(world.rng.integers(0, 1 << 40)))
        elif op == "resource":
            key, value = args
            world.resources[key] = value
        elif op == "resource_array":
            world.resources["grid"] = np.full((2, 2), args[0])
        elif op == "step":
            world.step(1 / 60)
    return trace


def final(world: World, trace: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    check_invariants(world)
    trace.append([int(world.spawn(Pos())) for _ in range(3)])  # the allocator's future
    trace.append(world.rng.random(2).tolist())
    return trace, world_state(world)


values = st.floats(-1e3, 1e3, allow_nan=False).map(lambda v: round(v, 3))
masks = st.integers(0, 31)
small = st.integers(0, 1000)
ops = st.one_of(
    st.tuples(st.just("spawn"), masks, values),
    st.tuples(st.just("spawn_batch"), masks, st.integers(0, 12), values),
    st.tuples(st.just("despawn"), small),
    st.tuples(st.just("despawn_batch"), small, st.integers(1, 6)),
    st.tuples(st.just("add"), small, st.integers(0, 4), values),
    st.tuples(st.just("remove"), small, st.integers(0, 4)),
    st.tuples(st.just("write"), masks, values),
    st.tuples(st.just("write_without")),
    st.tuples(st.just("spawn_in_query")),
    st.tuples(st.just("rng"), st.integers(0, 3)),
    st.tuples(st.just("resource"), st.sampled_from(["a", "b"]),
              st.one_of(st.integers(-10, 10), st.lists(st.integers(0, 3), max_size=3))),
    st.tuples(st.just("resource_array"), st.integers(0, 9)),
    st.tuples(st.just("step")),
)
programs = st.lists(ops, max_size=25)
EXAMPLES = int(os.environ.get("DETERMINISM_EXAMPLES", "1000"))


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs, programs, st.integers(0, 2**32 - 1))
def test_restore_then_replay_repeats_exactly(ops1: list[Any], ops2: list[Any],
                                             seed: int) -> None:
    world = World(seed=seed)
    run(world, ops1)
    snap = world.snapshot()
    at_snapshot = world_state(world)
    first = final(world, run(world, ops2))

    world.restore(snap)
    assert world_state(world) == at_snapshot
    assert final(world, run(world, ops2)) == first

    world.restore(snap)  # a snapshot stays usable: a third replay
    assert final(world, run(world, ops2)) == first

    loaded = World(seed=seed + 1)  # a fresh world from the save-file bytes
    loaded.register(*TYPES)
    loaded.restore(Snapshot.from_bytes(snap.to_bytes()), source="file")
    assert world_state(loaded) == at_snapshot
    assert final(loaded, run(loaded, ops2)) == first


@settings(max_examples=max(10, EXAMPLES // 3), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs, st.lists(programs, min_size=2, max_size=4))
def test_interleaved_snapshots_each_restore_their_own_state(
    ops1: list[Any], later: list[list[Any]]
) -> None:
    """Several snapshots held at once, taken between programs (so they share parts),
    restored in a scrambled order, each give back exactly their state."""
    world = World(seed=1)
    run(world, ops1)
    snaps, states = [], []
    for program in later:
        snaps.append(world.snapshot())
        states.append(world_state(world))
        run(world, program)
    for i in [*reversed(range(len(snaps))), 0, len(snaps) - 1]:
        world.restore(snaps[i])
        assert world_state(world) == states[i]
        check_invariants(world)
        run(world, later[-1])
