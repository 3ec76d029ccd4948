"""One movement tick: ``position += velocity * dt`` over every moving entity.

The engine's system is the owning-group query; its reference is the same numpy expression
on plain, pre-aligned structured arrays of the same dtypes (timed interleaved). Variant
``churned`` repeats both after 10% of the entities were despawned and respawned at random.
Baselines run their idiomatic per-entity loop, warm (caches built by a first tick).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import baselines
from benchmarks.mix import build_world, churn
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


def _plain(world: World) -> Callable[[], None]:
    """The same expression on plain structured arrays (pre-aligned, same dtypes)."""
    n = world.count(Position)
    rng = np.random.default_rng(2)
    pos = np.zeros(n, world.store(Position).schema.dtype)
    vel = np.zeros(n, world.store(Velocity).schema.dtype)
    for arr in (pos, vel):
        arr["x"] = rng.random(n)
        arr["y"] = rng.random(n)

    def run() -> None:
        pos["x"] += vel["x"] * DT
        pos["y"] += vel["y"] * DT

    return run


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    world, rng = build_world(n)
    out: list[Record] = []
    for variant in ("fresh", "churned"):
        if variant == "churned":
            churn(world, rng, 0.10)
        ops = {"engine": Op(lambda: movement(world)), "numpy": Op(_plain(world))}
        names = {"engine": ("tick", variant, "engine"), "numpy": ("tick", variant, "numpy")}
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
        ops = {"tick": Op(lambda: store.tick(float(DT)))}
        return timed_records(NAME, n, ops, timing, {"tick": ("tick", "", kind)})

    return job


JOBS = {"engine": engine, "esper": _baseline("esper"), "tcod-ecs": _baseline("tcod-ecs"),
        "dicts": _baseline("dicts")}
