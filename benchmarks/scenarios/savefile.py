"""Save files: ``world.save`` and loading, against the same bytes through the OS.

Engine ops are timed interleaved with writing the save file's own bytes with
``ndarray.tofile`` + fsync + rename (the atomic-write ceiling), reading them with
``np.fromfile``, and an atomic pickle of the world's columns (a dict of arrays) written
and read the same way. Loads: into a fresh ``World`` (``World().load``) and into a live
world that moved away from the saved state. Saves and loads are timed as two groups
(each interleaved within itself): a load timed right after an fsync'ing save measured the
disk's writeback of that save as much as the load. Every contender's result is
fingerprinted: a
file must read back as the state it was written from, a load must reproduce the file's.
Baselines pickle their state to a file, interleaved with the engine saving and loading a
world holding the same entities.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import baselines
from benchmarks.fingerprint import (
    arrays_hash,
    snapshot_content,
    snapshot_motion,
    world_arrays,
    world_content,
    world_motion,
)
from benchmarks.mix import MIX_TYPES, build_world
from benchmarks.runner import Op, Record, Timing, timed_records
from benchmarks.scenarios import Plan, sized_jobs
from benchmarks.scenarios.snapshot import Changer, paired, state_motion
from ecs_engine import Snapshot, World

NAME = "savefile"
TITLE = "Save files"
CONTENDERS = ("engine", "esper", "tcod-ecs", "dicts")


def plan(cfg: Any) -> Plan:
    yield from sized_jobs(NAME, CONTENDERS, cfg)


def atomic_write(path: Path, write: Callable[[Any], None]) -> None:
    """``write(file)`` into a temp file, flush, fsync, rename over ``path`` (as a save does)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def fresh_load(path: Path) -> World:
    world = World()
    world.register(*MIX_TYPES)
    world.load(path)
    return world


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    world, rng = build_world(n)
    change = Changer(world, rng, "churn")
    change()
    with tempfile.TemporaryDirectory(prefix="ecs-bench-") as tmp:
        out_path, in_path = Path(tmp) / "out.sav", Path(tmp) / "in.sav"
        raw_out, raw_in = Path(tmp) / "raw-out.bin", Path(tmp) / "raw-in.bin"
        pickle_out, pickle_in = Path(tmp) / "out.pickle", Path(tmp) / "in.pickle"
        world.save(in_path)
        saved = world_content(world, "state")
        file_bytes = np.fromfile(in_path, np.uint8)
        file_hash = arrays_hash([file_bytes])
        atomic_write(raw_in, file_bytes.tofile)
        columns = {str(i): a.copy() for i, a in enumerate(world_arrays(world, "state"))}
        atomic_write(pickle_in, lambda f: pickle.dump(columns, f, baselines.PICKLE))
        change()  # the live world moves away from the saved state

        def read_pickle(path: Path) -> dict[str, np.ndarray]:
            with open(path, "rb") as f:
                loaded: dict[str, np.ndarray] = pickle.load(f)
            return loaded

        def pickle_hash(d: dict[str, np.ndarray]) -> Any:
            return arrays_hash([d[k] for k in sorted(d, key=int)])

        ops = {
            "save": Op(lambda: world.save(out_path), change,
                       fingerprint=lambda _: snapshot_content(Snapshot.load(out_path)),
                       expect=lambda: world_content(world, "state")),
            "tofile": Op(lambda: atomic_write(raw_out, file_bytes.tofile),
                         fingerprint=lambda _: arrays_hash([np.fromfile(raw_out, np.uint8)]),
                         expect=lambda: file_hash),
            "pickle_save": Op(lambda: atomic_write(pickle_out, lambda f: pickle.dump(
                                  columns, f, baselines.PICKLE)),
                              fingerprint=lambda _: pickle_hash(read_pickle(pickle_out)),
                              expect=lambda: saved),
            "load_fresh": Op(lambda: fresh_load(in_path),
                             fingerprint=lambda w: world_content(w, "state"),
                             expect=lambda: saved),
            "load_live": Op(lambda: world.load(in_path), change,
                            fingerprint=lambda _: world_content(world, "state"),
                            expect=lambda: saved),
            "fromfile": Op(lambda: np.fromfile(raw_in, np.uint8),
                           fingerprint=lambda b: arrays_hash([b]), expect=lambda: file_hash),
            "pickle_load": Op(lambda: read_pickle(pickle_in), fingerprint=pickle_hash,
                              expect=lambda: saved),
        }
        names = {"save": ("save_file", "churn", "engine"),
                 "tofile": ("save_file", "churn", "tofile"),
                 "pickle_save": ("save_file", "churn", "pickle columns"),
                 "load_fresh": ("load_file", "fresh world", "engine"),
                 "load_live": ("load_file", "live world", "engine"),
                 "fromfile": ("load_file", "churn", "fromfile"),
                 "pickle_load": ("load_file", "churn", "pickle columns")}
        sizes: dict[str, int | None] = dict.fromkeys(ops, len(file_bytes))
        sizes["pickle_save"] = sizes["pickle_load"] = pickle_in.stat().st_size
        saves = ("save", "tofile", "pickle_save")
        out: list[Record] = []
        for group in (saves, tuple(k for k in ops if k not in saves)):
            out += timed_records(NAME, n, {k: ops[k] for k in group}, timing, names, sizes)
        return out


def _baseline(kind: str) -> Callable[[int, dict[str, Any], Timing], list[Record]]:
    def job(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
        store, twin = paired(kind, n)
        with tempfile.TemporaryDirectory(prefix="ecs-bench-") as tmp:
            path, engine_path = Path(tmp) / "world.pickle", Path(tmp) / "world.sav"
            atomic_write(path, lambda f: f.write(baselines.dumps(store.state())))
            twin.save(engine_path)

            def load() -> None:
                with open(path, "rb") as f:
                    store.install(baselines.loads(f.read()))

            def file_motion(_: Any) -> Any:
                with open(path, "rb") as f:
                    return state_motion(store, baselines.loads(f.read()))

            ops = {
                "save": Op(lambda: atomic_write(path, lambda f: f.write(
                    baselines.dumps(store.state()))), fingerprint=file_motion),
                "engine_save": Op(lambda: twin.save(engine_path),
                                  fingerprint=lambda _: snapshot_motion(
                                      Snapshot.load(engine_path))),
                "load": Op(load, fingerprint=lambda _: state_motion(store, store.state())),
                "engine_load": Op(lambda: twin.load(engine_path),
                                  fingerprint=lambda _: world_motion(twin)),
            }
            names = {"save": ("save_file", "", f"{kind} pickle"),
                     "engine_save": ("save_file", f"vs {kind}", "engine"),
                     "load": ("load_file", "", f"{kind} pickle"),
                     "engine_load": ("load_file", f"vs {kind}", "engine")}
            sizes: dict[str, int | None] = {"save": path.stat().st_size,
                                            "load": path.stat().st_size,
                                            "engine_save": engine_path.stat().st_size,
                                            "engine_load": engine_path.stat().st_size}
            return timed_records(NAME, n, ops, timing, names, sizes)

    return job


JOBS = {"engine": engine, "esper": _baseline("esper"), "tcod-ecs": _baseline("tcod-ecs"),
        "dicts": _baseline("dicts")}
