"""Fuzzing save files at the level of their decoded structure.

Each round decodes a real save into its msgpack objects (header, metadata, column bins),
mutates that structure (metadata values, keys, group sizes, column bytes and lengths, which
columns go where), packs it again with the size and checksum recomputed, and loads it. So
every mutated file passes the checksum and reaches the semantic validation. The oracle:
the load raises ``SaveFileError`` and leaves the world exactly as it was, or it succeeds and
the world is sound: sparse sets agree with rows, every stored entity is alive, owning groups
are aligned and complete, every query returns exactly the entities that have its components,
and saving and loading the result again reproduces it.

Seeded and bounded (``SAVE_FUZZ_ROUNDS``, default 1500: a few seconds), so CI explores the
same cases every run; set ``SAVE_FUZZ_SEED`` to explore others.
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import xxhash

from ecs_engine import NULL, Entity, SaveFileError, World, component, field, readahead, savefile
from tests.world_state import check_invariants, world_state

ROUNDS = int(os.environ.get("SAVE_FUZZ_ROUNDS", "1500"))
SEED = int(os.environ.get("SAVE_FUZZ_SEED", "20261124"))


@component
class Pos:
    x: np.float64 = 0.0
    y: np.float32 = 0.0


@component
class Vel:
    dx: np.float32 = 0.0


@component
class Link:
    to: Entity = NULL


@component
class Bag:
    kinds: np.ndarray = field(np.uint8, shape=(2, 3))
    full: np.bool_ = False


@component
class Tag: ...


TYPES: tuple[type, ...] = (Pos, Vel, Link, Bag, Tag)


def make_world(seed: int) -> World:
    """Groups, holes in the slot table, references, subarrays, bools, a tag, resources."""
    rng = np.random.default_rng(seed)
    world = World(seed=seed)
    n = int(rng.integers(4, 14))
    keys = world.spawn_batch(Pos(x=rng.random(n), y=1.0), count=n)
    world.add_batch(keys[: n // 2 + 1], Vel(dx=rng.random(n // 2 + 1).astype(np.float32)))
    world.group(Pos, Vel)
    for i in range(0, n, 3):
        world.add(keys[i], Link(to=keys[(i + 1) % n]))
    world.add(keys[1], Bag(kinds=[[1, 2, 3], [4, 5, 6]], full=True))
    world.add(keys[2], Tag())
    world.despawn_batch(keys[[0, n - 1]])
    world.spawn(Pos(x=9.0), Vel())  # reuses a slot: generation 2
    world.resources.update(score=int(rng.integers(100)), name="lvl", grid=np.arange(4))
    world.tick = int(rng.integers(1000))
    return world


def fresh_world() -> World:
    world = World()
    world.register(*TYPES)
    return world


# -- the save as decoded objects, and back ------------------------------------------------


def decode_items(data: bytes) -> tuple[dict[str, Any], Any, list[Any]]:
    """(header, metadata, bins): the file's msgpack objects without padding nils and the
    trailing checksum."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(data))
    unpacker.feed(data)
    objects = [obj for obj in unpacker if obj is not None]
    return objects[0], objects[1], objects[2:-1]


def encode_items(header: dict[str, Any], meta: Any, bins: list[Any]) -> bytes:
    """A file from its objects with padding, size and checksum as the writer makes them."""
    def pack_header(size: int) -> bytes:
        out = msgpack.Packer().pack_map_header(len(header))
        for key, value in header.items():
            out += msgpack.packb(key)
            out += (b"\xcf" + size.to_bytes(8, "big") if key == "size"
                    else msgpack.packb(value, use_bin_type=True))
        return out

    body = msgpack.packb(meta, use_bin_type=True)
    start = len(pack_header(0))
    for item in bins:
        packed = msgpack.packb(item, use_bin_type=True)
        if isinstance(item, bytes | bytearray):
            body += b"\xc0" * savefile._pad(start + len(body), len(item))
        body += packed
    size = start + len(body) + 9
    full = pack_header(size) + body
    return full + b"\xcf" + xxhash.xxh3_64_intdigest(full).to_bytes(8, "big")


# -- mutations of the decoded structure ---------------------------------------------------


