"""One component of many entities, by key: ``world.alive``, ``get_batch`` and ``set_batch``.

Following references in bulk ("credit each bullet's shooter") without a Python loop: the
keys come from a column (``q[Bullet]["owner"]``), the rows are gathered or scattered by
numpy fancy indexing through the store's slot->row index.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ecs_engine.component import (
    ComponentBase,
    ComponentSchema,
    component_values,
    schema_of,
    type_schema,
)
from ecs_engine.entity import KEY_DTYPE, as_keys, format_key, key_slots, reject_repeats
from ecs_engine.storage import PARENT_LINK

if TYPE_CHECKING:
    from ecs_engine.storage import ComponentStore
    from ecs_engine.world import World


def alive_mask(world: World, keys: Any) -> np.ndarray:
    """``world.alive(keys)``: a bool array, True where the key's entity exists.

    Any shape of integer keys; negative or never-issued values are simply not alive.
    """
    arr = np.asarray(keys)
    if arr.dtype == object or (arr.size and arr.dtype.kind not in "uib"):
        raise TypeError(f"alive: entity keys must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "b":
        raise TypeError("alive: entity keys must be integers, got bools")
    flat = arr.reshape(-1)
    ok = np.ones(flat.shape, np.bool_)
    if flat.dtype.kind == "i":
        ok = flat >= 0
    as_u64 = flat.astype(KEY_DTYPE)  # negatives wrap; they are masked out by ``ok``
    ok &= world._slots.alive_mask(as_u64)
    return ok.reshape(arr.shape)


def _keys(world: World, keys: Any, op: str) -> np.ndarray:
    """Keys as uint64, each one alive and not being despawned (``KeyError`` naming one)."""
    try:
        arr = as_keys(keys)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{op}: {exc}") from None
    ok = world._slots.alive_mask(arr)
    pending = world._pending_despawn
    if pending:
        ok &= ~np.isin(arr, np.fromiter(pending, KEY_DTYPE, len(pending)))
    if not ok.all():
        bad = np.flatnonzero(~ok)
        first = int(arr[bad[0]])
        why = ("already being despawned" if world._slots.is_alive(first)
               else world._slots.why_dead(first))
        raise KeyError(f"{op}: {len(bad)} of {len(arr)} keys are not alive; first at index "
                       f"{bad[0]}: {why}")
    return arr


def _rows(world: World, arr: np.ndarray, ctype: type,
          op: str) -> tuple[ComponentStore | None, np.ndarray]:
    """The store of ``ctype`` (None if the world has none yet) and each key's row in it;
    ``KeyError`` if a key has no such component."""
    schema = type_schema(ctype)
    store = world._stores.get(ctype)
    if store is None:
        rows = np.full(len(arr), -1, np.int64)
    else:
        rows = store.rows_of(key_slots(arr))
    missing = np.flatnonzero(rows < 0)
    if len(missing):
        first = int(arr[missing[0]])
        raise KeyError(f"{op}: {len(missing)} of {len(arr)} keys have no {schema.name}; first "
                       f"at index {missing[0]}: {format_key(first)}"
                       f"{world._deferred_note(first)}")
    return store, rows


def get_batch(world: World, keys: Any, ctype: type) -> np.ndarray:
    """The rows of ``ctype`` for ``keys``, in key order, as a structured array (a copy)."""
    arr = _keys(world, keys, "get_batch")
    store, rows = _rows(world, arr, ctype, "get_batch")
    if store is None:  # no keys, and no store yet
        return np.zeros(0, schema_of(ctype).dtype)
    return store.data[rows]


def _field_values(schema: ComponentSchema, values: Any, n: int,
                  op: str) -> dict[str, np.ndarray]:
    """``values`` (structured rows, a field -> values mapping, or a component instance)
    checked and converted per field: one value, or ``n`` of them."""
    if isinstance(values, ComponentBase):
        vtype, given, _ = component_values(values)
        if schema_of(vtype) is not schema:
            raise TypeError(f"{op}: got a {schema_of(vtype).name}, expected {schema.name} "
                            f"values")
        items: Mapping[str, Any] = given
    elif isinstance(values, np.ndarray) and values.dtype.names is not None:
        items = {name: values[name] for name in values.dtype.names}
        if values.ndim != 1 or len(values) != n:
            raise ValueError(f"{op}: {len(values) if values.ndim else 'a 0-d array of'} rows "
                             f"for {n} keys")
    elif isinstance(values, Mapping):
        items = values
    else:
        raise TypeError(f"{op}: give structured rows (e.g. from get_batch), a mapping of "
                        f"{schema.name} fields to values, or a {schema.name}(...) instance; "
                        f"got {type(values).__name__}")
    out: dict[str, np.ndarray] = {}
    for name, value in items.items():
        if name not in schema.field_names:
            raise KeyError(f"{op}: {schema.name} has no field {name!r}; fields are "
                           f"{list(schema.field_names)}")
        converted, count = schema.convert(name, value)
        if count is not None and count != n:
            raise ValueError(f"{op}: {schema.name}.{name} has {count} values for {n} keys")
        out[name] = converted
    return out


def set_batch(world: World, keys: Any, ctype: type, values: Any) -> None:
    """Write ``values`` into the ``ctype`` rows of ``keys`` (only the fields given).

    All checks come first, so a bad key or value leaves the world as it was. The write is
    immediate (like ``world.get(e, T)["x"] = ...``) and counts as a change for snapshots.
    """
    arr = _keys(world, keys, "set_batch")
    reject_repeats(arr, "set_batch")
    schema = type_schema(ctype)
    if schema.name == PARENT_LINK:
        raise TypeError("set_batch: ChildOf is written with world.set_parent, which checks "
                        "cycles and keeps depths right")
    fields = _field_values(schema, values, len(arr), "set_batch")
    store, rows = _rows(world, arr, ctype, "set_batch")
    if store is None or not len(rows) or not fields:
        return
    for name, value in fields.items():
        store.data[name][rows] = value
    store.touch(rows)
