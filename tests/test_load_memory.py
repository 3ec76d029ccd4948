"""``world.load`` hands the memory a file was read into to the stores (no second copy).

What must hold: nothing else ever aliases that memory (no snapshot, no recycled buffer),
kept views are still counted, the stores grow normally, and loads, snapshots and restores
interleave in any order with the same results as copying would give.
"""

from __future__ import annotations

import dataclasses
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from ecs_engine import (
    NULL,
    Entity,
    History,
    RestoreEvent,
    SaveFileError,
    World,
    component,
    schema_of,
)
from ecs_engine.memcopy import BufferPool
from ecs_engine.snapshot import sparse_capacity
from tests.world_state import check_invariants, world_state

ROWS = 70_000  # past the pool's 1 MB minimum: the file is read into recycled memory


@component
class Pos:
    x: np.float64 = 0.0
    y: np.float64 = 0.0


@component
class Vel:
    dx: np.float32 = 0.0


@component
class Link:
    to: Entity = NULL


def build(seed: int = 1, n: int = ROWS) -> World:
    world = World(seed=seed)
    keys = world.spawn_batch(Pos(x=np.arange(float(n)), y=2.0), Vel(dx=1.0), count=n)
    world.add_batch(keys[::5], Link(to=keys[0]))
    world.despawn_batch(keys[3::97])
    return world


def fresh() -> World:
    world = World()
    world.register(Pos, Vel, Link)
    return world


def shake(world: World, seed: int) -> None:
    """Writes, spawns and despawns touching every store."""
    rng = np.random.default_rng(seed)
    with world.query(Pos, Vel) as q:
        q[Pos]["x"] += q[Vel]["dx"]
    alive = world.store(Pos).entities[: world.store(Pos).n].copy()
    world.despawn_batch(rng.choice(alive, 40, replace=False))
    world.spawn_batch(Pos(x=-1.0), Link(), count=60)


def store_arrays(world: World) -> list[np.ndarray]:
    return [a for s in world._stores.values() for a in (s.data, s.entities)]


def aliased(world: World, arrays: list[np.ndarray]) -> bool:
    return any(np.shares_memory(a, b) for a in store_arrays(world) for b in arrays)


def test_a_loaded_world_owns_the_file_memory_and_nothing_else_sees_it(tmp_path: Path) -> None:
    source = build()
    source.save(tmp_path / "a.sav")
    expected = world_state(source)
    world = fresh()
    world.load(tmp_path / "a.sav")
    assert world_state(world) == expected
    check_invariants(world)
    assert not world.store(Pos).data.flags.owndata  # taken over, not copied
    snap = world.snapshot()
    assert not aliased(world, [c for s in snap.stores for c in (*s.chunks, s.entities)])
    shake(world, 1)
    assert world_state(world) != expected
    world.restore(snap)
    assert world_state(world) == expected


def test_loading_again_and_again_never_reads_into_memory_a_store_uses(tmp_path: Path) -> None:
    states = []
    for i in range(3):
        w = build(seed=i)
        shake(w, i)
        w.save(tmp_path / f"{i}.sav")
        states.append(world_state(w))
    world = fresh()
    kept = []
    for step in range(9):  # the pool offers the buffers of earlier loads once free
        i = step % 3
        world.load(tmp_path / f"{i}.sav")
        assert world_state(world) == states[i]
        check_invariants(world)
        pool = world._buffers
        offered = [pool.take(b.size) for b in list(pool._buffers)]
        assert not aliased(world, offered)  # what the pool would hand out next is free
        del offered
        kept.append((world.snapshot(), states[i]))
        if step % 2:
            shake(world, step)  # spawns grow the stores out of the file memory
    for snap, state in kept:  # no later load or write reached an earlier snapshot
        world.restore(snap)
        assert world_state(world) == state


