"""Snapshot to memory, restore, and round trips through bytes and through a file.

Engine ops are timed interleaved with the memcpy ceiling for exactly the bytes they copy:
a snapshot against allocate-and-copy (``src.copy()`` of byte views), a restore against
``np.copyto`` into preallocated buffers. Two variants: ``values`` (new values in every
column between repetitions: the layout may be shared, the data may not) and ``churn``
(also 1% of entities despawned and respawned: every array must be copied).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import baselines
from benchmarks.mix import build_world, churn, mutate_values
from benchmarks.runner import Op, Record, Timing, progress, record, timed_records
from benchmarks.scenarios import Plan, sized_jobs
from ecs_engine import Snapshot, World
from ecs_engine.memcopy import as_bytes

NAME = "snapshot"
TITLE = "Snapshot, restore, save and load"
CONTENDERS = ("engine", "esper", "tcod-ecs", "dicts")
VARIANTS = ("values", "churn")


def plan(cfg: Any) -> Plan:
    yield from sized_jobs(NAME, CONTENDERS, cfg, required=(("esper", 100_000),))  # target 5


def _copied(new: Snapshot, old: Snapshot) -> list[np.ndarray]:
    """Arrays of ``new`` that are not shared with ``old`` (what the snapshot copied)."""
    held = {id(a) for a in old.arrays()}
    return [a for a in new.arrays() if id(a) not in held and a.nbytes]


def _alloc_copy(arrays: list[np.ndarray]) -> Callable[[], list[np.ndarray]]:
    views = [as_bytes(a) for a in arrays]
    return lambda: [v.copy() for v in views]


def _copy_into(arrays: list[np.ndarray]) -> Callable[[], None]:
    views = [as_bytes(a) for a in arrays]
    dsts = [np.empty_like(v) for v in views]
    for d, v in zip(dsts, views, strict=True):  # touch every page before timing
        np.copyto(d, v)

    def run() -> None:
        for d, v in zip(dsts, views, strict=True):
            np.copyto(d, v)

    return run


class _Changer:
    """The untimed step between repetitions: new values (and churn) everywhere."""

    def __init__(self, world: World, rng: np.random.Generator, variant: str) -> None:
        self.world, self.rng, self.variant, self.step = world, rng, variant, 0

    def __call__(self) -> None:
        self.step += 1
        if self.variant == "churn":
            churn(self.world, self.rng, 0.01)
        mutate_values(self.world, self.step)


def _nbytes(arrays: list[np.ndarray]) -> int:
    return sum(a.nbytes for a in arrays)


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    world, rng = build_world(n)
    out: list[Record] = []
    for variant in VARIANTS:
        change = _Changer(world, rng, variant)
        change()
        first = world.snapshot()
        change()
        probe = world.snapshot()
        copied = _copied(probe, first)
        del first
        progress(f"  snapshot/{variant}: engine copies {_nbytes(copied) / 1e6:.1f} MB "
                 f"in {len(copied)} arrays")
        ops = {
            "snap": Op(world.snapshot, change),
            "alloc": Op(_alloc_copy(copied)),
        }
        names = {"snap": ("snapshot", variant, "engine"),
                 "alloc": ("snapshot", variant, "memcpy")}
        sizes = dict.fromkeys(ops, _nbytes(copied))
        out += timed_records(NAME, n, ops, timing, names, sizes)
        # restore: the world moves away from `base` before every call
        base = world.snapshot()
        # what a restore copies back: everything after churn, only the data columns when
        # just the values moved (layout and slot table are unchanged, so they are skipped)
        restored = ([a for a in base.arrays() if a.nbytes] if variant == "churn"
                    else [s.data for s in base.stores if s.data.nbytes])
        ops = {"restore": Op(lambda base=base: world.restore(base), change),
               "copyto": Op(_copy_into(restored))}
        names = {"restore": ("restore", variant, "engine"),
                 "copyto": ("restore", variant, "memcpy")}
        sizes = dict.fromkeys(ops, _nbytes(restored))
        out += timed_records(NAME, n, ops, timing, names, sizes)
        del base
    out += _engine_bytes_and_files(world, rng, n, timing)
    return out


def _engine_bytes_and_files(world: World, rng: np.random.Generator, n: int,
                            timing: Timing) -> list[Record]:
    change = _Changer(world, rng, "churn")
    change()
    snap = world.snapshot()
    try:
        blob = snap.to_bytes()
    except (ImportError, AttributeError, NotImplementedError) as exc:
        note = f"skipped: save files not available ({type(exc).__name__}: {exc})"
        progress(f"  {note}")
        return [record(NAME, op, "engine", n, status="skipped", note=note)
                for op in ("to_bytes", "from_bytes", "save_bytes", "load_bytes",
                           "save_file", "load_file")]
    full = [a for a in snap.arrays() if a.nbytes]
    total = _nbytes(full)
    holder: dict[str, Snapshot] = {}

    def fresh_snapshot() -> None:
        change()
        holder["snap"] = world.snapshot()

    ops = {
        "to_bytes": Op(lambda: holder["snap"].to_bytes(), fresh_snapshot),
        "from_bytes": Op(lambda: Snapshot.from_bytes(blob)),
        "save_bytes": Op(lambda: world.snapshot().to_bytes(), change),
        "load_bytes": Op(lambda: world.restore(Snapshot.from_bytes(blob)), change),
        "alloc": Op(_alloc_copy(full)),
    }
    names = {"to_bytes": ("to_bytes", "churn", "engine"),
             "from_bytes": ("from_bytes", "churn", "engine"),
             "save_bytes": ("save_bytes", "churn", "engine"),
             "load_bytes": ("load_bytes", "churn", "engine"),
             "alloc": ("bytes_memcpy", "churn", "memcpy")}
    sizes = dict.fromkeys(ops, total)
    sizes["to_bytes"] = sizes["from_bytes"] = len(blob)
    out = timed_records(NAME, n, ops, timing, names, sizes)
    with tempfile.TemporaryDirectory(prefix="ecs-bench-") as tmp:
        path = Path(tmp) / "world.sav"
        raw = Path(tmp) / "raw.bin"
        world.save(path)
        _raw_write(raw, full)
        readers = [np.empty_like(as_bytes(a)) for a in full]
        ops = {
            "save": Op(lambda: world.save(path), change),
            "load": Op(lambda: world.load(path), change),
            "raw_write": Op(lambda: _raw_write(raw, full)),
            "raw_read": Op(lambda: _raw_read(raw, readers)),
        }
        names = {"save": ("save_file", "churn", "engine"),
                 "load": ("load_file", "churn", "engine"),
                 "raw_write": ("save_file", "churn", "raw file"),
                 "raw_read": ("load_file", "churn", "raw file")}
        sizes = dict.fromkeys(ops, total)
        sizes["save"] = sizes["load"] = path.stat().st_size
        out += timed_records(NAME, n, ops, timing, names, sizes)
    return out


def _raw_write(path: Path, arrays: list[np.ndarray]) -> None:
    """The file ceiling: the same bytes written as the engine saves (temp, fsync, rename)."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        for a in arrays:
            f.write(memoryview(as_bytes(a)))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _raw_read(path: Path, buffers: list[np.ndarray]) -> None:
    with open(path, "rb") as f:
        for b in buffers:
            f.readinto(memoryview(b))


