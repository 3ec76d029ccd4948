"""Blueprints: a saved group of entities, loaded again into a live world with fresh keys.

``world.extract(keys)`` copies entities (every component, their subtrees by default) into a
:class:`Blueprint`; ``world.instantiate(bp)`` spawns them in bulk under new keys and remaps
every ``Entity`` field column-at-once through one vectorised old->new look-up. A key that
points outside the blueprint becomes NULL and is listed in ``Instance.dangling``.

On disk a blueprint is a save file (same format, checksum, validation and
``SaveFileError``): its stores hold the blueprint's rows under their original keys, and a
tag store named ``ecs.Blueprint`` lists every key in blueprint order (an entity with no
components is still part of it). The slot table is empty: a blueprint owns no slots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, overload

import numpy as np

from ecs_engine.component import schema_of, type_schema
from ecs_engine.entity import (
    KEY_DTYPE,
    NULL,
    Entity,
    KeyLike,
    as_key,
    as_keys,
    key_slots,
    key_str,
)
from ecs_engine.hierarchy import (
    BUILTIN_COMPONENTS,
    ChildOf,
    depth_of,
    jump_depths,
    with_descendants,
)
from ecs_engine.keymap import KeyMap
from ecs_engine.memcopy import copy_into
from ecs_engine.migrate import find_saved_type, migrate_rows, unknown_component_hint
from ecs_engine.savefile import SaveFileError
from ecs_engine.slotmap import SlotTable
from ecs_engine.snapshot import Snapshot, StoreSnapshot

if TYPE_CHECKING:
    from ecs_engine.world import World

BLUEPRINT_MARKER = "ecs.Blueprint"  # tag store whose entity column lists the blueprint's keys


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


def _empty_snapshot_parts() -> dict[str, Any]:
    return {
        "slots": SlotTable(np.zeros(0, np.uint32), np.zeros(0, np.bool_), np.zeros(0, np.int64)),
        "groups": (),
        "resources": {},
        "tick": 0,
        "rng_state": np.random.PCG64(0).state,  # unused; the format requires a valid one
    }


class Blueprint:
    """A self-contained copy of some entities under their original keys.

    ``keys``: the original keys in blueprint order (``instantiate`` returns new keys in
    the same order). Build one with ``world.extract``; read one with ``from_bytes`` or
    ``load`` (``SaveFileError`` for anything that is not a valid blueprint)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snap = snapshot
        self.keys, self._where, self._parts = _validate(snapshot)
        self._plans: dict[tuple[type, ...], _Plan] = {}  # by the types a world resolved

    def __len__(self) -> int:
        return len(self.keys)

    def __repr__(self) -> str:
        names = ", ".join(self.components) or "no components"
        return f"Blueprint({len(self.keys)} entities; {names})"

    @property
    def components(self) -> tuple[str, ...]:
        """Names of the components any of its entities has."""
        return tuple(s.name for s in self._parts)

    def rows(self, component: type | str) -> tuple[np.ndarray, np.ndarray]:
        """(original keys, rows) of one component, rows in the dtype they were saved with."""
        name = component if isinstance(component, str) else type_schema(component).name
        for s in self._parts:
            if s.name == name:
                return s.entities, s.data
        raise KeyError(f"the blueprint has no component {name!r}; it has {list(self.components)}")

    def to_bytes(self) -> memoryview:
        """The blueprint in the save-file format (a read-only bytes-like view)."""
        return self._snap.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Blueprint:
        """Parse blueprint bytes; ``SaveFileError`` names what is wrong with bad ones."""
        return cls(Snapshot.from_bytes(data))

    def save(self, path: str | Path) -> None:
        """Write atomically to ``path`` (as a save file is written)."""
        self._snap.save(path)

    @classmethod
    def load(cls, path: str | Path) -> Blueprint:
        try:
            return cls(Snapshot.load(path))
        except SaveFileError as exc:
            text = str(exc)
            prefix = f"{Path(path)}: "
            raise SaveFileError(text if text.startswith(prefix) else prefix + text) from None


