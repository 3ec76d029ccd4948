"""Column storage: one sparse set per component type over a numpy structured array."""

from __future__ import annotations

import itertools
import sys
from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ecs_engine.component import ComponentSchema
from ecs_engine.entity import KEY_DTYPE, SLOT_MASK, key_slots
from ecs_engine.memcopy import copy_into
from ecs_engine.native import c_function

if TYPE_CHECKING:  # group.py imports this module
    from ecs_engine.group import Group

CHUNK_ROWS = 32768  # rows per versioned chunk: snapshots share unchanged chunks
# Removing many rows in one pass in C (``_removal.c``), or None: ``removal_plan`` and
# ``remove_runs`` then move the same rows with numpy.
_remove_slots: Any | None = c_function("_removal", "remove_slots")
_move_block: Any | None = c_function("_removal", "move_block")  # (the same rows move)
REMOVES_IN_C = _remove_slots is not None
PARENT_LINK = "ChildOf"
"""The hierarchy's component: only ``world.set_parent`` writes it (cycle and depth checks)."""


def move_plan(current: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``ComponentStore.move_rows``' permutation as ``(dst, src)`` for ``place_rows``:
    row ``current[j]`` goes to ``targets[j]`` (a contiguous range; both int64), displaced
    rows take the places the moved rows left, paired in ascending order. None: nothing
    moves."""
    # (Few numpy calls, none through Python-level wrappers: at a few hundred rows each
    # call's fixed cost is most of the time.)
    if not np.count_nonzero(current != targets):
        return None
    k = len(targets)
    t0 = targets[0]  # a numpy scalar: compares with no Python int conversion
    offset = current - t0
    inside = offset.view(np.uint64) < k  # below t0 wraps to huge
    vacated = current[~inside]
    vacated.sort()
    claimed = np.zeros(k, np.bool_)
    claimed[offset[inside]] = True
    displaced = (~claimed).nonzero()[0]
    displaced += t0
    return np.concatenate((targets, vacated)), np.concatenate((current, displaced))


def removal_plan(rows: np.ndarray, bounds: list[int]) -> tuple[np.ndarray, np.ndarray,
                                                                 list[int]]:
    """Where rows move when the distinct ``rows`` leave a store whose rows form runs
    that end at ``bounds`` (ascending; the last is the store's row count) and stay in
    that order: the groups' prefixes, innermost first, then the rows no group holds.

    Returns ``(holes, sources, cut)``: row ``sources[j]`` moves to ``holes[j]`` (both
    ascending), and ``cut[p]`` of ``rows`` lay below ``bounds[p]``, so run ``p`` ends at
    ``bounds[p] - cut[p]`` after. Each run's survivors past its new end fill the holes
    in front of it, in ascending order: the same rows a swap-removal in each run and a
    shift of the runs behind it would move, planned once for all runs, so a store
    moves its rows once instead of once per group it leaves."""
    rows = np.sort(rows)
    cut: list[int] = np.searchsorted(rows, bounds).tolist()
    # run p's survivors end in [new end of run p-1, new end of run p); those past both
    # its new end and its start (from ``low``) move, the rest stay
    lows, start, ends = [], 0, []
    for bound, c in zip(bounds, cut, strict=True):
        end = bound - c
        lows.append(end if end > start else start)
        ends.append(end)
        start = bound
    first_mover: list[int] = np.searchsorted(rows, lows).tolist()
    hole_parts: list[np.ndarray] = []
    candidates: list[np.ndarray] = []
    staying: list[np.ndarray] = []  # removed rows among the candidates (no source)
    start = new_start = done = 0
    for bound, c, end, low, j in zip(bounds, cut, ends, lows, first_mover, strict=True):
        gap_end = start if start < end else end  # run p-1's vacated tail, inside run p
        if gap_end > new_start:
            hole_parts.append(np.arange(new_start, gap_end))
        if j > done:
            hole_parts.append(rows[done:j])
        if bound > low:
            candidates.append(np.arange(low, bound))
            if c > j:
                staying.append(rows[j:c])
        start, new_start, done = bound, end, c
    if not hole_parts:
        empty = np.zeros(0, np.int64)
        return empty, empty, cut
    holes = hole_parts[0] if len(hole_parts) == 1 else np.concatenate(hole_parts)
    sources = candidates[0] if len(candidates) == 1 else np.concatenate(candidates)
    if staying:
        gone = staying[0] if len(staying) == 1 else np.concatenate(staying)
        keep = np.ones(len(sources), np.bool_)
        keep[np.searchsorted(sources, gone)] = False
        sources = sources[keep]
    return holes, sources, cut


def few_removal_plan(rows: list[int], bounds: list[int]) -> tuple[list[int], list[int],
                                                                  list[int]]:
    """``removal_plan`` of a few rows, in Python (no numpy call's fixed cost): ``rows``
    are distinct and ascending; returns ``(holes, sources, cut)`` as lists, the same
    values. Moving ``sources[j]`` to ``holes[j]`` one row at a time in that order gives
    the vectorised result: each hole lies below its source, and a source that is also
    a hole (a run's tail, vacated for the next run) is read before it is filled."""
    holes: list[int] = []
    sources: list[int] = []
    cut: list[int] = []
    start = new_start = done = 0
    for bound in bounds:
        c = bisect_left(rows, bound, done)
        cut.append(c)
        end = bound - c
        low = end if end > start else start
        gap_end = start if start < end else end
        if gap_end > new_start:
            holes.extend(range(new_start, gap_end))
        j = bisect_left(rows, low, done, c)
        if j > done:
            holes.extend(rows[done:j])
        if bound > low:
            if c > j:
                removed = rows[j:c]
                sources.extend([row for row in range(low, bound) if row not in removed])
            else:
                sources.extend(range(low, bound))
        start, new_start, done = bound, end, c
    return holes, sources, cut


def row_word_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """One row of ``dtype`` as one plain item: an unsigned int of its size (1, 2, 4 or 8
    bytes), else a void of its size. Arrays of it copy with one memcpy."""
    size = dtype.itemsize
    return np.dtype(f"<u{size}" if size in (1, 2, 4, 8) else (np.void, size))


_STRUCT_FORMATS = frozenset("?bBhHiIlLqQfd")  # what a memoryview assigns items of


def _writer(column: np.ndarray) -> Any:
    """What ``writer[row] = value`` stores a checked Python scalar through: a memoryview
    of the (one-value, strided) column when its format is a native struct format, else
    the column itself. Either converts exactly as numpy does (C casts)."""
    try:
        view = column.data
    except (TypeError, ValueError, BufferError):
        return column
    if view.format not in _STRUCT_FORMATS or view.itemsize != column.dtype.itemsize:
        view.release()
        return column
    return view


class _Probe:
    data: np.ndarray


def _attribute_refs() -> int:
    """What ``sys.getrefcount(obj.data)`` reports for an array nothing else references
    (measured, since interpreters count the call's own references differently)."""
    probe = _Probe()
    probe.data = np.zeros(1)
    return sys.getrefcount(probe.data)


_UNSHARED_REFS = _attribute_refs()


class LayoutClock:
    """Counts structural changes across a world's stores: any store's rows moving, added
    or removed (a new key array only comes with those), or its group (owner, size)
    changing. Query plans note the count when they resolve; while it stands, no plan's
    rows can have changed, which one comparison tells (without looking at each store)."""

    __slots__ = ("stamp",)

    def __init__(self) -> None:
        self.stamp = 0


class ComponentStore:
    """Dense rows ``data[:n]`` and ``entities[:n]``; ``sparse[slot]`` is the row or -1.

    Two versions, drawn from the world's counter so each identifies one state:
    ``data_version`` moves on every change to values (including handing out a writable
    view), ``layout_version`` on every change to which entity sits in which row. A
    snapshot shares what has not moved; a restore copies only what differs.
    """

    def __init__(self, schema: ComponentSchema, slot_capacity: int,
                 versions: Iterator[int] | None = None, capacity: int = 16,
                 clock: LayoutClock | None = None) -> None:
        self.schema = schema
        self.clock = clock if clock is not None else LayoutClock()
        self.data: np.ndarray = np.zeros(capacity, schema.dtype)
        self.entities = np.zeros(capacity, KEY_DTYPE)
        self.sparse = np.full(slot_capacity, -1, np.int32)
        self.n = 0
        self._versions = versions if versions is not None else itertools.count(1)
        self.data_version = next(self._versions)
        self.layout_version = next(self._versions)
        # The data version of each chunk of CHUNK_ROWS rows: a write to a few rows moves
        # only their chunks, so a snapshot re-copies only those (e.g. movers grouped at
        # the front of a store shared with static colliders).
        self.chunk_versions = np.full(-(-capacity // CHUNK_ROWS), self.data_version, np.int64)
        self.group_size = 0  # rows [0, group_size) belong to the owning group, if any
        # (layout version, keys[:n] as bytes) for query plans' memo keys (planmemo)
        self.key_bytes: tuple[int, bytes] = (-1, b"")
        self.owner: Group | None = None  # the Group that owns this store
        self.columns: dict[str, np.ndarray] = {}  # field name -> view of ``data`` (cached)
        self.frozen: np.ndarray = self.data  # a read-only view of ``data`` (bound below)
        self.flat: np.ndarray | None = None  # ``data`` as (rows, values) if one dtype
        self.frozen_flat: np.ndarray | None = None
        self._own_views = 0
        # Records' fast paths, for one-value fields: name -> column (reads), and name ->
        # (writer, Python type, lowest, highest): a value of that type within the bounds
        # is stored exactly with no conversion, through ``writer[row] = value`` (a
        # memoryview of the column where Python's struct formats cover its dtype: half
        # the cost of numpy's item assignment).
        self.scalar_columns: dict[Any, np.ndarray] = {}  # Any: records probe with any key
        self.scalar_writes: dict[Any, tuple[Any, type, Any, Any]] = {}
        self._bind_columns()

    @property
    def chunk_versions(self) -> np.ndarray:
        """The data version of each chunk of ``CHUNK_ROWS`` rows (int64)."""
        return self._chunk_versions

    @chunk_versions.setter
    def chunk_versions(self, value: np.ndarray) -> None:
        self._chunk_versions = value
        # ``chunk_marks[i] = version``: a memoryview's item assignment costs half numpy's
        # (single-row writes mark their chunk through it)
        self.chunk_marks = value.data

    def _bind_columns(self) -> None:
        """Cache one view per field: ``data[name]`` costs a view construction per call."""
        data = self.data
        self.columns = {name: data[name] for name in self.schema.field_names}
        self.frozen = data.view()  # read-only: its slices are read-only views for free
        self.frozen.flags.writeable = False
        # ``Query.unstructured``: (capacity, values per row) views when every field has
        # one dtype, so an aligned query slices them with one numpy call
        element = self.schema.element
        if element is not None:
            self.flat = data.view(element).reshape(len(data), self.schema.values_per_row)
            self.frozen_flat = self.flat.view()
            self.frozen_flat.flags.writeable = False
        self._own_views = len(self.columns) + 2 + (2 if element is not None else 0)
        # Records' fast paths (ChildOf is written only through world.set_parent: no
        # writers for it).
        exact = self.schema.exact_scalars
        self.scalar_columns = {name: self.columns[name] for name in exact}
        self.scalar_writes = {} if self.schema.name == PARENT_LINK else {
            name: (_writer(self.columns[name]), *bounds)
            for name, (_convert, *bounds) in exact.items()}
        # Single-row moves: ``row_moves[dst] = row_moves[src]`` copies a whole row as one
        # item (rows of 1, 2, 4 or 8 bytes through a memoryview of unsigned words,
        # others as numpy voids): no field-by-field structured copy. ``key_marks`` is
        # a memoryview of the keys, for reading and writing one key.
        size = data.dtype.itemsize
        words = data.view(row_word_dtype(data.dtype))
        # The one extra view of ``data`` (see views_outstanding). Snapshots and restores
        # copy rows through it too: a plain copy (numpy copies structured rows field by
        # field), with no view to build per call.
        self.row_words = words
        self.row_moves: Any = _writer(words) if size in (1, 2, 4, 8) else words
        self.key_marks = _writer(self.entities)

    @property
    def capacity(self) -> int:
        return len(self.data)

    @property
    def nbytes(self) -> int:
        """Bytes of live rows (data plus entity keys)."""
        return self.n * (self.schema.dtype.itemsize + KEY_DTYPE.itemsize)

    @property
    def version(self) -> int:
        """Moves on every change (values or layout)."""
        return self.data_version

    def touch(self, rows: slice | np.ndarray | None = None) -> None:
        """Values changed (or a writable view was handed out): in ``rows``, or anywhere."""
        version = next(self._versions)
        self.data_version = version
        chunks = self._chunk_versions
        if len(chunks) == 1:  # small stores: one scalar store, whatever the rows
            self.chunk_marks[0] = version
        elif rows is None:
            chunks[:] = version
        elif isinstance(rows, slice):
            start, stop, _ = rows.indices(self.capacity)
            if stop > start:
                self._mark_chunks(start, stop, version)
        elif len(rows):
            hit = np.zeros(len(chunks), np.bool_)
            hit[np.asarray(rows) // CHUNK_ROWS] = True  # O(rows), no sort
            chunks[hit] = version

    def touch_rows(self, start: int, stop: int) -> None:
        """The values of rows ``[start, stop)`` changed (``start < stop``)."""
        version = next(self._versions)
        self.data_version = version
        self._mark_chunks(start, stop, version)

    def _mark_chunks(self, start: int, stop: int, version: int) -> None:
        """Chunks holding rows ``[start, stop)`` (``start < stop``) are at ``version``."""
        first, last = start // CHUNK_ROWS, (stop - 1) // CHUNK_ROWS
        if first == last:  # one scalar store, not a slice assignment
            self.chunk_marks[first] = version
        else:
            self._chunk_versions[first : last + 1] = version

    def touch_row(self, row: int) -> None:
        """The values of one row changed (cheaper than ``touch(slice(row, row + 1))``)."""
        version = next(self._versions)
        self.data_version = version
        self.chunk_marks[row // CHUNK_ROWS] = version

    def touch_layout(self) -> None:
        """Rows were added, removed or moved (values move with them)."""
        self.layout_version = next(self._versions)
        self.clock.stamp += 1
        self.touch()

    def _touch_layout_rows(self, row: int, other: int) -> None:
        """One or two rows moved: only their chunks' data changed (``row <= other``)."""
        version = next(self._versions)
        self.layout_version = version
        self.data_version = version
        self.clock.stamp += 1
        marks = self.chunk_marks
        marks[row // CHUNK_ROWS] = version
        marks[other // CHUNK_ROWS] = version

    def ensure_slots(self, slot_capacity: int) -> None:
        if slot_capacity > len(self.sparse):
            sparse = np.full(slot_capacity, -1, np.int32)
            sparse[: len(self.sparse)] = self.sparse
            self.sparse = sparse

    def reserve(self, rows: int) -> None:
        if rows <= self.capacity:
            return
        cap = max(rows, 2 * self.capacity)
        data = np.zeros(cap, self.schema.dtype)
        copy_into(data[: self.n], self.data[: self.n])
        entities = np.zeros(cap, KEY_DTYPE)
        entities[: self.n] = self.entities[: self.n]
        self.data, self.entities = data, entities
        self._bind_columns()
        chunks = np.full(-(-cap // CHUNK_ROWS), self.data_version, np.int64)
        chunks[: len(self.chunk_versions)] = self.chunk_versions
        self.chunk_versions = chunks

    def rows_of(self, slots: np.ndarray) -> np.ndarray:
        """Row of each slot, -1 where absent (int64)."""
        return self.sparse[slots].astype(np.int64)

    def contains(self, slot: int) -> bool:
        return slot < len(self.sparse) and self.sparse[slot] >= 0

    def append(self, keys: np.ndarray, first_slot: int | None = None,
               slots: np.ndarray | None = None) -> slice:
        """Append rows for new keys (not present); returns the slice to fill.

        ``first_slot``: the keys' slots are ``first_slot, first_slot + 1, ...`` (fresh
        slots from one allocation), so the sparse update is one slice write; ``slots``:
        the keys' slots, when the caller has them (several stores get the same keys)."""
        k = len(keys)
        self.reserve(self.n + k)
        rows = slice(self.n, self.n + k)
        self.entities[rows] = keys
        row_ids = np.arange(self.n, self.n + k, dtype=np.int32)
        if first_slot is not None:
            self.sparse[first_slot : first_slot + k] = row_ids
        else:
            self.sparse[key_slots(keys) if slots is None else slots] = row_ids
        self.n += k
        self.touch_layout()
        return rows

    def append_one(self, key: int, slot: int) -> int:
        """Append a row for one new key (not present); returns the row to fill."""
        row = self.n
        if row >= len(self.data):
            self.reserve(row + 1)
        self.key_marks[row] = key
        self.sparse[slot] = row
        self.n = row + 1
        self._touch_layout_rows(row, row)
        return row

    def insert_one(self, key: int, slot: int, at: int) -> int:
        """Add a row for one new key (not present) at row ``at <= n``: the row there
        moves to the end (``append_one`` then a swap with ``at``, in one move). Returns
        ``at``, the row to fill. For an entity joining an owning group of size ``at``."""
        row = self.n
        if row >= len(self.data):
            self.reserve(row + 1)
        if at != row:
            self._move_one(row, at)
        self.key_marks[at] = key
        self.sparse[slot] = at
        self.n = row + 1
        self._touch_layout_rows(at, row)
        return at

    def insert_chain(self, key: int, slot: int, ats: list[int]) -> int:
        """``insert_one`` for an entity joining nested groups: ``ats`` are their sizes,
        innermost first (ascending). The row at each position moves to the next one out
        (the outermost's to the end), and the entity takes ``ats[0]``, which it returns."""
        if len(ats) == 1:
            return self.insert_one(key, slot, ats[0])
        row = self.n
        if row >= len(self.data):
            self.reserve(row + 1)
        hole = row
        for at in reversed(ats):
            if at != hole:
                self._move_one(hole, at)
                hole = at
        self.key_marks[hole] = key
        self.sparse[slot] = hole
        self.n = row + 1
        self._touch_layout_rows(hole, row)
        for at in ats:
            self.chunk_marks[at // CHUNK_ROWS] = self.data_version
        return hole

    def remove_chain(self, row: int, slot: int, lasts: list[int]) -> None:
        """``remove_group_one`` for a member of nested groups: ``lasts`` are their last
        rows, innermost first (ascending). Each level's last row fills the hole, which
        moves out level by level, and the store's last row fills the last hole."""
        end = self.n - 1
        self.sparse[slot] = -1
        hole = row
        for last in lasts:
            if last != hole:
                self._move_one(hole, last)
                hole = last
        if hole != end:
            self._move_one(hole, end)
        self.n = end
        self._touch_layout_rows(row, end)
        version = self.data_version
        for last in lasts:  # every row that moved
            self.chunk_marks[last // CHUNK_ROWS] = version

    def place_rows(self, dst: np.ndarray, src: np.ndarray) -> None:
        """Permute rows: row ``src[j]`` moves to ``dst[j]`` (values, keys and the index);
        ``dst`` and ``src`` hold the same distinct live rows. Only their chunks change."""
        if len(dst) == 0:
            return
        self.data[dst] = self.data[src]
        self.entities[dst] = self.entities[src]
        self.sparse[key_slots(self.entities[dst])] = dst.astype(np.int32)
        self.layout_version = next(self._versions)
        self.clock.stamp += 1
        self.touch(dst)

    def move_block(self, start: int, to: int, count: int) -> None:
        """``move_rows`` of the run ``[start, start + count)`` to ``[to, to + count)``
        (``to < start``), with the same outcome (the displaced rows take the places the
        moved rows left, in ascending order) but as a few slice copies, no index arrays:
        two runs trade places, or, where they overlap, the span rotates."""
        end = start + count
        if _move_block is not None:  # (one C pass, no copies to hold: ~12 numpy calls)
            _move_block(self.data, self.entities, self.sparse, start, to, count)
        else:
            self._move_block_numpy(start, to, count)
        self.layout_version = next(self._versions)
        self.clock.stamp += 1
        self.touch_rows(to, end)

    def _move_block_numpy(self, start: int, to: int, count: int) -> None:
        """``move_block``'s rows, keys and index, moved with numpy (no versions)."""
        end = start + count
        words, keys = self.row_words, self.entities
        spans: tuple[tuple[int, int], ...]
        if to + count <= start:  # apart: the runs trade places
            held, held_keys = words[to : to + count].copy(), keys[to : to + count].copy()
            words[to : to + count] = words[start:end]
            keys[to : to + count] = keys[start:end]
            words[start:end] = held
            keys[start:end] = held_keys
            spans = ((to, to + count), (start, end))
        else:  # overlapping: the moved run first, then the rows it displaced
            held, held_keys = words[start:end].copy(), keys[start:end].copy()
            words[to + count : end] = words[to:start]
            keys[to + count : end] = keys[to:start]
            words[to : to + count] = held
            keys[to : to + count] = held_keys
            spans = ((to, end),)
        sparse = self.sparse
        for lo, hi in spans:
            sparse[key_slots(keys[lo:hi])] = np.arange(lo, hi, dtype=np.int32)

    def _move_one(self, dst: int, src: int) -> None:
        """Row ``src``'s values and key to row ``dst`` (the index follows); ``src``'s
        slot in the index is left to the caller."""
        moves, keys = self.row_moves, self.key_marks
        moves[dst] = moves[src]
        key = keys[src]
        keys[dst] = key
        self.sparse[key & SLOT_MASK] = dst

    def remove_one(self, row: int, slot: int) -> None:
        """Swap-remove one live row (of the key in ``slot``): the last row fills the hole."""
        last = self.n - 1
        self.sparse[slot] = -1
        if row != last:
            self._move_one(row, last)
        self.n = last
        self._touch_layout_rows(row, last)

    def remove_group_one(self, row: int, slot: int, group_last: int) -> None:
        """Remove one live row of an owning group's prefix (of the key in ``slot``),
        whose last row is ``group_last``: that row fills the hole and the store's last
        row fills its place (a swap with ``group_last`` and a swap-remove, in two
        moves). The caller shrinks the group."""
        end = self.n - 1
        self.sparse[slot] = -1
        if row != group_last:
            self._move_one(row, group_last)
        if group_last != end:
            self._move_one(group_last, end)
        self.n = end
        self._touch_layout_rows(row, group_last)
        self.chunk_marks[end // CHUNK_ROWS] = self.data_version  # the third row that moved

    def remove_few(self, slots: list[int], rows: list[int], holes: list[int],
                   sources: list[int], new_n: int) -> None:
        """``remove_runs`` of a few rows, one row move at a time: ``rows`` (of the keys
        in ``slots``) leave, ``holes``/``sources`` are their ``few_removal_plan`` and
        ``new_n`` the row count after. Only the chunks of rows that changed move."""
        sparse = self.sparse
        for slot in slots:
            sparse[slot] = -1
        if holes:
            move = self._move_one
            for dst, src in zip(holes, sources, strict=True):
                move(dst, src)
        last = self.n - 1
        self.n = new_n
        version = next(self._versions)
        self.layout_version = version
        self.data_version = version
        self.clock.stamp += 1
        marks = self.chunk_marks
        if last < CHUNK_ROWS:  # (every changed row in the first chunk)
            marks[0] = version
            return
        for row in holes:
            marks[row // CHUNK_ROWS] = version
        for row in rows:
            marks[row // CHUNK_ROWS] = version
        marks[last // CHUNK_ROWS] = version

    def remove_rows(self, rows: np.ndarray, slots: np.ndarray | None = None) -> None:
        """Swap-remove distinct rows: the last live rows fill the holes. ``slots``: the
        removed entities' slots (in any order), when the caller has them."""
        k = len(rows)
        if k == 0:
            return
        new_n = self.n - k
        self.sparse[key_slots(self.entities[rows]) if slots is None else slots] = -1
        in_tail = rows >= new_n
        doomed = np.zeros(k, np.bool_)
        doomed[rows[in_tail] - new_n] = True
        movers = (~doomed).nonzero()[0]  # (flatnonzero is a Python wrapper around it)
        movers += new_n
        holes = rows[~in_tail]
        if len(holes):
            holes.sort()
            self.data[holes] = self.data[movers]
            moved = self.entities[movers]
            self.entities[holes] = moved
            self.sparse[key_slots(moved)] = holes  # (rows fit the int32 index)
        self.n = new_n
        self.touch_layout()

    def remove_runs(self, slots: np.ndarray, bounds: list[int],
                    plan: tuple[np.ndarray, np.ndarray, list[int]]) -> None:
        """``remove_rows`` in a store whose rows form runs ending at ``bounds`` (its
        groups' sizes, innermost first, then its row count), each run kept in front of
        the next: ``plan`` is ``removal_plan`` of the removed rows (stores of one group
        whose removed rows are the same share it). (``remove_rows`` is the one-run case,
        kept apart: it costs 1-3 us less a call on the stores no group owns.)"""
        holes, sources, cut = plan
        self.sparse[slots] = -1
        if len(holes):
            self.data[holes] = self.data[sources]
            moved = self.entities[sources]
            self.entities[holes] = moved
            self.sparse[key_slots(moved)] = holes  # (rows fit the int32 index)
        self.n = bounds[-1] - cut[-1]
        self.touch_layout()

    def remove_slots(self, slots: np.ndarray, bounds: list[int]) -> list[int] | None:
        """Remove the rows of the entities in ``slots`` (distinct, int64; slots the store
        does not hold are skipped) from runs ending at ``bounds`` (as ``remove_runs``),
        in one pass in C: the same rows move as with ``removal_plan`` and
        ``remove_runs``. Returns the plan's ``cut``, or None when the store held none of
        them (nothing changed). Only where ``REMOVES_IN_C``."""
        assert _remove_slots is not None
        cut: list[int] | None = _remove_slots(self.data, self.entities, self.sparse, slots,
                                              bounds)
        if cut is not None:
            self.n = bounds[-1] - cut[-1]
            self.touch_layout()
        return cut

    def move_rows(self, current: np.ndarray, targets: np.ndarray) -> None:
        """Move row ``current[j]`` to ``targets[j]`` (a contiguous range); displaced rows
        take the places the moved rows left, paired in ascending order."""
        moves = move_plan(current, targets)
        if moves is not None:
            self.place_rows(*moves)

    def load_rows(self, data: np.ndarray, entities: np.ndarray, sparse: np.ndarray,
                  *, adopt: bool = False) -> None:
        """Replace every row (a load from a file): ``data`` (in the schema's dtype) and
        ``entities`` are copied in, or with ``adopt`` become the store's arrays (writable
        arrays nothing else uses; the store then has no spare rows and grows on the next
        append); ``sparse`` (slot -> row, -1 elsewhere) is adopted as the index (extended
        with -1 if shorter than the current one). Grows without copying the rows it
        replaces. Never raises for valid input: restores call it after validation, when
        nothing may fail."""
        n = len(entities)
        if adopt:
            self.data, self.entities = data, entities
            self._bind_columns()
            self.chunk_versions = np.full(-(-n // CHUNK_ROWS), self.data_version, np.int64)
        elif n > self.capacity:
            cap = max(n, 16)
            # np.empty: every row below n is written next, so zeroing them first (calloc
            # on reused memory does) would be a wasted pass; the rest is zeroed below.
            self.data = np.empty(cap, self.schema.dtype)
            self.entities = np.empty(cap, KEY_DTYPE)
            self.data[n:] = np.zeros(1, self.schema.dtype)
            self.entities[n:] = 0
            self._bind_columns()
            self.chunk_versions = np.full(-(-cap // CHUNK_ROWS), self.data_version, np.int64)
        if len(sparse) < len(self.sparse):
            longer = np.full(len(self.sparse), -1, np.int32)
            longer[: len(sparse)] = sparse
            sparse = longer
        if not adopt:
            copy_into(self.data[:n], data)
            copy_into(self.entities[:n], entities.astype(KEY_DTYPE, copy=False))
        self.sparse = sparse
        self.n = n
        self.group_size = 0
        self.touch_layout()

    def views_outstanding(self) -> bool:
        """True while arrays that view ``data`` live outside the store: query columns kept
        past their block, ``live()`` views. They can write without moving the version, so
        snapshots and restores treat every row as changed while any exists, and leave
        the store's version moved past what they copied, so writes a view makes before
        it dies are never taken for the copied rows (every numpy
        view of ``data`` references it, so its reference count tells; the store's own
        cached field columns are counted out)."""
        # the store's own views: the columns, ``frozen``, ``row_words`` and the flat pair
        return sys.getrefcount(self.data) > _UNSHARED_REFS + self._own_views

    def live(self) -> np.ndarray:
        """The live rows (a writable view; the caller bumps the version)."""
        return self.data[: self.n]

    def clear(self) -> None:
        self.sparse[key_slots(self.entities[: self.n])] = -1
        self.n = 0
        self.group_size = 0
        self.touch_layout()