def _atomic_pickle(path: Path, state: Any) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(baselines.dumps(state))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _baseline(kind: str) -> Callable[[int, dict[str, Any], Timing], list[Record]]:
    def job(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
        store = baselines.BASELINES[kind]()
        store.spawn(n, np.random.default_rng(1))
        state = store.state()
        copy_fn = baselines.deepcopy
        blob = baselines.dumps(state)
        ops: dict[str, Op] = {
            "snapshot": Op(lambda: copy_fn(store.state())),
            "restore": Op(lambda: store.install(copy_fn(state))),
            "save_bytes": Op(lambda: baselines.dumps(store.state())),
            "load_bytes": Op(lambda: store.install(baselines.loads(blob))),
        }
        names = {"snapshot": ("snapshot", "", f"{kind} deepcopy"),
                 "restore": ("restore", "", f"{kind} deepcopy"),
                 "save_bytes": ("save_bytes", "", f"{kind} pickle"),
                 "load_bytes": ("load_bytes", "", f"{kind} pickle")}
        if kind == "dicts":
            ops["snap_comp"] = Op(lambda: store.comprehension_copy(store.state()))
            ops["restore_comp"] = Op(lambda: store.install(store.comprehension_copy(state)))
            names["snap_comp"] = ("snapshot", "", "dicts comprehension")
            names["restore_comp"] = ("restore", "", "dicts comprehension")
        with tempfile.TemporaryDirectory(prefix="ecs-bench-") as tmp:
            path = Path(tmp) / "world.pickle"
            _atomic_pickle(path, state)

            def load() -> None:
                with open(path, "rb") as f:
                    store.install(baselines.loads(f.read()))

            ops["save_file"] = Op(lambda: _atomic_pickle(path, store.state()))
            ops["load_file"] = Op(load)
            names["save_file"] = ("save_file", "", f"{kind} pickle")
            names["load_file"] = ("load_file", "", f"{kind} pickle")
            sizes: dict[str, int | None] = {k: len(blob) for k in ops}
            return timed_records(NAME, n, ops, timing, names, sizes)

    return job


JOBS = {"engine": engine, "esper": _baseline("esper"), "tcod-ecs": _baseline("tcod-ecs"),
        "dicts": _baseline("dicts")}
