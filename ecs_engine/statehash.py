"""A canonical digest of a world's state, at memory speed.

The digest covers everything a replay depends on: the slot table (generations, alive flags,
free-list order), every non-empty store's keys and rows in row order, owning groups,
resources, tick and rng state. Stores are taken in name order and framed with their
lengths and schemas, so the digest does not depend on the order components were
registered (nor on which empty stores exist; dicts and groups keep their order, which a
replay can observe), and two different states cannot be spliced
into the same byte stream. Row data is hashed straight from the store buffers (component
dtypes are packed, so there are no padding bytes): no copy of the columns is made.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np
import xxhash

from ecs_engine.memcopy import as_bytes
from ecs_engine.savevalues import checked_tick, to_wire, wire_dtype

if TYPE_CHECKING:
    from ecs_engine.storage import ComponentStore
    from ecs_engine.world import World

__all__ = ["STATE_HASH_VERSION", "canonical_value", "state_hash"]

STATE_HASH_VERSION = 1  # bump when the byte stream below changes
_TAG = b"ecs_engine state hash v%d\n" % STATE_HASH_VERSION
_LITTLE = np.little_endian


def canonical_value(value: Any, where: str) -> bytes:
    """msgpack bytes of a save-file value (resources, rng state), as a save file holds it.

    Dict order is kept: iterating a dict is observable, so a replay may depend on it (a
    save file keeps it too)."""
    return msgpack.packb(to_wire(value, where), use_bin_type=True)


def _schema_bytes(store: ComponentStore) -> bytes:
    """Field names, little-endian dtype strings and shapes of a store, once per schema."""
    cached = store.__dict__.get("_state_hash_schema")
    if cached is None:
        dtype = store.data.dtype
        parts = [store.schema.name]
        for name in dtype.names or ():
            fdt = dtype.fields[name][0]  # type: ignore[index]
            base, shape = fdt.subdtype if fdt.subdtype is not None else (fdt, ())
            parts.append(f"{name}:{wire_dtype(base)}:{tuple(shape)}")
        cached = "\x1f".join(parts).encode()
        store.__dict__["_state_hash_schema"] = cached
    return cached


def _update_array(h: Any, arr: np.ndarray) -> None:
    """Hash an array's bytes in little-endian order (a no-op conversion on x86/ARM)."""
    if not _LITTLE:  # pragma: no cover - big-endian hosts only
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    h.update(struct.pack("<Q", arr.nbytes))
    if arr.nbytes:
        h.update(as_bytes(arr))


def state_hash(world: World) -> str:
    """A 128-bit xxh3 digest (32 hex digits) of the world's whole replay state.

    Equal for equal states in any process; independent of component registration order
    and of empty stores; any difference in a key, a slot generation, the free-list order,
    a row, a row's position, a group, a resource, the tick or the rng state changes it.
    ``TypeError`` if a resource cannot be saved (the same rule as save files).
    """
    if world._open_queries:
        raise RuntimeError("cannot hash the state while a query is open")
    h = xxhash.xxh3_128()
    h.update(_TAG)
    slots = world._slots
    hw, n_free = slots.high_water, slots.n_free
    h.update(struct.pack("<qQQ", checked_tick(world.tick), hw, n_free))
    _update_array(h, slots.generations[:hw])
    _update_array(h, slots.alive[:hw])
    _update_array(h, slots.free[:n_free])
    stores = sorted((s for s in world._stores.values() if s.n), key=lambda s: s.schema.name)
    h.update(struct.pack("<Q", len(stores)))
    for store in stores:
        schema = _schema_bytes(store)
        h.update(struct.pack("<QQ", len(schema), store.n))
        h.update(schema)
        _update_array(h, store.entities[: store.n])
        _update_array(h, store.data[: store.n])
    # Groups in creation order (a restore recreates them in that order).
    h.update(canonical_value([[[s.schema.name for s in g.stores], g.size]
                              for g in world._groups], "groups"))
    h.update(canonical_value(world.resources, "resources"))
    h.update(canonical_value(world.rng.bit_generator.state, "rng state"))
    return h.hexdigest()