def _validate(snap: Snapshot) -> tuple[np.ndarray, KeyMap, tuple[StoreSnapshot, ...]]:
    """Check a blueprint's stores; return its keys (and their look-up) and its
    component stores."""
    marker = [s for s in snap.stores if s.name == BLUEPRINT_MARKER]
    if not marker:
        raise SaveFileError(f"not a blueprint (no {BLUEPRINT_MARKER!r} entry): a world save "
                            f"loads with world.load")
    if marker[0].data.dtype.names:
        raise SaveFileError(f"blueprint: {BLUEPRINT_MARKER!r} must be a tag (no fields)")
    if snap.groups or any(s.group_size for s in snap.stores):
        raise SaveFileError("blueprint: a blueprint has no owning groups")
    keys = _frozen(np.array(marker[0].entities, KEY_DTYPE))
    if (keys == NULL).any():
        raise SaveFileError("blueprint: NULL is listed as one of its entities")
    where = KeyMap(keys)
    dups = where.duplicates()
    if len(dups):
        raise SaveFileError(f"blueprint: {key_str(int(dups[0]))} is listed twice")
    parts = tuple(s for s in snap.stores if s.name != BLUEPRINT_MARKER)
    for s in parts:
        if len(s.data) != s.n:
            raise SaveFileError(f"blueprint component {s.name!r}: {len(s.data)} rows of data "
                                f"for {s.n} entities")
        pos = where.positions(s.entities)
        if (pos < 0).any():
            bad = int(s.entities[np.flatnonzero(pos < 0)[0]])
            raise SaveFileError(f"blueprint component {s.name!r}: {key_str(bad)} is not one of "
                                f"the blueprint's entities")
        if len(np.unique(pos)) != len(pos):
            raise SaveFileError(f"blueprint component {s.name!r}: an entity appears twice")
        if s.name == "ChildOf":
            rows = migrate_rows(s.name, s.data, schema_of(ChildOf))
            inside = where.positions(rows["parent"])
            child_pos = np.full(len(keys), -1, np.int64)
            child_pos[pos] = inside
            _, on_cycle = jump_depths(child_pos, np.zeros(len(keys), np.int64))
            if on_cycle.any():
                bad = int(keys[np.flatnonzero(on_cycle)[0]])
                raise SaveFileError(f"blueprint: the ChildOf links form a cycle (through "
                                    f"{key_str(bad)})")
    return keys, where, parts


class DanglingRef(NamedTuple):
    """A reference that pointed outside the blueprint; it was set to NULL."""

    component: str
    field: str
    key: Entity  # the old key it held


@dataclass(frozen=True, eq=False)
class Instance:
    """The result of ``world.instantiate``: ``keys`` are the new keys in blueprint order."""

    keys: np.ndarray
    _old: KeyMap = field(repr=False)
    _dangling: tuple[tuple[str, str, np.ndarray], ...] = field(repr=False, default=())

    @overload
    def map(self, old_keys: int) -> Entity: ...
    @overload
    def map(self, old_keys: Any) -> np.ndarray: ...

    def map(self, old_keys: Any) -> Entity | np.ndarray:
        """The new key of each old key (NULL for keys that were not in the blueprint)."""
        scalar = np.ndim(old_keys) == 0
        arr = as_keys(old_keys)
        pos = self._old.positions(arr)
        out = np.where(pos >= 0, self.keys[np.maximum(pos, 0)], NULL).astype(KEY_DTYPE)
        return Entity(int(out[0])) if scalar else out

    @property
    def dangling(self) -> list[DanglingRef]:
        """Every reference that pointed outside the blueprint: (component, field, old key),
        by component and field, in row order."""
        return [DanglingRef(comp, fname, Entity(int(k)))
                for comp, fname, old in self._dangling for k in old.tolist()]


