"""Fingerprints of a contender's final state, so a fast wrong answer cannot win.

Two kinds: ``motion`` is comparable across contenders that store the same entities
differently (esper objects, float32 columns, Python floats, rows in any order): the entity
count, the float64 sums of every position's x and y, and *paired* sums that tie each
entity's value to another of its own (its velocity): ``sum(x * (1 + vx))``. A sum alone
cannot tell which entity got which value, so a tick adding entity j's velocity to entity
i's position, moving half of them, or not moving at all, passed it (at 1M entities the sum
of x is ~5e8, and its relative tolerance ~500, while a tick moves it by ~5); the paired sum
moves by ``dt * sum(vx + vx**2)`` per tick (~1,400 at 1M), and only when each entity moves by
its own velocity. ``content`` (an xxh3 of every byte of the slot table and of each store's
keys and rows) checks that a copy, a restore or a file round trip reproduced the state
exactly.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import xxhash

from benchmarks.runner import Fingerprint
from ecs_engine import Snapshot, World
from ecs_engine.components import Position, Velocity
from ecs_engine.memcopy import as_bytes

Values = Iterable[float] | np.ndarray
Paired = tuple[Values, Values, Values, Values]
"""``(a, b, wa, wb)``: values of some entities and, entity by entity, a companion value of
each (x, y and vx, vy of the entities that have both a position and a velocity)."""


def _f64(values: Values) -> np.ndarray:
    return np.asarray(values, np.float64) if not isinstance(values, np.ndarray) else \
        values.astype(np.float64, copy=False)


def sums(count: int, x: Values, y: Values, paired: Paired | None = None) -> Fingerprint:
    """``("motion", count, sum x, sum y)`` with float64 sums, and with ``paired``
    ``(len, sum a * (1 + wa), sum b * (1 + wb))`` (see the module doc)."""
    out: tuple[object, ...] = ("motion", int(count), float(np.sum(_f64(x))),
                               float(np.sum(_f64(y))))
    if paired is not None:
        a, b, wa, wb = (_f64(v) for v in paired)
        out += (len(a), float(np.sum(a * (1.0 + wa))), float(np.sum(b * (1.0 + wb))))
    return out


def world_motion(world: World) -> Fingerprint:
    pos = world.store(Position).live()
    if Velocity not in world._stores:
        return sums(len(pos), pos["x"], pos["y"])
    with world.query(Position, Velocity, readonly=(Position, Velocity)) as q:
        p, v = q[Position], q[Velocity]
        return sums(len(pos), pos["x"], pos["y"], (p["x"], p["y"], v["x"], v["y"]))


def snapshot_motion(snap: Snapshot) -> Fingerprint:
    ps = snap.store(Position.__name__)
    pos = ps.data
    try:
        vs = snap.store(Velocity.__name__)
    except KeyError:
        return sums(len(pos), pos["x"], pos["y"])
    _, at_p, at_v = np.intersect1d(ps.entities, vs.entities, assume_unique=True,
                                   return_indices=True)
    p, v = pos[at_p], vs.data[at_v]
    return sums(len(pos), pos["x"], pos["y"], (p["x"], p["y"], v["x"], v["y"]))


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
