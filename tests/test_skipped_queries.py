"""Systems that skip a query when it would find nothing.

integrate does not open its query when nothing moves freely (every body with Position
and Velocity has a Collider, as in the stock game) and the query could not make a group:
it must leave exactly the states of always opening it (the reference below is integrate
before, verbatim), also while free movers come and go, in worlds that make groups
themselves and in worlds with no stores yet. The demo's fall_out reads Position's rows
from the store and opens its query only when someone fell (tests/test_demo.py has the
falls)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ecs_engine import World
from ecs_engine.components import Collider, Gravity, Grounded, Position, Velocity
from ecs_engine.demo.game import DT, Game
from ecs_engine.systems.physics import integrate
from ecs_engine.systems.schedule import MOVING_BODY


def ref_integrate(world: World, dt: float) -> None:
    with world.query(Position, Velocity, without=(Collider,), readonly=(Velocity,)) as q:
        if len(q) == 0:
            return
        pos = q.unstructured(Position)
        pos += q.unstructured(Velocity) * np.float32(dt)


def _world(seed: int, auto_group: bool, grouped: bool) -> World:
    rng = np.random.default_rng(seed)
    w = World(seed=seed, auto_group=auto_group)
    if grouped:
        w.group(*MOVING_BODY)
    for _ in range(int(rng.integers(0, 8))):
        parts: list[Any] = [Position(x=float(rng.uniform(-5, 5)), y=float(rng.uniform(-5, 5)))]
        if rng.random() < 0.8:
            parts.append(Velocity(x=float(rng.uniform(-3, 3)), y=float(rng.uniform(-3, 3))))
        if rng.random() < 0.6:
            parts.append(Collider())
        if grouped and rng.random() < 0.5:
            parts += [Velocity(x=1.0), Collider(), Grounded(), Gravity()]
            parts = list({type(p): p for p in parts}.values())
        w.spawn(*parts)
    return w


def _mutate(world: World, rng: np.random.Generator) -> None:
    keys = [int(k) for k in world.entities()]
    if not keys:
        world.spawn(Position(), Velocity(x=2.0))
        return
    k = keys[int(rng.integers(len(keys)))]
    ctype = [Position, Velocity, Collider][int(rng.integers(3))]
    if world.has(k, ctype):
        world.remove(k, ctype)
    else:
        world.add(k, ctype())


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.booleans())
def test_skipping_the_query_leaves_the_same_states(seed: int, auto_group: bool,
                                                   grouped: bool) -> None:
    traces = []
    for system in (integrate, ref_integrate):
        world = _world(seed, auto_group, grouped)
        world.add_system(system, name="integrate")
        rng = np.random.default_rng(seed)
        trace = []
        for _ in range(25):
            if rng.random() < 0.4:
                _mutate(world, rng)
            world.step(DT)
            trace.append((world.state_hash(), repr(world.component_types),
                          len(world._groups)))
        traces.append(trace)
    assert traces[0] == traces[1]


def _queries(world: World) -> tuple[Any, list[int]]:
    calls: list[int] = []
    real = world.query

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    return mock.patch.object(world, "query", spy), calls


def test_no_query_while_nothing_moves_freely_and_a_free_mover_moves_at_once() -> None:
    world = Game("demo", history_seconds=DT).world
    world.step(DT)
    spy, calls = _queries(world)
    with spy:
        integrate(world, DT)
    assert calls == []  # every moving thing in the demo collides
    ball = world.spawn(Position(x=3, y=4), Velocity(x=60, y=0))
    integrate(world, DT)
    assert float(world.get(ball, Position)["x"]) == 4.0
    world.add(ball, Collider())  # now collide moves it
    with spy:
        integrate(world, DT)
    assert calls == []
    assert float(world.get(ball, Position)["x"]) == 4.0


def test_fall_out_opens_no_query_while_nobody_fell() -> None:
    from ecs_engine.demo.game import fall_out

    world = Game("demo", history_seconds=DT).world
    world.step(DT)
    spy, calls = _queries(world)
    before = world.state_hash()
    with spy:
        fall_out(world, DT)
    assert calls == [] and world.state_hash() == before
