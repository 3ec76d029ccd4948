"""touch_damage, pickups and reach_goal share one player-box test a tick
(``gameplay._touching``) and do their exact work only when it finds their kind touched.

They must leave exactly the state the systems had before (state hash, events and row
order after every tick) in any schedule: the three together, any one alone, in any order,
while entities move between kinds, teleport, lose components and despawn. The reference
below is the code before the shared test, verbatim."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecs_engine import World
from ecs_engine.components import (
    Ammo,
    Collider,
    Enemy,
    Goal,
    Gravity,
    Grounded,
    Health,
    Pickup,
    Player,
    Position,
    Score,
    Velocity,
    stock_prefabs,
)
from ecs_engine.demo.game import DT, INPUT_ACTIONS, Game
from ecs_engine.systems import gameplay
from ecs_engine.systems.events import clear_events, emit
from ecs_engine.systems.gameplay import (
    INVULNERABLE_AFTER_HIT,
    PICKUP_AMMO,
    PICKUP_COIN,
    PICKUP_EVENTS,
    PICKUP_HEALTH,
    WON_AT,
    _handle_deaths,
    overlap_matrix,
    pickups,
    reach_goal,
    touch_damage,
)
from ecs_engine.systems.grid import box_edges
from ecs_engine.systems.physics import integrate
from ecs_engine.systems.schedule import MOVING_BODY

System = Callable[[World, float], None]
_count = np.count_nonzero


# -- the systems before the shared test (the reference) -----------------------------------

def _ref_contact(world: World, dt: float, health: np.ndarray, pos: np.ndarray,
                 col: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    inv = health["invulnerable"]
    left = np.where(inv > 0, np.maximum(inv - dt, 0), inv)
    with world.query(Enemy, Position, Collider, readonly=(Enemy, Position, Collider)) as e:
        touching = overlap_matrix(box_edges(pos, col), box_edges(e[Position], e[Collider]))
        damage = (touching * e[Enemy]["damage"][None, :]).max(axis=1, initial=0)
    hurt = (damage > 0) & (left <= 0) & (health["hp"] > 0)
    return left, hurt, damage


def ref_touch_damage(world: World, dt: float) -> None:
    with world.query(Player, Health, Position, Collider, Velocity,
                     readonly=(Player, Health, Position, Collider, Velocity)) as p:
        if len(p) == 0:
            return
        health = p[Health]
        _, hurt, _ = _ref_contact(world, dt, health, p[Position], p[Collider])
        due = _count(hurt) > 0 or _count(health["invulnerable"] > 0) > 0
    if due:
        with world.query(Player, Health, Position, Collider, Velocity,
                         readonly=(Player, Position, Collider)) as p:
            health = p[Health]
            health["invulnerable"], hurt, damage = _ref_contact(world, dt, health,
                                                                p[Position], p[Collider])
            health["hp"][hurt] -= damage[hurt].astype(np.int16)
            health["invulnerable"][hurt] = INVULNERABLE_AFTER_HIT
            p[Velocity]["y"][hurt] = 12.0
            if _count(hurt):
                emit(world, "hurt", p[Position]["x"][hurt], p[Position]["y"][hurt])
    _handle_deaths(world)


def ref_pickups(world: World, dt: float) -> None:
    taken: np.ndarray | None = None
    with world.query(Player, Position, Collider, Health, Ammo, Score,
                     readonly=(Player, Position, Collider)) as p:
        if len(p) == 0:
            return
        with world.query(Pickup, Position, Collider, readonly=(Pickup, Position, Collider)) as k:
            touching = overlap_matrix(box_edges(p[Position], p[Collider]),
                                      box_edges(k[Position], k[Collider]))
            got = touching.any(axis=0)
            if not _count(got):
                return
            who = np.argmax(touching, axis=0)[got]
            kind, amount = k[Pickup]["kind"][got], k[Pickup]["amount"][got]
            taken = k.entities[got].copy()
            for code, name in PICKUP_EVENTS.items():
                sel = kind == code
                if _count(sel):
                    emit(world, name, k[Position]["x"][got][sel], k[Position]["y"][got][sel])
        health, ammo, score = p[Health], p[Ammo], p[Score]
        for code, column, field in ((PICKUP_HEALTH, health, "hp"), (PICKUP_AMMO, ammo, "count"),
                                    (PICKUP_COIN, score, "coins")):
            sel = kind == code
            np.add.at(column[field], who[sel], amount[sel].astype(column[field].dtype))
        np.minimum(health["hp"], health["max_hp"], out=health["hp"])
        np.minimum(ammo["count"], 99, out=ammo["count"])
    if taken is not None:
        world.despawn_batch(taken)


def ref_reach_goal(world: World, dt: float) -> None:
    del dt
    if world.resources.get(WON_AT) is not None:
        return
    with world.query(Player, Position, Collider, Health,
                     readonly=(Player, Position, Collider, Health)) as p:
        if len(p) == 0:
            return
        with world.query(Goal, Position, Collider, readonly=(Goal, Position, Collider)) as g:
            if len(g) == 0:
                return
            touching = overlap_matrix(box_edges(p[Position], p[Collider]),
                                      box_edges(g[Position], g[Collider]))
            winners = touching.any(axis=1) & (p[Health]["hp"] > 0)
            if not _count(winners):
                return
            emit(world, "goal", p[Position]["x"][winners], p[Position]["y"][winners])
    world.resources[WON_AT] = int(world.tick) + 1


NEW: dict[str, System] = {"touch_damage": touch_damage, "pickups": pickups,
                          "reach_goal": reach_goal}
REF: dict[str, System] = {"touch_damage": ref_touch_damage, "pickups": ref_pickups,
                          "reach_goal": ref_reach_goal}


# -- random worlds ------------------------------------------------------------------------

def _world(seed: int, grouped: bool) -> World:
    """Players, enemies, pickups and goals crowded into a 12 x 6 room, moving: many
    touch, some players lack Health, Velocity or Ammo, some boxes are huge or empty.
    Some worlds register every type up front, the others only what they spawn."""
    rng = np.random.default_rng(seed)
    w = World(seed=seed, auto_group=False)
    if grouped:
        w.group(*MOVING_BODY)
    if rng.random() < 0.5:
        w.register(Position, Velocity, Collider, Gravity, Grounded, Player, Health, Ammo,
                   Score, Enemy, Pickup, Goal)

    def body(n: int) -> tuple[Any, ...]:
        return (Position(x=rng.uniform(0, 12, n), y=rng.uniform(0, 6, n)),
                Collider(w=rng.choice([0.0, 0.5, 0.9, 2.0, 14.0], n),
                         h=rng.choice([0.0, 0.6, 1.6, 7.0], n)))

    def moving(n: int) -> tuple[Any, ...]:
        return (Velocity(x=rng.uniform(-9, 9, n), y=rng.uniform(-4, 4, n)), Gravity(),
                Grounded())

    n = int(rng.integers(0, 4))
    if n:
        w.spawn_batch(*body(n), *moving(n), Player(),
                      Health(hp=rng.integers(0, 6, n), max_hp=5,
                             invulnerable=rng.choice([0.0, 0.0, 0.3, -1.0], n)),
                      Ammo(count=rng.integers(90, 99, n)), Score(), count=n)
    for _ in range(int(rng.integers(0, 2))):  # odd players
        parts = [*body(1), Player()]
        parts += [c for c, keep in ((Health(hp=3), rng.random() < 0.5),
                                    (Ammo(count=1), rng.random() < 0.5), (Score(), True),
                                    (Velocity(x=1.0), rng.random() < 0.5))
                  if keep]
        w.spawn(*parts)
    n = int(rng.integers(0, 7))
    if n:
        w.spawn_batch(*body(n), *moving(n), Enemy(damage=rng.integers(0, 3, n)),
                      Health(hp=rng.integers(1, 3, n), max_hp=2), count=n)
    n = int(rng.integers(0, 8))
    if n:
        w.spawn_batch(*body(n), Pickup(kind=rng.integers(0, 3, n), amount=rng.integers(1, 4, n)),
                      count=n)
    n = int(rng.integers(0, 3))
    if n:
        w.spawn_batch(*body(n), Goal(), count=n)
    return w


def _keys(world: World, ctype: type) -> list[int]:
    if not world.count(ctype):
        return []  # (a query would create the store: the test must not)
    with world.query(ctype, readonly=(ctype,)) as q:
        return [int(k) for k in q.entities]


def _mutate(world: World, rng: np.random.Generator) -> None:
    """One change between ticks (the same on both worlds: drawn from a copied rng)."""
    kind = int(rng.integers(0, 10))
    players = _keys(world, Player)
    if kind == 0 and players:  # a player jumps onto something
        others = [k for t in (Enemy, Pickup, Goal) for k in _keys(world, t)
                  if world.has(k, Position)]
        p = players[int(rng.integers(len(players)))]
        if others and world.has(p, Position):
            at = world.get(others[int(rng.integers(len(others)))], Position)
            world.add(p, Position(x=float(at["x"]) + 0.1, y=float(at["y"])))
    elif kind == 1:  # an enemy becomes a pickup, or a pickup an enemy
        src, dst = (Enemy, Pickup(kind=1, amount=2)) if rng.random() < 0.5 else (
            Pickup, Enemy(damage=1))
        keys = _keys(world, src)
        if keys:
            k = keys[int(rng.integers(len(keys)))]
            world.remove(k, src)
            world.add(k, dst)
    elif kind == 2 and players:  # the player role moves to someone else
        world.remove(players[0], Player)
        others = _keys(world, Enemy)
        if others:
            world.add(others[0], Player())
    elif kind == 3:  # a goal comes or goes; the game goes on
        goals = _keys(world, Goal)
        if goals and rng.random() < 0.5:
            world.despawn(goals[0])
        else:
            world.spawn(Position(x=float(rng.uniform(0, 12)), y=float(rng.uniform(0, 6))),
                        Collider(w=1.0, h=2.0), Goal())
        world.resources[WON_AT] = None
    elif kind == 4 and players:  # a collider grows or shrinks
        if world.has(players[-1], Collider):
            world.add(players[-1], Collider(w=float(rng.uniform(0, 15)), h=1.0))
    elif kind == 5 and players:  # a component goes
        ctype = [Health, Velocity, Collider, Position][int(rng.integers(4))]
        if world.has(players[-1], ctype):
            world.remove(players[-1], ctype)
    elif kind == 6:
        keys = _keys(world, Pickup) + _keys(world, Enemy)
        if keys:
            world.despawn(keys[int(rng.integers(len(keys)))])
    elif kind == 7:  # things move without moving the layout
        for k in _keys(world, Pickup)[:3]:
            if world.has(k, Position):
                world.add(k, Position(x=float(rng.uniform(0, 12)), y=float(rng.uniform(0, 6))))
    elif kind == 8:
        stock_prefabs().instantiate(world, "player", x=float(rng.uniform(0, 12)),
                                    y=float(rng.uniform(0, 6)))
    elif kind == 9:  # an entity gains or loses one kind, nothing else changes
        ctype = [Enemy, Pickup, Goal, Player][int(rng.integers(4))]
        keys = []
        if world.count(Position) and world.count(Collider):
            with world.query(Position, Collider, readonly=(Position, Collider)) as q:
                keys = [int(k) for k in q.entities]
        if keys:
            k = keys[int(rng.integers(len(keys)))]
            if world.has(k, ctype):
                world.remove(k, ctype)
            else:
                world.add(k, ctype())


def _run(world: World, systems: list[System], ticks: int,
         seed: int) -> list[tuple[str, str, str]]:
    for system in systems:
        world.add_system(system, name=system.__name__.removeprefix("ref_"))
    rng = np.random.default_rng(seed)
    trace = []
    for _ in range(ticks):
        if rng.random() < 0.3:
            _mutate(world, rng)
        world.step(DT)
        trace.append((world.state_hash(), repr(world.resources.get("events")),
                       repr(world.component_types)))  # (no store the old ones lacked)
    return trace


SCHEDULES = [("touch_damage", "pickups", "reach_goal"), ("reach_goal", "pickups", "touch_damage"),
             ("touch_damage",), ("pickups",), ("reach_goal",), ("pickups", "touch_damage")]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(SCHEDULES), st.booleans())
def test_shared_touch_test_leaves_the_same_states_as_before(seed: int, names: tuple[str, ...],
                                                            grouped: bool) -> None:
    traces = []
    for table in (NEW, REF):
        systems: list[System] = [clear_events, integrate, *(table[n] for n in names)]
        traces.append(_run(_world(seed, grouped), systems, 40, seed))
    assert traces[0] == traces[1]


def _demo_trace(table: dict[str, System], ticks: int) -> list[tuple[str, str]]:
    game = Game("demo", seed=5, history_seconds=DT)
    world = game.world
    for name in ("touch_damage", "pickups", "reach_goal"):
        world.add_system(table[name], name=f"{name}_", before=name)
        world.remove_system(name)
    rng = np.random.default_rng(5)
    trace = []
    for t in range(ticks):
        world.resources["input"] = {k: bool(rng.random() < 0.4) for k in INPUT_ACTIONS}
        if t % 4 == 0:
            _mutate(world, rng)
        world.step(DT)
        trace.append((world.state_hash(), repr(world.resources.get("events"))))
    return trace


def test_demo_level_with_the_shared_test_leaves_the_same_states_as_before() -> None:
    new, ref = _demo_trace(NEW, 300), _demo_trace(REF, 300)
    assert new == ref
    kinds = {kind for _, events in new for kind in ("hurt", "coin", "goal") if kind in events}
    assert kinds == {"hurt", "coin", "goal"}  # the exact paths ran too


def _touching_by_queries(world: World) -> tuple[bool, bool, bool]:
    out = []
    with world.query(Player, Position, Collider, readonly=(Player, Position, Collider)) as p:
        players = box_edges(p[Position], p[Collider])
        for ctype in (Enemy, Pickup, Goal):
            with world.query(ctype, Position, Collider,
                             readonly=(ctype, Position, Collider)) as q:
                out.append(bool(overlap_matrix(players,
                                               box_edges(q[Position], q[Collider])).any()))
    return out[0], out[1], out[2]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_shared_touch_test_is_exact(seed: int, grouped: bool) -> None:
    # Not only never "no" where a system's own test finds a touch (the property above):
    # "yes" only then too, or the systems would do their exact work for nothing.
    world = _world(seed, grouped)
    rng = np.random.default_rng(seed)
    for _ in range(30):
        assert gameplay._touching(world) == _touching_by_queries(world)
        _mutate(world, rng)
        integrate(world, DT)


def test_the_shared_test_makes_no_store() -> None:
    # A game with players and its own component named "Goal": touch_damage and pickups
    # never asked for the stock Goal store, and their shared test (which looks at goals
    # too) must not make it now (a second type named "Goal" is a TypeError).
    from ecs_engine import component

    @component(name="Goal")
    class OwnGoal:
        reached: bool = False

    for table in (NEW, REF):
        w = World()
        w.spawn(Position(), Collider(), Velocity(), Player(), Health(), Ammo(), Score(),
                OwnGoal())
        for name in ("touch_damage", "pickups"):
            w.add_system(table[name])
        w.step(DT)
        assert Goal not in w.component_types
        assert {Enemy, Pickup} <= set(w.component_types)  # (their queries made these)


# -- the fast path --------------------------------------------------------------------------

@pytest.fixture
def demo() -> World:
    world = Game("demo", history_seconds=DT).world
    for _ in range(5):
        world.step(DT)
    return world


def _counting(target: Any, name: str) -> tuple[Any, list[int]]:
    calls: list[int] = []
    real = getattr(target, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    return mock.patch.object(target, name, spy), calls


def test_nothing_touching_reads_no_enemy_pickup_or_goal_box(demo: World) -> None:
    # The player stands at the start, touching nothing: the three systems' own box tests
    # (box_edges) never run, and the shared test runs once for all three.
    test, test_calls = _counting(gameplay, "_touch_test")
    for _ in range(3):
        demo.step(DT)  # (positions move: the round below tests again)
        edges, edge_calls = _counting(gameplay, "box_edges")
        demo.stepping = True
        try:
            with edges, test:
                for system in (touch_damage, pickups, reach_goal):
                    system(demo, DT)
        finally:
            demo.stepping = False
        assert edge_calls == []
        assert len(test_calls) == 1
        test_calls.clear()
    assert gameplay._touching(demo) == (False, False, False)


def test_a_touched_pickup_is_taken_in_the_same_tick(demo: World) -> None:
    (player,) = _keys(demo, Player)
    coin = next(k for k in _keys(demo, Pickup) if int(demo.get(k, Pickup)["kind"]) == 2)
    at = demo.get(coin, Position)
    coins = int(demo.get(player, Score)["coins"])
    demo.add(player, Position(x=float(at["x"]), y=float(at["y"])))
    demo.step(DT)
    assert not demo.is_alive(coin)
    assert int(demo.get(player, Score)["coins"]) == coins + 1
    assert gameplay._touching(demo)[1] is False  # (taken: nothing touches now)
