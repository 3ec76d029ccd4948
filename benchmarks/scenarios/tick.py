"""One movement tick: ``position += velocity * dt`` over every moving entity.

The engine's system is the owning-group query, written as the README teaches it
(``q.unstructured``: x and y in one op) and a line per field; the references are the same
expressions on plain, pre-aligned structured arrays of the same dtypes and, as INFO, on
float32 struct-of-arrays columns, all timed interleaved and started from copies of the
engine's columns. Variant ``churned``
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
    """The engine's movement system, as the README teaches it: both fields in one op."""
    with world.query(Position, Velocity) as q:
        pos = q.unstructured(Position)
        pos += q.unstructured(Velocity) * dt


def movement_fields(world: World, dt: float = DT) -> None:
    """The same system written a line per field (the row layout's stride on every op)."""
    with world.query(Position, Velocity) as q:
        pos, vel = q[Position], q[Velocity]
        pos["x"] += vel["x"] * dt
        pos["y"] += vel["y"] * dt


def _columns(world: World) -> tuple[np.ndarray, np.ndarray]:
    """Copies of the engine's position and velocity rows, in the query's order."""
    with world.query(Position, Velocity, readonly=(Position, Velocity)) as q:
        return q[Position].copy(), q[Velocity].copy()


def _plain(world: World) -> Op:
    """The engine's expression on plain structured arrays (pre-aligned, same dtypes)."""
    pos, vel = _columns(world)
    flat_pos, flat_vel = pos.view(np.float32).reshape(-1, 2), vel.view(np.float32).reshape(-1, 2)

    def run() -> None:
        flat_pos[...] += flat_vel * DT

    return Op(run, fingerprint=lambda _: sums(len(pos), pos["x"], pos["y"], (
        pos["x"], pos["y"], vel["x"], vel["y"])))


def _plain_fields(world: World) -> Op:
    """The per-field expression on plain structured arrays."""
    pos, vel = _columns(world)

    def run() -> None:
        pos["x"] += vel["x"] * DT
        pos["y"] += vel["y"] * DT

    return Op(run, fingerprint=lambda _: sums(len(pos), pos["x"], pos["y"], (
        pos["x"], pos["y"], vel["x"], vel["y"])))


def _soa(world: World) -> Op:
    """The same expression on four float32 struct-of-arrays columns."""
    pos, vel = _columns(world)
    x, y = pos["x"].astype(np.float32), pos["y"].astype(np.float32)
    vx, vy = vel["x"].astype(np.float32), vel["y"].astype(np.float32)

    def run() -> None:
        np.add(x, vx * DT, out=x)
        np.add(y, vy * DT, out=y)

    return Op(run, fingerprint=lambda _: sums(len(x), x, y, (x, y, vx, vy)))


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    world, rng = build_world(n)
    fields_world, fields_rng = build_world(n)  # its own copy: both systems move positions
    out: list[Record] = []
    for variant in ("fresh", "churned"):
        if variant == "churned":
            churn(world, rng, 0.10)
            churn(fields_world, fields_rng, 0.10)
        movement(world)  # the owning group exists before the references copy the rows
        movement_fields(fields_world)
        ops = {"engine": Op(lambda: movement(world), fingerprint=lambda _: world_motion(world)),
               "numpy": _plain(world),
               "engine fields": Op(lambda: movement_fields(fields_world),
                                   fingerprint=lambda _: world_motion(fields_world)),
               "numpy fields": _plain_fields(fields_world), "soa": _soa(world)}
        names = {"engine": ("tick", variant, "engine"), "numpy": ("tick", variant, "numpy"),
                 "engine fields": ("tick", variant, "engine per field"),
                 "numpy fields": ("tick", variant, "numpy per field"),
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
