"""Prefab-owned fields in save files: store what differs from the prefab, derive the rest.

URSA's split of component data: *prefab data* (an enemy's speed, a turret's interval) always
comes from the prefab, so a game update that re-balances a prefab reaches old saves;
*instance data* (hp, position) is the entity's own and an update must never overwrite it.
A field declared ``field(..., prefab=True)`` is prefab data; entities made by
``PrefabRegistry.instantiate[_batch]`` carry ``PrefabOf`` naming their prefab.

In a save file (written by ``world.save`` with the world's registry) a prefab-owned field is
stored only for the rows that differ from their prefab (a level parameter, a gameplay
write, an entity with no prefab): the component's own rows leave the field out, and a
companion store ``"<Component>#<field>"`` holds the overriding rows. A small table in the
resources entry :data:`RESERVED` keeps each prefab's name and its values at save time, so
the file alone still restores the exact saved state (``Snapshot.load``). Loading with a
registry (``world.load(path, prefabs=registry)``) re-derives every other row from the
*current* prefab, column-at-once; a prefab the registry no longer has is a ``SaveFileError``
naming it, before the world changes. In-memory snapshots are never split: they stay exact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ecs_engine.component import ComponentSchema, component_values, schema_of
from ecs_engine.prefab import Prefab, PrefabOf, PrefabRegistry, prefab_id

if TYPE_CHECKING:
    from ecs_engine.snapshot import Snapshot, StoreSnapshot

__all__ = ["RESERVED", "Derived", "for_file", "join", "rederive", "split"]

RESERVED = "ecs_engine.prefab_fields"
"""The resources key of the prefab table in a save file (never in a live world)."""
_PREFAB_OF = schema_of(PrefabOf).name
_SEP = "#"


@dataclasses.dataclass(frozen=True)
class Derived:
    """What :func:`join` learnt from a file: ``rows[(component, field)]`` = (row indices,
    prefab id per row) of the rows that came from a prefab; ``names`` = prefab id -> name."""

    rows: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]
    names: dict[int, str]


def _error(message: str) -> Exception:
    from ecs_engine.savefile import SaveFileError

    return SaveFileError(message)


def _prefab_ids(snap: Snapshot, entities: np.ndarray) -> np.ndarray:
    """The ``PrefabOf`` id of each entity (0 where it has none), vectorised."""
    out = np.zeros(len(entities), np.uint64)
    try:
        store = snap.store(_PREFAB_OF)
    except KeyError:
        return out
    if store.n == 0 or len(entities) == 0:
        return out
    order = np.argsort(store.entities, kind="stable")
    keys = store.entities[order]
    pos = np.minimum(np.searchsorted(keys, entities), len(keys) - 1)
    hit = keys[pos] == entities
    out[hit] = store.data["id"][order[pos[hit]]]
    return out


def _prefab_value(prefab: Any, schema: ComponentSchema, field: str) -> np.ndarray | None:
    """The prefab's value of ``schema.name.field`` (None if it lacks that component)."""
    for comp in prefab.components:
        ctype, values, _ = component_values(comp)
        if schema_of(ctype).name == schema.name:
            value = values.get(field)
            return np.asarray(value if value is not None else schema.defaults[field][0])
    return None


def _without(data: np.ndarray, fields: list[str]) -> np.ndarray:
    keep = [n for n in data.dtype.names or () if n not in fields]
    out = np.empty(len(data), np.dtype([(n, data.dtype.fields[n][0]) for n in keep]))  # type: ignore[index]
    for name in keep:
        out[name] = data[name]
    return out


def _column_store(name: str, field: str, column: np.ndarray,
                  entities: np.ndarray) -> StoreSnapshot:
    from ecs_engine.snapshot import StoreSnapshot

    rows = np.empty(len(entities), np.dtype([(field, column.dtype, column.shape[1:])]))
    rows[field] = column
    return StoreSnapshot(f"{name}{_SEP}{field}", (rows,), entities.copy())


def for_file(snap: Snapshot, prefabs: PrefabRegistry | None) -> Snapshot:
    """The snapshot as it goes into a file: :func:`split` with a registry, else as it is.
    ``TypeError`` if its resources use :data:`RESERVED`, with or without a registry: a
    load would take that entry for the prefab table."""
    if RESERVED in snap.resources:
        raise TypeError(f"resources may not use the key {RESERVED!r} (save files keep the "
                        f"prefab table there)")
    return split(snap, prefabs) if prefabs is not None else snap


