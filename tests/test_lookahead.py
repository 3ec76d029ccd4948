"""Keys checked while the rest of a big save is read (``ecs_engine.lookahead``).

The checks during the read may only save work: a load gives the same world, or the same
error naming the same problem, whether their indexes were used, ignored or never built.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ecs_engine import SaveFileError, Snapshot, World, component, lookahead, readahead, savefile
from ecs_engine.snapshot import KeyIndex, LiveSlots, StoreSnapshot
from tests.test_load_memory import Link, Pos, Vel
from tests.world_state import check_invariants, world_state

BIG = 200_000  # rows: a file past readahead.THREAD_FROM (read on a second thread)


def build(n: int) -> World:
    world = World(seed=4)
    keys = world.spawn_batch(Pos(x=np.arange(float(n))), Vel(dx=1.0), count=n)
    world.add_batch(keys[::3], Link(to=keys[0]))
    world.despawn_batch(keys[5::11])
    world.spawn_batch(Pos(x=-1.0), count=n // 20)  # recycled slots
    return world


def target() -> World:
    world = World()
    world.register(Pos, Vel, Link)
    world.spawn_batch(Pos(x=9.0), Link(), count=10)
    return world


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    path = tmp_path_factory.mktemp("big") / "big.sav"
    world = build(BIG)
    world.save(path)
    assert path.stat().st_size >= readahead.THREAD_FROM
    return path, world_state(world)


def record_builds(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record, for each store's key check, whether a file was being read meanwhile."""
    during: list[bool] = []
    real = KeyIndex.build.__func__  # type: ignore[attr-defined]

    def build(cls: type[KeyIndex], *args: object, **kw: object) -> KeyIndex:
        during.append(any(t.name == "ecs-engine-load" for t in threading.enumerate()))
        return real(cls, *args, **kw)

    monkeypatch.setattr(KeyIndex, "build", classmethod(build))
    return during


