"""Snapshot to memory and round trips through bytes.

Engine ops are timed interleaved with the memcpy ceiling for exactly the bytes they copy,
read from the same live arrays: a snapshot against allocate-and-copy (``src.copy()`` of
byte views). Variants: ``values`` (new values in every column between repetitions: the
layout may be shared, the data may not), ``churn`` (also 1% of entities despawned and
respawned: every array must be copied) and ``history`` (every array copied, the way a game
keeps them: a :class:`History` of 4 snapshots evicting the oldest, against one-piece
copies kept and dropped the same way). Every result is fingerprinted: the snapshot must
hold exactly the bytes of the world it was taken from.

Baselines deep-copy and pickle their state interleaved with the engine's
``world.snapshot()`` (every array copied) on a world holding the same entities.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import baselines
from benchmarks.fingerprint import (
    arrays_hash,
    snapshot_content,
    snapshot_motion,
    sums,
    world_arrays,
    world_content,
)
from benchmarks.mix import build_world, churn, mutate_values, touch_everything, twin_world
from benchmarks.runner import Op, Record, Timing, progress, timed_records
from benchmarks.scenarios import Plan, sized_jobs
from ecs_engine import History, Snapshot, World
from ecs_engine.memcopy import as_bytes

NAME = "snapshot"
TITLE = "Snapshot and bytes"
CONTENDERS = ("engine", "esper", "tcod-ecs", "dicts")
VARIANTS = ("values", "churn")
RING = 4  # snapshots a History keeps in the ``history`` variant


def plan(cfg: Any) -> Plan:
    yield from sized_jobs(NAME, CONTENDERS, cfg, required=(("esper", 100_000),))  # target 5


def alloc_copy(arrays: list[np.ndarray] | Callable[[], list[np.ndarray]]
               ) -> Callable[[], list[np.ndarray]]:
    """Allocate and copy each array (the memcpy ceiling of a snapshot); ``arrays`` may be
    a function giving the current ones (live views move when the world churns)."""
    if callable(arrays):
        source = arrays
        return lambda: [as_bytes(a).copy() for a in source()]
    views = [as_bytes(a) for a in arrays]
    return lambda: [v.copy() for v in views]


def nbytes_of(arrays: list[np.ndarray]) -> int:
    return sum(a.nbytes for a in arrays)


class Changer:
    """The untimed step between repetitions: new values (and churn) everywhere."""

    def __init__(self, world: World, rng: np.random.Generator, variant: str) -> None:
        self.world, self.rng, self.variant, self.step = world, rng, variant, 0

    def __call__(self) -> None:
        self.step += 1
        if self.variant != "values":
            churn(self.world, self.rng, 0.01)
        mutate_values(self.world, self.step)


def _parts(variant: str) -> str:
    return "data" if variant == "values" else "all"


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    world, rng = build_world(n)
    out: list[Record] = []
    for variant in VARIANTS:
        change = Changer(world, rng, variant)
        change()
        probe = world.snapshot()
        parts = _parts(variant)
        total = nbytes_of(world_arrays(world, parts, like=probe))  # no views kept: a
        # store with outstanding views counts as changed at every snapshot

        def live(parts: str = parts, probe: Snapshot = probe) -> list[np.ndarray]:
            return world_arrays(world, parts, like=probe)

        progress(f"  snapshot/{variant}: engine copies {total / 1e6:.1f} MB")
        ops = {
            "snap": Op(world.snapshot, change,
                       fingerprint=lambda s, parts=parts: snapshot_content(s, parts),
                       expect=lambda parts=parts: world_content(world, parts,
                                                                world.snapshot())),
            "alloc": Op(alloc_copy(live), fingerprint=arrays_hash,
                        expect=lambda parts=parts: world_content(world, parts,
                                                                 world.snapshot())),
        }
        names = {"snap": ("snapshot", variant, "engine"),
                 "alloc": ("snapshot", variant, "memcpy")}
        out += timed_records(NAME, n, ops, timing, names, dict.fromkeys(ops, total))
    out += _ring(world, rng, n, timing)
    out += _bytes(world, rng, n, timing)
    return out


def _ring(world: World, rng: np.random.Generator, n: int, timing: Timing) -> list[Record]:
    """Snapshots kept and dropped as a game keeps them (a History evicting the oldest)."""
    change = Changer(world, rng, "history")
    change()
    probe = world.snapshot()
    total = nbytes_of(world_arrays(world, "all", like=probe))
    history = History(capacity=RING)
    ring: deque[np.ndarray] = deque(maxlen=RING)

    def one_piece() -> np.ndarray:
        sources = world_arrays(world, "all", like=probe)
        buf = np.empty(nbytes_of(sources), np.uint8)
        at = 0
        for a in sources:
            b = as_bytes(a)
            buf[at : at + b.size] = b
            at += b.size
        ring.append(buf)
        return buf

    def expect() -> Any:
        return world_content(world, "all", world.snapshot())

    ops = {"record": Op(lambda: history.record(world), change,
                        fingerprint=lambda s: snapshot_content(s, "all"), expect=expect),
           "alloc": Op(one_piece, fingerprint=lambda b: arrays_hash([b]), expect=expect)}
    names = {"record": ("snapshot", "history", "engine"),
             "alloc": ("snapshot", "history", "memcpy")}
    return timed_records(NAME, n, ops, timing, names, dict.fromkeys(ops, total))


def _bytes(world: World, rng: np.random.Generator, n: int, timing: Timing) -> list[Record]:
    change = Changer(world, rng, "churn")
    change()
    snap = world.snapshot()
    blob = snap.to_bytes()
    blob_state = snapshot_content(snap, "state")
    full = [a for a in snap.arrays() if a.nbytes]
    full_hash = arrays_hash(full)
    holder: dict[str, Snapshot] = {}

    def fresh_snapshot() -> None:
        change()
        holder["snap"] = world.snapshot()

    def decoded(data: Any) -> Any:
        return snapshot_content(Snapshot.from_bytes(data), "state")

    ops = {
        "to_bytes": Op(lambda: holder["snap"].to_bytes(), fresh_snapshot, fingerprint=decoded,
                       expect=lambda: snapshot_content(holder["snap"], "state")),
        "from_bytes": Op(lambda: Snapshot.from_bytes(blob),
                         fingerprint=lambda s: snapshot_content(s, "state"),
                         expect=lambda: blob_state),
        "save_bytes": Op(lambda: world.snapshot().to_bytes(), change, fingerprint=decoded,
                         expect=lambda: world_content(world, "state")),
        "load_bytes": Op(lambda: world.restore(Snapshot.from_bytes(blob)), change,
                         fingerprint=lambda _: world_content(world, "state"),
                         expect=lambda: blob_state),
        "alloc": Op(alloc_copy(full), fingerprint=arrays_hash, expect=lambda: full_hash),
    }
    names = {"to_bytes": ("to_bytes", "churn", "engine"),
             "from_bytes": ("from_bytes", "churn", "engine"),
             "save_bytes": ("save_bytes", "churn", "engine"),
             "load_bytes": ("load_bytes", "churn", "engine"),
             "alloc": ("bytes_memcpy", "churn", "memcpy")}
    sizes = dict.fromkeys(ops, nbytes_of(full))
    sizes["to_bytes"] = sizes["from_bytes"] = len(blob)
    return timed_records(NAME, n, ops, timing, names, sizes)


def paired(kind: str, n: int) -> tuple[Any, World]:
    """A baseline holding the mix and an engine world holding the same entities."""
    store = baselines.BASELINES[kind]()
    store.spawn(n, np.random.default_rng(1))
    return store, twin_world(baselines._plan_columns(n, 1))


def state_motion(store: Any, state: Any) -> Any:
    return sums(*store.motion(state))


def _baseline(kind: str) -> Callable[[int, dict[str, Any], Timing], list[Record]]:
    def job(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
        store, twin = paired(kind, n)
        touch = lambda: touch_everything(twin)  # noqa: E731  every array copied
        ops: dict[str, Op] = {
            "snapshot": Op(lambda: baselines.deepcopy(store.state()),
                           fingerprint=lambda s: state_motion(store, s)),
            "engine": Op(twin.snapshot, touch, fingerprint=snapshot_motion),
            "save_bytes": Op(lambda: baselines.dumps(store.state()),
                             fingerprint=lambda b: state_motion(store, baselines.loads(b))),
            "engine_bytes": Op(lambda: twin.snapshot().to_bytes(), touch,
                               fingerprint=lambda b: snapshot_motion(Snapshot.from_bytes(b))),
        }
        names = {"snapshot": ("snapshot", "", f"{kind} deepcopy"),
                 "engine": ("snapshot", f"vs {kind}", "engine"),
                 "save_bytes": ("save_bytes", "", f"{kind} pickle"),
                 "engine_bytes": ("save_bytes", f"vs {kind}", "engine")}
        if kind == "dicts":
            ops["snap_comp"] = Op(lambda: store.comprehension_copy(store.state()),
                                  fingerprint=lambda s: state_motion(store, s))
            names["snap_comp"] = ("snapshot", "", "dicts comprehension")
        return timed_records(NAME, n, ops, timing, names)

    return job


JOBS = {"engine": engine, "esper": _baseline("esper"), "tcod-ecs": _baseline("tcod-ecs"),
        "dicts": _baseline("dicts")}
