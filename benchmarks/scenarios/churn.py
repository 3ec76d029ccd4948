"""Spawn/despawn churn per tick: 1% of the entities despawned and as many spawned.

Every contender despawns the same share of random live entities and spawns the same mix
(position and velocity, health on half, a reference on a tenth) in one tick. Victims are
picked untimed before each tick.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import baselines
from benchmarks.mix import build_world, spawn_mix
from benchmarks.runner import Op, Record, Timing, timed_records
from benchmarks.scenarios import Job, Plan

NAME = "churn"
TITLE = "Spawn/despawn churn per tick"
CONTENDERS = ("engine", "esper", "tcod-ecs", "dicts")


def plan(cfg: Any) -> Plan:
    for name in CONTENDERS:
        yield Job(NAME, name, cfg.churn_n, {"fraction": cfg.churn_fraction})


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    world, rng = build_world(n)
    count = max(1, int(n * params["fraction"]))
    picked: dict[str, np.ndarray] = {}

    def pick() -> None:
        keys = world.entities()
        picked["doomed"] = rng.choice(keys, count, replace=False)
        picked["pool"] = keys[:: max(1, len(keys) // 1000)]

    def tick() -> np.ndarray:
        world.despawn_batch(picked["doomed"])
        return spawn_mix(world, count, rng, targets=picked["pool"])

    ops = {"tick": Op(tick, pick)}
    return timed_records(NAME, n, ops, timing, {"tick": ("churn_tick", "", "engine")})


def _baseline(kind: str) -> Callable[[int, dict[str, Any], Timing], list[Record]]:
    def job(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
        rng = np.random.default_rng(1)
        store = baselines.BASELINES[kind]()
        store.spawn(n, rng)
        count = max(1, int(n * params["fraction"]))
        picked: dict[str, list[Any]] = {}

        def pick() -> None:
            ids = store.ids()
            chosen = rng.choice(len(ids), count, replace=False)
            picked["doomed"] = [ids[i] for i in chosen]
            picked["pool"] = ids[:: max(1, len(ids) // 1000)]

        def tick() -> list[Any]:
            store.despawn(picked["doomed"])
            return store.spawn(count, rng, picked["pool"])

        ops = {"tick": Op(tick, pick)}
        return timed_records(NAME, n, ops, timing, {"tick": ("churn_tick", "", kind)})

    return job


JOBS = {"engine": engine, "esper": _baseline("esper"), "tcod-ecs": _baseline("tcod-ecs"),
        "dicts": _baseline("dicts")}