INTERESTING: list[Any] = [0, 1, -1, 2, 3, 7, 255, 2**31, 2**32, 2**63, -(2**63), 2**64 - 1,
                          0.5, math.nan, math.inf, True, False, None, "", "Pos", "Vel", "<f8",
                          "|b1", [], [1], ["Pos", "Vel"], {}, b"", b"\x00" * 8]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into nested dicts and lists (the node itself included)."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        node = node[key]
    return node


def mutate_meta(meta: dict[str, Any], rng: random.Random) -> str:
    paths = [p for p in _paths(meta) if p]
    if not paths:
        return "meta: empty"
    path = rng.choice(paths)
    parent, key = _get(meta, path[:-1]), path[-1]
    how = rng.randrange(6)
    if how == 0:
        parent[key] = copy.deepcopy(rng.choice(INTERESTING))
    elif how == 1 and isinstance(parent[key], int) and not isinstance(parent[key], bool):
        parent[key] += rng.choice([-2, -1, 1, 2])
    elif how == 2:  # another value from the same file
        parent[key] = copy.deepcopy(_get(meta, rng.choice(paths)))
    elif how == 3 and isinstance(parent, dict):
        del parent[key]
    elif how == 4 and isinstance(parent, list) and parent:
        parent.insert(rng.randrange(len(parent) + 1), copy.deepcopy(rng.choice(parent)))
    elif isinstance(parent, list) and len(parent) > 1:
        i, j = rng.sample(range(len(parent)), 2)
        parent[i], parent[j] = parent[j], parent[i]
    else:
        parent[key] = copy.deepcopy(rng.choice(INTERESTING))
    return f"meta {'.'.join(map(str, path))} ({how})"


def mutate_groups(meta: dict[str, Any], rng: random.Random) -> str:
    """The review's finding: a shorter (or longer) owning-group prefix, the same size on
    every grouped store so the prefixes still look aligned."""
    groups = meta.get("groups") if isinstance(meta, dict) else None
    components = meta.get("components") if isinstance(meta, dict) else None
    if not isinstance(groups, list) or not isinstance(components, list):
        return "groups: not there"
    grouped = {n for g in groups if isinstance(g, list) for n in g if isinstance(n, str)}
    comps = [c for c in components if isinstance(c, dict) and isinstance(c.get("name"), str)
             and c["name"] in grouped
             and isinstance(c.get("group_size"), int)]
    if not comps:
        return "groups: none"
    size = max(0, comps[0]["group_size"] + rng.choice([-3, -2, -1, 1]))
    for comp in comps:
        comp["group_size"] = size
    return f"group size {size}"


