"""Checking a save's entity keys while the rest of the file is still being read.

A load must check every stored key against the slot table before the world changes (a
hostile or corrupt file never half-loads), and at a million entities those checks cost
about half as much as reading the file. A big file is read on one thread while the
other (``ecs_engine.readahead``) parses each part as soon as it is in
(``savefile._parse_arriving``) and, through this watcher, lays out the slot table and
checks each store's keys: the work hides behind the read, on keys that just arrived.

Nothing here decides anything. The parse runs before the checksum is known; what this
built is used only once the checksum and the rest of the checks passed, and only where
it was built from the very bytes the parse found (``KeyIndex.fits``). A file it could
not follow (odd layout, short read, any error) is checked after the read instead.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ecs_engine.memcopy import address_of
from ecs_engine.slotmap import PreparedSlots, SlotTable
from ecs_engine.snapshot import Allocate, KeyIndex, LiveSlots


class KeyLookahead:
    """A ``ReadWatcher`` for ``read_file_memory``: indexes keys as the read parses them.

    ``capacity_for(high_water)``: the slot capacity the world will have (the length of
    each sparse index); ``wanted(name)``: whether the world takes the saved component
    ``name`` (only those are indexed: a file may name thousands of stores the load then
    skips or refuses, and each index is a slot-table-sized array); ``prepare(table)``:
    checks the saved slot table and lays it out in new slot-map arrays (``prepare_slots``),
    done as soon as the table is in; ``alloc(length, dtype)``: memory for the indexes and
    the numpy check's live-key table (the world's pool). After the read,
    ``prepared_slots(table)`` gives what ``prepare`` made if it was made from ``table``'s
    very bytes (else None: the caller prepares), and ``results()`` the indexes by
    component name."""

    def __init__(self, capacity_for: Callable[[int], int],
                 wanted: Callable[[str], bool],
                 prepare: Callable[[SlotTable], PreparedSlots], alloc: Allocate) -> None:
        self._capacity_for = capacity_for
        self._alloc = alloc
        self._wanted = wanted
        self._prepare = prepare
        self._live: LiveSlots | None = None
        self._capacity = 0
        self._prepared: PreparedSlots | None = None
        self._indexes: dict[str, KeyIndex] = {}

    def slot_table(self, table: SlotTable) -> None:
        try:
            self._live = LiveSlots.of(table.generations, table.alive, table.free, self._alloc)
            self._capacity = self._capacity_for(len(table.generations))
        except Exception:  # (the check after the read reports what is wrong)
            self._live = None
            return
        try:
            self._prepared = self._prepare(table)
        except Exception:
            self._prepared = None

    def keys(self, name: str, keys: np.ndarray) -> None:
        if self._live is None or not len(keys) or not self._wanted(name):
            return  # (nothing to index, or a store the load will not take)
        try:
            # (a store whose keys equal an earlier one's copies its index)
            twin = next((b for b in self._indexes.values() if b.keys_equal(keys)), None)
            index = KeyIndex.build(keys, self._live, self._capacity, twin, self._alloc)
        except Exception:  # (memory: the check after the read tries again)
            return
        self._indexes[name] = index

    def prepared_slots(self, table: SlotTable) -> PreparedSlots | None:
        """``prepare``'s result for ``table`` (the parsed slot table) when it was made
        from the same memory; else None."""
        prepared = self._prepared
        if prepared is None or not all(
                a.dtype == b.dtype and len(a) == len(b)
                and (not len(a) or address_of(a) == address_of(b))
                for a, b in ((prepared.table.generations, table.generations),
                             (prepared.table.alive, table.alive),
                             (prepared.table.free, table.free))):
            return None
        return PreparedSlots(table, prepared.generations, prepared.alive, prepared.free)

    def results(self) -> dict[str, KeyIndex]:
        return self._indexes

    def stop(self) -> None:
        """Let go of what was built and read (a load that failed, or is done)."""
        self._live = self._prepared = None
        self._indexes = {}
