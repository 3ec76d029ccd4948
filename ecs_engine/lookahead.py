"""Checking a save's entity keys while the rest of the file is still being read.

A load must check every stored key against the slot table before the world changes (a
hostile or corrupt file never half-loads), and at a million entities those gathers and
scatters cost about as much as reading the file. Both mostly wait on memory, and numpy
and file reads release the GIL, so a second thread checks each store's keys as soon as
their bytes are in while the main thread reads on: the check hides behind the read.

Nothing here decides anything. What the thread built is used only where it was built
from the very bytes the full parse later finds (``KeyIndex.fits``); the checksum and
every other check still run after the read, on the main thread, and a file the thread
could not follow (odd layout, short read, any error) is simply checked there instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from ecs_engine.entity import KEY_DTYPE
from ecs_engine.savefile import arriving_columns
from ecs_engine.snapshot import KeyIndex, live_keys

MIN_BYTES = 4 << 20  # smaller files: a thread's start costs more than it hides


class KeyLookahead:
    """A ``ReadWatcher`` for ``read_file_memory``: indexes keys on a helper thread.

    ``capacity_for(high_water)``: the slot capacity the world will have (the length of
    each sparse index). After the read, ``results()`` waits for the thread and returns
    the indexes by component name."""

    def __init__(self, capacity_for: Callable[[int], int]) -> None:
        self._capacity_for = capacity_for
        self._arrived = threading.Condition()
        self._got = 0
        self._done = False
        self._thread: threading.Thread | None = None
        self._indexes: dict[str, KeyIndex] = {}

    def started(self, buf: np.ndarray, size: int) -> None:
        if size < MIN_BYTES:
            return
        self._thread = threading.Thread(target=self._run, args=(buf, size),
                                        name="ecs-engine-key-check", daemon=True)
        self._thread.start()

    def arrived(self, got: int) -> None:
        with self._arrived:
            self._got = got
            self._arrived.notify_all()

    def finished(self) -> None:
        with self._arrived:
            self._done = True
            self._arrived.notify_all()

    def results(self) -> dict[str, KeyIndex]:
        if self._thread is not None:
            self._thread.join()
        return self._indexes

    def _wait(self, nbytes: int) -> int:
        with self._arrived:
            self._arrived.wait_for(lambda: self._got >= nbytes or self._done)
            return self._got

    def _run(self, buf: np.ndarray, size: int) -> None:
        indexes: dict[str, KeyIndex] = {}
        try:
            generations = live = None
            capacity = 0
            for kind, name, column in arriving_columns(buf, size, self._wait):
                if kind == "generations":
                    generations = column.astype(np.uint32, copy=False)
                elif kind == "free" and generations is not None:
                    live = live_keys(generations, column.astype(np.int64, copy=False))
                    capacity = self._capacity_for(len(generations))
                elif kind == "keys" and live is not None:
                    keys = column.astype(KEY_DTYPE, copy=False)
                    twin = next((i for i in indexes.values() if i.keys_equal(keys)), None)
                    indexes[name] = KeyIndex.build(keys, live, capacity, twin)
        except Exception:  # the main thread checks this file itself and reports the error
            indexes.clear()
        self._indexes = indexes
