"""Bulk spawn: ``spawn_batch`` of N entities with Position and Velocity.

Reference: allocating the same two structured arrays with numpy and filling them from the
same input arrays (timed interleaved). Baselines create their entities one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import baselines
from benchmarks.fingerprint import sums, world_motion
from benchmarks.runner import Op, Record, Timing, timed_records
from benchmarks.scenarios import Plan, sized_jobs
from ecs_engine import World, schema_of
from ecs_engine.components import Position, Velocity

NAME = "spawn"
TITLE = "Bulk spawn"
CONTENDERS = ("engine", "esper", "tcod-ecs", "dicts")


def plan(cfg: Any) -> Plan:
    yield from sized_jobs(NAME, CONTENDERS, cfg)


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    rng = np.random.default_rng(1)
    columns = rng.random((4, n), dtype=np.float32)
    state: dict[str, World] = {}
    pos_dtype, vel_dtype = schema_of(Position).dtype, schema_of(Velocity).dtype

    def fresh() -> None:
        state["world"] = World()

    def spawn() -> np.ndarray:
        return state["world"].spawn_batch(Position(x=columns[0], y=columns[1]),
                                          Velocity(x=columns[2], y=columns[3]))

    def fill() -> tuple[np.ndarray, np.ndarray]:
        pos = np.empty(n, pos_dtype)
        pos["x"] = columns[0]
        pos["y"] = columns[1]
        vel = np.empty(n, vel_dtype)
        vel["x"] = columns[2]
        vel["y"] = columns[3]
        return pos, vel

    ops = {"engine": Op(spawn, fresh, fingerprint=lambda _: world_motion(state["world"])),
           "numpy": Op(fill, fingerprint=lambda r: sums(len(r[0]), r[0]["x"], r[0]["y"], (
               r[0]["x"], r[0]["y"], r[1]["x"], r[1]["y"])))}
    names = {"engine": ("spawn_batch", "", "engine"), "numpy": ("spawn_batch", "", "numpy")}
    return timed_records(NAME, n, ops, timing, names)


def _baseline(kind: str) -> Callable[[int, dict[str, Any], Timing], list[Record]]:
    def job(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
        columns = np.random.default_rng(1).random((4, n), dtype=np.float32).tolist()
        holder: dict[str, Any] = {}

        def fresh() -> None:
            holder["store"] = baselines.BASELINES[kind]()

        store_motion = lambda _: sums(*holder["store"].motion(  # noqa: E731
            holder["store"].state()))
        ops = {"spawn": Op(lambda: holder["store"].spawn_motion(columns), fresh,
                           fingerprint=store_motion)}
        return timed_records(NAME, n, ops, timing, {"spawn": ("spawn_batch", "", kind)})

    return job


JOBS = {"engine": engine, "esper": _baseline("esper"), "tcod-ecs": _baseline("tcod-ecs"),
        "dicts": _baseline("dicts")}
