"""Save files: round trips, and bad files (truncated, corrupted, hostile, inconsistent)
always raise SaveFileError and leave the world exactly as it was."""

from __future__ import annotations

import dataclasses
import io
import os
import random
import re
from collections.abc import Callable
from enum import IntEnum
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecs_engine import (
    NULL,
    Blueprint,
    Entity,
    SaveFileError,
    Snapshot,
    World,
    __version__,
    component,
    field,
    savefile,
)
from ecs_engine.entity import key_slot, make_key
from ecs_engine.savefile import decode_snapshot, encode_snapshot, read_file, write_file
from ecs_engine.snapshot import StoreSnapshot
from tests.world_state import check_invariants, world_state


@component
class Pos:
    x: np.float64 = 0.0
    y: np.float64 = 0.0


@component
class Vel:
    dx: np.float32 = 0.0


@component
class Target:
    entity: Entity = NULL


@component
class Inventory:
    items: np.ndarray = field(np.uint16, shape=(2, 3))
    full: np.bool_ = False


@component
class Frozen: ...


TYPES = (Pos, Vel, Target, Inventory, Frozen)


def build(n: int = 12, seed: int = 5) -> tuple[World, np.ndarray]:
    """Entity references, despawned and recycled slots, subarrays, bools, a tag, a group."""
    world = World(seed=seed)
    keys = world.spawn_batch(Pos(x=np.arange(n, dtype=np.float64), y=-1.0), Vel(dx=0.5),
                             count=n)
    for i in range(0, n, 2):
        world.add(keys[i], Target(entity=keys[(i + 3) % n]))
    world.add(keys[3], Inventory(items=[[1, 2, 3], [4, 5, 6]], full=True))
    world.add(keys[4], Frozen())
    world.despawn_batch([keys[5], keys[9]])
    world.spawn(Pos(x=100))  # recycles slot 9 with generation 2
    with world.query(Pos, Vel) as q:
        q[Vel]["dx"] += q[Pos]["x"].astype(np.float32)
    world.resources.update(score=3, name="level 1", grid=np.arange(6).reshape(2, 3))
    world.rng.random(4)
    world.tick = 9
    return world, keys


def fresh_world() -> World:
    world = World(seed=99)
    world.register(*TYPES)
    world.spawn_batch(Pos(x=7), Frozen(), count=3)
    world.resources["mine"] = 1
    return world


def small_save(version: int = savefile.FORMAT_VERSION) -> bytes:
    """A save of ``build()`` in format ``version`` (1: one bin per field, 2: row bins)."""
    world, _ = build()
    return bytes(savefile.encode_snapshot(world.snapshot(), version=version))


def load_bytes(world: World, data: bytes | bytearray | memoryview) -> None:
    world.restore(Snapshot.from_bytes(data), source="file")


def assert_rejected(data: bytes, match: str | None = None, world: World | None = None) -> str:
    """``data`` raises SaveFileError (matching ``match``) and the world is unchanged."""
    world = world or fresh_world()
    before = world_state(world)
    with pytest.raises(SaveFileError, match=match) as info:
        load_bytes(world, data)
    assert world_state(world) == before
    return str(info.value)


# -- forging files with valid checksums ------------------------------------------------

AUTO = object()


class Raw(bytes):
    """Bytes inserted into a forged file as they are (not wrapped in a bin)."""


def parts(data: bytes) -> list[Any]:
    """A save's top-level msgpack items: header, metadata, bins..., checksum (without
    the nils that pad columns to aligned offsets)."""
    items = msgpack.Unpacker(io.BytesIO(data), raw=False, strict_map_key=False,
                             ext_hook=msgpack.ExtType)
    return [item for item in items if item is not None]


def forge(head: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
          bins: list[bytes] | None = None, *, raw_meta: bytes | None = None,
          extra: bytes = b"", base: bytes | None = None) -> bytes:
    """A file from parts (defaults from ``base``) with its size and checksum recomputed;
    bins are padded to aligned offsets as the writer does (``Raw`` items are not)."""
    old = parts(base or small_save())
    fields = header() if head is None else head
    meta = old[1] if meta is None else meta
    bins = old[2:-1] if bins is None else bins
    meta_bytes = raw_meta if raw_meta is not None else msgpack.packb(meta, use_bin_type=True)

    def pack_header(size: int) -> bytes:  # AUTO: the size, as a fixed-width uint64
        out = msgpack.Packer().pack_map_header(len(fields))
        for k, v in fields.items():
            value = b"\xcf" + size.to_bytes(8, "big") if v is AUTO else msgpack.packb(v)
            out += msgpack.packb(k) + value
        return out

    rest = meta_bytes
    start = len(pack_header(0))  # fixed width: the size value does not change it
    for b in bins:
        if not isinstance(b, Raw):
            b = b"\xc0" * savefile._pad(start + len(rest), len(b)) + msgpack.packb(b)
        rest += b
    rest += extra
    size = start + len(rest) + 9
    body = pack_header(size) + rest
    return body + b"\xcf" + xxhash.xxh3_64_intdigest(body).to_bytes(8, "big")


