"""Vectorised "where is this key in that array" for entity keys (old -> new remapping).

Keys from one world have distinct slots, so a dense ``slot -> position`` table answers a
look-up with one gather and one generation compare (O(1) per key; no sort, no binary
search). Keys that are spread too thin for a table (or that share slots, as only a forged
file can) fall back to a sorted array and ``searchsorted``.
"""

from __future__ import annotations

import numpy as np

from ecs_engine.entity import KEY_DTYPE, key_slots

DENSE_SLACK = 32  # a table may span this many slots per key (plus DENSE_MIN) before
DENSE_MIN = 1 << 16  # the sorted fallback is used instead (building it is one fill)


class KeyMap:
    """Positions of keys in ``keys`` (distinct uint64 keys; not copied, keep it unchanged)."""

    def __init__(self, keys: np.ndarray) -> None:
        self.keys = keys
        self._table: np.ndarray | None = None
        self._low = 0  # slot of the table's first entry
        self._sorted: np.ndarray | None = None
        self._order: np.ndarray | None = None
        n = len(keys)
        slots = key_slots(keys)
        low = int(slots.min()) if n else 0
        span = int(slots.max()) + 1 - low if n else 0
        if span <= DENSE_MIN + DENSE_SLACK * n:
            table = np.full(span, -1, np.int64)
            table[slots - low] = np.arange(n)
            self._low = low
            if np.count_nonzero(table >= 0) == n:  # one key per slot
                self._table = table
                return
        self._order = np.argsort(keys, kind="stable")
        self._sorted = keys[self._order]

    def __len__(self) -> int:
        return len(self.keys)

    def positions(self, wanted: np.ndarray) -> np.ndarray:
        """Index into ``keys`` of every wanted key (int64), -1 where it is not there."""
        wanted = np.asarray(wanted, KEY_DTYPE)
        if len(self.keys) == 0:
            return np.full(wanted.shape, -1, np.int64)
        if self._table is not None:
            slots = key_slots(wanted) - self._low
            inside = (slots >= 0) & (slots < len(self._table))
            pos = self._table[np.where(inside, slots, 0)]
            pos[~inside] = -1
            hit = pos >= 0
            pos[hit & (self.keys[np.maximum(pos, 0)] != wanted)] = -1  # other generation
            return pos
        assert self._sorted is not None and self._order is not None
        at = np.minimum(np.searchsorted(self._sorted, wanted), len(self._sorted) - 1)
        return np.where(self._sorted[at] == wanted, self._order[at], -1)

    def duplicates(self) -> np.ndarray:
        """Keys listed more than once (empty when all are distinct)."""
        if self._table is not None:
            return np.zeros(0, KEY_DTYPE)
        assert self._sorted is not None
        repeated = self._sorted[1:] == self._sorted[:-1]
        return np.unique(self._sorted[1:][repeated])