def test_views_of_loaded_columns_are_counted_and_snapshots_see_their_writes(
        tmp_path: Path) -> None:
    build().save(tmp_path / "a.sav")
    world = fresh()
    world.load(tmp_path / "a.sav")
    store = world.store(Pos)
    assert not store.views_outstanding()
    with world.query(Pos) as q:
        xs = q[Pos]["x"]  # kept past the block
    assert store.views_outstanding()
    before = world.snapshot()
    xs[:] = -1234.5  # untracked write
    after = world.snapshot()
    assert np.all(after.store("Pos").data["x"] == -1234.5)
    assert not np.any(before.store("Pos").data["x"] == -1234.5)
    world.restore(before)
    assert not np.any(world.store(Pos).live()["x"] == -1234.5)


def test_history_and_rewind_across_a_load(tmp_path: Path) -> None:
    build().save(tmp_path / "a.sav")
    world = fresh()
    history = History()
    world.load(tmp_path / "a.sav")
    history.record(world)
    loaded = world_state(world)
    for i in range(4):
        shake(world, i)
        history.record(world)
    while history.rewind(world) is not None:
        pass
    assert world_state(world) == loaded


def loaded_with_events(path: Path) -> tuple[World, list[RestoreEvent], object]:
    """A fresh world that kept its restore events, after loading a save of ``build()``
    written to ``path``; and the state saved."""
    source = build()
    source.save(path)
    world = fresh()
    events: list[RestoreEvent] = []
    world.on_restore(lambda w, e: events.append(e))
    world.load(path)
    return world, events, world_state(source)


def test_the_event_snapshot_after_a_load_is_the_loaded_state_and_independent(
        tmp_path: Path) -> None:
    world, events, expected = loaded_with_events(tmp_path / "a.sav")
    assert events[0].source == "file"
    snap = events[0].snapshot  # taken on first use
    assert snap is events[0].snapshot
    shake(world, 3)
    world.restore(snap)
    assert world_state(world) == expected