def header(**changes: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"format": "ecs-engine-save", "version": savefile.FORMAT_VERSION,
                           "engine": __version__, "size": AUTO}
    for k, v in changes.items():
        if v is None:
            out.pop(k)
        else:
            out[k] = v
    return out


def meta_with(change: Callable[[dict[str, Any]], None]) -> bytes:
    meta = parts(small_save())[1]
    change(meta)
    return forge(header(), meta)


@pytest.mark.parametrize("version", savefile.READ_VERSIONS)
def test_forge_reproduces_a_real_save_exactly(version: int) -> None:
    data = small_save(version)
    assert forge(header(version=version), base=data) == data


# -- round trips -----------------------------------------------------------------------


def test_bytes_round_trip_restores_the_exact_state() -> None:
    world, keys = build()
    expected = world_state(world)
    other = fresh_world()
    load_bytes(other, world.snapshot().to_bytes())
    assert world_state(other) == expected
    check_invariants(other)
    assert [tuple(s.schema.name for s in g.stores) for g in other._groups] == [("Pos", "Vel")]
    with other.query(Pos, Vel) as q:
        assert q.aligned and len(q) == 10


def test_world_save_writes_the_live_state_and_returns_an_equal_snapshot(
        tmp_path: Path) -> None:
    """world.save writes straight from the live columns and takes its snapshot while the
    file is fsynced: the file, the returned snapshot and a fresh snapshot's bytes agree,
    and the save leaves no view that would make the next snapshot copy everything."""
    world, _ = build()
    path = tmp_path / "live.sav"
    snap = world.save(path)
    again = world.snapshot()  # nothing changed: every store is shared with the save's
    assert all(a.chunks[0] is b.chunks[0] for a, b in zip(snap.stores, again.stores,
                                                          strict=True))
    assert path.read_bytes() == bytes(snap.to_bytes()) == bytes(again.to_bytes())
    other = fresh_world()
    other.load(path)
    assert world_state(other) == world_state(world)


def test_world_save_refuses_while_a_query_is_open(tmp_path: Path) -> None:
    world, _ = build()
    with world.query(Pos) as _, pytest.raises(RuntimeError, match="query is open"):
        world.save(tmp_path / "q.sav")
    assert not (tmp_path / "q.sav").exists() and not list(tmp_path.iterdir())


def test_work_during_the_fsync_that_fails_leaves_the_old_file(tmp_path: Path) -> None:
    from ecs_engine.atomicfile import write_atomic

    path = tmp_path / "slot.sav"
    path.write_bytes(b"old")

    def boom() -> None:
        raise OSError("disk on fire")

    with pytest.raises(OSError, match="disk on fire"):
        write_atomic(path, lambda f: f.write(b"new"), meanwhile=boom)
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == [path.name]
    ran: list[int] = []
    write_atomic(path, lambda f: f.write(b"new"), meanwhile=lambda: ran.append(1))
    assert path.read_bytes() == b"new" and ran == [1]


def test_versions_1_and_2_hold_the_same_state() -> None:
    """The old layout (a bin per field) and the new one (a bin of rows) load into the same
    world, and saving that world again gives the version-2 bytes."""
    world, _ = build()
    snap = world.snapshot()
    v1, v2 = (bytes(encode_snapshot(snap, version=v)) for v in (1, 2))
    assert v1 != v2 and v1[32] == 1 and v2[32] == 2  # the version byte of the header
    states = []
    for data in (v1, v2):
        other = fresh_world()
        load_bytes(other, data)
        check_invariants(other)
        states.append(world_state(other))
        assert bytes(other.snapshot().to_bytes()) == v2
    assert states[0] == states[1] == world_state(world)


