"""Save files: a snapshot as one msgpack stream with raw column bins and a checksum.

The layout is documented byte by byte in ``SAVE_FORMAT.md``. Version 2 (written) stores
each component's rows as one bin in the stores' own packed layout; version 1 (one bin per
field) still reads. Saving computes the size first, then streams the file front to back:
small msgpack pieces, then every column straight from the source arrays (a store's row
buffers as they are; only byte swaps on big-endian machines go through a small scratch
buffer), hashing as it goes (``to_bytes`` fills one preallocated buffer, hashing each piece
while it is still in cache). ``world.save`` writes from the live columns and takes its
snapshot while the file is fsynced (:func:`save_world`).
Loading parses each part of a file as soon as its bytes are in, but uses nothing of it
before magic, version, size and checksum have passed (a file that parse could not follow
is parsed again then); it parses the metadata with a bounded ``msgpack.Unpacker`` and
reads every column as a zero-copy view into the file's buffer. Nothing on load executes
code, and no declared length can make it allocate more than the file holds.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import msgpack
import numpy as np
import xxhash

from ecs_engine.atomicfile import write_atomic
from ecs_engine.entity import KEY_DTYPE
from ecs_engine.memcopy import as_bytes, root_of
from ecs_engine.readahead import read_following
from ecs_engine.savevalues import (
    BIT_GENERATORS,
    check_value,
    checked_tick,
    ext_hook,
    parse_dtype,
    to_wire,
    wire_dtype,
)
from ecs_engine.slotmap import MAX_SLOTS, SlotTable

if TYPE_CHECKING:
    from ecs_engine.memcopy import BufferPool
    from ecs_engine.snapshot import Snapshot
    from ecs_engine.world import World

FORMAT_NAME = "ecs-engine-save"
FORMAT_VERSION = 2  # what the writer produces
READ_VERSIONS = (1, 2)  # what the reader accepts
MAGIC = b"\xa6format\xafecs-engine-save"  # bytes 1..23: the header's first key and value
HEADER_START = b"\x84" + MAGIC  # a fixmap of 4 entries, then MAGIC
CHECKSUM_SIZE = 9  # msgpack uint64: 0xcf + 8 bytes big-endian
CHUNK = 1 << 20  # bytes hashed at a time while writing
ALIGN = 8  # column data starts at file offsets that are multiples of this
MAX_ROW_BYTES = 1 << 30  # one row, all its fields
MAX_ROWS = 1 << 32
_META_KEYS = {"tick", "slots", "components", "groups", "resources", "rng"}
_HEADER_KEYS = {"format", "version", "engine", "size"}
_SLOT_DTYPES = (np.dtype("<u4"), np.dtype("|b1"), np.dtype("<i8"))


class SaveFileError(Exception):
    """A save file or snapshot that cannot be loaded; the world is left unchanged."""


# -- layout shared by writer and reader ------------------------------------------------


@dataclass(frozen=True)
class _Column:
    """One bulk bin: ``rows`` rows of ``shape`` elements of ``dtype``."""

    label: str
    dtype: np.dtype
    rows: int
    shape: tuple[int, ...] = ()
    keys_of: str = ""  # the component whose entity keys the bin holds (if it does)

    @property
    def nbytes(self) -> int:
        return self.rows * math.prod(self.shape) * self.dtype.itemsize


def _bin_header(n: int) -> bytes:
    if n < 1 << 8:
        return struct.pack(">BB", 0xC4, n)
    if n < 1 << 16:
        return struct.pack(">BH", 0xC5, n)
    if n < 1 << 32:
        return struct.pack(">BI", 0xC6, n)
    raise ValueError(f"a column of {n} bytes exceeds msgpack's 4 GiB bin limit")


def _pad(pos: int, nbytes: int) -> int:
    """Nil bytes (0xc0) to put at ``pos`` so the column of ``nbytes`` that follows (bin
    header, then data) has its data at a multiple of 8: columns then load as aligned
    arrays, which numpy indexes and compares 2-5x faster than unaligned ones."""
    return -(pos + len(_bin_header(nbytes))) % ALIGN


def _header(total: int, version: int = FORMAT_VERSION) -> bytes:
    from ecs_engine import __version__

    packer = msgpack.Packer(use_bin_type=True)
    out = HEADER_START
    out += packer.pack("version") + packer.pack(version)
    out += packer.pack("engine") + packer.pack(__version__)
    return out + packer.pack("size") + struct.pack(">BQ", 0xCF, total)  # fixed width


# -- writing ---------------------------------------------------------------------------


def _field_columns(data: np.ndarray) -> Iterator[tuple[str, np.dtype, tuple[int, ...]]]:
    dtype = data.dtype
    for name in dtype.names or ():
        fdt = dtype.fields[name][0]  # type: ignore[index]
        base, shape = (fdt.subdtype if fdt.subdtype is not None else (fdt, ()))
        yield name, base, tuple(shape)


def _row_dtype(fields: Sequence[tuple[str, np.dtype, tuple[int, ...]]]) -> np.dtype:
    """The packed, little-endian structured dtype of rows with ``fields`` (the in-memory
    layout of a store's rows: fields back to back in declaration order, no padding)."""
    return np.dtype([(name, base.newbyteorder("<"), shape) if shape
                     else (name, base.newbyteorder("<")) for name, base, shape in fields])


def _meta(snap: Snapshot, version: int = FORMAT_VERSION
          ) -> tuple[dict[str, Any], list[tuple[_Column, list[np.ndarray]]]]:
    """The metadata map and the bulk columns (with their source arrays), in file order."""
    slots = snap.slots
    hw, nfree = len(slots.generations), len(slots.free)
    columns = [
        (_Column("slot generations", _SLOT_DTYPES[0], hw), [slots.generations]),
        (_Column("slot alive flags", _SLOT_DTYPES[1], hw), [slots.alive]),
        (_Column("slot free list", _SLOT_DTYPES[2], nfree), [slots.free]),
    ]
    components = []
    # Stores by name: the same state gives the same bytes whatever order the components
    # were registered in. A world's empty stores that no group names are left out: which
    # types are registered is no part of the state (the state hash skips them too), and
    # a load then need not know their types. (Stores of no type, such as the prefab
    # columns of prefab_fields.split, stay: their dtypes are what a load reads.)
    grouped = {name for group in snap.groups for name in group}
    for s in sorted((s for s in snap.stores
                     if s.n or s.ctype is None or s.name in grouped), key=lambda s: s.name):
        layout = list(_field_columns(s.chunks[0]))
        fields = [{"name": name, "dtype": wire_dtype(base), "shape": list(shape)}
                  for name, base, shape in layout]
        columns.append((_Column(f"component {s.name!r} entities", KEY_DTYPE, s.n),
                        [s.entities]))
        # One bin of whole rows: the store's own bytes when it is packed and little-endian
        # (always, for stores of this engine on little-endian machines), so the writer
        # sends the snapshot's chunks as they are and the reader adopts the bytes as rows.
        if version == 1:  # one bin per field
            columns += [(_Column(f"component {s.name!r} field {name!r}",
                                 base.newbyteorder("<"), s.n, shape),
                         [chunk[name] for chunk in s.chunks]) for name, base, shape in layout]
        else:
            columns.append((_Column(f"component {s.name!r} rows", _row_dtype(layout), s.n),
                            list(s.chunks)))
        components.append({"name": s.name, "count": s.n, "group_size": s.group_size,
                           "fields": fields})
    meta = {
        "tick": checked_tick(snap.tick),
        "slots": {"count": hw, "free": nfree},
        "components": components,
        "groups": [list(g) for g in snap.groups],
        "resources": to_wire(dict(snap.resources), "resources"),
        "rng": to_wire(snap.rng_state, "rng state"),
    }
    return meta, columns


class _Writer:
    """Produces a save front to back, hashing each piece right after producing it (while
    it is in cache).

    Into a buffer (``file=None``): pieces are copied into one preallocated array. Into a
    file: contiguous little-endian columns (keys, slot tables) are written straight from
    the snapshot's arrays, and a field of structured rows is gathered through a small
    reused scratch buffer, so a save never builds the whole file in memory.
    """

    def __init__(self, size: int, file: BinaryIO | None = None) -> None:
        self.size = size
        self.file = file
        self.buf = np.empty(size if file is None else 0, np.uint8)
        self.scratch = np.empty(CHUNK if file is not None else 0, np.uint8)
        self.pos = 0
        self.hasher = xxhash.xxh3_64()

    def _space(self, nbytes: int) -> np.ndarray:
        """Writable bytes for the next ``nbytes`` of the file (``nbytes <= CHUNK`` when
        writing to a file)."""
        if self.file is None:
            return self.buf[self.pos : self.pos + nbytes]
        return self.scratch[:nbytes]

    def _commit(self, piece: np.ndarray | memoryview, in_place: bool = False) -> None:
        """Hash the next bytes of the file and send them; ``in_place``: they are already
        where they belong (in the buffer, from ``_space``)."""
        view = piece if isinstance(piece, memoryview) else piece.data
        self.hasher.update(view)
        if self.file is not None:
            self.file.write(view)
        elif not in_place:
            self.buf[self.pos : self.pos + len(view)] = np.frombuffer(view, np.uint8)
        self.pos += len(view)

    def put(self, piece: bytes) -> None:
        self._commit(memoryview(piece))

    def put_column(self, col: _Column, pieces: Sequence[np.ndarray]) -> None:
        """Write ``pieces`` (consecutive row ranges, each rows x shape, maybe strided) as
        contiguous little-endian bytes, after alignment padding and the bin header."""
        self.put(b"\xc0" * _pad(self.pos, col.nbytes) + _bin_header(col.nbytes))
        if col.nbytes == 0:
            return
        row_bytes = col.nbytes // col.rows
        step = max(1, CHUNK // row_bytes)
        done = 0
        for src in pieces:
            if (src.dtype == col.dtype and src.flags.c_contiguous
                    and src.shape[1:] == col.shape):
                flat = as_bytes(src)  # already the column's bytes: sent as they are
                if self.file is not None:  # one write call per array
                    self._commit(flat)
                    done += len(src)
                    continue
                for at in range(0, flat.size, CHUNK):  # copy, then hash while in cache
                    piece = flat[at : at + CHUNK]
                    space = self.buf[self.pos : self.pos + piece.size]
                    np.copyto(space, piece)
                    self._commit(space, in_place=True)
                done += len(src)
                continue
            for r in range(0, len(src), step):  # byte swaps, strided fields: gathered
                stop = min(len(src), r + step)
                space = self._space((stop - r) * row_bytes)
                np.copyto(space.view(col.dtype).reshape((stop - r, *col.shape)), src[r:stop])
                self._commit(space, in_place=self.file is None)
            done += len(src)
        if done != col.rows:
            raise AssertionError(f"save writer: {col.label} has {done} of {col.rows} rows")

    def finish(self) -> np.ndarray:
        checksum = struct.pack(">BQ", 0xCF, self.hasher.intdigest())
        if self.file is not None:
            self.file.write(checksum)
        else:
            self.buf[self.pos :] = np.frombuffer(checksum, np.uint8)
        self.pos += len(checksum)
        if self.pos != self.size:
            raise AssertionError(f"save writer: wrote {self.pos} of {self.size} bytes")
        return self.buf


@dataclass(frozen=True)
class _Plan:
    """Everything a save needs, checked (resources encodable) before any byte is written."""

    size: int
    meta: bytes
    columns: list[tuple[_Column, list[np.ndarray]]]
    version: int = FORMAT_VERSION


def _plan(snap: Snapshot, version: int = FORMAT_VERSION) -> _Plan:
    if version not in READ_VERSIONS:
        raise ValueError(f"cannot write save format version {version}")
    meta, columns = _meta(snap, version)
    meta_bytes = msgpack.Packer(use_bin_type=True, strict_types=True).pack(meta)
    total = len(_header(0)) + len(meta_bytes)
    for col, _ in columns:
        total += _pad(total, col.nbytes) + len(_bin_header(col.nbytes)) + col.nbytes
    return _Plan(total + CHECKSUM_SIZE, meta_bytes, columns, version)


def _encode(plan: _Plan, file: BinaryIO | None = None) -> np.ndarray:
    """The save bytes: into a new buffer, or written to ``file``."""
    writer = _Writer(plan.size, file)
    writer.put(_header(plan.size, plan.version))
    writer.put(plan.meta)
    for col, src in plan.columns:
        writer.put_column(col, src)
    return writer.finish()


def encode_snapshot(snap: Snapshot, *, version: int = FORMAT_VERSION) -> memoryview:
    """The snapshot as save-file bytes: a read-only memoryview over one fresh buffer
    (bytes-like; ``bytes(...)`` copies it). ``TypeError`` for resources that cannot be
    saved, naming the offending entry. ``version=1`` writes the old layout (one bin per
    field), which every reader of this engine still loads."""
    return _encode(_plan(snap, version)).data.toreadonly()


def write_file(path: str | os.PathLike[str], snap: Snapshot) -> None:
    """Write ``snap`` to ``path`` atomically: a crash at any point leaves either the old
    file or the new one, and several worlds saving to one path at once leave one complete
    save. Writes a temp file of its own next to ``path`` (created exclusively, never
    through a link), fsyncs it, renames it over ``path`` and fsyncs the folder."""
    plan = _plan(snap)  # a resource that cannot be saved fails here, before any file exists
    write_atomic(path, lambda f: _encode(plan, f))


def save_world(world: World, path: str | os.PathLike[str]) -> Snapshot:
    """``world.save``: write the world to ``path`` atomically and return its snapshot.

    The file is written straight from the live columns (no copy first); the snapshot the
    caller gets is taken while the file is fsynced, so its copy overlaps the wait for the
    disk. Nothing changes the world in between (this call runs to completion), so the
    snapshot holds exactly the state in the file. Prefab-owned fields are stored only
    where they differ from ``world.prefabs``' prefabs.
    """
    from ecs_engine.prefab_fields import for_file
    from ecs_engine.snapshot import live_view

    if world._open_queries:
        raise RuntimeError("cannot save while a query is open")
    view = live_view(world)
    plans = [_plan(for_file(view, world.prefabs))]
    del view  # views of the stores live only as long as the plan: see below
    taken: list[Snapshot] = []

    def write(f: BinaryIO) -> None:
        _encode(plans.pop(), f)  # the plan (and every view of a store) dies here, so the
        # snapshot below does not count them as outstanding views

    write_atomic(path, write, meanwhile=lambda: taken.append(world.snapshot()))
    return taken[0]


# -- reading ---------------------------------------------------------------------------


def _read_object(buf: np.ndarray, pos: int, end: int, what: str,
                 wait: Callable[[int], int] | None = None) -> tuple[Any, int]:
    """Unpack one msgpack object from ``buf[pos:end]``; returns it and the next offset.

    Feeds the unpacker a growing window so a small object never copies the whole file;
    every declared length is capped by the bytes left, so nothing can over-allocate.
    ``wait``: for a file still being read (each window once its bytes are in).
    """
    avail = end - pos
    if avail <= 0:
        raise SaveFileError(f"truncated: the file ends at byte {pos} where the {what} starts")
    cap = max(1, avail)
    unpacker = msgpack.Unpacker(
        raw=False, strict_map_key=True, ext_hook=ext_hook, max_buffer_size=cap,
        max_bin_len=cap, max_str_len=cap, max_ext_len=cap, max_array_len=cap,
        max_map_len=max(1, cap // 2),
    )
    fed, window = 0, 4096
    while True:
        stop = min(avail, fed + window)
        if wait is not None and wait(pos + stop) < pos + stop:
            raise SaveFileError(f"truncated: the file ends inside the {what} (from byte "
                                f"{pos})")
        unpacker.feed(buf[pos + fed : pos + stop])
        fed, window = stop, window * 2
        try:
            obj = unpacker.unpack()
        except msgpack.OutOfData:
            if fed >= avail:
                raise SaveFileError(f"truncated: the {what} (from byte {pos}) runs past byte "
                                    f"{end}") from None
            continue
        except (msgpack.StackError, RecursionError):  # RecursionError: pure-Python msgpack
            raise SaveFileError(f"the {what} (at byte {pos}) is nested too deeply") from None
        except (msgpack.UnpackException, ValueError, TypeError, OverflowError) as exc:
            raise SaveFileError(f"the {what} (at byte {pos}) is not valid msgpack: "
                                f"{exc}") from None
        return obj, pos + unpacker.tell()


def _read_bin(buf: np.ndarray, pos: int, end: int, col: _Column) -> tuple[np.ndarray, int]:
    """The column at ``pos`` (after 0-7 padding nils) as a read-only view (no copy) and
    the next offset."""
    for _ in range(ALIGN - 1):
        if pos >= end or buf[pos] != 0xC0:
            break
        pos += 1
    if pos >= end:
        raise SaveFileError(f"truncated: the file ends at byte {pos} where the {col.label} "
                            f"column starts")
    marker = int(buf[pos])
    width = {0xC4: 1, 0xC5: 2, 0xC6: 4}.get(marker)
    if width is None:
        raise SaveFileError(f"{col.label}: expected a msgpack bin at byte {pos}, found type "
                            f"byte 0x{marker:02x}")
    if pos + 1 + width > end:
        raise SaveFileError(f"truncated: the file ends inside the {col.label} bin header "
                            f"at byte {pos}")
    length = int.from_bytes(buf[pos + 1 : pos + 1 + width].tobytes(), "big")
    start = pos + 1 + width
    if length != col.nbytes:
        unit = (f"{col.dtype.itemsize}-byte rows" if col.dtype.names is not None
                else f"{col.dtype.str}{list(col.shape) if col.shape else ''}")
        raise SaveFileError(f"{col.label}: the column holds {length} bytes, expected "
                            f"{col.nbytes} ({col.rows} x {unit})")
    if start + length > end:
        raise SaveFileError(f"truncated: the {col.label} column (bytes {start}-"
                            f"{start + length}) runs past byte {end}")
    if col.dtype.itemsize == 0:  # a tag's rows: no bytes (numpy cannot view 0 bytes so)
        view = np.empty((col.rows, *col.shape), col.dtype)
    else:
        view = buf[start : start + length].view(col.dtype).reshape((col.rows, *col.shape))
    view.flags.writeable = False
    return view, start + length


def _expect(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise SaveFileError(f"{where}: expected {names}, found {type(value).__name__} "
                            f"{_short(value)}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _int_in(value: Any, lo: int, hi: int, where: str) -> int:
    _expect(value, int, where)
    if not lo <= value <= hi:
        raise SaveFileError(f"{where}: {value} is outside [{lo}, {hi}]")
    return int(value)


def _keys(obj: Any, required: set[str], where: str) -> dict[str, Any]:
    _expect(obj, dict, where)
    missing = sorted(required - obj.keys())
    extra = sorted(obj.keys() - required, key=repr)  # keys may be bytes
    if missing or extra:
        raise SaveFileError(f"{where}: " + "; ".join(
            ([f"missing {missing}"] if missing else []) + ([f"unknown {extra}"] if extra else [])
        ))
    return obj


@dataclass
class _Component:
    name: str
    count: int
    group_size: int
    fields: list[tuple[str, np.dtype, tuple[int, ...]]]


def _parse_components(meta: dict[str, Any]) -> list[_Component]:
    out: list[_Component] = []
    seen: set[str] = set()
    for i, comp in enumerate(_expect(meta["components"], list, "components")):
        where = f"components[{i}]"
        comp = _keys(comp, {"name", "count", "group_size", "fields"}, where)
        name = _expect(comp["name"], str, f"{where}.name")
        if not name or name in seen:
            raise SaveFileError(f"{where}: component name {name!r} is empty or repeated")
        seen.add(name)
        where = f"component {name!r}"
        count = _int_in(comp["count"], 0, MAX_ROWS, f"{where} count")
        group_size = _int_in(comp["group_size"], 0, count, f"{where} group_size")
        fields = []
        names: set[str] = set()
        for j, fld in enumerate(_expect(comp["fields"], list, f"{where} fields")):
            fwhere = f"{where} fields[{j}]"
            fld = _keys(fld, {"name", "dtype", "shape"}, fwhere)
            fname = _expect(fld["name"], str, f"{fwhere}.name")
            if not fname or fname in names:
                raise SaveFileError(f"{where}: field name {fname!r} is empty or repeated")
            names.add(fname)
            fwhere = f"{where} field {fname!r}"
            try:
                dtype = parse_dtype(fld["dtype"], f"{fwhere} dtype")
            except ValueError as exc:
                raise SaveFileError(str(exc)) from None
            dims = _expect(fld["shape"], list, f"{fwhere} shape")
            if len(dims) > 8:
                raise SaveFileError(f"{fwhere}: shape {_short(dims)} has more than 8 dimensions")
            shape = tuple(_int_in(d, 1, MAX_ROW_BYTES, f"{fwhere} shape") for d in dims)
            if math.prod(shape) * dtype.itemsize > MAX_ROW_BYTES:
                raise SaveFileError(f"{fwhere}: shape {list(shape)} makes rows too large")
            fields.append((fname, dtype.newbyteorder("<"), shape))
        # numpy keeps a row's size in 32 bits: many big fields wrapped it round to a
        # small or negative size, and a field's bytes then lay outside its row
        row_bytes = sum(math.prod(shape) * dt.itemsize for _, dt, shape in fields)
        if row_bytes > MAX_ROW_BYTES:
            raise SaveFileError(f"{where}: its fields make rows of {row_bytes} bytes, more "
                                f"than {MAX_ROW_BYTES}")
        out.append(_Component(name, count, group_size, fields))
    return out


def _parse_groups(value: Any) -> tuple[tuple[str, ...], ...]:
    groups = []
    for i, group in enumerate(_expect(value, list, "groups")):
        names = _expect(group, list, f"groups[{i}]")
        groups.append(tuple(_expect(n, str, f"groups[{i}] entry") for n in names))
    return tuple(groups)


def _parse_rng(value: Any) -> dict[str, Any]:
    """Validate an rng state by loading it into a fresh bit generator of its type."""
    state = _expect(value, dict, "rng state")
    name = state.get("bit_generator")
    if type(name) is not str or name not in BIT_GENERATORS:
        raise SaveFileError(f"rng state: unknown bit generator {_short(name)} (known: "
                            f"{', '.join(BIT_GENERATORS)})")
    bitgen = getattr(np.random, name)(0)
    try:
        check_value(state, "rng state")
        bitgen.state = state
    except Exception as exc:  # numpy's setter raises assorted types for bad states
        raise SaveFileError(f"rng state for {name} is invalid: {exc}") from None
    normal = bitgen.state  # the types numpy itself produces
    # numpy does not range-check buffer positions, which index C arrays.
    positions = {"MT19937": (normal["state"].get("pos"), 624),
                 "Philox": (normal.get("buffer_pos"), 4)}
    pos, top = positions.get(name, (0, 0))
    if not 0 <= pos <= top or normal.get("has_uint32", 0) not in (0, 1):
        raise SaveFileError(f"rng state for {name}: buffer position out of range")
    return normal


def _parse_layout(meta: Any) -> tuple[dict[str, Any], int, int, list[_Component]]:
    """The metadata map checked far enough to know every column's size."""
    meta = _keys(meta, _META_KEYS, "metadata")
    slot_meta = _keys(meta["slots"], {"count", "free"}, "slots")
    hw = _int_in(slot_meta["count"], 0, MAX_SLOTS, "slots count")
    nfree = _int_in(slot_meta["free"], 0, hw, "slots free")
    return meta, hw, nfree, _parse_components(meta)


def _columns(hw: int, nfree: int, comps: list[_Component], version: int) -> list[_Column]:
    cols = [_Column("slot generations", _SLOT_DTYPES[0], hw),
            _Column("slot alive flags", _SLOT_DTYPES[1], hw),
            _Column("slot free list", _SLOT_DTYPES[2], nfree)]
    for c in comps:
        cols.append(_Column(f"component {c.name!r} entities", KEY_DTYPE, c.count, (),
                            c.name))
        if version == 1:
            cols += [_Column(f"component {c.name!r} field {f!r}", dt, c.count, shape)
                     for f, dt, shape in c.fields]
        else:
            cols.append(_Column(f"component {c.name!r} rows", _row_dtype(c.fields), c.count))
    return cols


def _bools(arr: np.ndarray, where: str) -> np.ndarray:
    if arr.size and arr.view(np.uint8).max() > 1:
        raise SaveFileError(f"{where}: a bool byte is neither 0 nor 1")
    return arr


def _rows(comp: _Component, cols: list[np.ndarray]) -> np.ndarray:
    """The component's structured rows, in the dtype it was saved with (version 1: one
    column per field, interleaved here; version 2: the one rows column, as it is)."""
    dtype = _row_dtype(comp.fields)
    if len(cols) == 1 and cols[0].dtype == dtype:  # version 2: the bytes are the rows
        for fname, dt, _ in comp.fields:
            if dt.kind == "b":
                _bools(cols[0][fname], f"component {comp.name!r} field {fname!r}")
        return cols[0]
    for (fname, dt, _), col in zip(comp.fields, cols, strict=True):
        if dt.kind == "b":
            _bools(col, f"component {comp.name!r} field {fname!r}")
    if len(comp.fields) == 1 and comp.count:
        rows = cols[0].reshape(-1).view(np.uint8).view(dtype)  # the bytes are the rows
    else:
        rows = np.empty(comp.count, dtype)
        for (fname, _, _), col in zip(comp.fields, cols, strict=True):
            rows[fname] = col
    rows.flags.writeable = False
    return rows


def _body(buf: np.ndarray, pos: int, end: int, version: int,
          wait: Callable[[int], int] | None = None,
          watcher: ReadWatcher | None = None) -> Snapshot:
    """Parse metadata and columns from ``buf[pos:end]`` (checksum already verified, or
    to be verified before the result is used). ``wait``: for a file still being read,
    ``read_following``'s (each part is parsed as soon as its bytes are in); ``watcher``
    hears of the slot table's and the stores' key columns as they are parsed."""
    from ecs_engine.snapshot import Snapshot, StoreSnapshot

    meta, pos = _read_object(buf, pos, end, "metadata", wait)
    meta, hw, nfree, comps = _parse_layout(meta)
    tick = _int_in(meta["tick"], -(1 << 63), (1 << 63) - 1, "tick")
    groups = _parse_groups(meta["groups"])
    resources = _expect(meta["resources"], dict, "resources")
    try:
        check_value(resources, "resources")
    except ValueError as exc:
        raise SaveFileError(str(exc)) from None
    rng_state = _parse_rng(meta["rng"])
    arrays: list[np.ndarray] = []
    slots = None
    for col in _columns(hw, nfree, comps, version):
        if wait is not None:
            need = min(end, pos + ALIGN + 5 + col.nbytes)  # padding, bin header, bytes
            if wait(need) < need:
                raise SaveFileError(f"truncated: the file ends before the {col.label} "
                                    f"column")
        arr, pos = _read_bin(buf, pos, end, col)
        arrays.append(arr)
        if len(arrays) == 3:
            gens, alive, free = arrays
            slots = SlotTable(gens.astype(np.uint32, copy=False),
                              _bools(alive, "slot alive flags").view(np.bool_),
                              free.astype(np.int64, copy=False))
            if watcher is not None:
                watcher.slot_table(slots)
        elif watcher is not None and col.keys_of:
            watcher.keys(col.keys_of, arr.astype(KEY_DTYPE, copy=False))
    if pos != end:
        raise SaveFileError(f"{end - pos} bytes of unexpected data after the last column "
                            f"(byte {pos})")
    assert slots is not None  # (the first three columns)
    stores = []
    at = 3
    for c in comps:
        entities = arrays[at].astype(KEY_DTYPE, copy=False)
        width = len(c.fields) if version == 1 else 1
        data = _rows(c, arrays[at + 1 : at + 1 + width])
        at += 1 + width
        stores.append(StoreSnapshot(c.name, (data,), entities, c.group_size))
    return Snapshot(stores=tuple(stores), slots=slots, groups=groups, resources=resources,
                    tick=tick, rng_state=rng_state)


def _checksum_ok(buf: np.ndarray, digest: int | None = None) -> bool:
    """The stored checksum matches; ``digest``: xxh3_64 of ``buf[:-CHECKSUM_SIZE]`` if
    the caller already computed it (while reading)."""
    end = len(buf) - CHECKSUM_SIZE
    if end < 0 or buf[end] != 0xCF:
        return False
    stored = int.from_bytes(buf[end + 1 :].tobytes(), "big")
    if digest is None:
        digest = xxhash.xxh3_64_intdigest(buf[:end].data)
    return stored == digest


def _where(buf: np.ndarray, pos: int, version: int) -> str:
    """Which part of a save the end of the truncated ``buf`` falls in."""
    try:
        meta, at = _read_object(buf, pos, len(buf), "metadata")
        _, hw, nfree, comps = _parse_layout(meta)
    except SaveFileError:
        return "inside the metadata"
    for col in _columns(hw, nfree, comps, version):
        at += _pad(at, col.nbytes) + len(_bin_header(col.nbytes)) + col.nbytes
        if len(buf) < at:
            return f"inside the {col.label} column"
    return "inside the checksum"


def _header_of(buf: np.ndarray) -> tuple[int, int, int]:
    """Check magic and version; return the declared file size, the header's end and the
    format version."""
    if len(buf) == 0:
        raise SaveFileError("the file is empty")
    n = min(len(buf), 1 + len(MAGIC))
    head = buf[:n].tobytes()
    if not 0x80 <= head[0] <= 0x8F or head[1:] != MAGIC[: n - 1]:
        raise SaveFileError(f"not an ecs-engine save file (wrong magic: it starts with "
                            f"{head[:16]!r}, a save starts with {HEADER_START[:16]!r})")
    if n < 1 + len(MAGIC):
        raise SaveFileError(f"truncated: the file is {len(buf)} bytes and ends inside the "
                            f"header")
    header, pos = _read_object(buf, 0, min(len(buf), 256), "header")
    _expect(header, dict, "header")
    version = header.get("version")
    if version not in READ_VERSIONS or isinstance(version, bool):
        raise SaveFileError(f"unsupported save format version {_short(version)} (this engine "
                            f"reads versions {', '.join(map(str, READ_VERSIONS))})")
    header = _keys(header, _HEADER_KEYS, "header")
    if header["format"] != FORMAT_NAME:
        raise SaveFileError(f"not an ecs-engine save file (format {_short(header['format'])})")
    _expect(header["engine"], str, "header engine")
    return _int_in(header["size"], 0, 1 << 63, "header size"), pos, version


def _decode(buf: np.ndarray, digest: int | None = None,
            parsed: Snapshot | None = None) -> Snapshot:
    """``parsed``: what ``_parse_arriving`` made of these very bytes while they were
    read, returned once the checks below pass (else the body is parsed here)."""
    size, pos, version = _header_of(buf)
    if size != len(buf):
        if _checksum_ok(buf, digest):
            raise SaveFileError(f"the header says the file has {size} bytes, it has "
                                f"{len(buf)}")
        if len(buf) < size:
            raise SaveFileError(f"truncated: the file has {len(buf)} of its {size} bytes; it "
                                f"ends {_where(buf, pos, version)}")
        raise SaveFileError(f"{len(buf) - size} unexpected bytes after the end of the save "
                            f"(the header says {size} bytes, the file has {len(buf)})")
    if size < pos + CHECKSUM_SIZE or buf[size - CHECKSUM_SIZE] != 0xCF:
        raise SaveFileError("damaged: the file does not end with a checksum")
    if not _checksum_ok(buf, digest):
        raise SaveFileError("checksum mismatch: the file is damaged (a bit flipped or bytes "
                            "were overwritten)")
    if parsed is not None:
        return parsed
    return _body(buf, pos, size - CHECKSUM_SIZE, version)


def _parse_arriving(buf: np.ndarray, size: int, wait: Callable[[int], int],
                    watcher: ReadWatcher | None) -> Snapshot | None:
    """Parse a file of ``size`` bytes while it is read into ``buf`` (each part once its
    bytes are in; ``watcher`` hears of the slot table and key columns), or None where
    it does not parse: ``_decode`` then checks the whole file first and names what is
    wrong. Not to be used before ``_decode`` has checked size and checksum: until then
    the bytes may be anything, so any error here only means "parse it after"."""
    try:
        declared, pos, version = _header_of(buf[: wait(min(size, 256))])
        if declared != size or size - CHECKSUM_SIZE < pos:
            return None
        return _body(buf, pos, size - CHECKSUM_SIZE, version, wait, watcher)
    except Exception:
        return None


def decode_snapshot(data: bytes | bytearray | memoryview) -> Snapshot:
    """Parse a save file. ``SaveFileError`` names what is wrong with a bad one.

    Columns are zero-copy views when ``data`` is read-only (bytes, a read-only
    memoryview); a writable buffer is copied first so later writes cannot reach the
    snapshot.
    """
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    buf = np.frombuffer(view, np.uint8)
    return _decode(buf if view.readonly else buf.copy())


def read_file(path: str | os.PathLike[str], pool: BufferPool | None = None) -> Snapshot:
    """Read and parse a save file (``OSError`` if it cannot be read, ``SaveFileError``
    naming the file if it is bad).

    A big file is read and hashed on one thread while the other parses it
    (``read_following``), into memory from ``pool`` when given (a world's pool: memory a
    dropped snapshot or an earlier load used, which costs no page faults). The
    snapshot's columns are views into that memory, so the pool reuses it only after the
    snapshot is gone.
    """
    return read_file_memory(path, pool)[0]


class ReadWatcher(Protocol):
    """Hears of a save's slot table and each store's keys as the read parses them (before
    the checksum is known: it may prepare work, never decide; ``ecs_engine.lookahead``
    checks the keys). Its methods must not raise: the checks after the read report what
    is wrong with a file."""

    def slot_table(self, table: SlotTable) -> None: ...
    def keys(self, name: str, keys: np.ndarray) -> None: ...


def read_file_memory(path: str | os.PathLike[str], pool: BufferPool | None = None,
                     watcher: ReadWatcher | None = None) -> tuple[Snapshot, np.ndarray]:
    """``read_file``, and the buffer the snapshot's columns view (for a world load to
    take over instead of copying). ``watcher`` works on the bytes as they arrive."""
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        buf = pool.reuse(size) if pool is not None else None
        fresh = buf is None
        if buf is None:
            buf = np.empty(size, np.uint8)
            if pool is not None:
                pool.offer(buf)
        covered = max(0, size - CHECKSUM_SIZE)  # the checksum covers all but its own bytes
        hasher = xxhash.xxh3_64()
        got, parsed = read_following(
            f, buf, size, lambda wait: _parse_arriving(buf, size, wait, watcher),
            hasher.update, covered, fresh=fresh)
    try:
        digest = hasher.intdigest() if got == size else None
        return _decode(buf[:got], digest, parsed), root_of(buf)
    except SaveFileError as exc:
        raise SaveFileError(f"{os.fspath(path)}: {exc}") from None
