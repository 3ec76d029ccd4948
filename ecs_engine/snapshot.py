"""Snapshots: the whole world state as a handful of array copies.

A snapshot holds, per store, the live rows of ``data`` and ``entities`` plus the
allocator's slot table, the owning groups, resources, tick and rng state. Parts whose
version has not moved since the previous snapshot are shared with it, and a restore
copies only the parts whose version differs from the live one.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ecs_engine.entity import KEY_DTYPE, SLOT_BITS
from ecs_engine.group import Group, nested_outer
from ecs_engine.memcopy import address_of, as_bytes, pack_copies, root_of, take_over
from ecs_engine.native import c_function
from ecs_engine.plaincopy import copy_resources
from ecs_engine.slotmap import PreparedSlots, SlotTable
from ecs_engine.storage import CHUNK_ROWS, ComponentStore

if TYPE_CHECKING:
    from ecs_engine.prefab import PrefabRegistry
    from ecs_engine.world import World


# The one-pass key check in C (``_keyindex.c``), or None: then ``live_keys`` and
# ``_index_live_keys`` take numpy passes that give the same answers.
_index_in_one_pass: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], int] | None = (
    c_function("_keyindex", "index_slot_keys"))


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, eq=False)
class StoreSnapshot:
    """One store's live rows, as consecutive chunks (``CHUNK_ROWS`` rows each when taken
    from a world, so unchanged chunks are shared between snapshots; one chunk when read
    from a file). The rows have the dtype they were saved with."""

    name: str
    chunks: tuple[np.ndarray, ...]  # at least one (maybe empty) chunk
    entities: np.ndarray
    group_size: int = 0
    data_version: int = 0  # 0: from a file, never equal to a live version
    layout_version: int = 0
    ctype: type | None = None
    # slot -> row for slots [0, high water), kept for dense stores so a restore is a memcpy
    # instead of a scatter; None when rebuilt from ``entities`` (sparse stores, files).
    sparse: np.ndarray | None = None
    chunk_versions: np.ndarray | None = None  # data version of each chunk (world snapshots)
    # Every row as one array of the store's row words (``ComponentStore.row_words``) over
    # the chunks' memory (its slices of CHUNK_ROWS rows are the chunks' bytes): a restore
    # copies it (or the chunks that differ) with plain memcpys. None when the chunks lie
    # in several buffers (some shared with earlier snapshots) or come from a file.
    rows: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.entities)

    @property
    def data(self) -> np.ndarray:
        """All rows as one array (joins the chunks: a copy when there are several)."""
        if len(self.chunks) == 1:
            return self.chunks[0]
        return _frozen(np.concatenate(self.chunks))


@dataclass(frozen=True, eq=False)
class Snapshot:
    """An immutable copy of a world's state; restore it any number of times."""

    stores: tuple[StoreSnapshot, ...]
    slots: SlotTable
    groups: tuple[tuple[str, ...], ...]
    resources: dict[str, Any]
    tick: int
    rng_state: dict[str, Any]
    slot_version: int = 0
    origin: object = field(default=None, repr=False)  # the world's version counter

    def arrays(self) -> list[np.ndarray]:
        """Every array this snapshot holds (some may be shared with other snapshots)."""
        out = [self.slots.generations, self.slots.alive, self.slots.free]
        for s in self.stores:
            out += [*s.chunks, s.entities]
            if s.sparse is not None:
                out.append(s.sparse)
        return out

    @property
    def nbytes(self) -> int:
        """Bytes of array data held (counting shared arrays in full)."""
        return sum(a.nbytes for a in self.arrays())

    @property
    def entity_count(self) -> int:
        return int(np.count_nonzero(self.slots.alive))

    def store(self, name: str) -> StoreSnapshot:
        for s in self.stores:
            if s.name == name:
                return s
        raise KeyError(f"snapshot has no component {name!r}")

    def to_bytes(self) -> memoryview:
        """The snapshot as save-file bytes (msgpack; see SAVE_FORMAT.md): a read-only,
        bytes-like view of one fresh buffer (``bytes(...)`` copies it)."""
        from ecs_engine.prefab_fields import for_file
        from ecs_engine.savefile import encode_snapshot

        return encode_snapshot(for_file(self, None))

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Snapshot:
        """Parse a save file; ``SaveFileError`` on anything wrong with it."""
        from ecs_engine.prefab_fields import join
        from ecs_engine.savefile import decode_snapshot

        return join(decode_snapshot(data))[0]

    def save(self, path: str | Path, *, prefabs: PrefabRegistry | None = None) -> None:
        """Write atomically to ``path`` (temp file, fsync, rename). With ``prefabs``,
        prefab-owned fields are stored only where they differ from the prefab."""
        from ecs_engine.prefab_fields import for_file
        from ecs_engine.savefile import write_file

        write_file(path, for_file(self, prefabs))

    @classmethod
    def load(cls, path: str | Path) -> Snapshot:
        """Read a save file: the exact saved state (prefab-owned fields as saved)."""
        from ecs_engine.prefab_fields import join
        from ecs_engine.savefile import read_file

        return join(read_file(path))[0]


class RestoreCallbackError(Exception):
    """One or more ``on_restore`` callbacks raised. The restore (or load) itself
    succeeded: the world holds the restored state, and every callback ran.
    ``errors`` lists ``(callback, exception)`` pairs; the first is also ``__cause__``."""

    def __init__(self, errors: list[tuple[Any, Exception]]) -> None:
        self.errors = errors
        first_cb, first = errors[0]
        name = getattr(first_cb, "__qualname__", repr(first_cb))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"the restore succeeded, but {len(errors)} on_restore callback(s) "
                         f"failed; first {name}: {type(first).__name__}: {first}{more}")