def test_a_failing_load_after_a_good_one_leaves_the_loaded_state(tmp_path: Path) -> None:
    build().save(tmp_path / "a.sav")
    world = fresh()
    world.load(tmp_path / "a.sav")
    shake(world, 5)
    state = world_state(world)
    bad = bytearray((tmp_path / "a.sav").read_bytes())
    bad[len(bad) // 2] ^= 0xFF
    (tmp_path / "bad.sav").write_bytes(bytes(bad))
    from ecs_engine import SaveFileError
    with pytest.raises(SaveFileError):
        world.load(tmp_path / "bad.sav")
    assert world_state(world) == state
    check_invariants(world)


def test_a_migrated_store_is_copied_and_the_rest_taken_over(tmp_path: Path) -> None:
    build().save(tmp_path / "a.sav")

    @component(name="Vel")
    class WiderVel:
        dx: np.float64 = 0.0  # float32 -> float64: a safe cast, a new array

    world = World()
    world.register(Pos, WiderVel, Link)
    world.load(tmp_path / "a.sav")
    assert not world.store(Pos).data.flags.owndata  # taken over
    assert world.store(WiderVel).data.flags.owndata  # cast: a copy
    assert np.all(world.store(WiderVel).live()["dx"] == 1.0)
    shake_free = world.spawn(Pos(), WiderVel(dx=3.0))
    assert world.get(shake_free, WiderVel)["dx"] == 3.0
    check_invariants(world)


def test_an_event_snapshot_asked_for_after_the_world_moved_on_is_an_error_not_a_later_state(
        tmp_path: Path) -> None:
    """The load keeps no copy, so a kept event can give the loaded state only while the
    world still holds it; afterwards it must say so instead of returning a later state."""
    world, events, expected = loaded_with_events(tmp_path / "a.sav")
    shake(world, 4)  # e.g. the next tick, before a system looks at the event
    with pytest.raises(RuntimeError, match="changed since"):
        _ = events[0].snapshot
    world.load(tmp_path / "a.sav")
    world.resources["score"] = 1  # resources count as a change too
    with pytest.raises(RuntimeError, match="changed since"):
        _ = events[1].snapshot
    world.load(tmp_path / "a.sav")
    world.snapshot()  # nothing changed: still the loaded state
    world.restore(events[2].snapshot)
    assert world_state(world) == expected


@pytest.mark.parametrize("loaded", [True, False])
def test_writes_through_a_view_that_died_since_are_still_undone_by_a_restore(
        tmp_path: Path, loaded: bool) -> None:
    """A kept view makes every row count as changed, also after it is gone: what it wrote
    between a snapshot (or restore) and its death never moved a version."""
    source = build(n=2000)
    if loaded:
        source.save(tmp_path / "a.sav")
        world = fresh()
        world.load(tmp_path / "a.sav")
    else:
        world = source
    with world.query(Pos) as q:
        xs = q[Pos]["x"]  # kept past the block: writes without moving a version
    snap = world.snapshot()
    expected = world_state(world)
    xs[:5] = 77.0
    del xs
    written = world.snapshot()  # the view is gone: only versions tell what to copy
    assert np.all(written.store("Pos").data["x"][:5] == 77.0)
    world.restore(snap)  # ... and what to copy back
    assert world_state(world) == expected
    with world.query(Pos) as q:
        xs = q[Pos]["x"]
    world.restore(snap)  # restored while a view is alive ...
    xs[:5] = 78.0  # ... which writes afterwards
    del xs
    world.restore(snap)
    assert world_state(world) == expected


def test_small_stores_are_copied_so_they_never_pin_the_file(tmp_path: Path) -> None:
    """Only stores of 64 KB and more take over the file's memory: a small one would keep
    the whole file alive after the big ones grow out of it."""
    source = World(seed=2)
    keys = source.spawn_batch(Pos(x=np.arange(float(ROWS))), count=ROWS)
    source.add_batch(keys[:10], Link(to=keys[0]))
    source.save(tmp_path / "a.sav")
    world = fresh()
    world.load(tmp_path / "a.sav")
    assert not world.store(Pos).data.flags.owndata  # big: taken over
    assert world.store(Link).data.flags.owndata  # small: copied
    assert world.store(Link).entities.flags.owndata
    assert world_state(world) == world_state(source)


@pytest.mark.parametrize("live", [False, True])
def test_a_prepared_slot_table_gives_the_slot_map_a_copy_would(live: bool) -> None:
    """A load lays the slot table out in new arrays before it restores (while its key
    checks finish): the slot map must end as ``set_table``'s copy leaves it, at the
    capacity the stores' indexes were built for."""
    source = World(seed=3)
    keys = source.spawn_batch(Pos(x=1.0), count=5000)
    source.despawn_batch(keys[::3])
    table = source.snapshot().slots
    for prepared in (False, True):
        world = World()
        if live:
            world.spawn_batch(Pos(), count=9000)
        slots = world._slots
        capacity = sparse_capacity(world, len(table.generations))
        ready = slots.prepare(table) if prepared else None
        slots.set_table(table, 7, ready)
        assert slots.capacity == capacity
        hw = len(table.generations)
        assert np.array_equal(slots.generations[:hw], table.generations)
        assert (slots.generations[hw:] == 1).all() and not slots.alive[hw:].any()
        assert np.array_equal(slots.alive[:hw], table.alive)
        assert np.array_equal(slots.free[: slots.n_free], table.free)
        assert (slots.high_water, slots.n_alive) == (hw, hw - len(table.free))
        if prepared:  # the prepared arrays were taken as they are, and answer one-item reads
            assert ready is not None and slots.generations is ready.generations
            key = int(table.generations[1]) << 32 | 1
            assert slots.is_alive(key) == bool(table.alive[1])


def index_arrays(world: World) -> list[np.ndarray]:
    slots = world._slots
    return [s.sparse for s in world._stores.values()] + [slots.generations, slots.alive,
                                                         slots.free]


def test_a_load_after_a_load_takes_its_slot_table_and_indexes_from_the_pool(
        tmp_path: Path) -> None:
    """Memory a load's indexes replaced serves the next load (no page faults), never while
    anything still holds it, and never to two indexes at once."""
    paths, states = [], []
    for i in range(2):  # 300k slots: every index is past the pool's 1 MB minimum
        source = build(seed=i, n=300_000)
        shake(source, i)
        paths.append(tmp_path / f"{i}.sav")
        source.save(paths[-1])
        states.append(world_state(source))
    world = fresh()
    pooled = []
    held = before = None
    for step in range(6):
        world.load(paths[step % 2])
        assert world_state(world) == states[step % 2]
        check_invariants(world)
        arrays = index_arrays(world)
        assert not any(np.shares_memory(a, b) for i, a in enumerate(arrays)
                       for b in arrays[i + 1:])
        pooled.append(world._index_memory.nbytes)
        if step == 2:  # something still holds this index: no later load may reuse it
            held = world.store(Pos).sparse
            before = held.copy()
    assert held is not None and before is not None and np.array_equal(held, before)
    # From the third load on, nothing new: but for the held index, replaced once
    assert pooled[3] == pooled[2] and pooled[4] == pooled[5] == pooled[3] + held.nbytes
    assert not any(np.shares_memory(held, a) for a in index_arrays(world))


def idle_bytes(pool: BufferPool) -> int:
    """Bytes of the pool's buffers nothing but the pool holds."""
    # 3 references: the list's, the loop's and getrefcount's argument
    return sum(b.nbytes for b in pool._buffers if sys.getrefcount(b) == 3)


def test_the_pool_keeps_only_what_the_next_load_takes_again(tmp_path: Path) -> None:
    """After the slot map grew, the smaller buffers of the loads before would never serve
    a load again: they are let go, and one load's worth stays idle, however many types
    the world knows (the pool's length bound grows with them)."""
    source = build(n=300_000)
    source.save(tmp_path / "a.sav")
    world = fresh()
    world.register(*(component(name=f"Extra{i}")(type(f"Extra{i}", (), {"__annotations__":
                   {"v": np.int32}, "v": 0})) for i in range(20)))
    pool = world._index_memory

    def spare() -> int:  # (and the numpy check's live-key table, in a buffer up to 2x)
        in_use = sum(a.nbytes for a in index_arrays(world))
        return in_use + 2 * 8 * world._slots.high_water

    for _ in range(3):
        world.load(tmp_path / "a.sav")
    assert idle_bytes(pool) <= spare()
    for grown in range(3):
        world.spawn_batch(Pos(), count=700_000 << grown)  # the slot map grows again
        for _ in range(2):
            world.load(tmp_path / "a.sav")
            assert world_state(world) == world_state(source)
        assert idle_bytes(pool) <= spare()


def test_a_kept_load_error_does_not_keep_the_files_memory(tmp_path: Path) -> None:
    """The traceback of a failed load held the file's buffer and the indexes built for it
    (~35 MB per kept error at 600k entities)."""
    source = build(n=400_000)
    snap = source.snapshot()
    pos = next(s for s in snap.stores if s.name == schema_of(Pos).name)
    hostile = pos.entities.copy()
    hostile[-1] = hostile[0]  # an entity twice: found after the read, by the key check
    bad = tmp_path / "bad.sav"
    stores = tuple(dataclasses.replace(s, entities=hostile) if s is pos else s
                   for s in snap.stores)
    dataclasses.replace(snap, stores=stores).save(bad)
    size = bad.stat().st_size
    world = fresh()
    kept = []
    tracemalloc.start()
    try:
        for attempt in range(5):
            if attempt == 1:  # (the world's pools hold the first attempt's memory)
                before = tracemalloc.get_traced_memory()[0]
            with pytest.raises(SaveFileError, match="appears twice") as info:
                world.load(bad)
            kept.append(info.value)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < size / 4, (grown, size)  # each kept error held a file's worth before


def test_trim_keeps_one_idle_buffer_per_request_and_every_buffer_in_use() -> None:
    pool = BufferPool(keep=50)
    mb = BufferPool.MIN_BYTES
    taken = [pool.take(2 * mb) for _ in range(3)] + [pool.take(4 * mb) for _ in range(2)]
    held = taken[0]  # still in use
    del taken
    pool.trim([4 * mb, 2 * mb, 2 * mb])
    sizes = sorted(b.nbytes for b in pool._buffers)
    assert sizes == [2 * mb, 2 * mb, 2 * mb, 4 * mb]  # the held one, two idle 2s, one 4
    assert idle_bytes(pool) == 8 * mb
    pool.trim([])
    assert [b.nbytes for b in pool._buffers] == [2 * mb] and held.nbytes == 2 * mb
    del held
    pool.trim([3 * mb])  # a 2 MB buffer cannot serve 3 MB
    assert pool._buffers == []
