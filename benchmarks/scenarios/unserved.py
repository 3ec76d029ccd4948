"""A query the owning group does not serve, against the aligned equivalent, at 100k.

The demo groups ``(Position, Velocity, Collider, Grounded)`` for collision; its gravity
system queries ``(Velocity, Gravity)``, which that group cannot serve (a store belongs to
one group). Two worlds hold the same 100k bodies (plus 1k static colliders):

- ``unserved``: the stock group; the gravity query resolves through the stores' index;
- ``nested``: the stock group in a world with ``auto_group`` on: the gravity query's first
  tick nests ``(Position, Velocity, Collider, Grounded, Gravity)`` in it (its matches all
  belong to the group), so it is a pair of views from then on, also through respawns;
- ``aligned``: a world grouped as ``(Velocity, Gravity)`` instead, so the same query is a
  pair of views.

Variant ``stress``: every body has gravity, spawned in one batch (the demo's ``--stress``).
Variant ``half``: gravity on a random half of the bodies, after 10% of them were despawned
and respawned, so the rows the query needs are scattered through the stores.

Both run the demo's ``gravity`` system through ``world.step`` (where a game runs it),
interleaved; each must end with the same sum of vertical speeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.fingerprint import sums
from benchmarks.runner import Op, Record, Timing, timed_records
from benchmarks.scenarios import Job, Plan
from ecs_engine import World
from ecs_engine.components import Collider, Gravity, Grounded, Position, Velocity
from ecs_engine.systems.physics import gravity

NAME = "unserved"
TITLE = "Query the owning group does not serve vs aligned (100k)"
N = 100_000
QUICK_N = 10_000
DT = 1 / 60


def plan(cfg: Any) -> Plan:
    n = min(QUICK_N, max(cfg.sizes)) if cfg.quick else N
    for variant in ("stress", "half"):
        yield Job(NAME, "engine", n, {"variant": variant})


def build(n: int, variant: str, grouping: tuple[type, ...], auto_group: bool = False) -> World:
    """``n`` bodies and ``n // 100`` static colliders, the same in every call."""
    rng = np.random.default_rng(7)
    world = World(auto_group=auto_group)
    world.group(*grouping)
    world.spawn_batch(Position(x=rng.random(n // 100) * 100), Collider(w=1, h=1))
    xs = rng.random(n) * 100
    vy = rng.random(n) * 4 - 2
    if variant == "stress":
        world.spawn_batch(Position(x=xs, y=50), Velocity(x=0, y=vy), Collider(w=0.5, h=0.5),
                          Grounded(), Gravity())
        return world
    has_gravity = rng.random(n) < 0.5
    keys = world.spawn_batch(Position(x=xs, y=50), Velocity(x=0, y=vy),
                             Collider(w=0.5, h=0.5), Grounded())
    world.add_batch(keys[has_gravity], Gravity())
    doomed = rng.choice(n, n // 10, replace=False)
    world.despawn_batch(keys[doomed])
    again = world.spawn_batch(Position(x=xs[doomed], y=50), Velocity(x=0, y=vy[doomed]),
                              Collider(w=0.5, h=0.5), Grounded())
    world.add_batch(again[has_gravity[doomed]], Gravity())
    return world


def fall_speed(world: World) -> tuple[Any, ...]:
    """Velocities, each paired with its body's x (which gravity leaves alone): falling
    speed on the wrong bodies (the same count) changes the paired sum."""
    with world.query(Velocity, Position, readonly=(Velocity, Position)) as q:
        vel, pos = q[Velocity], q[Position]
        return sums(len(vel), vel["x"], vel["y"], (vel["x"], vel["y"], pos["x"], pos["x"]))


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    variant = params["variant"]
    unserved = build(n, variant, (Position, Velocity, Collider, Grounded))
    nested = build(n, variant, (Position, Velocity, Collider, Grounded), auto_group=True)
    aligned = build(n, variant, (Velocity, Gravity))
    for world in (unserved, nested, aligned):
        world.add_system(gravity)  # as a game runs it: inside world.step

    def tick(world: World) -> World:
        world.step(DT)
        return world

    ops = {"unserved": Op(lambda: tick(unserved), fingerprint=fall_speed),
           "nested": Op(lambda: tick(nested), fingerprint=fall_speed),
           "aligned": Op(lambda: tick(aligned), fingerprint=fall_speed)}
    served: dict[str, str] = {}

    def probe(world: World, dt: float) -> None:
        with world.query(Velocity, Gravity, readonly=(Gravity,)) as q:
            served["as"] = "views" if q.aligned else "gathered"

    served_as: dict[str, str] = {}
    for name, world in (("unserved", unserved), ("nested", nested)):
        world.step(0.0)  # (the nested world's first tick nests the group)
        world.add_system(probe, name="probe", before=gravity)
        world.step(0.0)  # how a tick serves the query (rows are laid out inside steps)
        world.remove_system("probe")
        served_as[name] = served["as"]
    if served_as["nested"] != "views":
        raise AssertionError("the gravity query should be served by a nested group")
    out = timed_records(NAME, n, ops, timing,
                        {"unserved": ("gravity", variant, "unserved"),
                         "nested": ("gravity", variant, "nested"),
                         "aligned": ("gravity", variant, "aligned")})
    for r in out:
        if r["contender"] in served_as:
            r["served_as"] = served_as[r["contender"]]
    return out


JOBS = {"engine": engine}