class RestoreEvent:
    """Passed to ``on_restore`` callbacks after a restore or load: ``source`` ("memory",
    "file" or "rollback"), ``previous_tick`` (the tick before it) and ``snapshot``."""

    __slots__ = ("_settled", "_snapshot", "_world", "previous_tick", "source")

    def __init__(self, snapshot: Snapshot | None, source: str, previous_tick: int,
                 world: World | None = None) -> None:
        self._snapshot = snapshot
        self._world = world  # takes the snapshot on first use when none was given
        # The world's state when the callbacks were done (a lazy event nobody asked yet):
        # a later first use is right only if the world still holds that state.
        self._settled: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self.source = source
        self.previous_tick = previous_tick

    @property
    def snapshot(self) -> Snapshot:
        """The state restored. ``world.load`` takes over the file's memory instead of
        copying it, and a ``Rollback`` restores from buffers it overwrites later, so after
        those this is ``world.snapshot()`` taken on first use (the world as the callbacks
        before this one left it); callbacks that never ask pay nothing. Asked for the
        first time after the callbacks are done, it is the restored state while the world
        has not changed since, and a ``RuntimeError`` once it has (that state is gone:
        ask during the callback)."""
        if self._snapshot is None:
            world = self._world
            if world is None:
                raise RuntimeError("this restore event has no snapshot")
            settled = self._settled
            if settled is not None and not (state_token(world) == settled[0]
                                            and _same(world.resources, settled[1])):
                raise RuntimeError(
                    "the world changed since this load and kept no copy of the loaded "
                    "state: read event.snapshot inside the on_restore callback (or call "
                    "world.snapshot() right after world.load)")
            self._snapshot = world.snapshot()
        return self._snapshot

    def _settle(self) -> None:
        """The callbacks are done: remember the state a later first use must still find."""
        if self._snapshot is None and self._world is not None:
            self._settled = (state_token(self._world), copy.deepcopy(self._world.resources))

    def __repr__(self) -> str:
        return (f"RestoreEvent(source={self.source!r}, previous_tick={self.previous_tick})")


SMALL_INDEX_SLOTS = 1 << 14  # a slot index this short (64 KB) is kept by every snapshot


def keeps_index(n: int, high_water: int) -> bool:
    """Whether a snapshot keeps a store's slot index (``sparse[:high_water]``) for a store
    of ``n`` rows: restoring it is one memcpy instead of a scatter per moved key. Dense
    stores keep it, and small worlds always do (a short index costs a few microseconds
    to copy, less than the numpy calls of a scatter)."""
    return n * 8 >= high_water or high_water <= SMALL_INDEX_SLOTS


Pending = int  # index into the list of arrays a snapshot copies in one batch


