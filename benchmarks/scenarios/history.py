"""History memory for a mostly static world: never-touched colliders plus a few movers.

Every tick moves the movers and records a snapshot. The ideal is one copy of the static
part plus ``snapshots x`` the movers' bytes (every store row of a mover, keys included).
Variant ``stock`` builds colliders from the stock components, as the level loader does
(they share the ``Position`` store with the movers); ``static-store`` gives colliders
their own position component, to show what per-store sharing saves when nothing static
shares a store with something moving.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import numpy as np

from benchmarks.runner import Record, Timing, progress, record
from benchmarks.scenarios import Job, Plan
from ecs_engine import History, World, component
from ecs_engine.components import Collider, Position, Solid, Velocity
from ecs_engine.entity import KEY_DTYPE

NAME = "history"
TITLE = "History memory"
VARIANTS = ("stock", "static-store")
DT = np.float32(1 / 60)


@component(name="StaticPosition")
class StaticPosition:
    """A position that never changes (benchmark-only, for the ``static-store`` variant)."""

    x: np.float32 = 0.0
    y: np.float32 = 0.0


def plan(cfg: Any) -> Plan:
    colliders, movers, snapshots = cfg.history
    for variant in VARIANTS:
        yield Job(NAME, "engine", colliders + movers,
                  {"colliders": colliders, "movers": movers, "snapshots": snapshots,
                   "variant": variant})


def _build(colliders: int, movers: int, variant: str) -> tuple[World, np.ndarray]:
    rng = np.random.default_rng(3)
    world = World(seed=3)
    xy = rng.random((2, colliders), dtype=np.float32) * 1000
    pos_type = Position if variant == "stock" else StaticPosition
    world.spawn_batch(pos_type(x=xy[0], y=xy[1]), Collider(w=1, h=1), Solid())
    mv = rng.random((4, movers), dtype=np.float32)
    keys = world.spawn_batch(Position(x=mv[0] * 1000, y=mv[1] * 1000),
                             Velocity(x=mv[2] - 0.5, y=mv[3] - 0.5), Collider(w=0.8, h=1.6))
    return world, keys


def _move(world: World) -> None:
    with world.query(Position, Velocity, readonly=(Velocity,)) as q:
        pos, vel = q[Position], q[Velocity]
        pos["x"] += vel["x"] * DT
        pos["y"] += vel["y"] * DT


def _rows_bytes(world: World, keys: np.ndarray) -> int:
    """Bytes of every store row (data plus key) that belongs to one of ``keys``."""
    slots = (keys & np.uint64(0xFFFF_FFFF)).astype(np.int64)
    total = 0
    for ctype in world.component_types:
        store = world.store(ctype)
        rows = int(np.count_nonzero(store.rows_of(slots) >= 0))
        total += rows * (store.schema.dtype.itemsize + KEY_DTYPE.itemsize)
    return total


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    colliders, movers, snapshots = params["colliders"], params["movers"], params["snapshots"]
    variant = params["variant"]
    world, mover_keys = _build(colliders, movers, variant)
    _move(world)  # creates the owning group before anything is recorded
    history = History(capacity=snapshots)
    samples = []
    first_bytes = 0
    for i in range(snapshots):
        _move(world)
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        history.record(world)
        samples.append(time.perf_counter() - t0)
        gc.enable()
        if i == 0:
            first_bytes = history.nbytes
        if (i + 1) % max(1, snapshots // 4) == 0:
            progress(f"  history/{variant}: {i + 1}/{snapshots} snapshots, "
                     f"{history.nbytes / 1e6:.1f} MB")
    movers_bytes = _rows_bytes(world, mover_keys)
    full = history.latest.nbytes if history.latest is not None else 0
    static_bytes = full - movers_bytes
    ideal = snapshots * movers_bytes + static_bytes
    # A stricter ideal: the first snapshot whole, then only the bytes each tick changes
    # (the movers' Position rows; _move writes nothing else).
    changed_bytes = len(mover_keys) * world.store(Position).schema.dtype.itemsize
    strict_ideal = first_bytes + (snapshots - 1) * changed_bytes
    return [
        record(NAME, "memory", "engine", n, variant=variant, nbytes=history.nbytes,
               colliders=colliders, movers=movers, snapshots=snapshots,
               movers_bytes=movers_bytes, static_bytes=static_bytes, ideal_bytes=ideal,
               changed_bytes=changed_bytes, strict_ideal_bytes=strict_ideal,
               first_snapshot_bytes=first_bytes,
               per_snapshot_bytes=round((history.nbytes - first_bytes) / max(1, snapshots - 1)),
               ratio_to_ideal=round(history.nbytes / ideal, 3)),
        record(NAME, "record", "engine", n, samples, variant=variant),
    ]


JOBS = {"engine": engine}
