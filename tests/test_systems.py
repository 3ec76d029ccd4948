"""Systems on tiny worlds: falling, landing, patrols, lifetimes, shots, pickups, grids."""

from __future__ import annotations

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
    Gravity,
    Grounded,
    Health,
    Lifetime,
    Patrol,
    Pickup,
    Player,
    Position,
    Projectile,
    Score,
    Solid,
    Velocity,
    stock_prefabs,
)
from ecs_engine.systems import (
    StaticGrid,
    add_platformer_systems,
    collide,
    gravity,
    lifetimes,
    patrol,
    static_grid,
)
from ecs_engine.systems import grid as grid_module

DT = 1 / 60


def level(world: World, boxes: list[tuple[float, float, float, float]]) -> np.ndarray:
    """Spawn static ground boxes given as (left, bottom, width, height)."""
    arr = np.array(boxes, np.float64)
    return stock_prefabs().instantiate_batch(
        world, "ground", x=arr[:, 0] + arr[:, 2] / 2, y=arr[:, 1] + arr[:, 3] / 2,
        w=arr[:, 2], h=arr[:, 3])


def falling_box(world: World, x: float, y: float) -> int:
    return world.spawn(Position(x=x, y=y), Velocity(), Collider(w=1, h=1), Gravity(),
                       Grounded())


def run(world: World, systems: list, ticks: int) -> None:
    for _ in range(ticks):
        for system in systems:
            system(world, DT)


def test_box_falls_lands_and_stops() -> None:
    world = World()
    level(world, [(0, 0, 10, 1)])
    box = falling_box(world, 5, 6)
    run(world, [gravity, collide], 10)
    assert world.get(box, Position)["y"] < 6  # it is falling
    assert not world.get(box, Grounded)["on_ground"]
    run(world, [gravity, collide], 200)
    pos, vel = world.get(box, Position), world.get(box, Velocity)
    assert abs(pos["y"] - 1.5) < 0.01  # resting on the top (y=1) with half its height
    assert vel["y"] == 0
    assert world.get(box, Grounded)["on_ground"]
    y_rest = float(pos["y"])
    run(world, [gravity, collide], 60)
    assert float(world.get(box, Position)["y"]) == y_rest  # stays put


def test_box_stops_at_wall_and_reports_side() -> None:
    world = World()
    level(world, [(0, 0, 20, 1), (10, 1, 1, 5)])
    box = falling_box(world, 5, 1.5)

    def push(w: World, dt: float) -> None:  # like holding "right": the wall is hit every tick
        w.get(box, Velocity)["x"] = 8.0

    run(world, [push, gravity, collide], 120)
    assert abs(world.get(box, Position)["x"] - 9.5) < 0.01
    assert world.get(box, Velocity)["x"] == 0
    assert world.get(box, Grounded)["wall"] == 1


def test_fast_body_never_passes_a_one_unit_floor() -> None:
    world = World()
    level(world, [(-50, 0, 100, 1)])
    boxes = world.spawn_batch(Position(x=np.linspace(-40, 40, 50), y=30), Velocity(y=-39.0),
                              Collider(w=0.5, h=0.5), Gravity(), Grounded())
    run(world, [gravity, collide], 300)
    with world.query(Position, readonly=(Position,)) as q:
        ys = q[Position]["y"][np.isin(q.entities, boxes)]
    assert np.allclose(ys, 1.25, atol=0.01)


def test_projectile_dies_after_its_lifetime() -> None:
    world = World()
    shot = world.spawn(Position(), Velocity(x=1), Lifetime(remaining=0.5), Projectile())
    run(world, [lifetimes], 29)
    assert world.is_alive(shot)
    run(world, [lifetimes], 2)
    assert not world.is_alive(shot)


def test_enemy_turns_at_a_wall() -> None:
    world = World()
    level(world, [(0, 0, 20, 1), (12, 1, 1, 3)])
    enemy = stock_prefabs().instantiate(world, "enemy", x=8, y=1.5, speed=4, dir=1)
    run(world, [patrol, gravity, collide], 90)
    assert world.get(enemy, Patrol)["direction"] == -1
    assert world.get(enemy, Position)["x"] < 11.5
    assert world.get(enemy, Velocity)["x"] < 0


def test_patrol_writes_patrol_only_when_a_walker_turns() -> None:
    """Walking on moves Velocity only: Patrol's version stays (so Rollback does not copy
    it again); the tick a walker turns moves it and flips that walker alone."""
    world = World()
    level(world, [(0, 0, 20, 1), (12, 1, 1, 3)])
    prefabs = stock_prefabs()
    walker = prefabs.instantiate(world, "enemy", x=8, y=1.5, speed=4, dir=1)
    other = prefabs.instantiate(world, "enemy", x=3, y=1.5, speed=1, dir=1)
    run(world, [gravity, collide], 30)  # both standing on the floor
    patrols = world.store(Patrol)
    before = patrols.data_version
    run(world, [patrol, gravity, collide], 5)
    assert patrols.data_version == before
    assert float(world.get(walker, Velocity)["x"]) == 4
    for _ in range(90):
        run(world, [patrol, gravity, collide], 1)
        if world.get(walker, Patrol)["direction"] == -1:
            break
    assert world.get(walker, Patrol)["direction"] == -1
    assert patrols.data_version != before
    assert float(world.get(walker, Velocity)["x"]) == -4  # the turn's speed, same tick
    assert world.get(other, Patrol)["direction"] == 1


