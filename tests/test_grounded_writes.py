"""collide writes ``Grounded`` only in rows whose value changed (up to FEW_GROUNDED bodies;
more write every row), so a tick where every body keeps standing (most ticks) leaves the
store's version alone: Rollback, snapshots and the state hash do not copy it again. The
values must be exactly those of writing every row (the reference below is collide before,
verbatim), with few bodies (the per-body loop) and many (the vectorised move), with and
without the moving-body group, comparing or not."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ecs_engine import World
from ecs_engine.components import (
    Collider,
    Gravity,
    Grounded,
    Position,
    Velocity,
    stock_prefabs,
)
from ecs_engine.systems import collision, collision_few
from ecs_engine.systems.colliders import level_colliders
from ecs_engine.systems.collision import SCRATCH_KEY, _move, collide
from ecs_engine.systems.physics import gravity
from ecs_engine.systems.schedule import MOVING_BODY
from ecs_engine.systems.scratch import world_scratch

DT = 1 / 60


def ref_collide(world: World, dt: float) -> None:
    grid = level_colliders(world)
    scratch = world_scratch(world, SCRATCH_KEY)
    with world.query(Position, Velocity, Collider, Grounded, readonly=(Collider,)) as q, \
            world.query(Position, Velocity, Collider, without=(Grounded,),
                        readonly=(Collider,)) as other:
        parts = [(q[Position], q[Velocity], q[Collider])]
        if len(other):
            parts.append((other[Position], other[Velocity], other[Collider]))
        wall_rows, wall_side, floor_rows, floor_side = _move(grid, parts, dt, scratch)
        n = len(q)
        if len(parts) > 1:
            if len(wall_rows):
                mine = wall_rows < n
                wall_side, wall_rows = wall_side[mine], wall_rows[mine]
            mine = floor_rows < n
            floor_side, floor_rows = floor_side[mine], floor_rows[mine]
        ground = q[Grounded]
        if ground.dtype.itemsize == 2 and ground.flags.c_contiguous:
            ground.view(np.uint16).fill(0)
        else:
            ground["on_ground"] = False
            ground["wall"] = 0
        ground["on_ground"][floor_rows[floor_side < 0]] = True
        if len(wall_rows):
            ground["wall"][wall_rows] = wall_side


def _world(seed: int, n: int, grouped: bool) -> World:
    """A walled pit with a few ledges; ``n`` bodies in it (a quarter without Grounded),
    some resting, some falling, some running into walls."""
    rng = np.random.default_rng(seed)
    w = World(seed=seed, auto_group=False)
    if grouped:
        w.group(*MOVING_BODY)
    boxes = [(20.0, 0.5, 40.0, 1.0), (0.5, 10.0, 1.0, 20.0), (39.5, 10.0, 1.0, 20.0)]
    boxes += [(float(rng.integers(3, 37)), float(rng.integers(2, 12)) + 0.5,
               float(rng.integers(2, 6)), 1.0) for _ in range(4)]
    arr = np.array(boxes)
    stock_prefabs().instantiate_batch(w, "ground", x=arr[:, 0], y=arr[:, 1], w=arr[:, 2],
                                      h=arr[:, 3])
    x, y = rng.uniform(2, 38, n), rng.uniform(1.6, 15, n)
    y[rng.random(n) < 0.5] = 1.5  # standing on the floor
    vx, cw = rng.choice([0.0, 0.0, -6.0, 6.0], n), rng.choice([0.5, 0.9, 1.0], n)
    with_ground = rng.random(n) < 0.75
    for sel, extra in ((with_ground, (Grounded(),)), (~with_ground, ())):
        k = int(sel.sum())
        if k:
            w.spawn_batch(Position(x=x[sel], y=y[sel]), Velocity(x=vx[sel]), Gravity(),
                          Collider(w=cw[sel], h=1.0), *extra, count=k)
    return w


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 5, collision_few.FEW_BODIES_PYTHON, 60]),
       st.booleans(), st.booleans())
def test_grounded_is_what_writing_every_row_gives_and_moves_only_when_changed(
        seed: int, n: int, grouped: bool, compare: bool) -> None:
    with mock.patch.object(collision, "FEW_GROUNDED", 10**9 if compare else -1):
        _grounded_run(seed, n, grouped, compare)


def _grounded_run(seed: int, n: int, grouped: bool, compare: bool) -> None:
    new, ref = _world(seed, n, grouped), _world(seed, n, grouped)
    rng = np.random.default_rng(seed)
    store = new.store(Grounded)
    unchanged_ticks = 0
    for tick in range(90):
        if tick % 15 == 7:  # kicks: some jump, some run at the walls
            kick = {"x": float(rng.uniform(-12, 12)), "y": float(rng.uniform(0, 20))}
            for w in (new, ref):
                with w.query(Velocity) as q:
                    q[Velocity]["x"][::3] = kick["x"]
                    q[Velocity]["y"][::4] = kick["y"]
        before = store.live().tobytes(), store.data_version
        for w, collide_fn in ((new, collide), (ref, ref_collide)):
            gravity(w, DT)
            collide_fn(w, DT)
        assert new.state_hash() == ref.state_hash()
        if store.live().tobytes() == before[0]:
            unchanged_ticks += 1
            if compare:
                assert store.data_version == before[1]  # nothing written: same version
    assert unchanged_ticks > 0


def test_landing_and_leaving_a_wall_are_written() -> None:
    world = World()
    stock_prefabs().instantiate_batch(world, "ground", x=[10, 15.5], y=[0.5, 3], w=[20, 1],
                                      h=[1, 4])
    body = world.spawn(Position(x=14.4, y=4), Velocity(), Collider(w=1, h=1), Gravity(),
                       Grounded())
    store = world.store(Grounded)

    def tick(vx: float) -> None:
        with world.query(Velocity) as q:
            q[Velocity]["x"] = vx  # (a wall zeroes it: pushing again, as patrol does)
        gravity(world, DT)
        collide(world, DT)

    for _ in range(60):
        tick(5)
    assert bool(world.get(body, Grounded)["on_ground"])
    assert int(world.get(body, Grounded)["wall"]) == 1
    version = store.data_version
    tick(5)
    assert store.data_version == version  # standing against the wall: nothing changed
    tick(-5)  # away from the wall
    assert store.data_version != version
    assert bool(world.get(body, Grounded)["on_ground"])
    assert int(world.get(body, Grounded)["wall"]) == 0
    version = store.data_version
    world.add(body, Velocity(y=10))  # up: off the ground
    gravity(world, DT)
    collide(world, DT)
    assert store.data_version != version
    assert not bool(world.get(body, Grounded)["on_ground"])
