"""The slot table: generations, alive flags and a free list, all in numpy arrays."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ecs_engine.entity import KEY_DTYPE, SLOT_BITS, SLOT_MASK, KeyLike, key_slots, key_str
from ecs_engine.native import c_function

MAX_SLOTS = 1 << 31  # slot indices must also fit a store's int32 sparse array
_GENERATION_SHIFT = np.uint64(SLOT_BITS)
# A batch's slots taken or given back in one C loop (``_keyindex.c``), or None (numpy:
# the same keys and table).
_allocate_slots: Callable[..., None] | None = c_function("_keyindex", "allocate_slots")
_release_slots: Callable[..., None] | None = c_function("_keyindex", "release_slots")


@dataclass(frozen=True)
class SlotTable:
    """A copy of the allocator state: enough to reproduce every future key."""

    generations: np.ndarray  # uint32 per slot ever used
    alive: np.ndarray  # bool per slot ever used
    free: np.ndarray  # int64 free-list stack; the last entry is reused first


@dataclass(frozen=True)
class PreparedSlots:
    """``table`` laid out in a slot map's arrays ahead of a restore (``SlotMap.prepare``),
    for ``set_table`` to take as they are."""

    table: SlotTable
    generations: np.ndarray
    alive: np.ndarray
    free: np.ndarray


class SlotMap:
    """Generational slot allocator. Keys are ``generation << 32 | slot``; generation >= 1."""

    def __init__(self, capacity: int = 64, versions: Iterator[int] | None = None) -> None:
        self._versions = versions if versions is not None else itertools.count(1)
        self.generations = np.ones(capacity, np.uint32)
        self.alive = np.zeros(capacity, np.bool_)
        self.free = np.zeros(capacity, np.int64)
        self._bind()
        self.n_free = 0
        self.high_water = 0  # slots [0, high_water) have been used at least once
        self.n_alive = 0
        self.version = next(self._versions)  # names the allocator state

    def _bind(self) -> None:
        """Memoryviews of the three arrays, for one-item reads and writes (Python ints
        and bools in and out, at half the cost of numpy's ``item`` and item assignment).
        Rebound whenever an array is replaced (``_grow``, ``set_table``)."""
        self.gen_items = self.generations.data
        self.alive_items = self.alive.data
        self.free_items = self.free.data

    @property
    def capacity(self) -> int:
        return len(self.generations)

    def _grow(self, needed: int) -> None:
        if needed > MAX_SLOTS:
            raise MemoryError(f"slot map full: {needed} slots needed, at most {MAX_SLOTS}")
        cap = max(needed, 2 * self.capacity)
        gens = np.ones(cap, np.uint32)
        gens[: self.high_water] = self.generations[: self.high_water]
        alive = np.zeros(cap, np.bool_)
        alive[: self.high_water] = self.alive[: self.high_water]
        free = np.zeros(cap, np.int64)
        free[: self.n_free] = self.free[: self.n_free]
        self.generations, self.alive, self.free = gens, alive, free
        self._bind()

    def allocate(self, count: int) -> np.ndarray:
        """Allocate ``count`` keys: reuse free slots (LIFO) first, then fresh ones."""
        reused = min(count, self.n_free)
        fresh = count - reused
        if self.high_water + fresh > self.capacity:
            self._grow(self.high_water + fresh)
        keys = np.empty(count, KEY_DTYPE)
        if _allocate_slots is not None:
            _allocate_slots(keys, self.generations, self.alive, self.free, self.n_free,
                            self.high_water)
        else:
            self._allocate_numpy(keys, reused, fresh)
        self.n_free -= reused
        self.high_water += fresh
        self.n_alive += count
        self.version = next(self._versions)
        return keys

    def _allocate_numpy(self, keys: np.ndarray, reused: int, fresh: int) -> None:
        """``allocate``'s keys and alive flags with numpy (the counts and the version are
        the caller's)."""
        if reused:
            # Pop order equals ``count`` single pops: the top of the stack first.
            slots = self.free[self.n_free - reused : self.n_free][::-1]
            self.alive[slots] = True
            keys[:reused] = self.generations[slots].astype(KEY_DTYPE) << np.uint64(SLOT_BITS)
            keys[:reused] |= slots.astype(KEY_DTYPE)
        if fresh:
            # Never-used slots are at generation 1: their keys are one arange.
            first = (1 << SLOT_BITS) + self.high_water
            keys[reused:] = np.arange(first, first + fresh, dtype=KEY_DTYPE)
            self.alive[self.high_water : self.high_water + fresh] = True

    def allocate_one(self) -> tuple[int, int]:
        """Allocate one key, as ``allocate(1)`` would; returns (key, slot)."""
        n_free = self.n_free
        if n_free:
            self.n_free = n_free = n_free - 1
            slot = self.free_items[n_free]
            generation = self.gen_items[slot]
        else:
            slot = self.high_water
            if slot >= len(self.generations):
                self._grow(slot + 1)
            generation = 1  # never-used slots are at generation 1
            self.high_water = slot + 1
        self.alive_items[slot] = True
        self.n_alive += 1
        self.version = next(self._versions)
        return (generation << SLOT_BITS) | slot, slot

    def release_one(self, slot: int) -> None:
        """Free the slot of one live entity (already validated), as ``release`` does."""
        generation = self.gen_items[slot] + 1
        self.gen_items[slot] = generation if generation <= 0xFFFF_FFFF else 1
        self.alive_items[slot] = False
        self.free_items[self.n_free] = slot
        self.n_free += 1
        self.n_alive -= 1
        self.version = next(self._versions)

    def release(self, slots: np.ndarray) -> None:
        """Free slots of live entities (already validated), bumping their generation."""
        if (_release_slots is not None and slots.dtype == np.int64
                and slots.flags.c_contiguous):
            _release_slots(slots, self.generations, self.alive, self.free, self.n_free,
                           self.high_water)
        else:
            gens = self.generations[slots].astype(np.uint64) + 1
            gens[gens > 0xFFFF_FFFF] = 1  # wrap, never to 0: generation 0 marks NULL
            self.generations[slots] = gens.astype(np.uint32)
            self.alive[slots] = False
            self.free[self.n_free : self.n_free + len(slots)] = slots
        self.n_free += len(slots)
        self.n_alive -= len(slots)
        self.version = next(self._versions)

    def alive_mask(self, keys: np.ndarray) -> np.ndarray:
        """Vectorised ``is_alive`` over a uint64 key array."""
        slots = key_slots(keys)
        ok = slots < self.high_water
        # Out-of-range slots read a clipped (wrong) slot, but are already False in ok.
        ok &= self.alive.take(slots, mode="clip")
        ok &= self.generations.take(slots, mode="clip") == keys >> _GENERATION_SHIFT
        return ok

    def is_alive(self, key: KeyLike) -> bool:
        key = int(key)
        slot = key & SLOT_MASK
        return (
            slot < self.high_water
            and key >= 0
            and self.gen_items[slot] == key >> SLOT_BITS
            and self.alive_items[slot] == 1  # a bool (typed int): a bool either way
        )

    def why_dead(self, key: KeyLike) -> str:
        """Explain why a key is not alive (for error messages)."""
        key = int(key)
        slot, gen = key & SLOT_MASK, key >> SLOT_BITS
        if key == 0:
            return "NULL is never alive"
        if key < 0 or key > 0xFFFF_FFFF_FFFF_FFFF:
            return f"{key} is not a 64-bit entity key"
        if gen == 0 or slot >= self.high_water:
            return f"{key_str(key)} was never alive"
        current = int(self.generations[slot])
        if gen > current:
            return f"{key_str(key)} was never alive (slot {slot} is at generation {current})"
        if self.alive[slot]:
            return (f"{key_str(key)} is stale: it was despawned and slot {slot} now holds "
                    f"generation {current}")
        return f"{key_str(key)} was despawned"

    def keys_alive(self) -> np.ndarray:
        """Keys of all live entities, in slot order."""
        slots = np.flatnonzero(self.alive[: self.high_water])
        return (self.generations[slots].astype(KEY_DTYPE) << np.uint64(SLOT_BITS)) | slots.astype(
            KEY_DTYPE
        )

    def table(self) -> SlotTable:
        """A copy of the allocator state."""
        hw = self.high_water
        return SlotTable(self.generations[:hw].copy(), self.alive[:hw].copy(),
                         self.free[: self.n_free].copy())

    def prepare(self, table: SlotTable,
                alloc: Callable[[int, np.typing.DTypeLike], np.ndarray] = np.empty
                ) -> PreparedSlots:
        """New arrays holding ``table`` at the capacity ``set_table`` gives it, built
        before a restore may change anything (a load builds them while its key checks
        finish) and then taken by ``set_table`` with no copy. ``alloc(length, dtype)``:
        where their memory comes from (a load takes it from its world's pool)."""
        hw = len(table.generations)
        if hw > MAX_SLOTS:
            raise MemoryError(f"slot map full: {hw} slots needed, at most {MAX_SLOTS}")
        cap = max(hw, 2 * self.capacity) if hw > self.capacity else self.capacity
        gens = alloc(cap, np.uint32)
        gens[:hw] = table.generations
        gens[hw:] = 1
        alive = alloc(cap, np.bool_)
        alive[:hw] = table.alive
        alive[hw:] = False
        free = alloc(cap, np.int64)  # (past the list: never read, pages left untouched)
        free[: len(table.free)] = table.free
        return PreparedSlots(table, gens, alive, free)

    def set_table(self, table: SlotTable, version: int,
                  prepared: PreparedSlots | None = None) -> None:
        """Replace the allocator state with a copy of ``table`` (whose state is ``version``),
        or with ``prepared``'s arrays when they were made from ``table`` for this map."""
        hw = len(table.generations)
        if (prepared is not None and prepared.table is table
                and len(prepared.generations) >= max(hw, self.capacity)):
            self.generations, self.alive, self.free = (prepared.generations,
                                                       prepared.alive, prepared.free)
            self._bind()
        else:
            if hw > self.capacity:
                self._grow(hw)
            # Slots past the high-water mark are already pristine up to the old mark.
            old_hw = self.high_water
            self.generations[:hw] = table.generations
            self.generations[hw:old_hw] = 1
            self.alive[:hw] = table.alive
            self.alive[hw:old_hw] = False
            self.free[: len(table.free)] = table.free
        self.n_free = len(table.free)
        self.high_water = hw
        # every dead slot is on the free list exactly once (restores validate foreign
        # tables), so no pass over the alive flags is needed
        self.n_alive = hw - self.n_free
        self.version = version