def test_file_round_trip_keeps_references_stale_keys_and_future_keys(tmp_path: Path) -> None:
    world, keys = build()
    path = tmp_path / "slot1.sav"
    world.save(path)
    other = fresh_world()
    other.load(path)
    # references between entities survive
    ref = int(other.get(keys[0], Target)["entity"])
    assert ref == keys[3] and other.is_alive(ref)
    assert other.get(ref, Pos)["x"] == 3.0
    assert other.get(ref, Inventory)["items"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert bool(other.get(ref, Inventory)["full"])
    assert other.has(keys[4], Frozen)
    # despawned and recycled slots: stale keys stay stale, the recycled slot is live
    assert not other.is_alive(keys[5]) and not other.is_alive(keys[9])
    recycled = make_key(key_slot(keys[9]), 2)
    assert other.is_alive(recycled) and other.get(recycled, Pos)["x"] == 100
    with pytest.raises(KeyError, match="stale"):
        other.get(keys[9], Pos)
    # the next spawns give the same keys as in the saved world
    assert [other.spawn(Vel()) for _ in range(3)] == [world.spawn(Vel()) for _ in range(3)]
    assert np.array_equal(other.rng.random(3), world.rng.random(3))


def test_snapshot_save_and_load_methods(tmp_path: Path) -> None:
    world, _ = build()
    snap = world.snapshot()
    snap.save(tmp_path / "a.sav")
    loaded = Snapshot.load(tmp_path / "a.sav")
    assert loaded.origin is None and loaded.tick == 9
    assert all(s.data_version == s.layout_version == 0 and s.ctype is None
               for s in loaded.stores)
    assert bytes(loaded.to_bytes()) == bytes(snap.to_bytes())  # re-encoding is exact


def test_encoding_is_deterministic_and_read_only() -> None:
    world, _ = build()
    first = world.snapshot().to_bytes()
    assert isinstance(first, memoryview) and first.readonly
    assert bytes(first) == bytes(encode_snapshot(world.snapshot()))
    assert bytes(first[:24]) == b"\x84\xa6format\xafecs-engine-save"


def test_decoding_bytes_is_zero_copy_and_writable_buffers_are_copied() -> None:
    data = small_save()
    snap = decode_snapshot(data)
    source = np.frombuffer(data, np.uint8)
    assert np.shares_memory(snap.store("Pos").entities, source)
    assert np.shares_memory(snap.store("Target").data, source)  # one field: no copy at all
    assert not snap.store("Pos").data.flags.writeable
    mutable = bytearray(data)
    copied = decode_snapshot(mutable)
    mutable[:] = bytes(len(mutable))
    assert np.array_equal(copied.store("Pos").data, snap.store("Pos").data)


def test_columns_are_padded_to_aligned_offsets() -> None:
    data = small_save()
    snap = decode_snapshot(data)
    for arr in snap.arrays():
        assert arr.flags.aligned
    assert b"\xc0" in data  # padding nils: still one plain msgpack stream
    items = list(msgpack.Unpacker(io.BytesIO(data), raw=False, ext_hook=msgpack.ExtType))
    assert items[0]["format"] == "ecs-engine-save" and None in items
    bins = parts(data)[2:-1]
    assert_rejected(forge(header(), bins=[Raw(b"\xc0" * 8), *bins]),
                    "expected a msgpack bin at byte .* found type byte 0xc0")


def test_resources_of_every_supported_type_round_trip() -> None:
    world = World()
    values: dict[str, Any] = {
        "none": None, "flag": True, "int": -5, "u64": 2**64 - 1, "big": 2**100,
        "neg_big": -(2**70), "float": 1.25, "nan": float("nan"), "text": "héllo",
        "raw": b"\x00\xff", "list": [1, [2, [3, {"deep": "x"}]]], "empty": {},
        "arr": np.arange(12, dtype=np.int32).reshape(3, 4), "bools": np.array([True, False]),
        "cplx": np.array([1 + 2j]), "big_endian": np.array([1, 2], dtype=">i4"),
        "zero_d": np.array(3.5), "empty_arr": np.zeros((0, 3)),
        "scalar": np.float32(1.5), "uscalar": np.uint64(2**64 - 1),
    }
    world.resources.update(values)
    snap = Snapshot.from_bytes(world.snapshot().to_bytes())
    out = snap.resources
    assert out.keys() == values.keys()
    for key in ("none", "flag", "int", "u64", "big", "neg_big", "float", "text", "raw", "list",
                "empty"):
        assert out[key] == values[key] and type(out[key]) is type(values[key]), key
    assert np.isnan(out["nan"])
    for key in ("arr", "bools", "cplx", "zero_d", "empty_arr"):
        assert type(out[key]) is np.ndarray and out[key].dtype == values[key].dtype
        assert out[key].shape == values[key].shape and np.array_equal(out[key], values[key])
        assert out[key].flags.writeable
    assert out["big_endian"].dtype == np.int32 and out["big_endian"].tolist() == [1, 2]
    assert type(out["scalar"]) is np.float32 and out["scalar"] == 1.5
    assert type(out["uscalar"]) is np.uint64 and out["uscalar"] == 2**64 - 1


class Mode(IntEnum):
    PLAY = 1


@pytest.mark.parametrize(("value", "where"), [
    ((1, 2), "resources['bad']: a builtins.tuple"),
    ({1, 2}, "resources['bad']: a builtins.set"),
    (object(), "resources['bad']: a builtins.object"),
    ({1: "x"}, "resources['bad']: dict key 1 is not a str"),
    ([1, {"inner": Mode.PLAY}], "resources['bad'][1]['inner']: a tests.test_savefile.Mode"),
    (np.array(["a"]), "resources['bad']: a numpy.ndarray"),
    (np.array([None]), "resources['bad']: a numpy.ndarray"),
    (bytearray(b"x"), "resources['bad']: a builtins.bytearray"),
    (np.ma.masked_array([1, 2], mask=[False, True]), "resources['bad']: a numpy.ma.MaskedArray"),
])
def test_unsupported_resource_types_are_a_type_error(value: Any, where: str,
                                                     tmp_path: Path) -> None:
    world, _ = build()
    path = tmp_path / "s.sav"
    world.save(path)
    world.resources["bad"] = value
    with pytest.raises(TypeError, match=re.escape(where)):
        world.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sav"]  # no temp file left
    fresh_world().load(path)  # the old save is intact


def test_too_deeply_nested_resources_are_rejected_on_save() -> None:
    world = World()
    deep: list[Any] = []
    for _ in range(100):
        deep = [deep]
    world.resources["deep"] = deep
    with pytest.raises(ValueError, match="nested deeper than 64"):
        world.snapshot().to_bytes()


@pytest.mark.parametrize("name", ["PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"])
def test_every_numpy_bit_generator_round_trips(name: str) -> None:
    world = World()
    world.rng = np.random.Generator(getattr(np.random, name)(11))
    world.rng.random(7)
    world.rng.integers(0, 10, dtype=np.uint32)  # leaves a buffered half word
    data = world.snapshot().to_bytes()
    expected = world.rng.random(5)
    other = World()
    load_bytes(other, data)
    assert type(other.rng.bit_generator).__name__ == name
    assert np.array_equal(other.rng.random(5), expected)


def test_empty_world_round_trips() -> None:
    other = fresh_world()
    load_bytes(other, World().snapshot().to_bytes())
    assert len(other) == 0 and other.count(Pos) == 0 and other.resources == {}


def test_write_file_sweeps_its_stale_temp_files_and_leaves_none(tmp_path: Path) -> None:
    world, _ = build()
    path = tmp_path / "quick.sav"
    (tmp_path / ".quick.sav.crashed1.tmp").write_bytes(b"half a save from a crashed process")
    write_file(path, world.snapshot())
    assert [p.name for p in tmp_path.iterdir()] == ["quick.sav"]
    world.spawn(Pos())
    write_file(path, world.snapshot())  # over an existing save
    assert read_file(path).entity_count == len(world)
    assert [p.name for p in tmp_path.iterdir()] == ["quick.sav"]


def test_read_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.sav"
    path.write_bytes(b"GIF89a not a save")
    with pytest.raises(SaveFileError, match=r"bad\.sav: not an ecs-engine save file"):
        read_file(path)
    with pytest.raises(FileNotFoundError):
        read_file(tmp_path / "missing.sav")


def test_world_load_of_a_bad_file_changes_nothing(tmp_path: Path) -> None:
    data = bytearray(small_save())
    data[len(data) // 2] ^= 0x10
    path = tmp_path / "bad.sav"
    path.write_bytes(bytes(data))
    world = fresh_world()
    before = world_state(world)
    events: list[Any] = []
    world.on_restore(lambda w, e: events.append(e))
    with pytest.raises(SaveFileError, match="checksum mismatch"):
        world.load(path)
    assert world_state(world) == before and events == []


# -- truncation and corruption ---------------------------------------------------------


def test_every_truncation_is_rejected_and_changes_nothing() -> None:
    data = small_save()
    world = fresh_world()
    before = world_state(world)
    header_size = len(savefile._header(0))
    for cut in range(len(data)):
        with pytest.raises(SaveFileError, match="truncated|empty") as info:
            load_bytes(world, data[:cut])
        assert world_state(world) == before, cut
        if cut >= header_size:
            assert f"has {cut} of its {len(data)} bytes" in str(info.value)
        elif cut:
            assert "header" in str(info.value)


@pytest.mark.parametrize("version", savefile.READ_VERSIONS)
def test_truncation_message_names_the_part_cut(version: int) -> None:
    data = small_save(version)
    items = parts(data)
    meta_end = len(savefile._header(0)) + len(msgpack.packb(items[1]))
    labels = ["slot generations", "slot alive flags", "slot free list"]
    for comp in items[1]["components"]:
        labels.append(f"component {comp['name']!r} entities")
        if version == 1:
            labels += [f"component {comp['name']!r} field {f['name']!r}"
                       for f in comp["fields"]]
        else:
            labels.append(f"component {comp['name']!r} rows")
    assert "ends inside the header" in assert_rejected(data[:10])
    assert "inside the metadata" in assert_rejected(data[: meta_end - 1])
    end = meta_end
    for label, column in zip(labels, items[2:-1], strict=True):
        end += savefile._pad(end, len(column)) + len(msgpack.packb(column))
        if column:
            assert f"inside the {label} column" in assert_rejected(data[: end - 1])
    assert "inside the checksum" in assert_rejected(data[:-3])


def test_thousands_of_random_corruptions_are_all_detected() -> None:
    data = small_save()
    world = fresh_world()
    before = world_state(world)
    rng = random.Random(1234)
    kinds: dict[str, int] = {}
    for i in range(3000):
        bad = bytearray(data)
        how = i % 5
        if how == 0:  # one flipped bit
            pos = rng.randrange(len(bad))
            bad[pos] ^= 1 << rng.randrange(8)
        elif how == 1:  # one byte overwritten
            pos = rng.randrange(len(bad))
            bad[pos] = (bad[pos] + rng.randrange(1, 256)) % 256
        elif how == 2:  # a run of random bytes
            pos = rng.randrange(len(bad) - 8)
            bad[pos : pos + 8] = rng.randbytes(8)
        elif how == 3:  # a byte inserted
            bad.insert(rng.randrange(len(bad)), rng.randrange(256))
        else:  # a byte deleted
            del bad[rng.randrange(len(bad))]
        if bad == data:
            continue
        with pytest.raises(SaveFileError) as info:
            load_bytes(world, bytes(bad))
        kind = next(k for k in KNOWN_FAULTS if k in str(info.value))
        kinds[kind] = kinds.get(kind, 0) + 1
    assert world_state(world) == before
    assert kinds["checksum mismatch"] > 1500  # in-place damage: caught by the checksum
    assert kinds["truncated"] > 300 and kinds["unexpected bytes after the end"] > 300


KNOWN_FAULTS = ("checksum mismatch", "wrong magic", "truncated", "unexpected bytes after the end",
                "unsupported save format version", "header", "does not end with a checksum")


@pytest.mark.parametrize(("data", "match"), [
    (b"", "empty"),
    (b"\x89PNG\r\n\x1a\n" + bytes(100), "wrong magic"),
    (b"\x84\xa6format\xafecs-engine-savX" + bytes(50), "wrong magic"),
    (msgpack.packb([1, 2, 3]), "wrong magic"),
    (b"x" * 5, "wrong magic"),
])
def test_files_that_are_not_saves_are_rejected(data: bytes, match: str) -> None:
    assert_rejected(data, match)


def test_trailing_bytes_are_rejected() -> None:
    data = small_save()
    assert_rejected(data + b"\x00", "1 unexpected bytes after the end")
    assert_rejected(data + data, "unexpected bytes after the end")


# -- hostile files with valid checksums: the parser itself -----------------------------


@pytest.mark.parametrize(("changes", "match"), [
    ({"version": 3}, "unsupported save format version 3"),
    ({"version": 0}, "unsupported save format version 0"),
    ({"version": "1"}, "unsupported save format version '1'"),
    ({"version": True}, "unsupported save format version True"),
    ({"version": None}, "unsupported save format version None"),
    ({"format": "ecs-engine-savx"}, "wrong magic"),
    ({"engine": 3}, "header engine: expected str"),
    ({"size": "big"}, "header size: expected int"),
    ({"size": None}, r"header: missing \['size'\]"),
    ({"extra": 1}, r"header: unknown \['extra'\]"),
])
def test_bad_header_fields(changes: dict[str, Any], match: str) -> None:
    assert_rejected(forge(header(**changes)), match)


def test_header_size_that_lies_is_rejected() -> None:
    assert_rejected(forge(header(size=5)), "header says the file has 5 bytes")
    assert_rejected(forge(header(size=2**63)), "header says the file has")
    assert_rejected(forge(header(size=-1)), r"header size: -1 is outside")


def test_unsupported_version_is_reported_before_checksum() -> None:
    data = bytearray(forge(header(version=7)))
    data[-1] ^= 1
    assert_rejected(bytes(data), "unsupported save format version 7")


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change to the metadata: ``path`` like ``components.0.fields.1.dtype``."""
    def change(meta: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = meta
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        key: Any = int(last) if isinstance(node, list) else last
        if value is DELETE:
            del node[key]
        else:
            node[key] = value
    return change


DELETE = object()


@pytest.mark.parametrize(("path", "value", "match"), [
    ("tick", "x", "tick: expected int"),
    ("tick", True, "tick: expected int, found bool"),
    ("tick", 1.5, "tick: expected int"),
    ("tick", DELETE, r"metadata: missing \['tick'\]"),
    ("bonus", 1, r"metadata: unknown \['bonus'\]"),
    ("slots", [20, 3], "slots: expected dict"),
    ("slots.count", -1, "slots count: -1 is outside"),
    ("slots.count", "20", "slots count: expected int"),
    ("slots.count", 2**40, "slots count: .* is outside"),
    ("slots.free", 21, "slots free: 21 is outside"),
    ("components", {}, "components: expected list"),
    ("components.2", "Pos", r"components\[2\]: expected dict"),
    ("components.2.name", 5, r"components\[2\].name: expected str"),
    ("components.2.name", "", "empty or repeated"),
    ("components.1.name", "Pos", "'Pos' is empty or repeated"),
    ("components.2.count", -2, "'Pos' count: -2 is outside"),
    ("components.2.count", 2**40, "'Pos' count: .* is outside"),
    ("components.2.group_size", 18, "'Pos' group_size: 18 is outside"),
    ("components.2.fields", "x", "'Pos' fields: expected list"),
    ("components.2.fields.1.name", "x", "field name 'x' is empty or repeated"),
    ("components.2.fields.0.dtype", "|O", "not a little-endian numeric dtype"),
    ("components.2.fields.0.dtype", "<U4", "not a little-endian numeric dtype"),
    ("components.2.fields.0.dtype", ">f8", "not a little-endian numeric dtype"),
    ("components.2.fields.0.dtype", "(2,)f8", "not a little-endian numeric dtype"),
    ("components.2.fields.0.dtype", "<f8,<f8", "not a little-endian numeric dtype"),
    ("components.2.fields.0.dtype", "<b1", "not a canonical numeric dtype"),
    ("components.2.fields.0.dtype", "<f3", "not a numpy dtype"),
    ("components.2.fields.0.dtype", 8, "not a little-endian numeric dtype"),
    ("components.2.fields.0.shape", [0], "shape: 0 is outside"),
    ("components.2.fields.0.shape", [-1], "shape: -1 is outside"),
    ("components.2.fields.0.shape", "x", "shape: expected list"),
    ("components.2.fields.0.shape", [1] * 9, "more than 8 dimensions"),
    ("components.2.fields.0.shape", [2**20, 2**20], "makes rows too large"),
    ("components.2.fields.0.shape", [2],
     r"'Pos' rows: the column holds 176 bytes, expected 264 \(11 x 24-byte rows"),
    ("components.2.fields.0.extra", 1, r"unknown \['extra'\]"),
    ("groups", "Pos", "groups: expected list"),
    ("groups.0", "Pos", r"groups\[0\]: expected list"),
    ("groups.0.0", 1, r"groups\[0\] entry: expected str"),
    ("resources", [], "resources: expected dict"),
    ("rng", [], "rng state: expected dict"),
    ("rng.bit_generator", "os.system", "unknown bit generator 'os.system'"),
    ("rng.state", "x", "rng state for PCG64 is invalid"),
    ("rng.state.state", -1, "rng state for PCG64 is invalid"),
    ("rng.has_uint32", 7, "rng state for PCG64: buffer position out of range"),
])
def test_bad_metadata_fields(path: str, value: Any, match: str) -> None:
    assert_rejected(meta_with(_set(path, value)), match)


def test_rng_buffer_positions_that_would_index_out_of_bounds_are_rejected() -> None:
    for name, field_path, value in [("MT19937", "state.pos", 10_000),
                                    ("MT19937", "state.pos", -5),
                                    ("Philox", "buffer_pos", -5)]:
        world = World()
        world.rng = np.random.Generator(getattr(np.random, name)(1))
        good = bytes(world.snapshot().to_bytes())
        meta = parts(good)[1]
        _set(f"rng.{field_path}", value)(meta)
        assert_rejected(forge(header(), meta, base=good), f"rng state for {name}")


def _meta_bytes_with(placeholder_value: bytes) -> bytes:
    """Metadata whose ``resources['x']`` is replaced by raw msgpack bytes."""
    meta = parts(small_save())[1]
    meta["resources"] = {"x": "@@PLACEHOLDER@@"}
    packed = msgpack.packb(meta, use_bin_type=True)
    return packed.replace(msgpack.packb("@@PLACEHOLDER@@"), placeholder_value)


@pytest.mark.parametrize(("raw", "match"), [
    (b"\xc6\xff\xff\xff\xff", "exceeds max_bin_len|truncated"),
    (b"\xdb\xff\xff\xff\xff", "exceeds max_str_len|truncated"),
    (b"\xdd\xff\xff\xff\xff", "exceeds max_array_len|truncated"),
    (b"\xdf\xff\xff\xff\xff", "exceeds max_map_len|truncated"),
    (b"\xc9\xff\xff\xff\xff\x01", "exceeds max_ext_len|truncated"),
    (b"\x91" * 10_000 + b"\xc0", "nested too deeply"),
    (b"\x81\xa1k" * 5_000 + b"\xc0", "nested too deeply"),
    (b"\x91" * 100 + b"\xc0", "nested deeper than 64"),
    (b"\xd4\x09\x00", "unknown msgpack ext type 9"),
    (b"\xd6\xff\x00\x00\x00\x01", "Timestamp is not a save-file value"),
    (b"\xc7\x04\x01\x02|O\x00", "not a little-endian numeric dtype"),
    (b"\xc7\x05\x01\x03<f8\x01", "payload too short for its shape"),
    (b"\xc7\x0d\x01\x03<f8\x01\x02\x00\x00\x00\x00\x00\x00\x00\x00", "needs 16 bytes"),
    (b"\xc7\x01\x01\x09", "payload too short for its header"),
    (b"\xc7\x05\x01\x03<f8\x40", "dimensions"),
    (b"\xc7\x00\x02", "big-int ext: empty payload"),
    (b"\x81\x01\x02", "is not allowed for map key|not valid msgpack"),
    (b"\xa2\xff\xfe", "not valid msgpack"),
    (b"\xc1", "not valid msgpack"),
])
def test_hostile_msgpack_inside_the_metadata(raw: bytes, match: str) -> None:
    assert_rejected(forge(header(), raw_meta=_meta_bytes_with(raw)), match)


def test_hostile_top_level_metadata() -> None:
    assert_rejected(forge(header(), raw_meta=b"\x91" * 10_000 + b"\xc0"), "nested too deeply")
    assert_rejected(forge(header(), raw_meta=b"\xdd\xff\xff\xff\xff"), "exceeds max_array_len")
    assert_rejected(forge(header(), raw_meta=msgpack.packb([1])), "metadata: expected dict")
    assert_rejected(forge(header(), bins=[], raw_meta=b""), "where the metadata starts")


def test_hostile_columns() -> None:
    data = small_save()
    bins = parts(data)[2:-1]
    huge = Raw(b"\xc6\xff\xff\xff\xff")
    assert_rejected(forge(header(), bins=[huge, *bins[1:]]),
                    r"slot generations: the column holds 4294967295 bytes, expected 48")
    assert_rejected(forge(header(), bins=[bins[0][:-4], *bins[1:]]),
                    "slot generations: the column holds 44 bytes, expected 48")
    assert_rejected(forge(header(), bins=[Raw(msgpack.packb(7)), *bins[1:]]),
                    "slot generations: expected a msgpack bin at byte .* found type byte 0x07")
    assert_rejected(forge(header(), bins=bins[:-1]), "ends at byte .* where the component")
    assert_rejected(forge(header(), bins=[*bins, b"more"]), "unexpected data after the last")
    assert_rejected(forge(header(), bins=bins, extra=b"\xc0"), "unexpected data after the last")
    alive = bytearray(bins[1])
    alive[0] = 2
    assert_rejected(forge(header(), bins=[bins[0], bytes(alive), *bins[2:]]),
                    "slot alive flags: a bool byte is neither 0 nor 1")


@pytest.mark.parametrize("version", savefile.READ_VERSIONS)
def test_bool_field_bytes_must_be_zero_or_one(version: int) -> None:
    data = small_save(version)
    items = parts(data)
    names = [c["name"] for c in items[1]["components"]]
    # bins: 3 slot columns, then per component: entities + fields (version 1) or entities
    # + rows (version 2)
    index = 3
    for comp in items[1]["components"]:
        if comp["name"] == "Inventory":
            index += 2 if version == 1 else 1  # v1: entities, items; the next is 'full'
            break
        index += 1 + (len(comp["fields"]) if version == 1 else 1)
    assert "Inventory" in names
    bins = items[2:-1]
    if version == 1:
        bins[index] = b"\x05"
    else:  # one row: items (2 x 3 uint16), then full
        assert len(bins[index]) == 13
        bins[index] = bins[index][:12] + b"\x05"
    assert_rejected(forge(header(version=version), bins=bins, base=data),
                    "'Inventory' field 'full': a bool byte")


# -- inconsistent but well-formed files: validated before the world is touched ---------


def _world_and_parts() -> tuple[bytes, dict[str, Any], list[Any]]:
    world = World(seed=2)
    keys = world.spawn_batch(Pos(x=np.arange(6.0)), Vel(), count=6)
    world.despawn_batch([keys[1], keys[4]])
    with world.query(Pos, Vel) as q:
        assert q.aligned
    data = bytes(world.snapshot().to_bytes())
    items = parts(data)
    return data, items[1], items[2:-1]


def _u(values: list[int], dtype: str) -> bytes:
    return np.array(values, dtype=dtype).tobytes()


def test_inconsistent_slot_tables_are_rejected() -> None:
    data, meta, bins = _world_and_parts()
    gens = np.frombuffer(bins[0], "<u4").tolist()
    alive = np.frombuffer(bins[1], "|b1").tolist()
    assert alive == [True, False, True, True, False, True]
    cases = [
        ([gens, alive, [1, 2]], "free list names a live or out-of-range slot"),
        ([gens, alive, [1, 9]], "free list names a live or out-of-range slot"),
        ([gens, alive, [-1, 4]], "free list names a live or out-of-range slot"),
        ([gens, alive, [1, 1]], "free list names a slot twice"),
        ([gens, [True, False, True, True, False, True], [1]], "dead slots are missing"),
        ([gens, [False, False, True, True, False, True], [1, 4, 0]], "'Pos': holds entities"),
        ([[0] + gens[1:], alive, [1, 4]], "generation 0 is reserved"),
    ]
    for (g, a, f), match in cases:
        meta2 = dict(meta, slots={"count": len(g), "free": len(f)})
        forged = forge(header(), meta2, [_u(g, "<u4"), _u(a, "|b1"), _u(f, "<i8"), *bins[3:]])
        assert_rejected(forged, match)


def test_stores_that_disagree_with_the_slot_table_are_rejected() -> None:
    data, meta, bins = _world_and_parts()
    entities = np.frombuffer(bins[3], "<u8").copy()  # Pos entities
    stale = entities.copy()
    stale[0] += np.uint64(1 << 32)  # generation 2: never alive
    dead = entities.copy()
    dead[0] = make_key(1, 2)  # slot 1 was despawned
    twice = entities.copy()
    twice[1] = twice[0]
    for column, match in [(stale, "'Pos': holds entities the slot table says are not alive"),
                          (dead, "'Pos': holds entities the slot table says are not alive"),
                          (twice, "'Pos': an entity appears twice")]:
        forged = forge(header(), meta, [*bins[:3], column.tobytes(), *bins[4:]])
        assert_rejected(forged, match)


def test_bad_groups_are_rejected() -> None:
    data, meta, bins = _world_and_parts()
    swapped = np.frombuffer(bins[3], "<u8")[::-1].copy()  # Pos rows no longer aligned
    pos_rows = np.frombuffer(bins[4], "<f8").reshape(-1, 2)[::-1].copy()  # x, y per row
    forged = forge(header(), meta, [*bins[:3], swapped.tobytes(), pos_rows.tobytes(),
                                    *bins[5:]])
    assert_rejected(forged, r"group \['Pos', 'Vel'\]: rows are not aligned")
    for groups, match in [([["Pos"]], "names unknown or repeated"),
                          ([["Pos", "Nope"]], "names unknown or repeated"),
                          ([["Pos", "Pos"]], "names unknown or repeated"),
                          ([["Pos", "Vel"], ["Vel", "Pos"]], "belongs to two groups")]:
        assert_rejected(forge(header(), dict(meta, groups=groups), bins), match)


def test_group_size_mismatch_is_rejected() -> None:
    data, meta, bins = _world_and_parts()
    meta["components"][0]["group_size"] = 3
    assert_rejected(forge(header(), meta, bins), "rows are not aligned")


def test_a_group_prefix_that_is_too_short_is_rejected() -> None:
    """Same group_size on every grouped store, so the prefixes still align, but an entity
    with both components sits outside them: query(Pos, Vel) would silently skip it."""
    data, meta, bins = _world_and_parts()
    for size in (3, 0):
        for comp in meta["components"]:
            comp["group_size"] = size
        assert_rejected(forge(header(), meta, bins),
                        rf"group \['Pos', 'Vel'\]: {4 - size} entities have every component "
                        rf"of the group but are outside its first {size} rows")


def test_a_group_size_on_a_store_no_group_owns_is_rejected() -> None:
    data, meta, bins = _world_and_parts()
    meta["groups"] = []
    assert_rejected(forge(header(), meta, bins), "'Pos': group size 4 but no group owns it")
    for comp in meta["components"]:
        comp["group_size"] = 0
    other = fresh_world()
    load_bytes(other, forge(header(), meta, bins))  # ungrouped: fine
    with other.query(Pos, Vel) as q:
        assert len(q) == 4


def test_nothing_on_load_executes_code() -> None:
    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (exec, ("raise SystemExit('pickle ran')",))

    import pickle

    world = World()
    world.resources["payload"] = pickle.dumps(Boom())  # stays inert bytes
    other = fresh_world()
    load_bytes(other, world.snapshot().to_bytes())
    assert isinstance(other.resources["payload"], bytes)
    assert_rejected(forge(header(), raw_meta=_meta_bytes_with(b"\xd4\x63\x00")),
                    "unknown msgpack ext type 99")


# -- the parser under random mutation (checksum recomputed) ----------------------------

_BASE = small_save()
_ITEMS = parts(_BASE)
_META = msgpack.packb(_ITEMS[1], use_bin_type=True)


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "1500")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.filterwarnings("ignore::ecs_engine.SchemaChangeWarning")
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1,
                max_size=4),
       st.booleans())
def test_random_mutations_of_a_checksummed_file_never_escape(
    edits: list[tuple[int, int]], in_meta: bool
) -> None:
    """Mutate the metadata or the columns, recompute size and checksum: the file either
    loads or raises SaveFileError, and a failed load leaves the world unchanged."""
    meta = bytearray(_META)
    bins = [bytearray(b) for b in _ITEMS[2:-1]]
    for pos, value in edits:
        if in_meta:
            meta[pos % len(meta)] = value
        else:
            column = bins[pos % len(bins)]
            if column:
                column[(pos // len(bins)) % len(column)] = value
    data = forge(header(), raw_meta=bytes(meta), bins=[bytes(b) for b in bins])
    world = fresh_world()
    before = world_state(world)
    try:
        load_bytes(world, data)
    except SaveFileError:
        assert world_state(world) == before
    else:
        check_invariants(world)


def test_a_load_names_every_unknown_component_at_once(tmp_path: Path) -> None:
    """One message per missing registration made a game fix them one run at a time."""
    world = World()
    world.spawn(Pos(), Vel(), Frozen())
    world.save(tmp_path / "all.sav")
    target = World()
    target.register(Vel)
    with pytest.raises(SaveFileError, match=r"all\.sav: unknown components 'Frozen', 'Pos': "
                                            r"register their types first "
                                            r"\(world\.register\(Frozen, Pos\)\)"):
        target.load(tmp_path / "all.sav")
    assert len(target) == 0
    blueprint = world.extract(world.entities())
    with pytest.raises(SaveFileError, match=r"unknown components 'Frozen', 'Pos'"):
        World().instantiate(Blueprint.from_bytes(bytes(blueprint.to_bytes())))


def test_which_types_are_registered_empty_is_not_part_of_a_save(tmp_path: Path) -> None:
    """A registered type with no rows changed the bytes (not the state hash), and the save
    then failed to load where that type was never registered."""
    plain, extra = World(seed=3), World(seed=3)
    extra.register(Inventory, Target)
    for world in (plain, extra):
        world.spawn(Pos(x=1.0), Vel())
    assert plain.state_hash() == extra.state_hash()
    assert bytes(plain.snapshot().to_bytes()) == bytes(extra.snapshot().to_bytes())
    extra.save(tmp_path / "e.sav")
    loaded = World()
    loaded.register(Pos, Vel)
    loaded.load(tmp_path / "e.sav")
    assert loaded.state_hash() == extra.state_hash()


def test_an_older_save_with_an_unknown_empty_store_loads(tmp_path: Path) -> None:
    """Saves written before empty stores were left out still hold them: such a store
    holds nothing to restore, so its type need not be known."""
    world = World(seed=2)
    world.spawn(Pos(x=2.0))
    snap = world.snapshot()
    empty = StoreSnapshot("Gone", (np.zeros(0, [("a", "<f4")]),), np.zeros(0, np.uint64))
    old = dataclasses.replace(snap, stores=(*snap.stores, empty))
    write_file(tmp_path / "old.sav", dataclasses.replace(
        old, stores=tuple(dataclasses.replace(s, ctype=None) for s in old.stores)))
    loaded = World()
    loaded.register(Pos)
    loaded.load(tmp_path / "old.sav")
    assert loaded.state_hash() == world.state_hash()
