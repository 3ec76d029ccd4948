"""The World: entities, component stores, queries, resources, rng and systems."""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import operator
import os
import traceback
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from sys import getrefcount
from typing import TYPE_CHECKING, Any

import numpy as np

from ecs_engine import hierarchy, queryblock, storage
from ecs_engine.batch import alive_mask, get_batch, set_batch
from ecs_engine.blueprint import Blueprint, Instance, extract, instantiate
from ecs_engine.component import (
    ComponentBase,
    component_values,
    detached,
    schema_of,
    type_schema,
)
from ecs_engine.entity import (
    KEY_DTYPE,
    NULL,
    SLOT_MASK,
    Entity,
    KeyLike,
    as_key,
    as_keys,
    key_slot,
    key_slots,
    key_str,
    reject_repeats,
)
from ecs_engine.group import Group, innermost_level, insert_positions, join_levels
from ecs_engine.hierarchy import ChildOf, HierarchyIndex
from ecs_engine.memcopy import BufferPool
from ecs_engine.native import c_function
from ecs_engine.query import IDLE_REFS, NO_KEYS, Query, QueryPlan
from ecs_engine.record import Record
from ecs_engine.slotmap import SlotMap, SlotTable
from ecs_engine.snapshot import (
    RestoreEvent,
    Snapshot,
    restore_snapshot,
    run_restore_callbacks,
    take_snapshot,
)
from ecs_engine.statehash import state_hash
from ecs_engine.storage import (
    CHUNK_ROWS,
    ComponentStore,
    LayoutClock,
    few_removal_plan,
    removal_plan,
)

if TYPE_CHECKING:
    from ecs_engine.lookahead import KeyLookahead
    from ecs_engine.prefab import PrefabRegistry

SystemFn = Callable[["World", float], Any]
# Batches up to these sizes go row by row: numpy's per-call costs outweigh a few rows.
# A batch's keys checked alive and distinct in one pass in C (``_keyindex.c``), or None
# (numpy: the same answers).
_live_distinct: Callable[[np.ndarray, np.ndarray, np.ndarray, int], int] | None = c_function(
    "_keyindex", "live_distinct")
# One entity's rows added to or removed from all its stores in one call (``_entityrows.c``:
# the rows ComponentStore.insert_chain and Group.remove_one move), or None (Python).
_insert_entity: Callable[..., bool] | None = c_function("_entityrows", "insert_entity")
_remove_entity: Callable[..., bool] | None = c_function("_entityrows", "remove_entity")
# Measured (best of 200, 4 components, 1k-10k entities): spawn_batch's numpy path costs
# ~25 us whatever the size, row by row ~10 us + ~3 us a row; despawn_batch ~65 us against
# ~3 us a key.
SMALL_SPAWN = 4
SMALL_DESPAWN = 20
MAX_QUERY_PLANS = 1024  # distinct query call shapes cached per world (systems use a few)


@dataclass(frozen=True)
class System:
    """A named system function ``fn(world, dt)``; ``dt`` in seconds."""

    name: str
    fn: SystemFn


def _remove_in_runs(store: ComponentStore, row: int, slot: int, sizes: list[int]) -> None:
    """Remove one row of a group's store as ``Group.remove_one`` does in each store (the
    last row of each prefix holding it fills the hole, then the store's last row), with
    ``sizes`` the prefixes' sizes (outermost first; updated: the row leaves them)."""
    lasts: list[int] = []  # the last row of each prefix holding the row, outermost first
    for depth, size in enumerate(sizes):
        if row >= size:
            break
        lasts.append(size - 1)
        sizes[depth] = size - 1
    if not lasts:
        store.remove_one(row, slot)
    elif len(lasts) == 1:
        store.remove_group_one(row, slot, lasts[0])
    else:
        store.remove_chain(row, slot, lasts[::-1])


class _QueryState:
    """The counters of a world's query blocks, in slots (queryblock.py reads them from C)."""

    __slots__ = ("_open_queries", "_deferred", "_plans")


