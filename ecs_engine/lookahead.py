"""Checking a save's entity keys while the rest of the file is still being read.

A load must check every stored key against the slot table before the world changes (a
hostile or corrupt file never half-loads), and at a million entities those checks cost
about half as much as reading the file. A big file is read on a second thread
(``ecs_engine.readahead``), so the load checks each store's keys as soon as their bytes
are in, while the thread reads on: the checks hide behind the read, and they read keys
that just arrived, from the cache.

Nothing here decides anything. What it built is used only where it was built from the
very bytes the full parse later finds (``KeyIndex.fits``); the checksum and every other
check still run after the read, and a file this could not follow (odd layout, short
read, any error) is simply checked there instead.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ecs_engine.entity import KEY_DTYPE
from ecs_engine.memcopy import address_of
from ecs_engine.readahead import THREAD_FROM
from ecs_engine.savefile import arriving_columns
from ecs_engine.slotmap import PreparedSlots, SlotTable
from ecs_engine.snapshot import Allocate, KeyIndex, LiveSlots

MIN_BYTES = THREAD_FROM  # smaller files are read in one go: the check after it does it


class KeyLookahead:
    """A ``ReadWatcher`` for ``read_file_memory``: indexes keys as their bytes arrive.

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
        self._prepared: PreparedSlots | None = None
        self._indexes: dict[str, KeyIndex] = {}

    def read(self, buf: np.ndarray, size: int, wait: Callable[[int], int]) -> None:
        if size < MIN_BYTES:
            return
        try:
            self._follow(buf, size, wait)
        except Exception:  # (the full check after the read reports what is wrong)
            self._prepared, self._indexes = None, {}

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
        self._prepared, self._indexes = None, {}

    def _follow(self, buf: np.ndarray, size: int, wait: Callable[[int], int]) -> None:
        generations = alive = None
        live: LiveSlots | None = None
        capacity = 0
        built: list[KeyIndex] = []  # a store whose keys equal an earlier one's copies it
        for kind, name, column in arriving_columns(buf, size, wait):
            if kind == "generations":
                generations = column.astype(np.uint32, copy=False)
            elif kind == "alive":
                alive = column.view(np.bool_)
            elif kind == "free" and generations is not None and alive is not None:
                free = column.astype(np.int64, copy=False)
                live = LiveSlots.of(generations, alive, free, self._alloc)
                capacity = self._capacity_for(len(generations))
                try:
                    self._prepared = self._prepare(SlotTable(generations, alive, free))
                except Exception:  # (a table that fails its checks: reported after)
                    self._prepared = None
            elif kind == "keys" and live is not None:
                if not len(column) or not self._wanted(name):
                    continue  # (nothing to index, or a store the load will not take)
                keys = column.astype(KEY_DTYPE, copy=False)
                twin = next((b for b in built if b.keys_equal(keys)), None)
                index = KeyIndex.build(keys, live, capacity, twin, self._alloc)
                built.append(index)
                self._indexes[name] = index
