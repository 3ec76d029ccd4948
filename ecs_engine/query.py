"""Queries: aligned column views over the entities that have a set of components."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ecs_engine.component import schema_of
from ecs_engine.entity import key_slots
from ecs_engine.group import Group
from ecs_engine.hierarchy import ChildOf
from ecs_engine.storage import ComponentStore

if TYPE_CHECKING:
    from ecs_engine.world import World


def _readonly(arr: np.ndarray) -> np.ndarray:
    view = arr.view()
    view.flags.writeable = False
    return view


class Query:
    """Rows of every entity that has all ``types`` and none of ``without``.

    Use as a context manager. ``q[T]`` is a structured array aligned with
    ``q.entities``; writes reach the store by the end of the block (immediately when
    the query is served by an owning group, which hands out views, not copies). A
    copied column is written back row by row where the block changed it, so writes made
    meanwhile elsewhere survive unless the block changed the same row. Columns in
    ``readonly`` are read-only arrays (writing raises ``ValueError``).
    Structural changes made inside the block (spawn, despawn, add, remove) are
    deferred until the outermost query closes.
    """

    def __init__(self, world: World, types: Iterable[type], without: Iterable[type] = (),
                 readonly: Iterable[type] = ()) -> None:
        types_t = tuple(types)
        readonly_t = tuple(readonly)
        if ChildOf in types_t and ChildOf not in readonly_t:
            readonly_t += (ChildOf,)  # parent links change through world.set_parent only
        for t in readonly_t:
            if t not in types_t:
                types_t += (t,)
        if not types_t:
            raise ValueError("query needs at least one component type")
        for t in types_t + tuple(without):
            schema_of(t)
        if len(set(types_t)) != len(types_t):
            raise ValueError("query lists a component type twice")
        self._world = world
        self.types = types_t
        self.without = tuple(without)
        self.readonly = frozenset(readonly_t)
        overlap = set(self.types) & set(self.without)
        if overlap:
            names = ", ".join(schema_of(t).name for t in overlap)
            raise ValueError(f"query both requires and excludes {names}")
        self._open = False
        self._rows: dict[type, slice | np.ndarray] = {}
        self._stores: dict[type, ComponentStore] = {}
        self._cache: dict[type, np.ndarray] = {}
        self._gathered: dict[type, tuple[np.ndarray, np.ndarray]] = {}  # (copy, original)
        self.entities: np.ndarray = np.zeros(0, np.uint64)

    def __enter__(self) -> Query:
        self._world._begin_query()
        self._open = True
        try:
            self._resolve()
        except BaseException:
            self._open = False
            self._world._end_query()
            raise
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            for ctype, (arr, original) in self._gathered.items():
                self._write_back(self._stores[ctype], self._rows[ctype], arr, original)
        finally:
            self._open = False
            self._cache.clear()
            self._gathered.clear()
            self._world._end_query()
        if isinstance(exc, ValueError):
            clearer = self._explain(exc)
            if clearer is not None:
                raise clearer from exc

    def _explain(self, exc: ValueError) -> ValueError | None:
        """numpy's error inside the block, restated in the query's terms (or None).

        Translating here, as the error leaves the block, costs nothing on the hot path:
        ``q[T]`` stays a plain numpy array.
        """
        message = str(exc)
        schemas = [schema_of(t) for t in self.types]
        if message.startswith("no field of name "):
            name = message[len("no field of name "):]
            if any(name in s.field_names for s in schemas):
                return None  # not one of our columns
            listed = "; ".join(f"{s.name} ({', '.join(s.field_names) or 'a tag'})"
                               for s in schemas)
            return ValueError(f"no field {name!r} in this query's components: {listed}")
        if message in ("assignment destination is read-only", "output array is read-only"):
            if not self.readonly:
                return None
            names = ", ".join(schema_of(t).name for t in self.types if t in self.readonly)
            return ValueError(f"{message}: this query declared readonly=({names}); those "
                              f"columns cannot be written (leave a type out of readonly= "
                              f"to write it)")
        return None

    @staticmethod
    def _write_back(store: ComponentStore, rows: Any, arr: np.ndarray,
                    original: np.ndarray) -> None:
        """Scatter only the rows this block changed, so writes made meanwhile through
        ``world.get`` or an inner query survive (and unchanged chunks stay shared)."""
        size = arr.dtype.itemsize
        if size == 0 or len(arr) == 0:
            return
        mine = arr.view(np.uint8).reshape(len(arr), size)
        before = original.view(np.uint8).reshape(len(arr), size)
        changed = (mine != before).any(axis=1)
        if changed.any():
            where = rows[changed]
            store.data[where] = arr[changed]
            store.touch(where)

    def _resolve(self) -> None:
        world = self._world
        stores = {t: world._store(t) for t in self.types}
        self._stores = stores
        excluded = [s for t in self.without if (s := world._stores.get(t)) is not None]
        excluded = [s for s in excluded if s.n]
        first = stores[self.types[0]]
        if len(self.types) == 1 and not excluded:
            self._aligned(slice(0, first.n), first)
            return
        group = world._group_for(self.types, may_create=len(self.readonly) < len(self.types))
        if group is not None and not excluded:
            self._aligned(slice(0, group.size), first)
            return
        if not excluded and self._within_group(stores):
            return

        def skipped(store: ComponentStore) -> int:
            """Leading rows no match can be in: a group's prefix, when its members all
            have a type the query excludes."""
            owner = store.owner
            if isinstance(owner, Group) and any(e.owner is owner for e in excluded):
                return store.group_size
            return 0

        driver = min(stores.values(), key=lambda s: s.n - skipped(s))
        keys = driver.entities[skipped(driver) : driver.n]
        slots = key_slots(keys)
        mask = np.ones(len(keys), np.bool_)
        rows = {}
        for t, store in stores.items():
            r = store.rows_of(slots)
            rows[t] = r
            mask &= r >= 0
        for store in excluded:
            mask &= store.rows_of(slots) < 0
        self._rows = {t: r[mask] for t, r in rows.items()}
        self.entities = _readonly(keys[mask])

    def _within_group(self, stores: dict[type, ComponentStore]) -> bool:
        """Serve a query over some of one group's types by the group's prefix, when no
        entity outside the prefix has all the queried types (checked on the rows past the
        prefix of the smallest store, usually few). True if served."""
        owner = next(iter(stores.values())).owner
        if not isinstance(owner, Group) or any(s.owner is not owner for s in stores.values()):
            return False
        size = owner.size
        driver = min(stores.values(), key=lambda s: s.n)
        if driver.n > size:
            slots = key_slots(driver.entities[size : driver.n])
            outside = np.ones(len(slots), np.bool_)
            for store in stores.values():
                if store is not driver:
                    outside &= store.rows_of(slots) >= 0
            if outside.any():
                return False
        self._aligned(slice(0, size), driver)
        return True

    def _aligned(self, rows: slice, store: ComponentStore) -> None:
        self._rows = dict.fromkeys(self.types, rows)
        self.entities = _readonly(store.entities[rows])

    def __len__(self) -> int:
        self._check_open()
        return len(self.entities)

    def _check_open(self) -> None:
        if not self._open:
            raise RuntimeError("use the query inside a with-block: `with world.query(...) as q:`")

    def __getitem__(self, ctype: type) -> np.ndarray:
        self._check_open()
        if ctype not in self._rows:
            raise KeyError(f"{schema_of(ctype).name} is not part of this query "
                           f"({', '.join(schema_of(t).name for t in self.types)})")
        cached = self._cache.get(ctype)
        if cached is not None:
            return cached
        store = self._stores[ctype]
        rows = self._rows[ctype]
        if isinstance(rows, slice):
            arr = store.data[rows]
            if ctype in self.readonly:
                arr = _readonly(arr)
            else:
                store.touch(rows)
        else:
            arr = store.data[rows]
            if ctype in self.readonly:
                arr.flags.writeable = False
            else:
                self._gathered[ctype] = (arr, arr.copy())
        self._cache[ctype] = arr
        return arr

    @property
    def aligned(self) -> bool:
        """True when the columns are views into the stores (no gather/scatter)."""
        self._check_open()
        return all(isinstance(r, slice) for r in self._rows.values())