class World(_QueryState):
    """A game world: entities with components in column stores, plus systems.

    ``seed`` seeds ``world.rng``. With ``auto_group`` the first writing query over
    several component types that no group owns yet creates an owning group for them,
    so that query (and the same query every tick after) gets aligned views with no
    gather. A store belongs to at most one group: create groups for the hot queries
    up front with ``world.group(...)`` when several queries share a type.
    """

    def __init__(self, *, seed: int | None = None, auto_group: bool = True) -> None:
        self._versions = itertools.count(1)  # one counter: a version names one state
        self._layout_clock = LayoutClock()  # structural changes of any store (query plans)
        self._slots = SlotMap(versions=self._versions)
        self._stores: dict[type, ComponentStore] = {}
        self._types_by_name: dict[str, type] = {}
        self._groups: list[Group] = []
        self._slot_capacity = self._slots.capacity  # every store's sparse array covers this
        self._plans: dict[Any, QueryPlan] = {}  # world.query arguments -> cached plan
        self._systems: list[System] = []
        self._open_queries = 0
        self._deferred: list[Callable[[], None]] = []
        self._pending_despawn: set[int] = set()
        self._flushing = False
        self._hierarchy = HierarchyIndex()  # children by parent, derived from ChildOf
        self._pending_spawns: list[np.ndarray] = []  # keys spawned inside a query block
        self._auto_group = auto_group
        self._restore_callbacks: list[Callable[[World, RestoreEvent], Any]] = []
        self._last_snapshot: weakref.ref[Snapshot] | None = None
        # Counts restores and loads (jumps to states the ticks before need not lead to);
        # a Rollback holds only frames recorded since the last one.
        self._jumps = 0
        self._buffers = BufferPool()  # snapshot memory to reuse once nothing holds it
        # A load's slot tables and key indexes: those a load replaces serve the next one
        # (no page faults; see load).
        self._index_memory = BufferPool()
        self.resources: dict[str, Any] = {}
        # Derived state systems rebuild from the columns (spatial grids, GPU buffers):
        # never saved, never snapshotted.
        self.caches: dict[str, Any] = {}
        self.rng: np.random.Generator = np.random.default_rng(seed)
        # The registry whose prefabs made this world's entities: saves store prefab-owned
        # fields relative to it. Configuration like the systems, not state: never saved.
        self.prefabs: PrefabRegistry | None = None
        self.tick = 0
        # True while a rollback or sync test re-runs ticks that already happened: systems
        # with effects outside the state (sounds, particles, network) skip them then.
        self.resimulating = False
        # True while step() runs the systems. Row order is state (the state hash covers
        # it), so queries reorder rows for views only then: a query from a renderer, a
        # test or an on_restore callback between ticks leaves the state as it was.
        self.stepping = False

    @property
    def auto_group(self) -> bool:
        """Whether writing queries make (and nest) owning groups themselves."""
        return self._auto_group

    @auto_group.setter
    def auto_group(self, value: bool) -> None:
        self._auto_group = bool(value)
        # cached query plans decided with the old setting look at their rows again
        self._layout_clock.stamp += 1

    # -- stores -------------------------------------------------------------------------
    def _store(self, ctype: type) -> ComponentStore:
        store = self._stores.get(ctype)
        if store is None:
            schema = type_schema(ctype)
            other = self._types_by_name.get(schema.name)
            if other is not None:
                raise TypeError(f"two component types are named {schema.name!r} "
                                f"({other.__module__}.{other.__qualname__} and "
                                f"{ctype.__module__}.{ctype.__qualname__}); pin distinct "
                                f"names with @component(name=...)")
            store = ComponentStore(schema, self._slots.capacity, self._versions,
                                   clock=self._layout_clock)
            self._stores[ctype] = store
            self._types_by_name[schema.name] = ctype
            if len(self._stores) > 1 and schema.name < max(self._types_by_name):
                # Stores stay in name order: snapshots, save files and every walk over the
                # stores are then the same whatever order the types were registered in.
                self._stores = dict(sorted(self._stores.items(),
                                           key=lambda item: item[1].schema.name))
        return store

    def _check_new_types(self, comps: Sequence[Any], op: str) -> None:
        """Name clashes among the call's new component types (with the world's or with
        each other) fail before any store is created: a refused call registers nothing."""
        self._check_type_names([type(comp) for comp in comps], op)

    def _check_type_names(self, ctypes: Sequence[type], op: str) -> None:
        """``_check_new_types`` for component types."""
        names: dict[str, type] = {}
        for ctype in ctypes:
            if ctype in self._stores:
                continue
            name = schema_of(ctype).name
            other = self._types_by_name.get(name) or names.setdefault(name, ctype)
            if other is not ctype:
                raise TypeError(f"{op}: two component types are named {name!r} "
                                f"({other.__module__}.{other.__qualname__} and "
                                f"{ctype.__module__}.{ctype.__qualname__}); pin distinct "
                                f"names with @component(name=...)")

    def register(self, *ctypes: type) -> None:
        """Make component types known by name (needed before loading a save that uses
        types this world has not touched yet)."""
        for ctype in ctypes:
            self._store(ctype)

    @property
    def component_types(self) -> tuple[type, ...]:
        """Every component type this world has a store for."""
        return tuple(self._stores)

    def store(self, ctype: type) -> ComponentStore:
        """The store of a component type (for engine extensions; prefer queries)."""
        store = self._stores.get(ctype)  # (systems ask dozens of times a tick)
        return store if store is not None else self._store(ctype)

    def _allocate(self, count: int) -> tuple[np.ndarray, int | None]:
        """New keys, and their first slot when all are fresh and consecutive."""
        first_slot = self._slots.high_water if self._slots.n_free == 0 else None
        keys = self._slots.allocate(count)
        self._cover_slots()
        return keys, first_slot

    def _cover_slots(self) -> None:
        capacity = self._slots.capacity
        if capacity != self._slot_capacity:
            for store in self._stores.values():
                store.ensure_slots(capacity)
            self._slot_capacity = capacity

    # -- validation ---------------------------------------------------------------------
    def _check_alive(self, key: object, op: str) -> int:
        key = as_key(key, op)
        if not self._slots.is_alive(key):
            raise KeyError(f"{op}: {self._slots.why_dead(key)}")
        if key in self._pending_despawn:
            raise KeyError(f"{op}: {key_str(key)} is already being despawned")
        return key

    def _check_alive_batch(self, keys: Any, op: str) -> np.ndarray:
        arr = as_keys(keys)
        if (_live_distinct is not None and not self._pending_despawn
                and arr.dtype == KEY_DTYPE and arr.flags.c_contiguous):
            slots = self._slots  # (one pass in C; anything wrong: the checks below say what)
            if _live_distinct(arr, slots.generations, slots.alive, slots.high_water) == 1:
                return arr
        alive = self._slots.alive_mask(arr)
        if self._pending_despawn:
            alive &= ~np.isin(arr, np.fromiter(self._pending_despawn, KEY_DTYPE))
        if np.count_nonzero(alive) != len(arr):  # (count_nonzero: a fifth of .all()'s cost)
            bad = np.flatnonzero(~alive)
            first = int(arr[bad[0]])
            why = ("already being despawned" if self._slots.is_alive(first)
                   else self._slots.why_dead(first))
            raise KeyError(f"{op}: {len(bad)} of {len(arr)} keys are not alive; first at "
                           f"index {bad[0]}: {why}")
        reject_repeats(arr, op)
        return arr

    def _few_live_keys(self, keys: Any) -> list[int] | None:
        """Up to ``SMALL_DESPAWN`` distinct live keys as ints, checked without numpy; None
        when the batch is larger or anything is wrong (the batch check then raises)."""
        if isinstance(keys, np.ndarray):
            if keys.ndim != 1 or keys.dtype.kind not in "ui" or len(keys) > SMALL_DESPAWN:
                return None
            keys = keys.tolist()
        elif not isinstance(keys, list | tuple) or len(keys) > SMALL_DESPAWN:
            return None
        is_alive = self._slots.is_alive
        pending = self._pending_despawn
        for key in keys:
            if type(key) is not int or not is_alive(key) or key in pending:
                return None
        if len(set(keys)) != len(keys):
            return None
        return list(keys)

    @staticmethod
    def _parse(components: Sequence[Any], op: str) -> tuple[list[ComponentBase], int | None]:
        """Validate component instances; return them and their common batch length."""
        seen: set[type] = set()
        count: int | None = None
        for comp in components:
            ctype, _, n = component_values(comp)
            if ctype in seen:
                raise ValueError(f"{op}: {schema_of(ctype).name} given twice")
            seen.add(ctype)
            if n is not None:
                if count is not None and n != count:
                    raise ValueError(f"{op}: batch lengths differ ({schema_of(ctype).name} has "
                                     f"{n}, others {count})")
                count = n
        return list(components), count

    # -- structural changes -------------------------------------------------------------
    @property
    def _deferring(self) -> bool:
        return self._open_queries > 0

    def spawn(self, *components: Any) -> Entity:
        """Create an entity with the given components; returns its key."""
        if not self._open_queries:
            key = self._spawn_one(components)
            if key is not None:
                return key
        comps, count = self._parse(components, "spawn")
        self._check_new_types(comps, "spawn")
        if count not in (None, 1):
            raise ValueError(f"spawn: got a batch of {count}; use spawn_batch for batches")
        linked = any(type(comp) is ChildOf for comp in comps)
        if linked:  # (a dead parent refuses the call before any store is created)
            comps, parents = self._split_parents(comps, 1, "spawn")
            self._store(ChildOf)
        for comp in comps:  # create stores now so a bad type fails before allocating
            self._store(type(comp))
        comps = self._snapshot_values(comps)
        keys, first = self._allocate(1)
        if self._deferring:
            self._pending_spawns.append(keys)
        self._run_or_defer(lambda: self._attach(keys, comps, fresh=True, first_slot=first))
        if linked:
            self._run_or_defer(lambda: self._apply_parents(keys, parents, "spawn"))
        return Entity(int(keys[0]))

    def _spawn_one(self, components: tuple[Any, ...]) -> Entity | None:
        """Spawn one entity of single (not batched) components whose types have stores
        (owned by one group at most), with no temporary arrays; None (nothing done) for
        anything else."""
        stores = self._stores
        picked: list[ComponentStore] = []
        lead: Group | None = None  # the group owning some of the stores
        owned = 0  # how many of the stores it owns
        for comp in components:
            ctype = type(comp)
            store = stores.get(ctype)  # only component instances have a store type
            if store is None or ctype is ChildOf or comp._batch is not None or store in picked:
                return None  # (a parent link goes through set_parent's checks; a type
                # given twice makes the general path raise)
            picked.append(store)
            owner = store.owner
            if owner is not None:
                if lead is None:
                    lead = owner
                elif owner is not lead and owner.root is not lead.root:
                    return None  # stores of two groups: the general path
                owned += 1
        slots = self._slots
        key, slot = slots.allocate_one()
        if len(slots.generations) != self._slot_capacity:
            self._cover_slots()
        if _insert_entity is not None and _insert_entity(
                picked, key, slot, [comp._one_row() for comp in components], 0, CHUNK_ROWS):
            return key  # type: ignore[return-value]  # (as below)
        if lead is not None and (lead.inner is not None or lead.outer is not None):
            self._insert_nested(components, picked, lead.root, key, slot)
        elif lead is not None and owned == len(lead.stores):
            # The entity joins the group: in each of its stores it takes the row after
            # the group's prefix (whose entity moves to the end): one move, no swaps.
            at = lead.size
            for comp, store in zip(components, picked, strict=True):
                if store.owner is lead:
                    row = store.insert_one(key, slot, at)  # may reallocate: write after
                else:
                    row = store.append_one(key, slot)
                comp._write_one(store.data, row)
            lead.grow_one()
        else:
            for comp, store in zip(components, picked, strict=True):
                row = store.append_one(key, slot)  # may reallocate data: write after
                comp._write_one(store.data, row)
        return key  # type: ignore[return-value]  # Entity is an int (a NewType): no call

    def spawn_batch(self, *components: Any, count: int | None = None) -> np.ndarray:
        """Create many entities at once; scalar values broadcast. Returns uint64 keys."""
        if not self._open_queries:
            few = self._spawn_few(components, count)
            if few is not None:
                return few
        comps, n = self._parse(components, "spawn_batch")
        self._check_new_types(comps, "spawn_batch")
        if count is not None:
            try:
                count = operator.index(count)  # 2.5 entities is not a count
            except TypeError:
                raise TypeError(f"spawn_batch: count must be an int, got {count!r}") from None
        if n is None:
            if count is None:
                raise ValueError("spawn_batch: give count= or at least one batched field")
            n = count
        elif count is not None and count != n:
            raise ValueError(f"spawn_batch: count={count} but the batch has {n} rows")
        if n < 0:
            raise ValueError(f"spawn_batch: count must be >= 0, got {n}")
        linked = any(type(comp) is ChildOf for comp in comps)
        if linked:  # (a dead parent refuses the call before any store is created)
            comps, parents = self._split_parents(comps, n, "spawn_batch")
            self._store(ChildOf)
        for comp in comps:
            self._store(type(comp))
        made: list[int] | None = None
        if n <= SMALL_SPAWN and not self._open_queries and not linked:
            made = self._spawn_rows(comps, [self._stores[type(comp)] for comp in comps], n)
        if made is not None:
            keys = np.array(made, KEY_DTYPE)
        else:
            comps = self._snapshot_values(comps)
            keys, first = self._allocate(n)
            if self._deferring:
                self._pending_spawns.append(keys)
            self._run_or_defer(lambda: self._attach(keys, comps, fresh=True, first_slot=first))
            if linked:
                self._run_or_defer(lambda: self._apply_parents(keys, parents, "spawn_batch"))
        keys.flags.writeable = False  # the caller's copy; stores hold their own
        return keys

    @staticmethod
    def _insert_nested(components: Sequence[Any], stores: list[ComponentStore], root: Group,
                       key: int, slot: int) -> None:
        """Rows for one new entity (its ``key`` and ``slot``) with single ``components``
        in ``stores``, some owned by the chain of nested groups under ``root``: in each
        level it joins, it takes the row after that level's prefix (see
        ``ComponentStore.insert_chain``)."""
        joined = join_levels(stores, root)
        for comp, store in zip(components, stores, strict=True):
            ats = insert_positions(store, joined)
            row = store.append_one(key, slot) if ats is None else store.insert_chain(
                key, slot, ats)  # may reallocate: write after
            comp._write_one(store.data, row)
        for level in joined:
            level.grow_one()

    def _spawn_few(self, components: tuple[Any, ...], count: Any) -> np.ndarray | None:
        """``spawn_batch`` of 1 to ``SMALL_SPAWN`` entities of components whose types have
        stores (none a parent link, none given twice, batches of one length that ``count``,
        an int, agrees with), checked with no more than that; None (nothing done) for
        anything else: the general path checks again and raises what it finds wrong.
        (A tick's respawn of a few entities pays ~5 us here against ~13 us there.)"""
        n = count
        if n is not None and (type(n) is not int or not 0 < n <= SMALL_SPAWN):
            return None
        stores = self._stores
        picked: list[ComponentStore] = []
        for comp in components:
            ctype = type(comp)
            store = stores.get(ctype)  # only component instances have a store type
            if store is None or ctype is ChildOf or store in picked:
                return None
            batch = comp._batch
            if batch is not None:
                if n is None:
                    n = batch
                elif batch != n:
                    return None
            picked.append(store)
        if n is None or not 0 < n <= SMALL_SPAWN:
            return None
        few = self._spawn_rows(components, picked, n)
        if few is None:
            return None
        keys = np.array(few, KEY_DTYPE)
        keys.flags.writeable = False  # the caller's copy; stores hold their own
        return keys

    def _spawn_rows(self, comps: Sequence[Any], stores: list[ComponentStore],
                    n: int) -> list[int] | None:
        """``spawn_batch`` of a few entities (checked components, their ``stores``), one
        entity at a time: for small batches, numpy's per-call cost outweighs the rows.
        None (nothing done) where that would leave other rows than ``_attach``."""
        joined: list[Group] | None = None
        if n > 1 or _insert_entity is None:
            joined = self._joined_levels(stores)
            if joined and n > 1 and not self._inserts_exact(stores, joined, n):
                return None
        # Every row as a tuple in field order, converted once (None: a field with a
        # per-row shape, written by _write_row).
        rows = [comp._row_tuples(n) for comp in comps]
        slots = self._slots
        keys = []
        for i in range(n):
            key, slot = slots.allocate_one()
            if len(slots.generations) != self._slot_capacity:
                self._cover_slots()
            if _insert_entity is not None and _insert_entity(
                    stores, key, slot, [comp if values is None else values[i]
                                        for comp, values in zip(comps, rows, strict=True)],
                    i, CHUNK_ROWS):
                keys.append(key)
                continue
            if joined is None:
                joined = self._joined_levels(stores)
            for comp, store, values in zip(comps, stores, rows, strict=True):
                ats = insert_positions(store, joined)
                if ats is not None:
                    row = store.insert_chain(key, slot, ats)
                else:
                    row = store.append_one(key, slot)
                if values is not None:  # (written after the move: it may reallocate)
                    store.data[row] = values[i]
                else:
                    comp._write_row(store.data, row, i)
            for group in joined:
                group.grow_one()
            keys.append(key)
        return keys

    @staticmethod
    def _joined_levels(stores: list[ComponentStore]) -> list[Group]:
        """The groups an entity of exactly ``stores`` joins (every store of theirs is
        given), outermost first within each chain: in those stores it takes the row
        after the group's prefix (the layout of an append and a swap into the prefix, in
        one move)."""
        joined: list[Group] = []
        for store in stores:
            owner = store.owner
            if owner is not None and owner.root not in joined:
                joined += join_levels(stores, owner.root)
        return joined

    @staticmethod
    def _inserts_exact(stores: list[ComponentStore], joined: list[Group], n: int) -> bool:
        """Whether ``n`` entities joining the levels ``joined`` one at a time (each level's
        first row past its prefix moving to the end of that stretch, ``insert_chain``)
        leave the rows ``_attach`` leaves (all ``n`` appended, then each level's
        ``enter_appended`` moving them as a block). Each stretch a level's prefix grows
        into (a store's rows past its owner's prefix; an outer level's prefix past the
        level's), of ``m`` rows, ends rotated by ``n`` (mod ``m``) one at a time; as a
        block it is rotated by ``n`` when ``m >= n`` and kept in order when ``m < n``:
        the same unless ``1 < m < n`` and ``m`` does not divide ``n``."""
        for store in stores:
            owner = store.owner
            if owner is not None and owner in joined:
                m = store.n - owner.size
                if 1 < m < n and n % m:
                    return False
        for level in joined:
            outer = level.outer
            if outer is not None:
                m = outer.size - level.size
                if 1 < m < n and n % m:
                    return False
        return True

    def despawn(self, entity: KeyLike) -> None:
        """Destroy an entity and all its components. ``KeyError`` if not alive."""
        if type(entity) is int and not self._open_queries and not self._pending_despawn:
            # the common case: a live key, no query open, not a parent
            if self._slots.is_alive(entity) and not self._parents_among((entity,)):
                self._destroy_one(entity)
                return
        key = self._check_alive(entity, "despawn")
        if not self._open_queries and not self._parents_among([key]):
            self._destroy_one(key)
            return
        keys = np.array([key], KEY_DTYPE)
        if self._deferring:
            self._pending_despawn.update(hierarchy.with_descendants(self, keys).tolist())
        self._run_or_defer(lambda: self._destroy(keys))

    def despawn_batch(self, keys: Any) -> None:
        """Destroy many entities. ``KeyError`` (nothing destroyed) if any is not alive."""
        if not self._open_queries:
            few = self._few_live_keys(keys)
            if few is not None and not self._parents_among(few):
                if len(few) > 2:  # (no subtrees to take along: row by row)
                    self._destroy_few(few)
                elif len(few) == 2:
                    self._destroy_two(few[0], few[1])
                elif few:
                    self._destroy_one(few[0])
                return
        arr = self._check_alive_batch(keys, "despawn_batch").copy()
        if self._deferring:
            self._pending_despawn.update(hierarchy.with_descendants(self, arr).tolist())
        self._run_or_defer(lambda: self._destroy(arr))

    def add(self, entity: KeyLike, comp: Any) -> None:
        """Attach a component, replacing the current one of that type if present."""
        key = self._check_alive(entity, "add")
        ctype, _, count = component_values(comp)
        if count not in (None, 1):
            raise ValueError(f"add: got a batch of {count}; use add_batch")
        if ctype is ChildOf:  # the parent link has invariants: it goes through set_parent
            self.set_parent(key, comp.parent)
            return
        self._store(ctype)
        keys = np.array([key], KEY_DTYPE)
        comps = self._snapshot_values([comp])
        self._run_or_defer(lambda: self._attach(keys, comps))

    def add_batch(self, keys: Any, comp: Any) -> None:
        """Attach (or replace) one component type on many entities."""
        arr = self._check_alive_batch(keys, "add_batch").copy()
        ctype, _, count = component_values(comp)
        if count is not None and count != len(arr):
            raise ValueError(f"add_batch: {len(arr)} keys but a batch of {count}")
        if ctype is ChildOf:
            self.set_parent(arr, comp.parent)
            return
        self._store(ctype)
        comps = self._snapshot_values([comp])
        self._run_or_defer(lambda: self._attach(arr, comps))

    def remove(self, entity: KeyLike, ctype: type) -> None:
        """Detach a component. ``KeyError`` if the entity is not alive or lacks it."""
        key = self._check_alive(entity, "remove")
        name = type_schema(ctype).name
        keys = np.array([key], KEY_DTYPE)

        def run() -> None:
            if not self.has(key, ctype):
                op = "remove (deferred)" if self._flushing else "remove"
                raise KeyError(f"{op}: {key_str(key)} has no {name}")
            if ctype is ChildOf:  # detaching keeps the subtree's depths right
                self.set_parent(keys, NULL)  # (at a flush no query is open: it runs now)
            else:
                self._detach(self._stores[ctype], keys)

        self._run_or_defer(run)

    def remove_batch(self, keys: Any, ctype: type) -> None:
        """Detach a component from many entities (all must have it)."""
        arr = self._check_alive_batch(keys, "remove_batch").copy()
        name = type_schema(ctype).name

        def run() -> None:
            store = self._stores.get(ctype)
            rows = store.rows_of(key_slots(arr)) if store else np.full(len(arr), -1)
            if (rows < 0).any():
                first = int(arr[np.flatnonzero(rows < 0)[0]])
                raise KeyError(f"remove_batch: {key_str(first)} has no {name}")
            if ctype is ChildOf:  # detached through set_parent, all or none
                self.set_parent(arr, NULL)
            elif store is not None:  # (None: an empty batch)
                self._detach(store, arr)

        self._run_or_defer(run)

    def _snapshot_values(self, comps: list[Any]) -> list[Any]:
        """Deferred ops must apply the values as they were at the call, not at the flush."""
        return [detached(c) for c in comps] if self._deferring else comps

    def _run_or_defer(self, op: Callable[[], None]) -> None:
        if self._deferring:
            self._deferred.append(op)
        else:
            op()

    def _attach(self, keys: np.ndarray, comps: Iterable[Any], fresh: bool = False,
                first_slot: int | None = None) -> None:
        """Write components onto ``keys``; ``fresh`` keys (just spawned) have none yet."""
        if self._flushing and not fresh:
            self._check_still_alive(keys, "add (deferred)")
        if fresh:
            entering: list[Group] = []  # each group once, when every store has the rows
            filled: list[ComponentStore] = []
            # once, as int64: numpy casts any other index on every scatter (a strided
            # uint32 view of the keys' low words cost ~1.5 us a store at 85 keys)
            slots = None if first_slot is not None else key_slots(keys)
            for comp in comps:
                store = self._store(type(comp))
                appended = store.append(keys, first_slot, slots)  # may reallocate: write after
                comp._write(store.data, appended)
                filled.append(store)
                owner = store.owner
                if isinstance(owner, Group) and owner not in entering:
                    entering.append(owner)
            roots: list[Group] = []
            for group in entering:
                if group.root not in roots:
                    roots.append(group.root)
            for root in roots:
                # Fresh keys have exactly the given types: all join a group whose every
                # store got them (as each store's last rows), none join another; nested
                # groups after the group they are nested in.
                for level in join_levels(filled, root):
                    level.enter_appended(len(keys))
            return
        slots = key_slots(keys)
        for comp in comps:
            store = self._store(type(comp))
            rows = store.rows_of(slots)
            present = rows >= 0
            if present.all():
                comp._write(store.data, rows)
                store.touch(rows)
                continue
            if present.any():
                comp._write(store.data, rows[present], np.flatnonzero(present))
                new = np.flatnonzero(~present)
                new_rows = store.append(keys[new])
                comp._write(store.data, new_rows, new)
                entered = keys[new]
            else:
                new_rows = store.append(keys)
                comp._write(store.data, new_rows)
                entered = keys
            if isinstance(store.owner, Group):
                store.owner.enter(entered)

    def _detach(self, store: ComponentStore, keys: np.ndarray) -> None:
        if isinstance(store.owner, Group):
            store.owner.leave(keys)
        store.remove_rows(store.rows_of(key_slots(keys)))

    def _parents_among(self, keys: Sequence[int]) -> bool:
        """True if one of a few live ``keys`` is some entity's parent (its despawn takes
        the subtree along). A look at the parent column per key: far cheaper for a
        projectile in a world with a hierarchy than the batch path's index check."""
        store = self._stores.get(ChildOf)
        if store is None or store.n == 0:
            return False
        parents = store.columns["parent"][: store.n]
        return any(bool((parents == key).any()) for key in keys)

    def _destroy_one(self, key: int) -> None:
        """``_destroy`` of one live key, row by row (no temporary arrays)."""
        slot = key & SLOT_MASK
        if _remove_entity is not None and _remove_entity(self._stores.values(), slot,
                                                         CHUNK_ROWS):
            self._slots.release_one(slot)
            return
        for store in self._stores.values():
            if store.n:
                row = store.sparse.item(slot)
                if row >= 0:
                    owner = store.owner
                    if owner is not None and row < store.group_size:
                        owner.remove_one(row, slot)  # from every store of the group
                    else:
                        store.remove_one(row, slot)
        self._slots.release_one(slot)

    def _destroy_two(self, key: int, other: int) -> None:
        """``_destroy_few`` of two keys, cheaper: in each store, removing the higher row
        first and then the lower one, each as ``_destroy_one`` removes a row (the runs'
        last rows filling the holes), leaves the rows ``removal_plan`` leaves (not so
        for three rows or more, nor for two the other way round)."""
        slot, other_slot = key & SLOT_MASK, other & SLOT_MASK
        shrunk: dict[Group, int] = {}  # each group's size once the keys are gone
        for store in self._stores.values():
            if not store.n:
                continue
            item = store.sparse.item
            high, low = item(slot), item(other_slot)
            high_slot, low_slot = slot, other_slot
            if high < low:
                high, low, high_slot, low_slot = low, high, other_slot, slot
            if high < 0:
                continue
            owner = store.owner
            if owner is None:
                store.remove_one(high, high_slot)
                if low >= 0:
                    store.remove_one(low, low_slot)
                continue
            if owner.inner is None:  # one prefix (the common case, inline)
                size = owner.size
                if high < size:
                    size -= 1
                    store.remove_group_one(high, high_slot, size)
                else:
                    store.remove_one(high, high_slot)
                if low >= 0:
                    if low < size:
                        size -= 1
                        store.remove_group_one(low, low_slot, size)
                    else:
                        store.remove_one(low, low_slot)
                shrunk[owner] = size  # (the same in each of its stores)
                continue
            levels = owner.chain()  # outermost first: the prefixes a row may lie in
            sizes = [level.size for level in levels]
            _remove_in_runs(store, high, high_slot, sizes)
            if low >= 0:
                _remove_in_runs(store, low, low_slot, sizes)
            for level, size in zip(levels, sizes, strict=True):
                shrunk[level] = size
        for group, size in shrunk.items():
            group._set_size(size)
        release = self._slots.release_one
        release(slot)
        release(other_slot)

    def _destroy_few(self, keys: list[int]) -> None:
        """``_destroy`` of a few distinct live keys none of which is a parent, row by row
        (no temporary arrays) yet with ``_destroy``'s rows: each store moves the rows
        ``removal_plan`` moves (``few_removal_plan``), not a swap-removal per key, which
        would leave another order (row order is state: hashes, query order)."""
        slots = [key & SLOT_MASK for key in keys]
        shrunk: dict[Group, int] = {}  # each group's size once the keys are gone
        # the last group plan: (owner, row count, rows, plan); the next store of the same
        # group with the same rows and row count uses it again
        last: tuple[Group, int, list[int], tuple[list[int], list[int], list[int]]] | None
        last = None
        for store in self._stores.values():
            n = store.n
            if not n:
                continue
            rows = list(map(store.sparse.item, slots))
            gone = slots
            if min(rows) < 0:
                gone = [slot for slot, row in zip(slots, rows, strict=True) if row >= 0]
                if not gone:
                    continue
                rows = [row for row in rows if row >= 0]
            rows.sort()
            owner = store.owner
            if owner is None:  # one run: remove_rows' moves
                plan = few_removal_plan(rows, [n])
            elif last is not None and last[0] is owner and last[1] == n and last[2] == rows:
                plan = last[3]
            else:
                levels = owner.chain()  # the store's runs: innermost first, then the rest
                bounds = [level.size for level in reversed(levels)]
                bounds.append(n)
                plan = few_removal_plan(rows, bounds)
                cut = plan[2]
                depth = len(levels)
                for i, level in enumerate(levels):  # (the same in each of its stores)
                    shrunk[level] = level.size - cut[depth - 1 - i]
                last = (owner, n, rows, plan)
            store.remove_few(gone, rows, plan[0], plan[1], n - plan[2][-1])
        for group, size in shrunk.items():
            group._set_size(size)
        release = self._slots.release_one
        for slot in slots:
            release(slot)

    def _destroy(self, keys: np.ndarray) -> None:
        if self._flushing:  # a deferred despawn: an earlier one may have taken these keys
            keys = keys[self._slots.alive_mask(keys)]  # along with an ancestor's subtree
        keys = hierarchy.with_descendants(self, keys)  # unchanged when nobody has a parent
        if not len(keys):  # (e.g. a deferred despawn of nothing: no store moves)
            return
        slots = key_slots(keys)
        shrunk: dict[Group, int] = {}  # each group's size once the keys are gone
        # the last removal plan, with its bounds and rows: the next store of the same
        # group (aligned rows, the same runs) uses it again
        last: tuple[list[int], bytes, tuple[np.ndarray, np.ndarray, list[int]]] | None = None
        in_c = storage.REMOVES_IN_C
        for store in self._stores.values():
            if store.n == 0:
                continue
            # the store's runs: the prefixes of its owner and the groups nested in it
            # (innermost first), then its other rows
            owner = store.owner
            levels = owner.chain()[::-1] if owner is not None else []
            bounds = [g.size for g in levels]
            bounds.append(store.n)
            if in_c:  # (the plan found and applied in one pass: the same rows move)
                cut = store.remove_slots(slots, bounds)
                if cut is None:
                    continue
            else:
                rows = store.rows_of(slots)
                has = rows >= 0
                hits = np.count_nonzero(has)  # (a fifth of .all()'s and .any()'s cost)
                if hits != len(rows):
                    if not hits:
                        continue
                    rows = rows[has]
                gone = slots if hits == len(slots) else slots[has]
                if owner is None:
                    store.remove_rows(rows, gone)
                    continue
                held = rows.tobytes()
                if last is not None and last[0] == bounds and last[1] == held:
                    plan = last[2]
                else:
                    plan = removal_plan(rows, bounds)
                    last = (bounds, held, plan)
                store.remove_runs(gone, bounds, plan)
                cut = plan[2]
            for level, removed in zip(levels, cut[:-1], strict=True):
                shrunk[level] = level.size - removed  # (the same in each of its stores)
        for group, size in shrunk.items():
            group._set_size(size)
        self._slots.release(slots)
        if self._pending_despawn:
            self._pending_despawn.difference_update(keys.tolist())

    # -- reads --------------------------------------------------------------------------
    def is_alive(self, entity: KeyLike) -> bool:
        """True while the key's entity exists (False for NULL, stale or foreign keys;
        ``TypeError`` for what is not a key, e.g. a float or a string, as in ``get``)."""
        return self._slots.is_alive(as_key(entity, "is_alive"))

    def has(self, entity: KeyLike, ctype: type) -> bool:
        """True if the entity is alive and has a component of this type (``TypeError``
        for what is not a key)."""
        key = as_key(entity, "has")
        store = self._stores.get(ctype)
        if store is None:
            type_schema(ctype)
            return False
        return self._slots.is_alive(key) and bool(store.contains(key_slot(key)))

    def get(self, entity: KeyLike, ctype: type) -> Record:
        """The entity's component as a :class:`Record`: ``rec["x"]`` reads the store,
        ``rec["x"] = 5`` writes it (found by key on every access, so it never goes stale
        silently). For many entities, use a query."""
        store = self._stores.get(ctype)
        if type(entity) is int and store is not None and not self._pending_despawn:
            slots = self._slots  # the common case: one index lookup, handed to the Record
            slot = entity & SLOT_MASK
            if slots.is_alive(entity) and slot < len(store.sparse):
                row = store.sparse.item(slot)
                if row >= 0:
                    return Record(store, entity, slots, row)
        key = self._check_alive(entity, "get")
        store = self._stores.get(ctype)
        if store is None or not store.contains(key_slot(key)):
            raise KeyError(f"get: {key_str(key)} has no {type_schema(ctype).name}"
                           f"{self._deferred_note(key)}")
        return Record(store, key, self._slots)

    def try_get(self, entity: KeyLike, ctype: type) -> Record | None:
        """Like :meth:`get`, but ``None`` where ``get`` raises ``KeyError`` (the entity is
        gone or has no ``ctype``). ``TypeError`` still for what is not a key or a type."""
        key = as_key(entity, "try_get")
        store = self._stores.get(ctype)
        if store is None:
            type_schema(ctype)
            return None
        if (not self._slots.is_alive(key) or not store.contains(key_slot(key))
                or key in self._pending_despawn):
            return None
        return Record(store, key, self._slots)

    def alive(self, keys: Any) -> np.ndarray:
        """Vectorised :meth:`is_alive`: a bool array shaped like ``keys`` (any integer
        array, e.g. a column of entity references)."""
        return alive_mask(self, keys)

    def get_batch(self, keys: Any, ctype: type) -> np.ndarray:
        """The ``ctype`` rows of many entities, in key order: a structured array (a copy;
        repeated keys repeat rows). ``KeyError`` naming the first key that is not alive or
        has no ``ctype``."""
        return get_batch(self, keys, ctype)

    def set_batch(self, keys: Any, ctype: type, values: Any) -> None:
        """Write ``ctype`` values of many entities: structured rows (e.g. from
        :meth:`get_batch`), a mapping ``{field: one value or one per key}``, or a
        ``ctype(...)`` instance. Only the fields given are written; nothing is written if
        any key or value is bad."""
        set_batch(self, keys, ctype, values)

    def _deferred_note(self, key: int) -> str:
        """Why a live key may lack a component: its spawn is waiting for the query block."""
        if not self._deferring:
            return ""
        if any(np.any(keys == np.uint64(key)) for keys in self._pending_spawns):
            return (" yet (it was spawned inside a query block: its components are "
                    "attached when the outermost block ends)")
        if self._deferred:
            return (" (add and remove inside a query block take effect when the outermost "
                    "block ends)")
        return ""

    def components_of(self, entity: KeyLike) -> tuple[type, ...]:
        """The component types an entity has."""
        key = self._check_alive(entity, "components_of")
        slot = key_slot(key)
        return tuple(t for t, s in self._stores.items() if s.contains(slot))

    def entities(self) -> np.ndarray:
        """Keys of all live entities (uint64, slot order)."""
        return self._slots.keys_alive()

    def __len__(self) -> int:
        return self._slots.n_alive

    def slot_table(self) -> SlotTable:
        """A copy of the allocator state (generations, alive flags, free-list order)."""
        return self._slots.table()

    def count(self, ctype: type) -> int:
        """How many entities have a component of this type."""
        store = self._stores.get(ctype)
        if store is None:
            type_schema(ctype)  # TypeError for a non-component
            return 0
        return store.n

    # -- hierarchy and blueprints ---------------------------------------------------------
    def _parent_keys(self, parent: Any, n: int, op: str) -> np.ndarray:
        """``parent`` (one key for all, or one per child) as checked uint64 keys."""
        if np.ndim(parent) == 0:
            if as_key(parent, f"{op} (parent)") == NULL:
                return np.zeros(n, KEY_DTYPE)
            return np.full(n, self._check_alive(parent, f"{op} (parent)"), KEY_DTYPE)
        arr = as_keys(parent)
        if len(arr) != n:
            raise ValueError(f"{op}: {n} children but {len(arr)} parents")
        linked = arr != NULL
        alive = self._slots.alive_mask(arr) | ~linked
        if self._pending_despawn and linked.any():
            alive &= ~np.isin(arr, np.fromiter(self._pending_despawn, KEY_DTYPE))
        if not alive.all():
            first = int(np.flatnonzero(~alive)[0])
            self._check_alive(int(arr[first]), f"{op} (parent at index {first})")
        return arr.copy()

    def _split_parents(self, comps: list[Any], n: int, op: str) -> tuple[list[Any], np.ndarray]:
        """Take the ``ChildOf`` out of a spawn's components; return the parent keys."""
        link = next(c for c in comps if type(c) is ChildOf)
        parents = np.broadcast_to(as_keys(link.parent), (n,)) if n else np.zeros(0, KEY_DTYPE)
        return [c for c in comps if c is not link], self._parent_keys(parents, n, op)

    def _check_still_alive(self, keys: np.ndarray, op: str) -> None:
        """At flush time: a key alive at the call may since have gone with its subtree."""
        alive = self._slots.alive_mask(keys)
        if not alive.all():
            key = int(keys[np.flatnonzero(~alive)[0]])
            raise KeyError(f"{op}: {self._slots.why_dead(key)} (despawned earlier in the "
                           f"same query block, e.g. with an ancestor)")

    def _apply_parents(self, children: np.ndarray, parents: np.ndarray, op: str) -> None:
        if self._flushing:
            self._check_still_alive(children, f"{op} (deferred)")
            self._check_still_alive(parents[parents != NULL], f"{op} (deferred, parent)")
        hierarchy.apply_parents(self, children, parents)

    def set_parent(self, child: Any, parent: Any = NULL) -> None:
        """Make ``child`` (a key or an array of keys) a child of ``parent`` (one key, or
        one per child; NULL detaches). A child that already has this parent keeps its
        place; one that moves goes last among its new siblings. ``KeyError`` names a dead
        key, ``ValueError`` a cycle (an entity under its own descendant); nothing changes
        then. Deferred inside a query block."""
        children = self._check_alive_batch(child, "set_parent").copy()
        parents = self._parent_keys(parent, len(children), "set_parent")
        self._run_or_defer(lambda: self._apply_parents(children, parents, "set_parent"))

    def parent(self, entity: KeyLike) -> Entity:
        """The parent of ``entity``, NULL for a root."""
        key = self._check_alive(entity, "parent")
        return Entity(int(hierarchy.parent_of(self, np.array([key], KEY_DTYPE))[0]))

    def children(self, entity: KeyLike) -> np.ndarray:
        """The children of ``entity`` (uint64 keys) in the order they were attached."""
        key = self._check_alive(entity, "children")
        idx = hierarchy.index(self)
        if idx is None:
            return np.zeros(0, KEY_DTYPE)
        return idx.children_of(np.array([key], KEY_DTYPE))

    def descendants(self, entity: KeyLike) -> np.ndarray:
        """Every entity below ``entity`` (uint64 keys), breadth-first: its children in
        attach order, then theirs, level by level."""
        key = self._check_alive(entity, "descendants")
        idx = hierarchy.index(self)
        if idx is None:
            return np.zeros(0, KEY_DTYPE)
        return idx.descendants(np.array([key], KEY_DTYPE))

    def extract(self, keys: Any, descendants: bool = True) -> Blueprint:
        """Copy entities (every component; their subtrees unless ``descendants=False``)
        into a self-contained :class:`Blueprint`. The world is not changed."""
        return extract(self, keys, descendants)

    def instantiate(self, blueprint: Blueprint, parent: KeyLike = NULL) -> Instance:
        """Spawn a copy of ``blueprint`` under fresh keys (allocated in bulk) and return
        the :class:`Instance`. ``Entity`` fields that point inside the blueprint are
        remapped to the new keys; others become NULL and are listed in
        ``inst.dangling``. The blueprint's roots become children of ``parent`` (unless
        NULL). All or nothing: ``SaveFileError``/``KeyError`` leave the world unchanged."""
        return instantiate(self, blueprint, parent)

    # -- queries ------------------------------------------------------------------------
    def query(self, *types: type, without: Iterable[type] = (),
              readonly: Iterable[type] = ()) -> Query:
        """Entities with all ``types`` (and none of ``without``): ``with world.query(...) as q``.

        The arguments are checked once per distinct call shape; the resolved rows are
        reused until a structural change moves rows of a store involved."""
        # (the common call shape, types alone, has its own short key)
        key: Any = (types, without, readonly) if without or readonly else types
        try:
            plan = self._plans.get(key)
        except TypeError:  # lists or other unhashable iterables: normalise
            key = (types, tuple(without), tuple(readonly))
            without, readonly = key[1], key[2]
            plan = self._plans.get(key)
        if plan is not None:
            query = plan.idle
            if query is not None and query._in is None and getrefcount(query) == IDLE_REFS:
                # Nothing but the plan holds its last query (no block has it open, no
                # caller kept it; an open block with no name left, entered by hand, is
                # still open): hand it out again instead of building one, as fresh
                # as a new one (no keys until its block opens).
                query.entities = NO_KEYS
                return query
        else:
            plan = QueryPlan(self, types, without, readonly)
            if len(self._plans) < MAX_QUERY_PLANS:
                self._plans[key] = plan
        query = plan.idle = Query(self, plan)
        return query

    def group(self, *types: type) -> Group:
        """Create an owning group so queries over exactly these types get aligned views.

        Types that include every type of an existing group (and of the group nested in
        it, if any) plus new ones make a *nested* group: its members (entities with all
        ``types``) come first inside the outer group's rows, so queries over any of these
        types that only its members match get views too."""
        if len(types) < 2 or len(set(types)) != len(types):
            raise ValueError("a group needs at least two different component types")
        if self._deferring:
            raise RuntimeError("cannot create a group while a query is open")
        stores = [self._store(t) for t in types]
        owned = [s for s in stores if s.owner is not None]
        outer = self._nest_target(stores) if owned else None
        if owned and outer is None:
            groups = {id(s.owner): s.owner for s in owned}.values()
            names = "; ".join("(" + ", ".join(schema_of(t).name for t in g.types) + ")"
                              for g in groups if isinstance(g, Group))
            raise ValueError(f"{', '.join(s.schema.name for s in owned)} already belong to the "
                             f"group {names} (a store has one group; a new group may nest in "
                             f"one only with all of its types plus new ones, one nested group "
                             f"per group; writing queries create groups the first time: "
                             f"create groups up front, or use World(auto_group=False))")
        group = Group(types, stores, outer=outer)
        self._groups.append(group)
        return group

    @staticmethod
    def _nest_target(stores: Sequence[ComponentStore]) -> Group | None:
        """The group a new group over ``stores`` would nest in: the innermost level of
        the one chain that owns some of them, when ``stores`` hold all of its stores,
        at least one store no group owns, and it holds no nested group yet."""
        innermost = innermost_level(stores, free=True)
        if innermost is None or len(stores) <= len(innermost.stores):
            return None
        if not all(s in stores for s in innermost.stores):
            return None
        return innermost

    def _group_for(self, types: Sequence[type], may_create: bool = True,
                   stores: Sequence[ComponentStore] | None = None) -> Group | None:
        """The group owning exactly ``types`` (their ``stores``, when the caller has
        them), creating it when allowed; None if there is none."""
        if len(types) < 2:  # a one-type group is useless and would block a real one
            return None
        if stores is None:
            stores = [self._store(t) for t in types]
        owner = stores[0].owner
        if isinstance(owner, Group) and set(owner.types) == set(types):
            return owner
        if may_create and owner is None and self._auto_group and self._open_queries <= 1 and all(
            s.owner is None for s in stores
        ):
            group = Group(types, stores)
            self._groups.append(group)
            return group
        return None

    def _begin_query(self) -> None:
        self._open_queries += 1

    def _end_query(self) -> None:
        self._open_queries -= 1
        if self._open_queries == 0:
            self._flush()

    def _flush(self) -> None:
        ops, self._deferred = self._deferred, []
        error: Exception | None = None
        self._flushing = True
        try:
            for op in ops:
                try:
                    op()
                except Exception as exc:  # run the rest; report the first failure
                    error = error or exc
        finally:
            self._flushing = False
        self._pending_despawn.clear()
        self._pending_spawns.clear()
        if error is not None:
            raise error

    # -- snapshots ----------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Copy the whole state (stores, slot table, groups, resources, tick, rng).

        Parts unchanged since the previous snapshot (or restore) are shared, not copied.
        """
        if self._open_queries:
            raise RuntimeError("cannot snapshot while a query is open")
        previous = self._last_snapshot() if self._last_snapshot is not None else None
        snap = take_snapshot(self, previous)
        self._last_snapshot = weakref.ref(snap)
        return snap

    def restore(self, snap: Snapshot, *, source: str = "memory") -> None:
        """Bring back the state of ``snap``; every key (also inside components) is valid
        again. ``SaveFileError`` (world unchanged) if it does not fit this world. Then runs
        the ``on_restore`` callbacks (see there for what happens when one raises)."""
        event = restore_snapshot(self, snap, source)
        self._last_snapshot = weakref.ref(snap)
        self._jumps += 1
        run_restore_callbacks(self, event)

    def state_hash(self) -> str:
        """A canonical 128-bit xxh3 digest (hex) of the whole replay state: slot table,
        every store's keys and rows in row order, groups, resources, tick and rng state.
        Independent of component registration order; see ``ecs_engine.statehash``."""
        return state_hash(self)

    @contextlib.contextmanager
    def _all_or_nothing(self) -> Iterator[None]:
        """If the block raises, put the world back exactly as it was (slot table, stores,
        groups, registered types; no ``on_restore`` callbacks: nothing was restored from
        the player's point of view). For bulk loaders such as levels."""
        if self._open_queries:  # changes are deferred to the block's end: nothing to undo
            yield
            return
        previous = self._last_snapshot() if self._last_snapshot is not None else None
        before = take_snapshot(self, previous)
        known = set(self._stores)
        try:
            yield
        except BaseException:
            dropped: list[ComponentStore] = []
            for ctype in [t for t in self._stores if t not in known]:
                store = self._stores.pop(ctype)
                dropped.append(store)
                del self._types_by_name[store.schema.name]
                if store.owner is not None:
                    gone = store.owner.chain()  # with the groups nested in it
                    self._groups = [g for g in self._groups if g not in gone]
                    store.owner.disband()
            if dropped:  # a plan resolved in the block holds its stores for good: forget it
                stale = [k for k, p in self._plans.items()
                         if any(s in dropped for s in p.stores)]
                for k in stale:
                    self._plans.pop(k).forget()  # (a caller's kept query resolves again)
                # A store leaving changes the matches of plans that exclude its type,
                # though no kept store's rows may move on the way back: the clock must.
                self._layout_clock.stamp += 1
            restore_snapshot(self, before)
            raise

    def on_restore(self, callback: Callable[[World, RestoreEvent], Any]) -> None:
        """Call ``callback(world, event)`` after every restore or load, so systems can
        rebuild derived state (spatial grids, GPU buffers).

        Callbacks run in registration order. If some raise, the others still run, and
        then ``restore``/``load`` raises one :class:`RestoreCallbackError` (its
        ``errors`` lists every failure): the world already holds the restored state."""
        self._restore_callbacks.append(callback)

    def save(self, path: str | Path) -> Snapshot:
        """Snapshot and write it to ``path`` atomically; returns the snapshot. Prefab-owned
        fields are stored only where they differ from ``self.prefabs``' prefabs."""
        from ecs_engine.savefile import save_world

        return save_world(self, path)

    def load(self, path: str | Path, *, prefabs: PrefabRegistry | None = None) -> None:
        """Read a save file and restore it. Prefab-owned fields the save did not store are
        re-derived from the current prefabs of ``prefabs`` (default ``self.prefabs``; the
        saved values without one), which then becomes ``self.prefabs``, so later saves
        compare against it. ``SaveFileError`` leaves the world unchanged.

        The stores take over the memory the file was read into (no second copy), so
        no snapshot of the loaded state is kept: ``world.snapshot()`` after the load
        makes one if you want to come back to it without reading the file again."""
        from ecs_engine.lookahead import KeyLookahead
        from ecs_engine.migrate import find_saved_type
        from ecs_engine.savefile import SaveFileError
        from ecs_engine.snapshot import prepare_slots, sparse_capacity

        known = self._types_by_name.values()
        # Every index in use plus as many spares (the ones this load replaces), the slot
        # table's three arrays twice and the live-key table: a load after a load takes
        # all its index memory from the pool. After the load, the pool keeps what the
        # next load will take again (trim), nothing older.
        pool = self._index_memory
        pool.keep = 2 * max(len(self._stores), len(known)) + 8
        pool.taken = []
        lookahead = KeyLookahead(lambda high_water: sparse_capacity(self, high_water),
                                 lambda name: find_saved_type(known, name) is not None,
                                 lambda table: prepare_slots(self, table), pool.array)
        try:
            self._load_read(path, prefabs, lookahead)
        except (SaveFileError, OSError) as exc:
            # A caller that keeps the error must not keep the file's memory with it (the
            # frames of its traceback, and of the errors it was raised from, hold the
            # buffers the load read and built).
            chained: BaseException | None = exc
            while chained is not None:
                traceback.clear_frames(chained.__traceback__)
                chained = chained.__cause__ or chained.__context__
            raise
        finally:
            lookahead.stop()  # (lets go of the indexes a failed load built)
            pool.trim(pool.taken)
            pool.taken = None

    def _load_read(self, path: str | Path, prefabs: PrefabRegistry | None,
                   lookahead: KeyLookahead) -> None:
        from ecs_engine.migrate import find_saved_type
        from ecs_engine.prefab_fields import join, rederive
        from ecs_engine.savefile import SaveFileError, read_file_memory
        from ecs_engine.snapshot import prepare_slots

        read, memory = read_file_memory(path, self._buffers, lookahead)
        registry = prefabs if prefabs is not None else self.prefabs
        try:  # what the file holds does not fit this world: name the file too
            snap, derived = join(read)
            del read
            if registry is not None:
                types = {}
                for s in snap.stores:
                    found = (self._types_by_name.get(s.name)
                             or find_saved_type(self._types_by_name.values(), s.name))
                    if found is not None:
                        types[s.name] = found
                snap = rederive(snap, derived, registry, types)
            # A big file's slot table was checked and laid out, and its keys checked,
            # while the rest of it was read (lookahead); what fits is used here.
            prepared = lookahead.prepared_slots(snap.slots) or prepare_slots(self, snap.slots)
            event = restore_snapshot(self, snap, "file", memory, lookahead.results(),
                                     prepared)
        except SaveFileError as exc:
            raise SaveFileError(f"{os.fspath(path)}: {exc}") from None
        del snap  # its columns are the stores' arrays now: it must not outlive this call
        self._last_snapshot = None
        self._jumps += 1
        if prefabs is not None:  # the state now derives from it: later saves split by it
            self.prefabs = prefabs
        run_restore_callbacks(self, event)

    # -- systems ------------------------------------------------------------------------
    def add_system(self, fn: SystemFn, *, name: str | None = None,
                   before: str | SystemFn | None = None,
                   after: str | SystemFn | None = None) -> None:
        """Register ``fn(world, dt)``; runs in registration order unless placed with
        ``before=`` or ``after=`` another system (by name or function)."""
        if not callable(fn):
            raise TypeError(f"add_system: {fn!r} is not callable; pass the function itself "
                            f"(world.add_system(movement)), not the result of calling it")
        sys_name = name or str(getattr(fn, "__name__", repr(fn)))
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # (some builtins have none: they fail at step)
            signature = None
        if signature is not None:
            try:
                signature.bind(self, 0.0)
            except TypeError:
                raise TypeError(f"add_system: {sys_name}{signature} cannot be called as "
                                f"fn(world, dt); a system takes the world and the tick's "
                                f"dt in seconds") from None
        if any(s.name == sys_name for s in self._systems):
            raise ValueError(f"a system named {sys_name!r} is already registered")
        if before is not None and after is not None:
            raise ValueError("give before= or after=, not both")
        entry = System(sys_name, fn)
        if before is not None:
            self._systems.insert(self._system_index(before), entry)
        elif after is not None:
            self._systems.insert(self._system_index(after) + 1, entry)
        else:
            self._systems.append(entry)

    def _system_index(self, ref: str | SystemFn) -> int:
        for i, s in enumerate(self._systems):
            if s.name == ref or s.fn is ref:
                return i
        raise KeyError(f"no system {ref!r}; systems are {list(self.systems)}")

    def remove_system(self, ref: str | SystemFn) -> None:
        del self._systems[self._system_index(ref)]

    @property
    def systems(self) -> tuple[str, ...]:
        """System names in run order."""
        return tuple(s.name for s in self._systems)

    def step(self, dt: float) -> None:
        """Run every system once with ``dt`` seconds, then advance ``tick``."""
        try:
            ok = 0 <= dt < math.inf  # (also False for NaN)
        except TypeError:
            raise TypeError(f"step: dt must be a number of seconds, got {dt!r}") from None
        if not ok:
            raise ValueError(f"step: dt must be a finite number of seconds >= 0, got {dt!r}")
        outer = self.stepping
        self.stepping = True  # queries may reorder rows only while systems run
        try:
            for system in tuple(self._systems):
                try:
                    system.fn(self, dt)
                except Exception as exc:  # (free until something raises)
                    exc.add_note(f"in system {system.name!r}, in world.step at tick "
                                 f"{self.tick}")
                    raise
        finally:
            self.stepping = outer
        self.tick += 1


QUERY_BLOCKS_IN_C = queryblock.install(World, _QueryState, Query, QueryPlan, LayoutClock,
                                       NO_KEYS, ComponentStore, CHUNK_ROWS)