def test_enemy_turns_before_a_ledge() -> None:
    world = World()
    level(world, [(0, 0, 10, 1)])  # the floor ends at x=10
    enemy = stock_prefabs().instantiate(world, "enemy", x=6, y=1.5, speed=4, dir=1)
    run(world, [patrol, gravity, collide], 240)
    x = float(world.get(enemy, Position)["x"])
    assert 0 < x < 10
    assert world.get(enemy, Grounded)["on_ground"]


def platformer(seed: int = 0) -> tuple[World, int]:
    world = World(seed=seed)
    level(world, [(0, 0, 40, 1)])
    player = stock_prefabs().instantiate(world, "player", x=5, y=2)
    world.resources["player_start"] = [5.0, 2.0]
    add_platformer_systems(world)
    for _ in range(30):
        world.step(DT)
    return world, player


def test_player_jumps_only_from_the_ground() -> None:
    world, player = platformer()
    world.resources["input"] = {"jump": True}
    world.step(DT)
    assert world.get(player, Velocity)["y"] > 0
    world.step(DT)
    vy = float(world.get(player, Velocity)["y"])
    world.step(DT)
    assert world.get(player, Velocity)["y"] < vy  # in the air: no second jump


def test_player_shoots_projectiles_it_owns_and_spends_ammo() -> None:
    world, player = platformer()
    ammo_before = int(world.get(player, Ammo)["count"])
    world.resources["input"] = {"shoot": True}
    world.step(DT)
    with world.query(Projectile, Velocity, readonly=(Projectile, Velocity)) as q:
        assert len(q) == 1
        assert int(q[Projectile]["owner"][0]) == player
        assert q[Velocity]["x"][0] > 0
    assert world.get(player, Ammo)["count"] == ammo_before - 1
    world.step(DT)  # cooldown: no second shot yet
    assert world.count(Projectile) == 1


def test_projectile_damages_enemy_but_not_its_owner() -> None:
    world, player = platformer()
    enemy = stock_prefabs().instantiate(world, "enemy", x=9, y=1.5, speed=0)
    world.resources["input"] = {"shoot": True}
    hp = int(world.get(enemy, Health)["hp"])
    for _ in range(40):
        world.step(DT)
        if not world.is_alive(enemy) or world.get(enemy, Health)["hp"] < hp:
            break
    assert not world.is_alive(enemy) or world.get(enemy, Health)["hp"] < hp
    assert world.get(player, Health)["hp"] == world.get(player, Health)["max_hp"]


def test_coin_pickup_scores_and_disappears() -> None:
    world, player = platformer()
    coin = stock_prefabs().instantiate(world, "coin", x=7, y=1.6)
    world.resources["input"] = {"right": True}
    for _ in range(30):
        world.step(DT)
    assert not world.is_alive(coin)
    assert world.get(player, Score)["coins"] == 1


def test_enemy_touch_hurts_once_then_invulnerable() -> None:
    world, player = platformer()
    stock_prefabs().instantiate(world, "enemy", x=5.5, y=1.5, speed=0)
    world.step(DT)
    hp = int(world.get(player, Health)["hp"])
    assert hp == int(world.get(player, Health)["max_hp"]) - 1
    assert world.get(player, Health)["invulnerable"] > 0


def test_grid_follows_restore_of_the_level() -> None:
    world = World()
    walls = level(world, [(0, 0, 10, 1), (4, 1, 1, 1)])
    grid_before = static_grid(world)
    snap = world.snapshot()
    world.despawn(walls[1])
    assert len(static_grid(world).left) == 1
    world.restore(snap)
    grid = static_grid(world)
    assert len(grid.left) == 2
    assert grid.version == grid_before.version


boxes = st.lists(st.tuples(st.integers(-20, 20), st.integers(-20, 20), st.integers(1, 9),
                           st.integers(1, 9)), min_size=0, max_size=25)


@pytest.mark.parametrize("brute_force_pairs", [0, grid_module.BRUTE_FORCE_PAIRS],
                         ids=["cells", "every-pair"])