def _plan_chunks(store: ComponentStore, old: StoreSnapshot | None, pending: list[np.ndarray],
                 ) -> tuple[list[np.ndarray | Pending] | Pending, np.ndarray]:
    """The store's live rows as chunks: chunks whose version did not move since ``old``
    (same layout) are shared with it, the others are queued in ``pending`` (as row
    words). When no chunk is shared, the whole store is queued as one copy instead."""
    n = store.n
    count = max(1, -(-n // CHUNK_ROWS))
    live = store.chunk_versions[:count]
    words = store.row_words
    versions = _frozen(live.copy())
    if (old is None or old.chunk_versions is None or old.layout_version != store.layout_version
            or len(old.chunks) != count):
        return _queue(pending, words[:n]), versions
    # (Python lists: a ufunc's first call in a snapshot costs more than the whole loop)
    same = [a == b for a, b in zip(old.chunk_versions.tolist(), live.tolist(), strict=True)]
    if not any(same):
        return _queue(pending, words[:n]), versions
    chunks: list[np.ndarray | Pending] = []
    for i in range(count):
        if same[i]:
            chunks.append(old.chunks[i])
        else:
            chunks.append(_queue(pending, words[i * CHUNK_ROWS : min(n, (i + 1) * CHUNK_ROWS)]))
    return chunks, versions


def _queue(pending: list[np.ndarray], arr: np.ndarray) -> Pending:
    pending.append(arr)
    return len(pending) - 1


def _rows_of(words: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """Copied row words (read-only) as rows of ``dtype`` (read-only: numpy makes an
    array over a read-only buffer read-only)."""
    return np.ndarray(words.shape, dtype, words)


_Made = TypeVar("_Made")


def _filled(cls: type[_Made], **fields: Any) -> _Made:
    """``cls(**fields)`` for a frozen dataclass given every field, for the snapshot's hot
    path: the dataclass sets each field through ``object.__setattr__``, about 4x the
    cost of filling the instance dict at once (measured 1.8 us against 0.45 us for a
    StoreSnapshot)."""
    made = object.__new__(cls)
    made.__dict__.update(fields)
    return made


def take_snapshot(world: World, previous: Snapshot | None) -> Snapshot:
    """Copy the world's state, sharing parts unchanged since ``previous``.

    Everything that must be copied is copied in one batch into one allocation
    (:func:`pack_copies`), so a snapshot costs one allocation however many chunks moved.
    Rows are copied as row words (plain integers or voids: one memcpy each, where numpy
    copies structured rows field by field), a store with no shared chunk in one piece.
    """
    reuse: dict[str, StoreSnapshot] = {}
    own_previous = previous is not None and previous.origin is world._versions
    if own_previous:
        reuse = {s.name: s for s in previous.stores}  # type: ignore[union-attr]
    pending: list[np.ndarray] = []
    plans = []
    group_of = {id(g) for g in world._groups}
    hw = world._slots.high_water
    viewed = []
    for ctype, store in world._stores.items():
        name = store.schema.name
        if store.views_outstanding():
            store.touch()  # a kept view may have written any row since the last snapshot
            viewed.append(store)
        old = reuse.get(name)
        n = store.n
        entities: np.ndarray | Pending
        sparse: np.ndarray | Pending | None
        if old is not None and old.layout_version == store.layout_version:
            entities, sparse = old.entities, old.sparse
        else:
            entities = _queue(pending, store.entities[:n])
            sparse = _queue(pending, store.sparse[:hw]) if keeps_index(n, hw) else None
        chunks: list[np.ndarray | Pending] | tuple[np.ndarray, ...] | Pending
        rows: np.ndarray | Pending | None
        if old is not None and old.data_version == store.data_version:
            chunks, chunk_versions, rows = old.chunks, old.chunk_versions, old.rows
        else:
            chunks, chunk_versions = _plan_chunks(store, old, pending)
            rows = chunks if isinstance(chunks, int) else None
        in_group = store.owner is not None and id(store.owner) in group_of
        plans.append((ctype, store, name, chunks, rows, entities, sparse, chunk_versions,
                      store.group_size if in_group else 0))
    slotmap = world._slots
    shared_slots: SlotTable | None = None
    pending_slots: tuple[Pending, Pending, Pending] = (0, 0, 0)
    if own_previous and previous.slot_version == slotmap.version:  # type: ignore[union-attr]
        shared_slots = previous.slots  # type: ignore[union-attr]
    else:
        pending_slots = (_queue(pending, slotmap.generations[:hw]),
                         _queue(pending, slotmap.alive[:hw]),
                         _queue(pending, slotmap.free[: slotmap.n_free]))
    copies = pack_copies(pending, world._buffers)

    def done(x: np.ndarray | Pending) -> np.ndarray:
        return copies[x] if isinstance(x, int) else x

    stores = []
    for ctype, store, name, chunks, rows, entities, sparse, chunk_versions, group_size in plans:
        dtype = store.data.dtype
        if isinstance(rows, int):  # the whole store in one copy: chunks are its slices
            rows = copies[rows]
            data = _rows_of(rows, dtype)
            chunks = ((data,) if len(data) <= CHUNK_ROWS else tuple(
                data[i : i + CHUNK_ROWS] for i in range(0, len(data), CHUNK_ROWS)))
        elif isinstance(chunks, list):
            chunks = tuple(_rows_of(copies[c], dtype) if isinstance(c, int) else c
                           for c in chunks)
        stores.append(_filled(
            StoreSnapshot, name=name, chunks=chunks, entities=done(entities),
            group_size=group_size, data_version=store.data_version,
            layout_version=store.layout_version, ctype=ctype,
            sparse=None if sparse is None else done(sparse), chunk_versions=chunk_versions,
            rows=rows))
    for store in viewed:  # ... and may write after it, also if it dies before anyone
        store.touch()  # looks again: no version of the store may claim the copied rows
    groups = tuple(tuple(s.schema.name for s in g.stores) for g in world._groups)
    if shared_slots is None:
        generations, alive, free = (copies[i] for i in pending_slots)
        shared_slots = _filled(SlotTable, generations=generations, alive=alive, free=free)
    return _filled(
        Snapshot,
        stores=tuple(stores),
        slots=shared_slots,
        groups=groups,
        resources=copy_resources(world.resources),
        tick=world.tick,
        rng_state=dict(world.rng.bit_generator.state),  # numpy builds a new dict per read
        slot_version=slotmap.version,
        origin=world._versions,
    )


def _slot_index(keys: np.ndarray) -> np.ndarray:
    """The slot of each key as an intp array: numpy scatters and gathers with it 3-4x
    faster than with a strided uint32 view of the keys."""
    from ecs_engine.entity import SLOT_MASK

    return (keys.astype(np.uint64, copy=False) & np.uint64(SLOT_MASK)).view(np.int64)


def _reindex(store: ComponentStore, keys: np.ndarray) -> None:
    """Point ``store.sparse`` at ``keys`` as the store's new rows (its rows still hold the
    old keys). Only rows whose key changed are touched: a restore after a little churn
    moves a few rows, and keys that stayed in their row keep their index entries."""
    old = store.entities[: store.n]
    common = min(len(old), len(keys))
    moved = np.flatnonzero(old[:common] != keys[:common])
    # Clear every old key that left its row, then set every new key's row: a key that
    # moved from one row to another is cleared first, then set.
    store.sparse[_slot_index(old[moved])] = -1
    store.sparse[_slot_index(old[common:])] = -1
    store.sparse[_slot_index(keys[moved])] = moved.astype(np.int32)
    store.sparse[_slot_index(keys[common:])] = np.arange(common, len(keys), dtype=np.int32)


_BLOCK = 1 << 16  # rows per block of the key checks: temporaries stay in cache


def _index_live_keys(keys: np.ndarray, live: np.ndarray, sparse: np.ndarray) -> bool:
    """Check every key is the live key of its slot (``live[slot] == key``) and write its
    row into ``sparse[slot]``; False (``sparse`` partly written) if one is not.

    Blocked: every temporary is one block long and reused, so the pass touches only the
    keys, the table and the index (no fresh multi-megabyte temporaries, whose page
    faults cost more than the gathers themselves). A slot past the table is clipped to
    the last slot, whose entry (a live key, or 0 when free: see ``live_keys``) has a
    lower slot, so it fails the comparison.
    """
    from ecs_engine.entity import SLOT_MASK

    keys = keys.astype(np.uint64, copy=False)
    n = len(keys)
    size = min(n, _BLOCK)
    rows = np.arange(size, dtype=np.int32)
    slots = np.empty(size, np.uint64)
    found = np.empty(size, np.uint64)
    mask = np.uint64(SLOT_MASK)
    for start in range(0, n, _BLOCK):
        stop = min(n, start + _BLOCK)
        block, m = keys[start:stop], stop - start
        index = np.bitwise_and(block, mask, out=slots[:m]).view(np.int64)
        if not np.array_equal(np.take(live, index, out=found[:m], mode="clip"), block):
            return False
        sparse[index] = rows[:m]
        rows += _BLOCK  # the next block's rows
    return True


Allocate = Callable[[int, "np.typing.DTypeLike"], np.ndarray]  # (length, dtype) -> array


def fresh_array(length: int, dtype: np.typing.DTypeLike) -> np.ndarray:
    """New memory (``Allocate`` for callers without a world's pool)."""
    return np.empty(length, dtype)


def live_keys(generations: np.ndarray, free: np.ndarray,
              alloc: Allocate = fresh_array) -> np.ndarray:
    """The live key of every slot of a slot table; slots on the free list get a key no
    stored key can equal (its slot would be 2**32 - 1, past any table), except the last
    slot, which gets 0 when free: ``_index_live_keys`` clips a stored key's slot past the
    table onto the last one, and 0 (slot 0, generation 0) equals no such key.

    Built in cache-sized blocks: no table-sized temporaries (an arange of every slot
    would be a fresh 8 MB array per million slots, page faults and all). ``alloc``: where
    the table's memory comes from (a load takes it from its world's pool)."""
    hw = len(generations)
    live = alloc(hw, np.uint64)
    if len(free) and (free.min() < 0 or free.max() >= hw):
        raise IndexError("a free slot outside the slot table")  # (not numpy's wrap-around)
    numbers = np.arange(min(hw, _BLOCK), dtype=np.uint64)
    for start in range(0, hw, _BLOCK):
        part = live[start : start + _BLOCK]
        np.left_shift(generations[start : start + _BLOCK], np.uint64(SLOT_BITS),
                      out=part, dtype=np.uint64)
        part |= numbers[: len(part)]
        numbers += np.uint64(_BLOCK)
    live[free] = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
    if hw and live[hw - 1] == np.uint64(0xFFFF_FFFF_FFFF_FFFF):
        live[hw - 1] = 0  # (a key 2**64 - 1 is clipped onto this slot)
    return live


@dataclass(frozen=True)
class LiveSlots:
    """What a store's keys are checked against: a slot table's generations and alive
    flags, which the C check reads as they are, and (``keys``) the table of every slot's
    live key that the numpy check needs instead (None with the C check)."""

    generations: np.ndarray
    alive: np.ndarray
    keys: np.ndarray | None

    @classmethod
    def of(cls, generations: np.ndarray, alive: np.ndarray, free: np.ndarray,
           alloc: Allocate = fresh_array) -> LiveSlots:
        """For a table whose alive flags and free list agree (``check_slot_table``; a
        table that does not is refused whatever its keys)."""
        if _index_in_one_pass is not None:
            return cls(np.ascontiguousarray(generations, np.uint32),
                       np.ascontiguousarray(alive, np.bool_), None)
        return cls(generations, alive, live_keys(generations, free, alloc))


def sparse_capacity(world: World, high_water: int) -> int:
    """Slots the world's slot map will have after restoring a table of ``high_water``."""
    capacity = world._slots.capacity
    return max(high_water, 2 * capacity) if high_water > capacity else capacity


@dataclass(frozen=True, eq=False)
class KeyIndex:
    """One store's keys checked against a slot table: every key alive (``alive``) and
    no slot twice (``unique``), with ``sparse`` (slot -> row, -1 elsewhere)."""

    keys: np.ndarray
    sparse: np.ndarray
    alive: bool
    unique: bool

    @classmethod
    def build(cls, keys: np.ndarray, slots: LiveSlots | None, capacity: int,
              twin: KeyIndex | None = None, alloc: Allocate = fresh_array) -> KeyIndex:
        """Check ``keys`` against ``slots``; ``twin``: an index of equal keys (components
        added together keep one row order), copied instead. ``alloc``: where the index's
        memory comes from (a load takes it from its world's pool)."""
        sparse = alloc(capacity, np.int32)
        if twin is not None:
            np.copyto(sparse, twin.sparse)
            return cls(keys, sparse, twin.alive, twin.unique)
        if slots is not None and slots.keys is None and _index_in_one_pass is not None:
            # (fills the index with -1 first, as the GIL-free part of the one pass)
            found = _index_in_one_pass(np.ascontiguousarray(keys, np.uint64),
                                       slots.generations, slots.alive, sparse)
            return cls(keys, sparse, found > 0, found == 1)
        sparse.fill(-1)
        if not len(keys):
            return cls(keys, sparse, True, True)
        live = None if slots is None else slots.keys
        if live is None or not len(live) or (len(live) == 1 and live[0] == 0):
            return cls(keys, sparse, False, False)  # (no live slot: see live_keys)
        if not _index_live_keys(keys, live, sparse):
            return cls(keys, sparse, False, False)
        # Live keys are one per slot: a repeated entity leaves fewer filled slots.
        unique = np.count_nonzero(sparse[: len(live)] >= 0) == len(keys)
        return cls(keys, sparse, True, bool(unique))

    def keys_equal(self, keys: np.ndarray) -> bool:
        return len(self.keys) == len(keys) and bool(np.array_equal(self.keys, keys))

    def fits(self, keys: np.ndarray, capacity: int) -> bool:
        """Built from these very bytes (the same memory) for this capacity."""
        return (len(self.sparse) == capacity and keys.dtype == self.keys.dtype
                and len(keys) == len(self.keys)
                and (not len(keys) or address_of(keys) == address_of(self.keys)))


def live_view(world: World) -> Snapshot:
    """The world's current state as a snapshot of views into its live arrays (no copy):
    for writing a save file straight from the columns. Valid only until the world
    changes; never hand it out (``world.snapshot()`` makes the copy that stays valid)."""
    group_of = {id(g) for g in world._groups}
    stores = []
    for ctype, store in world._stores.items():
        in_group = store.owner is not None and id(store.owner) in group_of
        stores.append(StoreSnapshot(store.schema.name, (store.data[: store.n],),
                                    store.entities[: store.n],
                                    store.group_size if in_group else 0, ctype=ctype))
    slotmap = world._slots
    hw = slotmap.high_water
    return Snapshot(
        stores=tuple(stores),
        slots=SlotTable(slotmap.generations[:hw], slotmap.alive[:hw],
                        slotmap.free[: slotmap.n_free]),
        groups=tuple(tuple(s.schema.name for s in g.stores) for g in world._groups),
        resources=world.resources,  # the writer converts it (to_wire) before writing
        tick=world.tick,
        rng_state=dict(world.rng.bit_generator.state),
    )


def check_slot_table(table: SlotTable) -> None:
    """``SaveFileError`` unless a slot table from elsewhere is self-consistent: integer
    generations in [1, 2**32), one bool alive flag per slot, an integer free list naming
    every dead slot once."""
    from ecs_engine.savefile import SaveFileError

    for name, arr, kinds in (("generations", table.generations, "ui"),
                             ("alive flags", table.alive, "b"), ("free list", table.free, "ui")):
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.dtype.kind not in kinds:
            raise SaveFileError(f"slot table: the {name} must be a 1-d array of "
                                f"{'bools' if kinds == 'b' else 'integers'}, got "
                                f"{getattr(arr, 'dtype', type(arr).__name__)}"
                                f"{getattr(arr, 'shape', '')}")
    hw = len(table.generations)
    if hw and table.generations.max() > 0xFFFF_FFFF:
        raise SaveFileError("slot table: a generation past 2**32 - 1")
    if len(table.alive) != hw:
        raise SaveFileError(f"slot table: {len(table.alive)} alive flags for {hw} slots")
    free = table.free
    if len(free) and (free.min() < 0 or free.max() >= hw or table.alive[free].any()):
        raise SaveFileError("slot table: the free list names a live or out-of-range slot")
    marks = np.zeros(hw, np.bool_)
    marks[free] = True
    if np.count_nonzero(marks) != len(free):
        raise SaveFileError("slot table: the free list names a slot twice")
    if len(free) + int(np.count_nonzero(table.alive)) != hw:
        raise SaveFileError("slot table: some dead slots are missing from the free list")
    if hw and table.generations.min() <= 0:
        raise SaveFileError("slot table: generation 0 is reserved for NULL (and a "
                            "generation is never negative)")


def prepare_slots(world: World, table: SlotTable) -> PreparedSlots:
    """Check a slot table from elsewhere and lay it out in the world's slot-map arrays,
    before the restore (nothing in the world changes): a load does this while its key
    checks finish, and ``restore_snapshot(prepared=...)`` then skips both steps."""
    check_slot_table(table)
    return world._slots.prepare(table, world._index_memory.array)


def _validate_foreign(world: World, snap: Snapshot, types: dict[str, type],
                      indexed: dict[str, KeyIndex] | None = None,
                      slots_checked: bool = False) -> dict[str, np.ndarray]:
    """Check a snapshot from elsewhere (a file) is self-consistent before touching the world.

    Returns each store's new sparse index (``slot -> row`` for the world's slot capacity),
    built by the same passes that check the store, for the restore to adopt. Linear time,
    a few vectorised passes per store: keys are checked alive by one gather from a table
    of live keys, and unique by scattering their rows into the index and counting the
    slots that took one (a slot named twice keeps one row). ``indexed``: stores' keys
    already checked (``KeyIndex``, e.g. while the file was read), used where they fit.
    """
    from ecs_engine.savefile import SaveFileError

    table = snap.slots
    hw = len(table.generations)
    free = table.free
    if not slots_checked:
        check_slot_table(table)
    capacity = sparse_capacity(world, hw)
    sparses: dict[str, np.ndarray] = {}
    live: LiveSlots | None = None
    checked: list[KeyIndex] = []  # stores whose keys passed, with keys to share
    for s in snap.stores:
        if len(s.data) != s.n:
            raise SaveFileError(f"component {s.name!r}: {len(s.data)} rows of data for "
                                f"{s.n} entities")
        if not 0 <= s.group_size <= s.n:
            raise SaveFileError(f"component {s.name!r}: group size {s.group_size} outside "
                                f"[0, {s.n}]")
        found = indexed.get(s.name) if indexed is not None else None
        if found is not None and found.fits(s.entities, capacity):
            index = found  # checked while the file was still being read
        else:
            if live is None and s.n:
                live = LiveSlots.of(table.generations, table.alive, free,
                                    world._index_memory.array)
            index = KeyIndex.build(s.entities, live, capacity,
                                   next((c for c in checked if c.keys_equal(s.entities)), None),
                                   world._index_memory.array)
        if not index.alive:
            raise SaveFileError(f"component {s.name!r}: holds entities the slot table says "
                                f"are not alive")
        if not index.unique:
            raise SaveFileError(f"component {s.name!r}: an entity appears twice")
        sparses[s.name] = index.sparse
        checked.append(index)
    by_name = {s.name: s for s in snap.stores}
    if len(by_name) != len(snap.stores):
        raise SaveFileError("a component appears twice")
    for names in snap.groups:
        if len(names) < 2 or any(n not in by_name for n in names) or len(set(names)) != len(
            names
        ):
            raise SaveFileError(f"group {list(names)} names unknown or repeated components")
    for i, names in enumerate(snap.groups):
        for later in snap.groups[i + 1 :]:
            if set(later) < set(names):  # (a save lists groups in creation order)
                raise SaveFileError(f"group {list(names)} comes before {list(later)}, the "
                                    f"group it is nested in (outer groups come first)")
    nesting = group_nesting(snap.groups)
    holders = [outer for outer, _ in nesting if outer is not None]
    for outer in holders:
        if holders.count(outer) > 1:
            raise SaveFileError(f"group {list(snap.groups[outer])} holds two nested groups "
                                f"(a group holds one)")
    for names, (nested_in, own) in zip(snap.groups, nesting, strict=True):
        # The order a world keeps (and hashes): loading another would not be this state.
        if nested_in is not None and names != own + snap.groups[nested_in]:
            raise SaveFileError(f"group {list(names)}: names out of order (a nested group "
                                f"lists its own components, then those of the group it is "
                                f"nested in, in that group's order: "
                                f"{list(own + snap.groups[nested_in])})")
        size = by_name[own[0]].group_size
        first = by_name[own[0]].entities[:size]
        for n in names:
            s = by_name[n]
            if ((n in own and s.group_size != size) or size > s.n
                    or not np.array_equal(s.entities[:size], first)):
                raise SaveFileError(f"group {list(names)}: rows are not aligned")
        # Complete: every entity with all of the group's components is in the prefix
        # (queries over the group read only the prefix, so one outside would be skipped).
        members = np.ones(hw, np.bool_)
        for n in names:
            members &= sparses[n][:hw] >= 0
        count = int(np.count_nonzero(members))
        if count != size:
            raise SaveFileError(f"group {list(names)}: {count - size} entities have every "
                                f"component of the group but are outside its first {size} "
                                f"rows")
    grouped = [n for _, own in nesting for n in own]
    if len(set(grouped)) != len(grouped):
        raise SaveFileError("a component belongs to two groups")
    for s in snap.stores:
        if s.group_size and s.name not in grouped:
            raise SaveFileError(f"component {s.name!r}: group size {s.group_size} but no "
                                f"group owns it")
    del types
    return sparses


def group_nesting(groups: tuple[tuple[str, ...], ...]) -> list[tuple[int | None, tuple[str, ...]]]:
    """For each group (by component names, in creation order): the index of the group it
    is nested in (None: none) and its own components (those its outer group lacks)."""
    out: list[tuple[int | None, tuple[str, ...]]] = []
    for i, names in enumerate(groups):
        outer = nested_outer(names, groups[:i])
        inherited = set(groups[outer]) if outer is not None else set()
        out.append((outer, tuple(n for n in names if n not in inherited)))
    return out


def _validate_hierarchy(snap: Snapshot, rows: np.ndarray) -> None:
    """Parent links of a foreign snapshot: alive parents, no cycle, consistent depths."""
    from ecs_engine.entity import SLOT_BITS
    from ecs_engine.hierarchy import check_loaded
    from ecs_engine.savefile import SaveFileError

    table = snap.slots
    slots = np.flatnonzero(table.alive).astype(np.uint64)
    alive = (table.generations[slots.astype(np.int64)].astype(np.uint64) << np.uint64(SLOT_BITS))
    alive |= slots
    problem = check_loaded(snap.store("ChildOf").entities, rows, np.sort(alive))
    if problem is not None:
        raise SaveFileError(f"component 'ChildOf': {problem}")


def _without_unknown_empty_stores(world: World, snap: Snapshot) -> Snapshot:
    """``snap`` without the empty stores of types this world does not know (and no group
    names): they hold no state (the state hash skips empty stores), so a save taken
    where such a type was registered loads where it is not."""
    from ecs_engine.hierarchy import BUILTIN_COMPONENTS

    grouped = {name for group in snap.groups for name in group}
    known = world._types_by_name
    dropped = [s for s in snap.stores if not s.n and s.ctype is None and s.name not in known
               and s.name not in BUILTIN_COMPONENTS and s.name not in grouped]
    if not dropped:
        return snap
    return dataclasses.replace(snap, stores=tuple(s for s in snap.stores if s not in dropped))


def _saved_types(world: World, snap: Snapshot) -> dict[str, type]:
    """The component type each of ``snap``'s stores restores into (registered, built in,
    or found under an old name); ``SaveFileError`` if one has none or two share one."""
    from ecs_engine.blueprint import BLUEPRINT_MARKER
    from ecs_engine.hierarchy import BUILTIN_COMPONENTS
    from ecs_engine.migrate import find_saved_type, unknown_component_hint
    from ecs_engine.savefile import SaveFileError

    if any(s.name == BLUEPRINT_MARKER for s in snap.stores):  # before "unknown component"
        raise SaveFileError("this is a blueprint, not a world save: load it with "
                            "world.instantiate(Blueprint.load(path))")
    types: dict[str, type] = {}
    unknown = []
    for s in snap.stores:
        ctype = (world._types_by_name.get(s.name) or s.ctype or BUILTIN_COMPONENTS.get(s.name)
                 or find_saved_type(world._types_by_name.values(), s.name))
        if ctype is None:
            unknown.append(s.name)
        else:
            types[s.name] = ctype
    if unknown:  # (every one at once: a game adding its registrations learns them all)
        raise SaveFileError(unknown_component_hint(unknown))
    if len(set(types.values())) < len(types):
        claimed = [n for n in types if list(types.values()).count(types[n]) > 1]
        raise SaveFileError(f"saved components {claimed} are one component type now (a "
                            f"renamed class and its old name both in one save)")
    return types


def _rng_for(world: World, snap: Snapshot) -> np.random.Generator:
    """The generator that will hold ``snap``'s rng state: ``world.rng`` when its bit
    generator has the saved type, else a new one of that type (state checked here, so
    applying it later cannot fail)."""
    name = snap.rng_state.get("bit_generator")
    if type(world.rng.bit_generator).__name__ == name:  # (the common case: no imports)
        return world.rng
    from ecs_engine.savefile import SaveFileError
    from ecs_engine.savevalues import BIT_GENERATORS

    if type(name) is not str:
        raise SaveFileError(f"rng state: bit generator name {name!r} is not a str")
    if name not in BIT_GENERATORS:
        raise SaveFileError(f"rng state: unknown bit generator {name!r}")
    bitgen = getattr(np.random, name)()
    try:
        bitgen.state = copy.deepcopy(snap.rng_state)
    except Exception as exc:  # numpy's setter raises assorted types for bad states
        raise SaveFileError(f"rng state for {name} is invalid: {exc}") from None
    return np.random.Generator(bitgen)


def _restore_chunks(store: ComponentStore, s: StoreSnapshot) -> None:
    """Copy back the chunks whose version differs from the live one (all of them after
    a layout change, which moves every chunk's version). With ``s.rows`` (every row in
    one array) that is one memcpy when every chunk differs (always for a one-chunk
    store), else one per differing chunk; without it (chunks from several snapshots),
    consecutive chunks that sit back to back in one snapshot's buffer go in one memcpy."""
    live = store.chunk_versions
    saved = s.chunk_versions
    chunks = s.chunks
    words = store.row_words
    rows = s.rows
    if rows is not None and rows.dtype == words.dtype:
        if len(chunks) == 1 or saved is None:
            words[: len(rows)] = rows
        else:
            todo = np.flatnonzero(live[: len(saved)] != saved).tolist()
            if len(todo) == len(chunks):
                words[: len(rows)] = rows
            else:
                for i in todo:
                    part = slice(i * CHUNK_ROWS, min(len(rows), (i + 1) * CHUNK_ROWS))
                    words[part] = rows[part]
    elif store.data.dtype.itemsize:
        dst = as_bytes(store.data)  # one flat byte view: each run is then a plain memcpy
        step = CHUNK_ROWS * store.data.dtype.itemsize
        todo = (list(range(len(chunks))) if saved is None
                else np.flatnonzero(live[: len(saved)] != saved).tolist())
        i = 0
        while i < len(todo):
            first = todo[i]
            start = address_of(chunks[first])
            end = start + chunks[first].nbytes
            owner = root_of(chunks[first])
            j = i + 1
            while (j < len(todo) and todo[j] == todo[j - 1] + 1
                   and address_of(chunks[todo[j]]) == end and root_of(chunks[todo[j]]) is owner):
                end += chunks[todo[j]].nbytes
                j += 1
            if j == i + 1:
                src = as_bytes(chunks[first])
            else:  # one span of the buffer the run's chunks are views into
                buf = as_bytes(owner)
                at = start - address_of(buf)
                src = buf[at : at + end - start]
            dst[first * step : first * step + src.size] = src
            i = j
    if saved is not None:
        live[: len(saved)] = saved
    store.data_version = s.data_version


TAKE_OVER_MIN_BYTES = 1 << 16  # rows of a store that a load adopts rather than copies


def restore_snapshot(world: World, snap: Snapshot, source: str = "memory",
                     memory: np.ndarray | None = None,
                     indexed: dict[str, KeyIndex] | None = None,
                     prepared: PreparedSlots | None = None) -> RestoreEvent:
    """Make the world's state equal to ``snap``; validates everything before changing it.
    Returns the event for the ``on_restore`` callbacks (which this does not call).

    ``memory``: the buffer a file was read into, which the caller gives up with ``snap``
    (a load): stores take over the rows and keys that lie in it instead of copying them,
    so ``snap`` then shares memory with the world and must be dropped (the event takes
    its snapshot from the world on first use). ``indexed``: stores' keys checked ahead
    (while the file was read), used where they are of these very bytes; ``prepared``:
    ``prepare_slots(world, snap.slots)`` done ahead."""
    if world._open_queries:
        raise RuntimeError("cannot restore while a query is open")
    own = snap.origin is world._versions
    types: dict[str, type] | None = None
    if own:  # taken from this world: its types are (or were) registered here
        found = [world._types_by_name.get(s.name) or s.ctype for s in snap.stores]
        if None not in found and len(set(found)) == len(found):
            types = {s.name: t for s, t in zip(snap.stores, found, strict=True) if t is not None}
    if types is None:  # a file's (or, never in practice, an own one's that did not fit)
        snap = _without_unknown_empty_stores(world, snap)
        types = _saved_types(world, snap)
    if prepared is not None and prepared.table is not snap.slots:
        prepared = None
    sparses = {} if own else _validate_foreign(world, snap, types, indexed,
                                               slots_checked=prepared is not None)
    rng = _rng_for(world, snap)
    datas: dict[str, np.ndarray] = {}
    if not own:
        from ecs_engine.component import schema_of
        from ecs_engine.migrate import migrate_rows

        datas = {s.name: migrate_rows(s.name, s.data, schema_of(types[s.name]))
                 for s in snap.stores}
    if "ChildOf" in datas:
        _validate_hierarchy(snap, datas["ChildOf"])
    for ctype in types.values():  # registering can fail (name clash): before any change
        world._store(ctype)

    # From here on nothing can fail: apply.
    previous_tick = world.tick
    slotmap = world._slots
    old_high_water = slotmap.high_water
    if not own or slotmap.version != snap.slot_version:
        slotmap.set_table(snap.slots, snap.slot_version if own else next(world._versions),
                          prepared)
    capacity = slotmap.capacity
    for group in world._groups:
        group.disband()
    world._groups = []
    snapped = set(types.values())
    for ctype, store in world._stores.items():
        if own or ctype not in snapped:  # a loaded store adopts an index of this size
            store.ensure_slots(capacity)
        if ctype not in snapped and store.n:
            store.clear()
    for s in snap.stores:
        store = world._stores[types[s.name]]
        if not own:  # everything was checked: adopt the new index, copy keys and rows
            data, keys = datas[s.name], s.entities.astype(KEY_DTYPE, copy=False)
            rows = keys_taken = None
            # Only big stores take over the file's memory: a small one would keep the
            # whole file alive after the big ones grow out of it (a copy costs it little).
            if (memory is not None and data.dtype == store.schema.dtype
                    and data.nbytes >= TAKE_OVER_MIN_BYTES):
                rows, keys_taken = take_over(data, memory), take_over(keys, memory)
            if rows is not None and keys_taken is not None:
                store.load_rows(rows, keys_taken, sparses[s.name], adopt=True)
            else:
                store.load_rows(data, keys, sparses[s.name])
            continue
        if store.layout_version != s.layout_version:
            store.reserve(s.n)
            # (own snapshots: keys and index have the store's plain integer dtypes, so
            # a slice assignment is a memcpy)
            if s.sparse is not None:
                store.sparse[: len(s.sparse)] = s.sparse
                store.sparse[len(s.sparse) : old_high_water] = -1
            else:
                _reindex(store, s.entities)
            store.entities[: s.n] = s.entities
            store.n = s.n
            store.layout_version = s.layout_version
            store.clock.stamp += 1
        viewed = store.views_outstanding()
        if viewed:
            store.touch()  # a kept view may have written: copy every chunk back
        if store.data_version != s.data_version:
            _restore_chunks(store, s)
        if viewed:  # ... and may write again, also if it dies before the next look:
            store.touch()  # the store's version must not claim the snapshot's rows
    by_name = {s.name: s for s in snap.stores}
    for names, (nested_in, own_names) in zip(snap.groups, group_nesting(snap.groups),
                                             strict=True):
        stores = [world._stores[types[n]] for n in names]
        world._groups.append(Group([types[n] for n in names], stores,
                                   adopt_size=by_name[own_names[0]].group_size,
                                   outer=None if nested_in is None
                                   else world._groups[nested_in]))
    world.resources = copy_resources(snap.resources)
    world.tick = snap.tick
    if rng is world.rng:
        world.rng.bit_generator.state = snap.rng_state  # read, never kept, by numpy
    else:
        world.rng = rng
    if memory is not None:
        return RestoreEvent(None, source, previous_tick, world)
    return RestoreEvent(snap, source, previous_tick)


def run_restore_callbacks(world: World, event: RestoreEvent) -> None:
    """Call every ``on_restore`` callback, even after one fails; then raise one
    :class:`RestoreCallbackError` listing the failures (the restore itself stands)."""
    errors: list[tuple[Any, Exception]] = []
    for callback in tuple(world._restore_callbacks):
        try:
            callback(world, event)
        except Exception as exc:  # the others must still rebuild their derived state
            errors.append((callback, exc))
    if world._restore_callbacks:  # none: nobody can hold the event
        event._settle()
    if errors:
        raise RestoreCallbackError(errors) from errors[0][1]


def _same(a: Any, b: Any, pairs: set[tuple[int, int]] | None = None) -> bool:
    """Deep equality for change detection: numpy arrays by value, NaN equal to NaN, and
    objects without their own ``==`` by their attributes (a restore deep-copies them, so
    identity would call every restored object changed). Containers that hold themselves
    compare without end otherwise: a pair of containers met again while being compared
    counts as equal (any difference shows elsewhere in the comparison)."""
    if isinstance(a, dict | list | tuple) or (
            isinstance(a, np.ndarray) and a.dtype.kind == "O") or hasattr(a, "__dict__"):
        if pairs is None:
            pairs = set()
        pair = (id(a), id(b))
        if pair in pairs:
            return True
        pairs.add(pair)
    if isinstance(a, np.ndarray | np.generic) or isinstance(b, np.ndarray | np.generic):
        if type(a) is not type(b) or a.dtype != b.dtype or np.shape(a) != np.shape(b):
            return False
        if a.dtype.kind == "O":
            return all(_same(x, y, pairs)
                       for x, y in zip(np.ravel(a), np.ravel(b), strict=True))
        if a.dtype.kind in "fc":
            return bool(np.array_equal(a, b, equal_nan=True))
        return np.asarray(a).tobytes() == np.asarray(b).tobytes()
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return type(a) is type(b)  # NaN
    if isinstance(a, dict):
        return (type(a) is type(b) and a.keys() == b.keys()
                and all(_same(v, b[k], pairs) for k, v in a.items()))
    if isinstance(a, list | tuple):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_same(x, y, pairs) for x, y in zip(a, b, strict=True)))
    if type(a) is not type(b):
        return False
    try:
        if bool(a == b):
            return True
    except (TypeError, ValueError):  # objects whose == is not a plain bool: assume changed
        return False
    if type(a).__eq__ is object.__eq__:  # identity only: compare what copying preserves
        state_a, state_b = getattr(a, "__dict__", None), getattr(b, "__dict__", None)
        if state_a is not None and state_b is not None and a is not b:
            return _same(state_a, state_b, pairs)
    return False


def _data_unchanged(store: ComponentStore, s: StoreSnapshot) -> bool:
    """Byte comparison of a store with outstanding views against its snapshot."""
    if store.layout_version != s.layout_version or store.n != s.n:
        return False
    itemsize = store.data.dtype.itemsize
    if itemsize == 0:
        return True
    live = as_bytes(store.data)
    step = CHUNK_ROWS * itemsize
    return all(np.array_equal(live[i * step : i * step + chunk.nbytes], as_bytes(chunk))
               for i, chunk in enumerate(s.chunks))


def state_token(world: World) -> tuple[Any, ...]:
    """Everything ``is_current`` compares except resources, as a value that changes when
    any of it changes (versions; bytes of stores that have outstanding views)."""
    stores = tuple(
        (st.data_version, st.layout_version,
         st.data[: st.n].tobytes() if st.views_outstanding() else None)
        for st in world._stores.values())
    groups = tuple(tuple(st.schema.name for st in g.stores) for g in world._groups)
    return (world._slots.version, world.tick, stores, groups,
            repr(world.rng.bit_generator.state))


def is_current(world: World, snap: Snapshot) -> bool:
    """True if nothing in the world changed since ``snap`` was taken or restored."""
    if snap.origin is not world._versions or world._slots.version != snap.slot_version:
        return False
    if world.tick != snap.tick or len(world._stores) != len(snap.stores):
        return False
    for s in snap.stores:
        store = world._stores.get(world._types_by_name.get(s.name))  # type: ignore[arg-type]
        if store is None:
            return False
        if store.views_outstanding():
            if not _data_unchanged(store, s):
                return False
        elif store.data_version != s.data_version:
            return False
    groups = tuple(tuple(st.schema.name for st in g.stores) for g in world._groups)
    if groups != snap.groups:
        return False
    return _same(world.rng.bit_generator.state, snap.rng_state) and _same(world.resources,
                                                                         snap.resources)