def mutate_bin(bins: list[Any], rng: random.Random) -> str:
    i = rng.randrange(len(bins))
    data = bytearray(bins[i])
    how = rng.randrange(6)
    if how == 0 and data:  # one byte
        data[rng.randrange(len(data))] = rng.randrange(256)
    elif how == 1 and len(data) >= 16:  # copy one 8-byte word over another (duplicate key)
        a, b = rng.randrange(len(data) // 8), rng.randrange(len(data) // 8)
        data[a * 8 : a * 8 + 8] = data[b * 8 : b * 8 + 8]
    elif how == 2 and len(data) >= 16:  # swap two 8-byte rows (entities reordered)
        a, b = rng.sample(range(len(data) // 8), 2)
        data[a * 8 : a * 8 + 8], data[b * 8 : b * 8 + 8] = (data[b * 8 : b * 8 + 8],
                                                            data[a * 8 : a * 8 + 8])
    elif how == 3:  # a row more or less
        step = rng.choice([1, 4, 8])
        data = data[:-step] if data and rng.random() < 0.5 else data + bytes(step)
    elif how == 4 and len(bins) > 1:  # swap whole columns
        j = rng.randrange(len(bins))
        bins[i], bins[j] = bins[j], bins[i]
        return f"swap bins {i} {j}"
    else:  # a key of generation 0 / max / another slot
        if len(data) >= 8:
            at = rng.randrange(len(data) // 8) * 8
            key = rng.choice([0, 1, 2**32, 2**32 + 5, 2**64 - 1])
            data[at : at + 8] = key.to_bytes(8, "little")
    bins[i] = bytes(data)
    return f"bin {i} ({how})"


# -- the oracle -----------------------------------------------------------------------------


def check_queries(world: World) -> None:
    """Every query (1-3 types, plus one exclusion) returns exactly the entities that have
    the components, compared with the stores' own key sets."""
    sets = {t: set(world.store(t).entities[: world.store(t).n].tolist()) for t in TYPES}
    for r in (1, 2, 3):
        for types in itertools.combinations(TYPES, r):
            want = set.intersection(*(sets[t] for t in types))
            with world.query(*types, readonly=types) as q:
                got = q.entities.tolist()
            assert len(got) == len(set(got)) and set(got) == want, types
    for t, without in ((Pos, Vel), (Pos, Link)):
        with world.query(t, without=(without,), readonly=(t,)) as q:
            assert set(q.entities.tolist()) == sets[t] - sets[without]


@pytest.mark.filterwarnings("ignore::ecs_engine.SchemaChangeWarning")
def test_structural_mutations_of_checksummed_saves_are_rejected_or_load_sound() -> None:
    rng = random.Random(SEED)
    # Both layouts the reader accepts: version 2 (a bin of rows per component, what the
    # engine writes) and version 1 (a bin per field, old saves).
    bases = [bytes(savefile.encode_snapshot(make_world(seed).snapshot(), version=version))
             for seed in range(4) for version in savefile.READ_VERSIONS]
    outcomes: Counter[str] = Counter()
    for round_no in range(ROUNDS):
        base = bases[round_no % len(bases)]
        header, meta, bins = decode_items(base)
        done = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            kind = rng.random()
            if kind < 0.45:
                done.append(mutate_meta(meta, rng))
            elif kind < 0.6:
                done.append(mutate_groups(meta, rng))
            else:
                done.append(mutate_bin(bins, rng))
        try:
            data = encode_items(header, meta, bins)
        except (TypeError, ValueError, OverflowError):  # msgpack cannot hold the value
            outcomes["unpackable"] += 1
            continue
        world = fresh_world()
        before = world_state(world)
        try:
            world.restore(savefile.decode_snapshot(data), source="file")
        except SaveFileError as exc:
            assert "checksum" not in str(exc), (done, exc)
            assert world_state(world) == before, done
            outcomes["rejected"] += 1
            continue
        except Exception as exc:  # anything else is a bug: say which mutation
            pytest.fail(f"round {round_no} {done}: {type(exc).__name__}: {exc}")
        outcomes["loaded"] += 1
        if data != base:
            outcomes["loaded mutated"] += 1
        try:
            check_invariants(world)
            check_queries(world)
            again = fresh_world()
            again.restore(savefile.decode_snapshot(bytes(world.snapshot().to_bytes())),
                          source="file")
            assert world_state(again) == world_state(world)
        except AssertionError as exc:
            pytest.fail(f"round {round_no} {done}: loaded an unsound world: {exc!r}")
        outcomes[f"loaded v{header['version']}"] += 1
    print(f"\nsave fuzz: {ROUNDS} rounds, seed {SEED}: {dict(outcomes)}")
    assert outcomes["rejected"] > ROUNDS // 3
    assert outcomes["loaded mutated"] > ROUNDS // 50  # harmless changes (values) load
    assert all(outcomes[f"loaded v{v}"] > ROUNDS // 50 for v in savefile.READ_VERSIONS)


def outcome(load: Callable[[World], None]) -> tuple[str, Any]:
    """What loading into a fresh world gives: its state, or the error (without the file
    name a file's error starts with), with the world checked unchanged."""
    world = fresh_world()
    before = world_state(world)
    try:
        load(world)
    except SaveFileError as exc:
        assert world_state(world) == before
        return "rejected", str(exc).split(".sav: ", 1)[-1]
    check_invariants(world)
    return "loaded", world_state(world)


@pytest.mark.filterwarnings("ignore::ecs_engine.SchemaChangeWarning")
def test_a_file_loads_as_its_bytes_do_however_it_arrives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``world.load(path)`` parses a file and checks its keys while the bytes arrive, in
    pieces, from a second thread; ``decode_snapshot`` parses bytes all there. Mutated
    and cut files load the same either way, or fail with the same message, whatever the
    piece size and wherever the pieces end."""
    rng = random.Random(SEED + 1)
    bases = [bytes(savefile.encode_snapshot(make_world(seed).snapshot(), version=version))
             for seed in range(2) for version in savefile.READ_VERSIONS]
    path = tmp_path / "fuzz.sav"
    seen: Counter[str] = Counter()
    for round_no in range(max(50, ROUNDS // 5)):
        base = bases[round_no % len(bases)]
        header, meta, bins = decode_items(base)
        done = [mutate_meta(meta, rng) if rng.random() < 0.5 else mutate_bin(bins, rng)
                for _ in range(rng.choice([0, 1, 2]))]
        try:
            data = encode_items(header, meta, bins)
        except (TypeError, ValueError, OverflowError):
            continue
        if rng.random() < 0.2:  # cut short, or with bytes after the end
            data = (data[: rng.randrange(len(data))] if rng.random() < 0.7
                    else data + bytes(rng.randrange(1, 9)))
        elif rng.random() < 0.25:  # damaged after the checksum was made: parsed unchecked
            at = rng.randrange(len(data))
            data = data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
        path.write_bytes(data)
        monkeypatch.setattr(readahead, "PIECE", rng.choice([1, 7, 64, 4096, 1 << 21]))
        monkeypatch.setattr(readahead, "THREAD_FROM", rng.choice([0, 1 << 40]))
        def from_disk(world: World) -> None:
            world.load(path)

        def from_memory(world: World, data: bytes = data) -> None:
            world.restore(savefile.decode_snapshot(data), source="file")

        from_file, from_bytes = outcome(from_disk), outcome(from_memory)
        assert from_file == from_bytes, (round_no, done)
        seen[from_file[0]] += 1
    assert seen["rejected"] > 10 and seen["loaded"] > 10, seen


def wrapped_rows(fields: list[dict[str, Any]], count: int, bins_added: list[bytes]) -> bytes:
    """A save with one more component whose fields add up to more than numpy's 32-bit row
    size (it wrapped to a small or negative row, with fields outside it)."""
    header, meta, bins = decode_items(bytes(savefile.encode_snapshot(make_world(0).snapshot())))
    meta["components"].append({"name": "Zz", "count": count, "group_size": 0,
                               "fields": fields})
    return encode_items(header, meta, bins + bins_added)


def big_field(name: str) -> dict[str, Any]:
    return {"name": name, "dtype": "|u1", "shape": [1 << 30]}


@pytest.mark.parametrize("damaged", [False, True])
@pytest.mark.parametrize("case", ["negative", "small"])
def test_rows_past_numpys_row_size_are_refused_and_a_damaged_file_stays_damaged(
        case: str, damaged: bool, tmp_path: Path) -> None:
    """Found by an outside review: such a file raised ValueError or crashed (SIGSEGV) in
    the parse that runs while the file is read, before its checksum is checked."""
    if case == "negative":  # 2 x 2**30: the row size wrapped to -2**31
        data = wrapped_rows([big_field("a"), big_field("b")], 0, [b"", b""])
    else:  # 4 x 2**30 + 1: the row wrapped to 1 byte, a bool field 2**30 bytes past it
        keys = decode_items(data := bytes(savefile.encode_snapshot(
            make_world(0).snapshot())))[2][3]  # a one-key entities column
        data = wrapped_rows([big_field("a"), {"name": "z", "dtype": "|b1", "shape": []},
                             big_field("b"), big_field("c"), big_field("d")], 1,
                            [keys, bytes(1)])
    if damaged:
        data = data[:-1] + bytes([data[-1] ^ 1])
    path = tmp_path / "wrapped.sav"
    path.write_bytes(data)
    match = ("checksum mismatch" if damaged
             else "'Zz': its fields make rows of (4294967297|2147483648) bytes, more than")
    for load in (lambda: savefile.decode_snapshot(data), lambda: savefile.read_file(path),
                 lambda: fresh_world().load(path)):
        with pytest.raises(SaveFileError, match=match):
            load()
