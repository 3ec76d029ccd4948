"""Owning groups: stores that keep their shared entities first, in the same order.

Like EnTT's owning groups: for a group over (A, B), rows ``[0, size)`` of A's and B's
stores hold the same entities in the same order, so a query over exactly (A, B) gets
contiguous, aligned views with no gather.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ecs_engine.entity import key_slots
from ecs_engine.storage import ComponentStore, move_plan


class Group:
    """Keeps the joined prefix of several stores aligned."""

    def __init__(self, types: Sequence[type], stores: Sequence[ComponentStore],
                 adopt_size: int | None = None) -> None:
        """Own ``stores`` and sort their shared entities to the front; with
        ``adopt_size`` the stores are already in group order (after a restore)."""
        for store in stores:
            if store.owner is not None:
                raise ValueError(f"{store.schema.name} is already owned by another group")
        self.types = tuple(types)
        self.stores = tuple(stores)
        self.size = 0
        for store in stores:
            store.owner = self
            store.clock.stamp += 1
        if adopt_size is not None:
            self._set_size(adopt_size)
            return
        self._set_size(0)
        smallest = min(self.stores, key=lambda s: s.n)
        self.enter(smallest.entities[: smallest.n].copy())

    def _set_size(self, size: int) -> None:
        self.size = size
        for store in self.stores:
            store.group_size = size
            store.clock.stamp += 1

    def enter(self, keys: np.ndarray) -> None:
        """Bring in those of ``keys`` (distinct) that now have every component."""
        if len(keys) == 0:
            return
        slots = key_slots(keys)
        rows0 = self.stores[0].rows_of(slots)
        mask = rows0 >= self.size
        for store in self.stores[1:]:
            mask &= store.rows_of(slots) >= 0
        if not mask.any():
            return
        slots = slots[mask]
        targets = np.arange(self.size, self.size + len(slots))
        for store in self.stores:
            store.move_rows(store.rows_of(slots), targets)
        self._set_size(self.size + len(slots))

    def enter_appended(self, count: int) -> None:
        """``enter`` of fresh entities that were just appended to every store of the
        group, as the last ``count`` rows of each (in the same key order): all of them
        join, with no index lookups, and nothing moves where the group already spans its
        store (the common case: the appended rows are the group's next rows)."""
        if count == 0:
            return
        size = self.size
        targets: np.ndarray | None = None
        for store in self.stores:
            start = store.n - count
            if start != size:
                if targets is None:
                    targets = np.arange(size, size + count)
                store.move_rows(np.arange(start, store.n), targets)
        self._set_size(size + count)

    def grow_one(self) -> None:
        """One entity joined at row ``size`` of every store (``ComponentStore.insert_one``)."""
        self._set_size(self.size + 1)

    def remove_one(self, row: int, slot: int) -> None:
        """Remove the entity in group row ``row`` (its key's ``slot``) from every store
        of the group: its group's last row fills its place and the store's last row
        fills that one (two moves per store, no swaps)."""
        last = self.size - 1
        for store in self.stores:
            store.remove_group_one(row, slot, last)
        self._set_size(last)

    def leave(self, keys: np.ndarray) -> None:
        """Move those of ``keys`` (distinct) that are in the group out of it."""
        if len(keys) == 0:
            return
        rows = self.stores[0].rows_of(key_slots(keys))
        self.leave_rows(rows[rows >= 0])

    def leave_rows(self, rows: np.ndarray) -> None:
        """``leave`` of the entities in ``rows`` (distinct, int64) of any one store of
        the group: prefix rows name the same entities in every store, the others are not
        members (a caller that looked the rows up already saves the lookup)."""
        rows = rows[rows < self.size]
        if len(rows) == 0:
            return
        rows.sort()
        targets = np.arange(self.size - len(rows), self.size)
        moves = move_plan(rows, targets)  # the same rows in every store: planned once
        if moves is not None:
            for store in self.stores:
                store.place_rows(*moves)
        self._set_size(self.size - len(rows))

    def disband(self) -> None:
        for store in self.stores:
            store.owner = None
            store.group_size = 0
            store.clock.stamp += 1
        self.size = 0
