"""One movement tick: ``position += velocity * dt`` over every moving entity.

The engine's system is the owning-group query; its references are the same numpy
expression on plain, pre-aligned structured arrays of the same dtypes and, as INFO, on
float32 struct-of-arrays columns (what the row layout of structured arrays costs), all
timed interleaved and started from copies of the engine's columns. Variant ``churned``
repeats them after 10% of the entities were despawned and respawned at random.
Baselines run their idiomatic per-entity loop, warm (caches built by a first tick),
interleaved with the engine's tick on a world holding the same entities; every
contender's final positions are fingerprinted (count and sums) and must agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import baselines
from benchmarks.fingerprint import sums, world_motion
from benchmarks.mix import build_world, churn, twin_world
from benchmarks.runner import Op, Record, Timing, timed_records
from benchmarks.scenarios import Plan, sized_jobs
from ecs_engine import World
from ecs_engine.components import Position, Velocity

NAME = "tick"
TITLE = "Movement tick"
CONTENDERS = ("engine", "esper", "tcod-ecs", "dicts")
DT = np.float32(1 / 60)


def plan(cfg: Any) -> Plan:
    yield from sized_jobs(NAME, CONTENDERS, cfg, required=(("esper", 100_000),))  # target 2


def movement(world: World, dt: float = DT) -> None:
    """The engine's movement system, as a user writes it."""
    with world.query(Position, Velocity) as q:
        pos, vel = q[Position], q[Velocity]
        pos["x"] += vel["x"] * dt
        pos["y"] += vel["y"] * dt


def _columns(world: World) -> tuple[np.ndarray, np.ndarray]:
    """Copies of the engine's position and velocity rows, in the query's order."""
    with world.query(Position, Velocity, readonly=(Position, Velocity)) as q:
        return q[Position].copy(), q[Velocity].copy()


def _plain(world: World) -> Op:
    """The same expression on plain structured arrays (pre-aligned, same dtypes)."""
    pos, vel = _columns(world)

    def run() -> None:
        pos["x"] += vel["x"] * DT
        pos["y"] += vel["y"] * DT

    return Op(run, fingerprint=lambda _: sums(len(pos), pos["x"], pos["y"]))


def _soa(world: World) -> Op:
    """The same expression on four float32 struct-of-arrays columns."""
    pos, vel = _columns(world)
    x, y = pos["x"].astype(np.float32), pos["y"].astype(np.float32)
    vx, vy = vel["x"].astype(np.float32), vel["y"].astype(np.float32)

    def run() -> None:
        np.add(x, vx * DT, out=x)
        np.add(y, vy * DT, out=y)

    return Op(run, fingerprint=lambda _: sums(len(x), x, y))


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    world, rng = build_world(n)
    out: list[Record] = []
    for variant in ("fresh", "churned"):
        if variant == "churned":
            churn(world, rng, 0.10)
        movement(world)  # the owning group exists before the references copy the rows
        ops = {"engine": Op(lambda: movement(world), fingerprint=lambda _: world_motion(world)),
               "numpy": _plain(world), "soa": _soa(world)}
        names = {"engine": ("tick", variant, "engine"), "numpy": ("tick", variant, "numpy"),
                 "soa": ("tick", variant, "numpy f32 SoA")}
        out += timed_records(NAME, n, ops, timing, names)
    with world.query(Position, Velocity) as q:
        aligned = q.aligned
    for r in out:
        r["aligned"] = aligned
    return out


def _baseline(kind: str) -> Callable[[int, dict[str, Any], Timing], list[Record]]:
    def job(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
        store = baselines.BASELINES[kind]()
        store.spawn(n, np.random.default_rng(1))
        store.tick(float(DT))  # warm caches; the engine twin takes the same first step
        twin = twin_world(baselines._plan_columns(n, 1))
        movement(twin)
        ops = {
            "tick": Op(lambda: store.tick(float(DT)),
                       fingerprint=lambda _: sums(*store.motion(store.state()))),
            "engine": Op(lambda: movement(twin), fingerprint=lambda _: world_motion(twin)),
        }
        names = {"tick": ("tick", "", kind), "engine": ("tick", f"vs {kind}", "engine")}
        return timed_records(NAME, n, ops, timing, names)

    return job


JOBS = {"engine": engine, "esper": _baseline("esper"), "tcod-ecs": _baseline("tcod-ecs"),
        "dicts": _baseline("dicts")}
