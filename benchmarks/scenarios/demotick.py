"""The demo's default level, one simulation tick (target: <= 0.4 ms per tick).

The shipped ``demo`` level (about 70 entities, 13 systems, some 20 queries a tick) is
where per-call costs decide: almost none of the time is arithmetic. A timed call runs
``TICKS`` ticks with no input; records carry ``per_tick_ms``. The fingerprint is the
player's and every body's position sums after the last tick, which must equal those of
a second game stepped the same number of ticks (the demo is deterministic).
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks.fingerprint import world_motion
from benchmarks.runner import Op, Record, Timing, timed_records
from benchmarks.scenarios import Job, Plan

NAME = "demotick"
TITLE = "Demo default level tick"
TICKS = 50
DT = 1 / 60


def plan(cfg: Any) -> Plan:
    yield Job(NAME, "engine", 0)


def job(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    os.environ.setdefault("ARCADE_HEADLESS", "1")
    from ecs_engine.demo.game import Game

    game = Game("demo", history_seconds=DT, save_dir=os.devnull)
    twin = Game("demo", history_seconds=DT, save_dir=os.devnull)
    world, other = game.world, twin.world
    steps = {"count": 0}

    def run() -> Any:
        for _ in range(TICKS):
            world.step(DT)
        steps["count"] += TICKS
        return world

    def expect() -> Any:
        while other.tick < world.tick:
            other.step(DT)
        return world_motion(other)

    ops = {"tick": Op(run, fingerprint=world_motion, expect=expect)}
    out = timed_records(NAME, len(world), ops, timing, {"tick": ("demo_tick", "", "engine")})
    for r in out:
        r["ticks"] = TICKS
        r["entities"] = len(world)
        r["systems"] = len(world.systems)
        if "median_s" in r:
            r["per_tick_ms"] = round(r["median_s"] / TICKS * 1e3, 4)
    return out


JOBS = {"engine": job}