def extract(world: World, keys: Any, descendants: bool = True) -> Blueprint:
    """Copy ``keys`` (and, by default, their descendants, breadth-first after them) with
    every component into a blueprint. Parent links to entities outside it are dropped:
    the extracted roots are roots of the blueprint."""
    if world._open_queries:
        raise RuntimeError("cannot extract while a query is open")
    arr = world._check_alive_batch(keys, "extract")
    arr = with_descendants(world, arr) if descendants else arr.copy()
    where = KeyMap(arr)
    slots = key_slots(arr)
    stores = [StoreSnapshot(BLUEPRINT_MARKER, (np.zeros(len(arr), np.dtype([])),),
                            _frozen(arr))]
    for ctype, store in world._stores.items():
        if store.n == 0:
            continue
        rows = store.rows_of(slots)
        has = np.flatnonzero(rows >= 0)
        if len(has) == 0:
            continue
        data = store.data[rows[has]]
        ents = arr[has]
        if ctype is ChildOf:
            inside = where.positions(data["parent"]) >= 0
            data, ents = data[inside], ents[inside]
            if len(ents) == 0:
                continue
        stores.append(StoreSnapshot(store.schema.name, (_frozen(data),), _frozen(ents),
                                    ctype=ctype))
    return Blueprint(Snapshot(stores=tuple(stores), **_empty_snapshot_parts()))


@dataclass(frozen=True)
class _Part:
    """One component of a blueprint, resolved against a world's types."""

    ctype: type
    rows: np.ndarray  # contiguous, in the world's schema
    pos: np.ndarray  # blueprint position of each row's entity
    identity: bool  # ``pos`` is 0, 1, 2, ...: rows are in blueprint order
    # Entity field -> blueprint position of each value; len(blueprint) (an extra NULL
    # entry after the new keys) where it points outside, so the remap is one gather.
    remap: tuple[tuple[str, np.ndarray], ...]


@dataclass(frozen=True)
class _Plan:
    """Everything an instantiate needs that depends only on the blueprint and the
    component types: computed (and checked) once, reused by every instantiate."""

    parts: tuple[_Part, ...]
    dangling: tuple[tuple[str, str, np.ndarray], ...]


def _resolve(world: World, bp: Blueprint) -> _Plan:
    """Types, migrated rows and remap positions: everything that can fail, before any
    change to the world."""
    ctypes = []
    unknown = []
    for s in bp._parts:
        # The world's own type first, by name or a ``formerly`` name (as from a file:
        # an in-memory blueprint of a renamed class migrates too), then the blueprint's.
        ctype = (world._types_by_name.get(s.name)
                 or find_saved_type(world._types_by_name.values(), s.name)
                 or s.ctype or BUILTIN_COMPONENTS.get(s.name))
        if ctype is None:
            unknown.append(s.name)
        else:
            ctypes.append(ctype)
    if unknown:
        raise SaveFileError(unknown_component_hint(unknown))
    world._check_type_names(ctypes, "instantiate")  # name clashes: before any change
    key = tuple(ctypes)
    plan = bp._plans.get(key)
    if plan is None:
        plan = _plan(bp, key)  # may refuse the rows (migration): nothing registered yet
        bp._plans[key] = plan
    for ctype in ctypes:
        world._store(ctype)
    return plan


def _plan(bp: Blueprint, ctypes: tuple[type, ...]) -> _Plan:
    where, n = bp._where, len(bp.keys)
    parts, dangling = [], []
    for s, ctype in zip(bp._parts, ctypes, strict=True):
        schema = schema_of(ctype)
        rows = np.ascontiguousarray(migrate_rows(s.name, s.data, schema))
        remap = []
        for spec in schema.fields:
            if spec.is_entity:
                old = rows[spec.name].reshape(-1)
                pos = where.positions(old)
                outside = pos < 0
                bad = outside & (old != NULL)
                if bad.any():
                    dangling.append((schema.name, spec.name, _frozen(old[bad].copy())))
                pos[outside] = n
                remap.append((spec.name, _frozen(pos)))
        pos = where.positions(s.entities)
        identity = len(pos) == n and bool((pos == np.arange(n)).all())
        parts.append(_Part(ctype, rows, _frozen(pos), identity, tuple(remap)))
    return _Plan(tuple(parts), tuple(dangling))