def split(snap: Snapshot, prefabs: PrefabRegistry) -> Snapshot:
    """The snapshot as it goes into a file: prefab-owned columns reduced to the rows that
    differ from their prefab (see the module doc). Unchanged if nothing is prefab-owned."""
    stores: list[StoreSnapshot] = []
    table: dict[str, Any] = {"names": {}, "values": {}, "order": {}}
    for s in snap.stores:
        if s.ctype is None or _SEP in s.name:
            stores.append(s)
            continue
        schema = schema_of(s.ctype)
        owned = [f.name for f in schema.fields if f.prefab]
        if not owned or s.n == 0:
            stores.append(s)
            continue
        data = s.data
        pids = _prefab_ids(snap, s.entities)
        unique, inverse = np.unique(pids, return_inverse=True)
        companions = []
        for field in owned:
            column = data[field]
            base = np.zeros_like(column)
            has_base = np.zeros(s.n, bool)
            values: dict[str, Any] = {}
            for i, pid in enumerate(unique):
                prefab = prefabs.by_id(int(pid)) if pid else None
                value = _prefab_value(prefab, schema, field) if prefab is not None else None
                if value is None:
                    continue
                rows = inverse == i
                base[rows] = value
                has_base[rows] = True
                values[str(int(pid))] = value.tolist()
                table["names"][str(int(pid))] = prefab.name  # type: ignore[union-attr]
            # By bits, not by value: -0.0 == 0.0 (and a NaN's payload) would otherwise
            # load as the prefab's value, not the saved one.
            bits = np.dtype(f"u{column.dtype.itemsize}")
            differs = column.view(bits) != base.view(bits)
            if differs.ndim > 1:
                differs = differs.reshape(s.n, -1).any(axis=1)
            override = ~has_base | differs
            companions.append(_column_store(s.name, field, column[override],
                                            s.entities[override]))
            table["values"][f"{s.name}.{field}"] = values
        table["order"][s.name] = list(data.dtype.names or ())
        stores.append(dataclasses.replace(s, chunks=(_without(data, owned),), sparse=None,
                                          chunk_versions=None, data_version=0))
        stores.extend(companions)
    if not table["order"]:
        return snap
    try:  # every instance's prefab by name: a later release may rename it (aliases=)
        for pid in np.unique(snap.store(_PREFAB_OF).data["id"]).tolist():
            prefab = prefabs.by_id(int(pid)) if pid else None
            if prefab is not None:
                table["names"].setdefault(str(int(pid)), prefab.name)
    except KeyError:
        pass
    resources = dict(snap.resources)
    resources[RESERVED] = table  # (for_file refused a world's own entry under this key)
    return dataclasses.replace(snap, stores=tuple(stores), resources=resources)


def join(snap: Snapshot) -> tuple[Snapshot, Derived]:
    """Undo :func:`split` with the prefab values stored in the file (the exact saved state);
    also returns which rows came from a prefab, for :func:`rederive`."""
    from ecs_engine.savefile import SaveFileError

    table = snap.resources.get(RESERVED)
    if table is None:
        if any(_SEP in s.name for s in snap.stores):
            raise _error("the save has prefab-owned columns but no prefab table")
        return snap, Derived({}, {})
    try:
        names: Mapping[str, str] = table["names"]
        values: Mapping[str, Mapping[str, Any]] = table["values"]
        order: Mapping[str, list[str]] = table["order"]
        by_name = {s.name: s for s in snap.stores}
        derived: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
        stores: list[StoreSnapshot] = []
        for s in snap.stores:
            if _SEP in s.name:
                continue
            if s.name not in order:
                stores.append(s)
                continue
            data = s.data
            pids = _prefab_ids(snap, s.entities)
            fields = [f for f in order[s.name] if f not in (data.dtype.names or ())]
            row_of = np.argsort(s.entities, kind="stable")  # one sort serves every field
            sorted_keys = s.entities[row_of]
            columns: dict[str, np.ndarray] = {}
            for field in fields:
                extra = by_name[f"{s.name}{_SEP}{field}"]
                column = np.zeros((s.n, *extra.data.dtype[field].shape),
                                  extra.data.dtype[field].base)
                from_prefab = np.zeros(s.n, bool)
                for pid_text, value in values[f"{s.name}.{field}"].items():
                    rows = pids == np.uint64(int(pid_text))
                    column[rows] = np.asarray(value, dtype=column.dtype)
                    from_prefab |= rows
                at = np.searchsorted(sorted_keys, extra.entities)
                if (at >= s.n).any() or \
                        (sorted_keys[np.minimum(at, s.n - 1)] != extra.entities).any() \
                        or len(np.unique(extra.entities)) != extra.n:
                    raise _error(f"prefab-owned column {extra.name!r} names entities that "
                                 f"have no {s.name!r} (or names one twice)")
                rows = row_of[at]
                column[rows] = extra.data[field]
                from_prefab[rows] = False
                missing = ~from_prefab
                missing[rows] = False
                if missing.any():
                    raise _error(f"{s.name}.{field}: {int(missing.sum())} row(s) have neither "
                                 f"a stored value nor a prefab value")
                columns[field] = column
                derived[(s.name, field)] = (np.flatnonzero(from_prefab), pids[from_prefab])
            saved: Mapping[str, Any] = data.dtype.fields or {}
            full_dtype = np.dtype([(n, saved[n][0]) if n in saved
                                   else (n, columns[n].dtype, columns[n].shape[1:])
                                   for n in order[s.name]])
            rows_out = np.empty(s.n, full_dtype)
            for n in order[s.name]:
                rows_out[n] = columns[n] if n in columns else data[n]
            rows_out.flags.writeable = False
            stores.append(dataclasses.replace(s, chunks=(rows_out,)))
        table_names = {int(k): str(v) for k, v in names.items()}
    except SaveFileError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise _error(f"the save's prefab table is malformed ({type(exc).__name__}: {exc})") \
            from None
    resources = {k: v for k, v in snap.resources.items() if k != RESERVED}
    joined = dataclasses.replace(snap, stores=tuple(stores), resources=resources)
    return joined, Derived(derived, table_names)


