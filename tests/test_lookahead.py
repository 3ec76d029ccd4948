"""Keys checked on a second thread while a big save is read (``ecs_engine.lookahead``).

The thread may only save work: a load gives the same world, or the same error naming the
same problem, whether the thread's indexes were used, ignored or never built.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ecs_engine import SaveFileError, Snapshot, World, component, lookahead
from ecs_engine.snapshot import KeyIndex, LiveSlots, StoreSnapshot
from tests.test_load_memory import Link, Pos, Vel
from tests.world_state import check_invariants, world_state

BIG = 200_000  # rows: a file past lookahead.MIN_BYTES


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
    assert path.stat().st_size >= lookahead.MIN_BYTES
    return path, world_state(world)


def record_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    threads: list[str] = []
    real = KeyIndex.build.__func__  # type: ignore[attr-defined]

    def build(cls: type[KeyIndex], *args: object, **kw: object) -> KeyIndex:
        threads.append(threading.current_thread().name)
        return real(cls, *args, **kw)

    monkeypatch.setattr(KeyIndex, "build", classmethod(build))
    return threads


def test_a_big_load_checks_every_store_once_off_the_critical_path(
        big: tuple[Path, object], monkeypatch: pytest.MonkeyPatch) -> None:
    path, expected = big
    threads = record_builds(monkeypatch)
    world = target()
    world.load(path)
    assert world_state(world) == expected
    check_invariants(world)
    # each store once: by the helper during the read, or by the main thread after it
    # (stores the helper had not reached); none again by the check after the read
    assert len(threads) == 3


def test_the_main_thread_takes_the_stores_a_slow_helper_has_not_reached(
        big: tuple[Path, object], monkeypatch: pytest.MonkeyPatch) -> None:
    path, expected = big
    threads: list[str] = []
    real = KeyIndex.build.__func__  # type: ignore[attr-defined]

    def build(cls: type[KeyIndex], *args: object, **kw: object) -> KeyIndex:
        me = threading.current_thread().name
        threads.append(me)
        if me == "ecs-engine-key-check":
            time.sleep(0.3)  # the read is done long before: the main thread takes over
        return real(cls, *args, **kw)

    real_help = lookahead.KeyLookahead._help

    def help_(self: lookahead.KeyLookahead) -> None:
        with self._state:  # the helper has Link (it always does first in practice)
            self._state.wait_for(lambda: 0 in self._claimed or self._over, 5.0)
        real_help(self)

    monkeypatch.setattr(KeyIndex, "build", classmethod(build))
    monkeypatch.setattr(lookahead.KeyLookahead, "_help", help_)
    world = target()
    world.load(path)
    assert world_state(world) == expected
    check_invariants(world)
    main = threading.current_thread().name
    # stores in file order: Link (the helper's), then Pos and Vel (Vel's keys equal
    # Pos's: it copies the index the main thread built for Pos)
    assert threads == ["ecs-engine-key-check", main, main]


def test_a_helper_failing_while_the_main_thread_waits_on_it_only_costs_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = World(seed=5)  # Pos and Vel on the same entities: equal keys, one index
    keys = source.spawn_batch(Pos(x=np.arange(float(BIG))), Vel(dx=1.0), count=BIG)
    source.add_batch(keys[::3], Link(to=keys[0]))
    path = tmp_path / "twins.sav"
    source.save(path)
    expected = world_state(source)
    real = KeyIndex.build.__func__  # type: ignore[attr-defined]
    waiting = threading.Event()

    def build(cls: type[KeyIndex], keys: np.ndarray, *args: object, **kw: object
              ) -> KeyIndex:
        if threading.current_thread().name == "ecs-engine-key-check" and len(keys) == BIG:
            waiting.wait(5.0)  # Pos, claimed by the helper: fail once main waits on it
            time.sleep(0.05)
            raise MemoryError("no room for the index")
        return real(cls, keys, *args, **kw)

    real_await = lookahead.KeyLookahead._await

    def await_(self: lookahead.KeyLookahead, at: int) -> KeyIndex:
        waiting.set()
        return real_await(self, at)

    real_help = lookahead.KeyLookahead._help

    def help_(self: lookahead.KeyLookahead) -> None:
        with self._state:  # let the helper claim Pos first (it always does in practice)
            self._state.wait_for(lambda: 1 in self._claimed or self._over, 5.0)
        real_help(self)

    monkeypatch.setattr(KeyIndex, "build", classmethod(build))
    monkeypatch.setattr(lookahead.KeyLookahead, "_await", await_)
    monkeypatch.setattr(lookahead.KeyLookahead, "_help", help_)
    world = target()
    world.load(path)  # checked again on the main thread, after the read
    assert waiting.is_set()  # the main thread did wait for the helper's Pos
    assert world_state(world) == expected


def test_a_small_load_checks_on_the_main_thread(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    source = build(300)
    source.save(tmp_path / "small.sav")
    threads = record_builds(monkeypatch)
    world = target()
    world.load(tmp_path / "small.sav")
    assert world_state(world) == world_state(source)
    assert threads and set(threads) == {threading.current_thread().name}


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
    """The thread followed the file wrongly (here: every store gets Pos's keys): its
    indexes do not fit the parsed columns, so the main thread checks them itself."""
    path, expected = big
    real = lookahead.arriving_columns

    def confused(buf: np.ndarray, size: int, wait: object) -> Iterator[tuple[str, str, np.ndarray]]:
        first = None
        for kind, name, arr in real(buf, size, wait):  # type: ignore[arg-type]
            if kind == "keys":
                first = arr if first is None else first
                arr = first
            yield kind, name, arr

    monkeypatch.setattr(lookahead, "arriving_columns", confused)
    threads = record_builds(monkeypatch)
    world = target()
    world.load(path)
    assert world_state(world) == expected
    assert threading.current_thread().name in threads  # some rechecked on the main thread


def test_a_failing_helper_thread_only_costs_time(big: tuple[Path, object],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path, expected = big

    def failing(buf: np.ndarray, size: int, wait: object) -> Iterator[tuple[str, str, np.ndarray]]:
        raise MemoryError("no room for the index")
        yield  # pragma: no cover

    monkeypatch.setattr(lookahead, "arriving_columns", failing)
    world = target()
    world.load(path)
    assert world_state(world) == expected


def test_a_read_that_stops_short_releases_the_helper_thread() -> None:
    watcher = lookahead.KeyLookahead(lambda high_water: high_water, lambda name: True,
                                     lambda table: World()._slots.prepare(table),
                                     np.empty)
    buf = np.zeros(lookahead.MIN_BYTES, np.uint8)
    watcher.started(buf, len(buf))
    watcher.arrived(1000)  # then the read fails
    watcher.finished()
    assert watcher.results() == {}


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
    helper build one for each (thousands of them asked for gigabytes)."""
    source = build(BIG)
    source.spawn_batch(Extra(), count=1000)
    snap = source.snapshot()
    ghosts = tuple(StoreSnapshot(f"Ghost{i}", (np.zeros(0, np.int64),),
                                 np.zeros(0, np.uint64)) for i in range(50))
    dataclasses.replace(snap, stores=snap.stores + ghosts).save(tmp_path / "extra.sav")
    without = [s for s in snap.stores if s.name != "LookaheadExtra"]
    dataclasses.replace(snap, stores=tuple(without) + ghosts).save(tmp_path / "ghosts.sav")
    threads = record_builds(monkeypatch)
    world = target()
    before = world_state(world)
    with pytest.raises(SaveFileError, match="unknown component 'LookaheadExtra'"):
        world.load(tmp_path / "extra.sav")
    assert world_state(world) == before
    assert len(threads) == 3  # Pos, Vel and Link: not Extra, not the empty ghosts
    threads.clear()
    world.load(tmp_path / "ghosts.sav")
    assert len(threads) == 3
    check_invariants(world)


def test_a_load_that_fails_while_reading_stops_the_helper_first(
        big: tuple[Path, object], tmp_path: Path) -> None:
    path, _ = big
    bad = tmp_path / "flipped.sav"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # the checksum no longer matches
    bad.write_bytes(bytes(data))
    world = target()
    with pytest.raises(SaveFileError, match="damaged"):
        world.load(bad)
    assert not [t for t in threading.enumerate() if t.name == "ecs-engine-key-check"]


@pytest.mark.parametrize("rows", [300, BIG])  # the main thread's check, and the helper's
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
def test_the_helper_thread_hashes_every_byte_the_checksum_covers(
        big: tuple[Path, object], tmp_path: Path, where: float) -> None:
    """On a big file the key-check thread hashes the pieces as they arrive (the main
    thread only reads): a flipped bit anywhere is still found."""
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


def test_a_helper_failing_half_way_leaves_the_rest_of_the_hash_to_the_main_thread(
        big: tuple[Path, object], monkeypatch: pytest.MonkeyPatch) -> None:
    path, expected = big
    real = lookahead.arriving_columns

    def failing_late(buf: np.ndarray, size: int,
                     wait: object) -> Iterator[tuple[str, str, np.ndarray]]:
        for kind, name, arr in real(buf, size, wait):  # type: ignore[arg-type]
            yield kind, name, arr
            if kind == "keys":
                raise MemoryError("no room for the next index")

    monkeypatch.setattr(lookahead, "arriving_columns", failing_late)
    world = target()
    world.load(path)
    assert world_state(world) == expected