def _write_part(world: World, part: _Part, new_keys: np.ndarray, ext_keys: np.ndarray,
                first_slot: int | None) -> None:
    store = world._store(part.ctype)
    keys = new_keys if part.identity else new_keys[part.pos]
    rows = store.append(keys, first_slot if part.identity else None)
    dst = store.data[rows]
    copy_into(dst, part.rows)
    for fname, pos in part.remap:
        col = dst[fname]
        col[...] = ext_keys[pos].reshape(col.shape)
    if store.owner is not None:
        store.owner.enter(keys)


def _write_hierarchy(world: World, bp: Blueprint, child: _Part | None,
                     new_keys: np.ndarray, parent: int) -> None:
    """ChildOf rows of the instance: the blueprint's internal links (depths and attach
    order recomputed), plus its roots under ``parent`` when one is given."""
    n = len(new_keys)
    parent_pos = np.full(n, -1, np.int64)
    old_order = np.zeros(n, np.uint64)
    if child is not None:
        inside = child.remap[0][1]  # "parent" is ChildOf's only Entity field
        keep = inside < n
        parent_pos[child.pos[keep]] = inside[keep]
        old_order[child.pos[keep]] = child.rows["order"][keep]
    linked = parent_pos >= 0
    base_depth = int(depth_of(world, np.array([parent], KEY_DTYPE))[0]) + 1 if parent else 0
    depths, _ = jump_depths(parent_pos, np.full(n, base_depth, np.int64))  # acyclic: checked
    if parent:
        has_row = np.ones(n, np.bool_)
    else:
        has_row = linked
    if not has_row.any():
        return
    store = world._store(ChildOf)
    idx = world._hierarchy.refresh(store) if store.n else None
    next_order = idx.next_order if idx is not None else 1
    members = np.flatnonzero(has_row)
    # Internal links keep their relative attach order; roots attach after them.
    rank = np.empty(len(members), np.uint64)
    sort = np.lexsort((members, old_order[members], ~linked[members]))
    rank[sort] = np.arange(len(members), dtype=np.uint64)
    keys = new_keys[members]
    rows = store.append(keys)
    data = store.data[rows]
    data["parent"] = np.where(linked[members],
                              new_keys[np.maximum(parent_pos[members], 0)], parent)
    data["depth"] = depths[members]
    data["order"] = next_order + rank
    if store.owner is not None:
        store.owner.enter(keys)


def instantiate(world: World, bp: Blueprint, parent: KeyLike = NULL) -> Instance:
    """Spawn a copy of the blueprint under fresh keys; see ``World.instantiate``."""
    if not isinstance(bp, Blueprint):
        raise TypeError(f"instantiate needs a Blueprint, got {type(bp).__name__}")
    parent_key = as_key(parent, "instantiate (parent)")
    if parent_key != NULL:
        world._check_alive(parent_key, "instantiate (parent)")
    plan = _resolve(world, bp)
    child = next((p for p in plan.parts if p.ctype is ChildOf), None)
    new_keys, first = world._allocate(len(bp.keys))

    def apply() -> None:
        # Deferred, the parent may have gone meanwhile (with an ancestor): the instance
        # is made without that link and the flush reports it, as for a deferred spawn.
        gone = world._flushing and parent_key != NULL and not world._slots.is_alive(
            parent_key)
        ext_keys = np.append(new_keys, np.uint64(NULL))
        for part in plan.parts:
            if part is not child:
                _write_part(world, part, new_keys, ext_keys, first)
        _write_hierarchy(world, bp, child, new_keys, NULL if gone else parent_key)
        if gone:
            world._check_still_alive(np.array([parent_key], KEY_DTYPE),
                                     "instantiate (deferred, parent)")

    world._run_or_defer(apply)
    new_keys.flags.writeable = False
    return Instance(new_keys, bp._where, plan.dangling)


__all__ = ["BLUEPRINT_MARKER", "Blueprint", "DanglingRef", "Instance", "extract", "instantiate"]
