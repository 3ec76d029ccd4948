"""Fingerprints of a contender's final state, so a fast wrong answer cannot win.

Two kinds: ``motion`` (entity count and the float64 sums of every position's x and y) is
comparable across contenders that store the same entities differently (esper objects,
float32 columns, Python floats); ``content`` (an xxh3 of every byte of the slot table and
of each store's keys and rows) checks that a copy, a restore or a file round trip
reproduced the state exactly.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import xxhash

from benchmarks.runner import Fingerprint
from ecs_engine import Snapshot, World
from ecs_engine.components import Position
from ecs_engine.memcopy import as_bytes


def sums(count: int, x: Iterable[float] | np.ndarray, y: Iterable[float] | np.ndarray
         ) -> Fingerprint:
    """``("motion", count, sum x, sum y)`` with float64 sums."""
    xs = np.asarray(x, np.float64) if not isinstance(x, np.ndarray) else x
    ys = np.asarray(y, np.float64) if not isinstance(y, np.ndarray) else y
    return ("motion", int(count), float(np.sum(xs, dtype=np.float64)),
            float(np.sum(ys, dtype=np.float64)))


def world_motion(world: World) -> Fingerprint:
    pos = world.store(Position).live()
    return sums(len(pos), pos["x"], pos["y"])


def snapshot_motion(snap: Snapshot) -> Fingerprint:
    pos = snap.store(Position.__name__).data
    return sums(len(pos), pos["x"], pos["y"])


def arrays_hash(arrays: Iterable[np.ndarray]) -> Fingerprint:
    """``("bytes", total, xxh3)`` over the arrays' bytes, one stream (chunking-blind)."""
    h = xxhash.xxh3_64()
    total = 0
    for a in arrays:
        if a.nbytes:
            b = as_bytes(np.ascontiguousarray(a))
            h.update(b)
            total += b.size
    return ("bytes", total, h.intdigest())


PARTS = ("data", "state", "all")
"""``data``: each store's rows; ``state``: the slot table, then each store's rows and keys
(what a save file holds); ``all``: also the slot indexes a snapshot keeps."""


def world_arrays(world: World, parts: str = "state", like: Snapshot | None = None
                 ) -> list[np.ndarray]:
    """The live arrays a snapshot of ``world`` holds, in :meth:`Snapshot.arrays` order
    (data chunks as one array). With ``parts="all"``, a store's slot index is included
    where ``like`` (a snapshot) kept one."""
    slots = world._slots
    # Stores by name, the order save files use (and snapshot_arrays lists them in).
    stores = sorted(world._stores.values(), key=lambda s: s.schema.name)
    if parts == "data":
        return [s.data[: s.n] for s in stores]
    hw = slots.high_water
    out = [slots.generations[:hw], slots.alive[:hw], slots.free[: slots.n_free]]
    kept = ({s.name for s in like.stores if s.sparse is not None}
            if like is not None and parts == "all" else set())
    for s in stores:
        out += [s.data[: s.n], s.entities[: s.n]]
        if s.schema.name in kept:
            out.append(s.sparse[:hw])
    return out


def snapshot_arrays(snap: Snapshot, parts: str = "state") -> list[np.ndarray]:
    """The snapshot's arrays in the order :func:`world_arrays` lists the live ones."""
    stores = sorted(snap.stores, key=lambda s: s.name)  # file order, whatever the source
    if parts == "data":
        return [s.data for s in stores]
    out = [snap.slots.generations, snap.slots.alive, snap.slots.free]
    for s in stores:
        out += [s.data, s.entities]
        if s.sparse is not None and parts == "all":
            out.append(s.sparse)
    return out


def world_content(world: World, parts: str = "state", like: Snapshot | None = None
                  ) -> Fingerprint:
    return arrays_hash(world_arrays(world, parts, like))


def snapshot_content(snap: Snapshot, parts: str = "state") -> Fingerprint:
    return arrays_hash(snapshot_arrays(snap, parts))