@settings(max_examples=60, deadline=None)
@given(statics=boxes, queries=boxes, cell=st.sampled_from([1.0, 2.5, 4.0, 16.0]))
def test_grid_pairs_match_brute_force(brute_force_pairs, statics, queries, cell) -> None:
    s = np.array(statics or np.zeros((0, 4)), np.float64).reshape(-1, 4)
    q = np.array(queries or np.zeros((0, 4)), np.float64).reshape(-1, 4) + 0.25
    grid = StaticGrid.build(s[:, 0], s[:, 1], s[:, 0] + s[:, 2], s[:, 1] + s[:, 3], cell=cell)
    with mock.patch.object(grid_module, "BRUTE_FORCE_PAIRS", brute_force_pairs):
        qi, bi = grid.pairs(q[:, 0], q[:, 1], q[:, 0] + q[:, 2], q[:, 1] + q[:, 3])
    got = set(zip(qi.tolist(), bi.tolist(), strict=True))
    want = {(i, j) for i in range(len(q)) for j in range(len(s))
            if q[i, 0] < s[j, 0] + s[j, 2] and q[i, 0] + q[i, 2] > s[j, 0]
            and q[i, 1] < s[j, 1] + s[j, 3] and q[i, 1] + q[i, 3] > s[j, 1]}
    assert got == want


def test_systems_run_in_any_world_without_the_demo() -> None:
    world = World(seed=7)
    ids = world.spawn_batch(Position(x=np.arange(100.0), y=50), Velocity(), Gravity(),
                            Collider(w=0.5, h=0.5), Grounded())
    level(world, [(-10, 0, 200, 1)])
    world.add_system(gravity)
    world.add_system(collide)
    for _ in range(400):
        world.step(DT)
    with world.query(Position, Grounded, readonly=(Position, Grounded)) as q:
        assert len(q) == len(ids)
        assert q[Grounded]["on_ground"].all()
        assert np.allclose(q[Position]["y"], 1.25, atol=0.01)
    assert world.count(Solid) == 1
    assert world.count(Enemy) == world.count(Pickup) == world.count(Player) == 0


def test_body_spawned_sunk_into_the_floor_is_pushed_out() -> None:
    world = World()
    level(world, [(0, 0, 10, 3)])  # floor top at y=3
    tall = world.spawn(Position(x=5, y=3.5), Velocity(), Collider(w=0.8, h=1.6), Gravity(),
                       Grounded())  # bottom at 2.7: 0.3 inside the floor
    run(world, [gravity, collide], 30)
    assert abs(float(world.get(tall, Position)["y"]) - 3.8) < 0.01
    assert world.get(tall, Grounded)["on_ground"]


def test_a_shot_hurts_the_player_as_an_enemy_touch_does() -> None:
    """Turret shots ignored the player's invulnerability (a hit every 1.5 s, invulnerable
    0 each time) and sent 'hit': no hurt sound, blink or knock-up."""
    from ecs_engine.components import Health, Projectile, stock_prefabs
    from ecs_engine.systems import add_platformer_systems, events
    from ecs_engine.systems.gameplay import INVULNERABLE_AFTER_HIT

    world = World(seed=1)
    prefabs = stock_prefabs()
    prefabs.instantiate(world, "grass", x=10, y=0.5, w=20, h=1)
    hero = prefabs.instantiate(world, "player", x=5, y=2)
    turret = world.spawn(Position(x=30, y=30))
    add_platformer_systems(world)
    for _ in range(10):  # land
        world.step(1 / 60)
    hp = int(world.get(hero, Health)["hp"])
    seen: list[str] = []
    for _tick in range(20):  # a shot into the player every tick, two at once on the first
        at = world.get(hero, Position)
        for _ in range(2 if _tick == 0 else 1):
            shot = prefabs.instantiate(world, "projectile", x=float(at["x"]), y=float(at["y"]))
            world.get(shot, Projectile)["owner"] = turret
        world.step(1 / 60)
        seen += [kind for kind, _x, _y in events(world)]
        if _tick == 0:
            # (touch_damage, later in the tick, already counted it down by one dt)
            assert world.get(hero, Health)["invulnerable"] == pytest.approx(
                INVULNERABLE_AFTER_HIT - 1 / 60)
            assert world.get(hero, Velocity)["y"] > 0  # knocked up
    assert int(world.get(hero, Health)["hp"]) == hp - 1  # one hit in 20 ticks (< 1 s)
    assert seen.count("hurt") == 1 and "hit" not in seen


def test_the_stock_ammo_pickup_refills_shots_and_the_demo_level_has_some() -> None:
    """The pickup code handled ammo but no prefab or level had any: the 20 starting shots
    ran out a third of the way through the demo level."""
    from ecs_engine.components import Ammo, stock_prefabs
    from ecs_engine.demo import Game
    from ecs_engine.systems import add_platformer_systems, events

    world = World(seed=1)
    prefabs = stock_prefabs()
    prefabs.instantiate(world, "grass", x=10, y=0.5, w=20, h=1)
    hero = prefabs.instantiate(world, "player", x=5, y=2)
    prefabs.instantiate(world, "ammo", x=5, y=2)
    add_platformer_systems(world)
    before = int(world.get(hero, Ammo)["count"])
    world.step(1 / 60)
    assert int(world.get(hero, Ammo)["count"]) == before + 10
    assert [kind for kind, _x, _y in events(world)] == ["ammo"]
    assert Game(seed=0).summary.entity_counts.get("ammo", 0) == 3