def slow_reader(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[int]:
    """Make the reading thread take ``seconds`` per piece; returns the bytes it had
    read each time a store's keys were checked."""
    real_piece = readahead._Reader._read_piece
    readers: list[readahead._Reader] = []

    def piece(self: readahead._Reader) -> None:
        if not readers or readers[-1] is not self:
            readers.append(self)
        time.sleep(seconds)
        real_piece(self)

    monkeypatch.setattr(readahead._Reader, "_read_piece", piece)
    seen: list[int] = []
    real_build = KeyIndex.build.__func__  # type: ignore[attr-defined]

    def build(cls: type[KeyIndex], *args: object, **kw: object) -> KeyIndex:
        seen.append(readers[-1]._got if readers else -1)
        return real_build(cls, *args, **kw)

    monkeypatch.setattr(KeyIndex, "build", classmethod(build))
    return seen


def test_a_big_load_checks_every_store_once_while_the_rest_is_read(
        big: tuple[Path, object], monkeypatch: pytest.MonkeyPatch) -> None:
    path, expected = big
    seen = slow_reader(monkeypatch, 0.02)
    world = target()
    world.load(path)
    assert world_state(world) == expected
    check_invariants(world)
    # each store once, none again by the check after the read; the first ones while
    # the thread was still reading (Vel's keys equal Pos's: it copies that index)
    assert len(seen) == 3
    size = path.stat().st_size
    assert 0 < seen[0] < size and seen == sorted(seen)
    assert not [t for t in threading.enumerate() if t.name == "ecs-engine-load"]


def test_a_slow_key_check_lets_the_reader_run_ahead(
        big: tuple[Path, object], monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader hashes each piece as it arrives, whatever the checks are doing."""
    path, expected = big
    real = KeyIndex.build.__func__  # type: ignore[attr-defined]

    def build(cls: type[KeyIndex], *args: object, **kw: object) -> KeyIndex:
        time.sleep(0.05)
        return real(cls, *args, **kw)

    monkeypatch.setattr(KeyIndex, "build", classmethod(build))
    world = target()
    world.load(path)
    assert world_state(world) == expected


def test_a_read_failing_half_way_raises_it_and_changes_nothing(
        big: tuple[Path, object], monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = big
    real_piece = readahead._Reader._read_piece

    def piece(self: readahead._Reader) -> None:
        if self._got >= readahead.PIECE:
            raise OSError(5, "Input/output error")
        real_piece(self)

    monkeypatch.setattr(readahead._Reader, "_read_piece", piece)
    world = target()
    before = world_state(world)
    with pytest.raises(OSError, match="Input/output error"):
        world.load(path)
    assert world_state(world) == before
    check_invariants(world)
    assert not [t for t in threading.enumerate() if t.name == "ecs-engine-load"]
    monkeypatch.undo()
    world.load(path)  # and the next load is whole
    assert world_state(world) == big[1]


def test_a_small_load_is_read_on_the_loading_thread_and_checked_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = build(300)
    source.save(tmp_path / "small.sav")
    during = record_builds(monkeypatch)
    world = target()
    world.load(tmp_path / "small.sav")
    assert world_state(world) == world_state(source)
    assert during == [False, False, False]


def broken(path: Path, out: Path, store: str, how: str) -> None:
    """Rewrite the save at ``path`` with one store's keys damaged (checksum valid)."""
    snap = Snapshot.load(path)
    stores = []
    for s in snap.stores:
        if s.name == store:
            keys = s.entities.copy()
            if how == "twice":
                keys[len(keys) // 2] = keys[0]
            else:  # a key whose generation is not the slot's
                keys[len(keys) // 2] += np.uint64(1 << 32)
            s = dataclasses.replace(s, entities=keys)
        stores.append(s)
    dataclasses.replace(snap, stores=tuple(stores)).save(out)


@pytest.mark.parametrize(("store", "how", "message"), [
    ("Pos", "twice", "'Pos': an entity appears twice"),
    ("Vel", "twice", "'Vel': an entity appears twice"),
    ("Link", "dead", "'Link': holds entities the slot table says are not alive"),
    ("Vel", "dead", "'Vel': holds entities the slot table says are not alive"),
])
def test_bad_keys_in_a_big_file_raise_the_same_error_and_change_nothing(
        big: tuple[Path, object], tmp_path: Path, store: str, how: str, message: str) -> None:
    path, _ = big
    bad = tmp_path / "bad.sav"
    broken(path, bad, store, how)
    world = target()
    before = world_state(world)
    with pytest.raises(SaveFileError, match=message):
        world.load(bad)
    assert world_state(world) == before
    check_invariants(world)


def test_indexes_of_other_bytes_are_ignored(big: tuple[Path, object],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks during the read followed the file wrongly (here: every store gets the
    first store's keys): their indexes do not fit the parsed columns, so the check after
    the read makes its own."""
    path, expected = big
    real = lookahead.KeyLookahead.keys
    first: list[np.ndarray] = []

    def confused(self: lookahead.KeyLookahead, name: str, keys: np.ndarray) -> None:
        first.extend([] if first else [keys])
        real(self, name, first[0])

    monkeypatch.setattr(lookahead.KeyLookahead, "keys", confused)
    seen = slow_reader(monkeypatch, 0.01)
    world = target()
    world.load(path)
    assert world_state(world) == expected
    size = path.stat().st_size
    assert len(seen) > 3 and seen[0] < size and seen[-1] == size  # redone after the read


def test_checks_failing_during_the_read_only_cost_time(big: tuple[Path, object],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of memory for an index while the file is read: the check after the read
    builds them all (and reports a real lack of memory itself)."""
    path, expected = big
    real = LiveSlots.of.__func__  # type: ignore[attr-defined]
    calls: list[int] = []

    def failing(cls: type[LiveSlots], *args: object, **kw: object) -> LiveSlots:
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError("no room for the live-key table")
        return real(cls, *args, **kw)

    monkeypatch.setattr(LiveSlots, "of", classmethod(failing))
    during = record_builds(monkeypatch)
    world = target()
    world.load(path)
    assert world_state(world) == expected
    assert during == [False] * 3 and len(calls) == 2  # every store checked after the read


def test_a_truncated_big_file_is_reported_as_truncated(big: tuple[Path, object],
                                                      tmp_path: Path) -> None:
    path, _ = big
    cut = tmp_path / "cut.sav"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])
    world = target()
    before = world_state(world)
    with pytest.raises(SaveFileError, match="truncated"):
        world.load(cut)
    assert world_state(world) == before


@component(name="LookaheadExtra")
class Extra:
    n: int = 0


def test_only_stores_the_world_takes_are_indexed(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each index is a slot-table-sized array: a file naming stores the load skips (empty
    ones of unknown types) or refuses (unknown types with rows) must not make the
    checks during the read build one for each (thousands of them asked for gigabytes)."""
    source = build(BIG)
    source.spawn_batch(Extra(), count=1000)
    snap = source.snapshot()
    ghosts = tuple(StoreSnapshot(f"Ghost{i}", (np.zeros(0, np.int64),),
                                 np.zeros(0, np.uint64)) for i in range(50))
    dataclasses.replace(snap, stores=snap.stores + ghosts).save(tmp_path / "extra.sav")
    without = [s for s in snap.stores if s.name != "LookaheadExtra"]
    dataclasses.replace(snap, stores=tuple(without) + ghosts).save(tmp_path / "ghosts.sav")
    during = record_builds(monkeypatch)
    world = target()
    before = world_state(world)
    with pytest.raises(SaveFileError, match="unknown component 'LookaheadExtra'"):
        world.load(tmp_path / "extra.sav")
    assert world_state(world) == before
    assert len(during) == 3  # Pos, Vel and Link: not Extra, not the empty ghosts
    during.clear()
    world.load(tmp_path / "ghosts.sav")
    assert len(during) == 3
    check_invariants(world)


def test_a_load_that_fails_its_checksum_leaves_no_reading_thread(
        big: tuple[Path, object], tmp_path: Path) -> None:
    path, _ = big
    bad = tmp_path / "flipped.sav"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # the checksum no longer matches
    bad.write_bytes(bytes(data))
    world = target()
    with pytest.raises(SaveFileError, match="damaged"):
        world.load(bad)
    assert not [t for t in threading.enumerate() if t.name == "ecs-engine-load"]


@pytest.mark.parametrize("rows", [300, BIG])  # checked after the read, and during it
def test_a_key_past_every_slot_onto_a_free_last_slot_is_not_alive(
        rows: int, tmp_path: Path) -> None:
    """Keys are gathered from the live-key table with their slot clipped to the last
    slot: 2**64 - 1 once matched the marker of a free last slot (then crashed)."""
    source = World()
    keys = source.spawn_batch(Pos(x=1.0), count=rows)
    source.despawn(int(keys[-1]))  # the last slot is free
    snap = source.snapshot()
    (pos,) = snap.stores
    hostile = pos.entities.copy()
    hostile[0] = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
    bad = tmp_path / "bad.sav"
    dataclasses.replace(snap, stores=(dataclasses.replace(pos, entities=hostile),)).save(bad)
    world = target()
    before = world_state(world)
    with pytest.raises(SaveFileError, match="'Pos': holds entities the slot table says "
                                            "are not alive"):
        world.load(bad)
    assert world_state(world) == before


def test_with_every_slot_free_no_key_is_alive() -> None:
    # one slot, free (the numpy check's live-key table is then a lone 0, which NULL equals)
    table = LiveSlots.of(np.ones(1, np.uint32), np.zeros(1, np.bool_), np.zeros(1, np.int64))
    for key in (0, 1, 1 << 32, 0xFFFF_FFFF_FFFF_FFFF):
        index = KeyIndex.build(np.array([key], np.uint64), table, 4)
        assert not index.alive


@pytest.mark.parametrize("where", [0.3, 0.7, -9])  # -9: the last byte the checksum covers
def test_the_reading_thread_hashes_every_byte_the_checksum_covers(
        big: tuple[Path, object], tmp_path: Path, where: float) -> None:
    """On a big file the reading thread hashes the pieces as they arrive: a flipped bit
    anywhere is still found."""
    path, _ = big
    data = bytearray(path.read_bytes())
    at = int(len(data) * where) if where > 0 else len(data) + int(where)
    data[at] ^= 0x10
    bad = tmp_path / "flipped.sav"
    bad.write_bytes(bytes(data))
    world = target()
    before = world_state(world)
    with pytest.raises(SaveFileError, match="damaged"):
        world.load(bad)
    assert world_state(world) == before


def test_checks_failing_half_way_leave_the_rest_to_the_check_after_the_read(
        big: tuple[Path, object], monkeypatch: pytest.MonkeyPatch) -> None:
    path, expected = big
    real = KeyIndex.build.__func__  # type: ignore[attr-defined]
    built: list[int] = []

    def failing_late(cls: type[KeyIndex], *args: object, **kw: object) -> KeyIndex:
        built.append(1)
        if len(built) == 2:  # the read's second store
            raise MemoryError("no room for the next index")
        return real(cls, *args, **kw)

    monkeypatch.setattr(KeyIndex, "build", classmethod(failing_late))
    world = target()
    world.load(path)
    assert world_state(world) == expected
    assert len(built) == 4  # three during the read, the failed one again after it


@pytest.mark.parametrize("rows", [300, BIG])
def test_a_load_parses_the_file_once_while_it_is_read(
        rows: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = build(rows)
    source.save(tmp_path / "w.sav")
    real = savefile._body
    calls: list[bool] = []

    def body(*args: object, **kw: object) -> object:
        calls.append(len(args) > 4 or "wait" in kw)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(savefile, "_body", body)
    world = target()
    world.load(tmp_path / "w.sav")
    assert world_state(world) == world_state(source)
    assert calls == [True]  # as the bytes arrived; not again after the checksum



def test_who_checks_the_keys_depends_on_whose_memory_the_file_goes_to(
        big: tuple[Path, object], monkeypatch: pytest.MonkeyPatch) -> None:
    """A first load reads into fresh memory on the loading thread (the helper parses and
    checks); once the world's pool holds memory a load can reuse, a helper reads into it
    and the loading thread parses and checks. The world is the same either way."""
    path, expected = big
    threads: list[str] = []
    real = KeyIndex.build.__func__  # type: ignore[attr-defined]

    def build(cls: type[KeyIndex], *args: object, **kw: object) -> KeyIndex:
        threads.append(threading.current_thread().name)
        return real(cls, *args, **kw)

    monkeypatch.setattr(KeyIndex, "build", classmethod(build))
    world = target()
    by_load = []
    for _ in range(4):
        threads.clear()
        world.spawn_batch(Pos(x=5.0), count=7)  # (moves away from the saved state)
        world.load(path)
        assert world_state(world) == expected
        check_invariants(world)
        by_load.append(set(threads))
    main = threading.current_thread().name
    assert by_load[0] == {"ecs-engine-load"}  # fresh memory
    assert by_load[2] == by_load[3] == {main}  # the memory of the load before the last
