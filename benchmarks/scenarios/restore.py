"""Restore from memory.

``world.restore(snap)`` after the world moved away from ``snap`` (``values``: only data
columns differ and are copied back; ``churn``: everything is), timed interleaved with
``np.copyto`` of the same bytes into preallocated buffers. Both results are fingerprinted:
the restored world must hold exactly the snapshot's bytes. Baselines install a deep copy
(or unpickle) of their state, interleaved with the engine restoring a world holding the
same entities (every array copied back).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import baselines
from benchmarks.fingerprint import (
    arrays_hash,
    snapshot_arrays,
    snapshot_content,
    world_content,
    world_motion,
)
from benchmarks.mix import build_world, touch_everything
from benchmarks.runner import Op, Record, Timing, timed_records
from benchmarks.scenarios import Plan, sized_jobs
from benchmarks.scenarios.snapshot import VARIANTS, Changer, nbytes_of, paired, state_motion
from ecs_engine import Snapshot
from ecs_engine.memcopy import as_bytes

NAME = "restore"
TITLE = "Restore from memory"
CONTENDERS = ("engine", "esper", "tcod-ecs", "dicts")


def plan(cfg: Any) -> Plan:
    yield from sized_jobs(NAME, CONTENDERS, cfg)


def copy_into(arrays: list[np.ndarray]) -> tuple[Callable[[], list[np.ndarray]],
                                                   list[np.ndarray]]:
    """``np.copyto`` of each array into a preallocated buffer (pages touched first)."""
    views = [as_bytes(a) for a in arrays]
    dsts = [v.copy() for v in views]

    def run() -> list[np.ndarray]:
        for d, v in zip(dsts, views, strict=True):
            np.copyto(d, v)
        return dsts

    return run, dsts


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    world, rng = build_world(n)
    out: list[Record] = []
    for variant in VARIANTS:
        change = Changer(world, rng, variant)
        change()
        base = world.snapshot()
        parts = "data" if variant == "values" else "all"
        # what a restore copies back: everything after churn, only the data columns when
        # just the values moved (layout and slot table are unchanged, so they are skipped)
        restored = [a for a in snapshot_arrays(base, parts) if a.nbytes]
        want = snapshot_content(base, parts)
        run, _ = copy_into(restored)
        ops = {"restore": Op(lambda base=base: world.restore(base), change,
                             fingerprint=lambda _, base=base, parts=parts: world_content(
                                 world, parts, base),
                             expect=lambda want=want: want),
               "copyto": Op(run, fingerprint=arrays_hash, expect=lambda want=want: want)}
        names = {"restore": ("restore", variant, "engine"),
                 "copyto": ("restore", variant, "memcpy")}
        out += timed_records(NAME, n, ops, timing, names, dict.fromkeys(ops, nbytes_of(restored)))
        del base
    return out


def _baseline(kind: str) -> Callable[[int, dict[str, Any], Timing], list[Record]]:
    def job(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
        store, twin = paired(kind, n)
        state = store.state()
        blob = baselines.dumps(state)
        base = twin.snapshot()
        engine_blob = base.to_bytes()
        live = lambda _: state_motion(store, store.state())  # noqa: E731
        ops: dict[str, Op] = {
            "restore": Op(lambda: store.install(baselines.deepcopy(state)), fingerprint=live),
            "engine": Op(lambda: twin.restore(base), lambda: touch_everything(twin),
                         fingerprint=lambda _: world_motion(twin)),
            "load_bytes": Op(lambda: store.install(baselines.loads(blob)), fingerprint=live),
            "engine_bytes": Op(lambda: twin.restore(Snapshot.from_bytes(engine_blob)),
                               fingerprint=lambda _: world_motion(twin)),
        }
        names = {"restore": ("restore", "", f"{kind} deepcopy"),
                 "engine": ("restore", f"vs {kind}", "engine"),
                 "load_bytes": ("load_bytes", "", f"{kind} pickle"),
                 "engine_bytes": ("load_bytes", f"vs {kind}", "engine")}
        if kind == "dicts":
            ops["restore_comp"] = Op(lambda: store.install(store.comprehension_copy(state)),
                                     fingerprint=live)
            names["restore_comp"] = ("restore", "", "dicts comprehension")
        return timed_records(NAME, n, ops, timing, names)

    return job


JOBS = {"engine": engine, "esper": _baseline("esper"), "tcod-ecs": _baseline("tcod-ecs"),
        "dicts": _baseline("dicts")}
