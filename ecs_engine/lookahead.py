"""Checking a save's entity keys while the rest of the file is still being read.

A load must check every stored key against the slot table before the world changes (a
hostile or corrupt file never half-loads), and at a million entities those gathers and
scatters cost about as much as reading the file. Both mostly wait on memory, and numpy
and file reads release the GIL, so a second thread checks each store's keys as soon as
their bytes are in while the main thread reads on: the check hides behind the read.
When the read is done first, the main thread takes the stores the helper has not reached
yet (from the last one back) and checks them too, so the two share what is left instead
of the main thread waiting.

Nothing here decides anything. What the threads built is used only where it was built
from the very bytes the full parse later finds (``KeyIndex.fits``); the checksum and
every other check still run after the read, on the main thread, and a file the threads
could not follow (odd layout, short read, any error) is simply checked there instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from ecs_engine.entity import KEY_DTYPE
from ecs_engine.memcopy import address_of
from ecs_engine.savefile import arriving_columns
from ecs_engine.slotmap import PreparedSlots, SlotTable
from ecs_engine.snapshot import Allocate, KeyIndex, LiveSlots

MIN_BYTES = 4 << 20  # smaller files: a thread's start costs more than it hides


class _Abandoned(Exception):
    """The other thread failed: stop, the main thread checks the file itself."""


class KeyLookahead:
    """A ``ReadWatcher`` for ``read_file_memory``: indexes keys on a helper thread.

    ``capacity_for(high_water)``: the slot capacity the world will have (the length of
    each sparse index); ``wanted(name)``: whether the world takes the saved component
    ``name`` (only those are indexed: a file may name thousands of stores the load then
    skips or refuses, and each index is a slot-table-sized array); ``prepare(table)``:
    checks the saved slot table and lays it out in new slot-map arrays (``prepare_slots``),
    which the helper does as soon as the table is in; ``alloc(length, dtype)``: memory for
    the indexes and the numpy check's live-key table (the world's pool). After the read,
    ``prepared_slots(table)`` gives what ``prepare`` made if it was made from ``table``'s
    very bytes (else None: the main thread prepares), ``results()`` checks the stores the
    helper has not started on, waits for it and returns the indexes by component name;
    ``stop()`` ends the helper without results (a load that failed before asking)."""

    def __init__(self, capacity_for: Callable[[int], int],
                 wanted: Callable[[str], bool],
                 prepare: Callable[[SlotTable], PreparedSlots], alloc: Allocate) -> None:
        self._capacity_for = capacity_for
        self._alloc = alloc
        self._wanted = wanted
        self._prepare = prepare
        self._prepared: PreparedSlots | None = None
        self._prepare_tried = False  # prepare ran (or never will): prepared_slots may answer
        self._state = threading.Condition()  # guards everything below, wakes waiters
        self._got = 0
        self._needed = 0  # the bytes the helper waits for: arrived() wakes it only then
        self._done = False
        self._failed = False
        self._over = False  # the helper thread has returned
        self._thread: threading.Thread | None = None
        self._buf: np.ndarray | None = None
        self._size = 0
        self._live: LiveSlots | None = None
        self._capacity = 0
        self._claimed: set[int] = set()  # key columns (in file order) someone checks
        self._built: dict[int, KeyIndex] = {}
        self._indexes: dict[str, KeyIndex] = {}

    def started(self, buf: np.ndarray, size: int) -> None:
        if size < MIN_BYTES:
            return
        self._buf, self._size = buf, size
        self._thread = threading.Thread(target=self._run, name="ecs-engine-key-check",
                                        daemon=True)
        self._thread.start()

    def arrived(self, got: int) -> None:
        with self._state:
            self._got = got
            if got >= self._needed:  # (a helper woken early only takes the GIL back)
                self._state.notify_all()

    def finished(self) -> None:
        with self._state:
            self._done = True
            self._state.notify_all()

    def results(self) -> dict[str, KeyIndex]:
        if self._thread is None:
            return {}
        try:
            self._help()
        except Exception:  # (as on the helper: the full check after the read reports it)
            self._fail()
        self._thread.join()
        return {} if self._failed else self._indexes

    def prepared_slots(self, table: SlotTable) -> PreparedSlots | None:
        """``prepare``'s result for ``table`` (the parsed slot table) when the helper made
        it from the same memory, waiting for it if need be; else None."""
        if self._thread is None:
            return None
        with self._state:
            self._state.wait_for(lambda: self._prepare_tried or self._failed or self._over)
            prepared = None if self._failed else self._prepared
        if prepared is None or not all(
                a.dtype == b.dtype and len(a) == len(b)
                and (not len(a) or address_of(a) == address_of(b))
                for a, b in ((prepared.table.generations, table.generations),
                             (prepared.table.alive, table.alive),
                             (prepared.table.free, table.free))):
            return None
        return PreparedSlots(table, prepared.generations, prepared.alive, prepared.free)

    def stop(self) -> None:
        """End the helper (if any), wait for it and let go of what it built and read."""
        if self._thread is None:
            return
        self._fail()
        self._thread.join()
        self._buf = self._live = self._prepared = None
        self._built, self._indexes = {}, {}

    def _wait(self, nbytes: int) -> int:
        with self._state:
            self._needed = nbytes
            self._state.wait_for(lambda: self._got >= nbytes or self._done or self._failed)
            if self._failed:
                raise _Abandoned
            return self._got

    def _fail(self) -> None:
        with self._state:
            self._failed = True
            self._state.notify_all()

    def _run(self) -> None:
        assert self._buf is not None
        try:
            generations = alive = None
            columns: list[tuple[str, np.ndarray]] = []
            for kind, name, column in arriving_columns(self._buf, self._size, self._wait):
                if kind == "generations":
                    generations = column.astype(np.uint32, copy=False)
                elif kind == "alive":
                    alive = column.view(np.bool_)
                elif kind == "free" and generations is not None and alive is not None:
                    free = column.astype(np.int64, copy=False)
                    live = LiveSlots.of(generations, alive, free, self._alloc)
                    with self._state:
                        self._live = live
                        self._capacity = self._capacity_for(len(generations))
                        self._state.notify_all()
                    self._prepare_table(SlotTable(generations, alive, free))
                elif kind == "keys" and self._live is not None:
                    if self._failed:
                        return
                    if not len(column) or not self._wanted(name):
                        continue  # (nothing to index, or a store the load will not take)
                    columns.append((name, column.astype(KEY_DTYPE, copy=False)))
                    at = len(columns) - 1
                    with self._state:
                        if at in self._claimed:  # the main thread took the rest
                            return
                        self._claimed.add(at)
                        self._state.notify_all()
                    self._check(at, columns)
        except Exception:
            self._fail()
        finally:
            with self._state:
                self._over = True
                self._state.notify_all()

    def _prepare_table(self, table: SlotTable) -> None:
        """``prepare`` the slot table while the keys are still being read (a table that
        fails its checks is left to the main thread, which reports it)."""
        try:
            prepared = self._prepare(table)
        except Exception:
            prepared = None
        with self._state:
            self._prepared = prepared
            self._prepare_tried = True
            self._state.notify_all()

    def _help(self) -> None:
        """On the main thread, once the read is done: check the stores the helper has not
        claimed, the last ones first in claiming (the helper goes first to last) and in
        file order in checking (a store whose keys equal an earlier store's copies that
        store's index, which is then always built or being built)."""
        assert self._buf is not None
        with self._state:
            self._state.wait_for(lambda: self._live is not None or self._failed
                                 or self._over)
            if self._live is None or self._failed:
                return
            got = self._got
        columns = [(name, column.astype(KEY_DTYPE, copy=False))
                   for kind, name, column in arriving_columns(self._buf, self._size,
                                                              lambda _: got)
                   if kind == "keys" and len(column) and self._wanted(name)]
        with self._state:
            mine = []
            for at in range(len(columns) - 1, -1, -1):
                if at in self._claimed:
                    break
                mine.append(at)
            self._claimed.update(mine)
        for at in reversed(mine):
            self._check(at, columns)

    def _check(self, at: int, columns: list[tuple[str, np.ndarray]]) -> None:
        """Build the index of key column ``at`` (of ``columns``, in file order)."""
        name, keys = columns[at]
        twin_at = next((i for i in range(at) if len(columns[i][1]) == len(keys)
                        and np.array_equal(columns[i][1], keys)), None)
        twin = None if twin_at is None else self._await(twin_at)
        assert self._live is not None
        index = KeyIndex.build(keys, self._live, self._capacity, twin, self._alloc)
        with self._state:
            self._built[at] = index
            self._indexes[name] = index
            self._state.notify_all()

    def _await(self, at: int) -> KeyIndex:
        """The index of key column ``at``, once whichever thread checks it is done."""
        with self._state:
            self._state.wait_for(lambda: at in self._built or self._failed)
            if self._failed:
                raise _Abandoned
            return self._built[at]