def rederive(snap: Snapshot, derived: Derived, prefabs: PrefabRegistry,
             types: Mapping[str, type]) -> Snapshot:
    """Replace every row that came from a prefab with the *current* prefab's value.

    ``types`` maps saved component names to this world's types (renames resolved).
    ``SaveFileError`` naming the prefab if the registry no longer has one the save uses.
    """
    names = derived.names

    def now_prefab(pid: int) -> Prefab | None:
        """The registry's prefab for a saved id: by id, else by the saved name or an
        alias of it (a prefab renamed with ``aliases=`` keeps its old saves)."""
        found = prefabs.by_id(pid)
        if found is None and pid in names:
            found = prefabs.resolve(names[pid])
        return found

    derived_ids = {int(p) for _, pids in derived.rows.values() for p in np.unique(pids)}
    # Only prefabs whose values the save took from them must still exist: an instance of
    # a prefab the saving world's registry did not have was saved with all its values.
    gone = [p for p in sorted(derived_ids) if now_prefab(p) is None]
    if gone:
        described = ", ".join(repr(names[p]) if p in names else f"id {p:#x}" for p in gone)
        raise _error(f"the save uses prefab(s) {described} that the registry no longer "
                     f"has; known prefabs are {prefabs.names}")
    try:
        used = {int(p) for p in np.unique(snap.store(_PREFAB_OF).data["id"])}
    except KeyError:
        used = set()
    # Instances of a prefab renamed with aliases=: the new prefab's id from now on.
    renamed_ids = {p: prefab_id(found.name) for p in used
                   if prefabs.by_id(p) is None and (found := now_prefab(p)) is not None}
    if not derived.rows and not renamed_ids:
        return snap
    stores = []
    from ecs_engine.migrate import _fits, migrate_rows

    for s in snap.stores:
        if renamed_ids and s.name == _PREFAB_OF:  # instances of a renamed prefab: its id now
            ids = s.data.copy()
            for old_id, new_id in renamed_ids.items():
                ids["id"][ids["id"] == old_id] = new_id
            ids.flags.writeable = False
            stores.append(dataclasses.replace(s, chunks=(ids,)))
            continue
        fields = [f for (name, f) in derived.rows if name == s.name]
        if not fields or s.name not in types:
            stores.append(s)
            continue
        schema = schema_of(types[s.name])
        current = {old: new for new, old in schema.migration.renamed.items()}
        # The rows in the current schema first (renamed, converted, widened, reshaped as
        # a load migrates them), then the current prefab values as they are: a value is
        # checked against and written in the type the field has now, and is never put
        # through a converter meant for the saved values.
        migrated = migrate_rows(s.name, s.data, schema)
        rows_out = migrated.copy() if migrated is s.data else migrated
        for field in fields:
            rows, pids = derived.rows[(s.name, field)]
            now = current.get(field, field)
            if now not in schema.field_names:
                continue  # the field is gone from the schema: migration dropped it
            unique, inverse = np.unique(pids, return_inverse=True)
            column = rows_out[now]
            for i, pid in enumerate(unique):
                prefab = now_prefab(int(pid))
                value = _prefab_value(prefab, schema, now)
                if value is None:
                    continue  # the prefab no longer has this component: keep the saved value
                target = column.dtype.base if column.dtype.shape else column.dtype
                if not _fits(np.asarray(value).reshape(-1), target).all():
                    raise _error(f"prefab {prefab.name!r}: "  # type: ignore[union-attr]
                                 f"{schema.name}.{now} = {value.tolist()} does not fit "
                                 f"its {target}")
                column[rows[inverse == i]] = value
        rows_out.flags.writeable = False
        stores.append(dataclasses.replace(s, chunks=(rows_out,)))
    return dataclasses.replace(snap, stores=tuple(stores))
