"""In-memory snapshots: exact restore, immutability, sharing of unchanged parts, events."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ecs_engine import NULL, Entity, RestoreEvent, SaveFileError, Snapshot, World, component, field
from ecs_engine.entity import key_generation, key_slot
from tests.world_state import check_invariants, world_state


@component
class Pos:
    x: np.float64 = 0.0
    y: np.float64 = 0.0


@component
class Vel:
    dx: np.float32 = 0.0
    dy: np.float32 = 0.0


@component
class Target:
    entity: Entity = NULL


@component
class Inventory:
    items: np.ndarray = field(np.uint16, shape=4)
    count: np.uint8 = 0


@component
class Frozen: ...


def populated(n: int = 20, seed: int = 7) -> tuple[World, np.ndarray]:
    """A world with references, holes in the slot table, a subarray field, a tag, a group."""
    world = World(seed=seed)
    keys = world.spawn_batch(Pos(x=np.arange(n, dtype=np.float64), y=1.0), Vel(dx=2.0),
                             count=n)
    for i in range(0, n, 3):
        world.add(keys[i], Target(entity=keys[(i + 1) % n]))
    for i in range(0, n, 4):
        world.add(keys[i], Inventory(items=[i, i + 1, i + 2, i + 3], count=4))
    world.add(keys[1], Frozen())
    world.despawn_batch(keys[5:8])
    with world.query(Pos, Vel) as q:  # auto-creates an owning group
        q[Pos]["y"] += q[Vel]["dx"]
    world.resources["score"] = 12
    world.resources["names"] = ["a", "b"]
    world.rng.random(3)
    world.tick = 5
    return world, keys


def test_restore_brings_back_every_part_of_the_state() -> None:
    world, keys = populated()
    before = world_state(world)
    snap = world.snapshot()
    world.despawn_batch(keys[10:15])
    world.spawn_batch(Pos(), Target(entity=keys[0]), count=7)
    with world.query(Pos) as q:
        q[Pos]["x"] = -1
    world.remove(keys[1], Frozen)
    world.resources["score"] = 99
    world.resources["names"].append("c")
    world.rng.random(10)
    world.tick = 50
    assert world_state(world) != before
    world.restore(snap)
    assert world_state(world) == before
    check_invariants(world)


def test_snapshot_can_be_restored_many_times_and_several_held_at_once() -> None:
    world, keys = populated()
    snaps, states = [], []
    for step in range(4):
        snaps.append(world.snapshot())
        states.append(world_state(world))
        world.spawn(Pos(x=step))
        world.despawn(keys[step * 2 + 8])
        world.rng.random()
    for i in [2, 0, 3, 0, 1, 1, 3]:
        world.restore(snaps[i])
        assert world_state(world) == states[i]
        check_invariants(world)
        world.spawn(Vel())  # diverge again before the next restore
        world.rng.integers(10)


def test_keys_and_references_are_valid_after_restore() -> None:
    world, keys = populated()
    snap = world.snapshot()
    world.despawn_batch(keys[:4])
    assert not world.is_alive(keys[0])
    world.restore(snap)
    ref = int(world.get(keys[0], Target)["entity"])
    assert ref == keys[1] and world.is_alive(ref)
    assert world.get(ref, Pos)["x"] == 1.0
    assert list(world.get(keys[4], Inventory)["items"]) == [4, 5, 6, 7]
    assert world.has(keys[1], Frozen)


def test_stale_keys_stay_stale_and_the_next_spawn_matches() -> None:
    world, keys = populated()
    stale = keys[6]
    snap = world.snapshot()
    expected = [world.spawn(Pos()) for _ in range(4)]  # reuses freed slots 7, 6, 5, then new
    assert key_slot(expected[0]) == key_slot(keys[7])
    assert key_generation(expected[0]) == key_generation(keys[7]) + 1
    world.restore(snap)
    assert not world.is_alive(stale)
    with pytest.raises(KeyError, match="despawned"):
        world.get(stale, Pos)
    assert [world.spawn(Pos()) for _ in range(4)] == expected


def test_snapshot_arrays_are_read_only_and_unaffected_by_later_changes() -> None:
    world, keys = populated()
    snap = world.snapshot()
    x_before = snap.store("Pos").data["x"].copy()
    for arr in snap.arrays():
        assert not arr.flags.writeable
        if arr.size:
            with pytest.raises(ValueError, match="read-only"):
                arr.reshape(-1)[:1] = arr.reshape(-1)[:1]
    world.resources["names"].append("z")  # resources are deep-copied
    with world.query(Pos) as q:
        q[Pos]["x"] += 100
    assert np.array_equal(snap.store("Pos").data["x"], x_before)
    assert snap.resources["names"] == ["a", "b"]
    world.restore(snap)
    world.resources["names"].append("y")  # ... on restore too
    assert snap.resources["names"] == ["a", "b"]


def test_unchanged_stores_and_slot_table_are_shared_between_snapshots() -> None:
    world, keys = populated()
    first = world.snapshot()
    with world.query(Pos, readonly=(Pos,)) as q:  # read-only: no version bump
        assert len(q)
    second = world.snapshot()
    for a, b in zip(first.stores, second.stores, strict=True):
        assert a.data is b.data and a.entities is b.entities
    assert first.slots is second.slots
    with world.query(Vel) as q:
        q[Vel]["dx"] += 1
    third = world.snapshot()
    assert third.store("Vel").data is not second.store("Vel").data
    assert third.store("Vel").entities is second.store("Vel").entities  # layout unchanged
    assert third.store("Pos").data is second.store("Pos").data
    assert third.slots is second.slots
    world.spawn(Frozen())
    fourth = world.snapshot()
    assert fourth.slots is not third.slots
    assert fourth.store("Frozen").entities is not third.store("Frozen").entities
    assert fourth.store("Pos").data is third.store("Pos").data


def test_sharing_continues_from_a_restored_snapshot() -> None:
    world, keys = populated()
    first = world.snapshot()
    with world.query(Vel) as q:
        q[Vel]["dx"] += 1
    world.restore(first)
    again = world.snapshot()
    assert again.store("Vel").data is first.store("Vel").data
    assert again.slots is first.slots


def test_restore_copies_only_what_differs_but_always_gets_it_right() -> None:
    world, keys = populated()
    snap = world.snapshot()
    pos_data = world.store(Pos).data
    with world.query(Vel) as q:
        q[Vel]["dx"] = 5
    world.restore(snap)
    assert world.store(Pos).data is pos_data  # untouched store kept its buffer
    assert np.all(world.store(Vel).data[: world.count(Vel)]["dx"] == 2.0)


def test_store_created_after_the_snapshot_is_emptied_by_restore() -> None:
    @component
    class Late:
        v: np.int32 = 0

    world, keys = populated()
    snap = world.snapshot()
    world.add(keys[0], Late(v=3))
    world.restore(snap)
    assert world.count(Late) == 0 and not world.has(keys[0], Late)
    check_invariants(world)


def test_groups_come_back_and_queries_stay_aligned() -> None:
    world, keys = populated()
    assert len(world._groups) == 1
    snap = world.snapshot()
    for g in world._groups:
        g.disband()
    world._groups = []
    world.group(Pos, Target)
    world.restore(snap)
    assert [tuple(s.schema.name for s in g.stores) for g in world._groups] == [("Pos", "Vel")]
    with world.query(Pos, Vel) as q:
        assert q.aligned
        assert np.array_equal(q[Pos]["y"], 1.0 + q[Vel]["dx"])
    world.add(world.spawn(Pos()), Vel(dx=1))  # group keeps tracking after restore
    check_invariants(world)


def test_rng_draws_repeat_after_restore() -> None:
    world, _ = populated()
    snap = world.snapshot()
    first = world.rng.random(5)
    world.restore(snap)
    assert np.array_equal(world.rng.random(5), first)


def test_rng_of_another_bit_generator_type_is_restored() -> None:
    world, _ = populated()
    world.rng = np.random.Generator(np.random.MT19937(3))
    snap = world.snapshot()
    draws = world.rng.random(3)
    world.rng = np.random.default_rng(1)  # a PCG64 now
    rng_before = world.rng
    world.restore(snap)
    assert type(world.rng.bit_generator).__name__ == "MT19937"
    assert world.rng is not rng_before
    assert np.array_equal(world.rng.random(3), draws)


def test_restore_event_reports_source_tick_and_snapshot() -> None:
    world, _ = populated()
    events: list[RestoreEvent] = []
    world.on_restore(lambda w, e: events.append(e))
    snap = world.snapshot()
    world.tick = 42
    world.restore(snap)
    assert len(events) == 1
    assert events[0].source == "memory" and events[0].previous_tick == 42
    assert events[0].snapshot is snap and world.tick == 5


def test_restore_event_source_is_file_after_load(tmp_path) -> None:
    world, _ = populated()
    seen: list[tuple[str, int]] = []
    world.on_restore(lambda w, e: seen.append((e.source, w.count(Pos))))
    world.save(tmp_path / "s.sav")
    world.spawn(Pos())
    world.load(tmp_path / "s.sav")
    assert seen == [("file", 17)]


def test_restore_callback_sees_the_restored_state() -> None:
    world, keys = populated()
    snap = world.snapshot()
    world.despawn(keys[0])
    alive: list[bool] = []
    world.on_restore(lambda w, e: alive.append(w.is_alive(keys[0])))
    world.restore(snap)
    assert alive == [True]


def test_cannot_snapshot_or_restore_inside_a_query() -> None:
    world, _ = populated()
    snap = world.snapshot()
    with world.query(Pos) as q:
        with pytest.raises(RuntimeError, match="query is open"):
            world.snapshot()
        with pytest.raises(RuntimeError, match="query is open"):
            world.restore(snap)
        assert len(q) == 17


def test_snapshot_of_one_world_restores_into_another() -> None:
    world, keys = populated()
    snap = world.snapshot()
    other = World()
    other.spawn_batch(Vel(), count=50)
    other.restore(snap)
    assert world_state(other) == world_state(world)
    check_invariants(other)
    assert other.spawn(Pos()) == world.spawn(Pos())


def test_foreign_snapshot_with_inconsistent_slot_table_is_rejected() -> None:
    world, keys = populated()
    snap = world.snapshot()
    other = World()
    other.spawn(Pos(x=1))
    before = world_state(other)
    bad_free = np.append(snap.slots.free, snap.slots.free[:1])
    broken = Snapshot(snap.stores, type(snap.slots)(snap.slots.generations, snap.slots.alive,
                                                     bad_free),
                      snap.groups, snap.resources, snap.tick, snap.rng_state)
    with pytest.raises(SaveFileError, match="free list"):
        other.restore(broken)
    assert world_state(other) == before


def test_empty_world_round_trips() -> None:
    world = World(seed=1)
    snap = world.snapshot()
    world.spawn(Pos())
    world.restore(snap)
    assert len(world) == 0 and world.count(Pos) == 0
    assert snap.entity_count == 0 and snap.nbytes == 0


def test_snapshot_reports_entity_count_and_bytes() -> None:
    world, _ = populated()
    snap = world.snapshot()
    assert snap.entity_count == len(world) == 17
    assert snap.nbytes == sum(a.nbytes for a in snap.arrays())
    assert snap.store("Pos").n == 17
    with pytest.raises(KeyError, match="no component 'Nope'"):
        snap.store("Nope")


def test_big_stores_share_unchanged_chunks_and_restore_them_right() -> None:
    from ecs_engine.storage import CHUNK_ROWS

    @component(name="ChunkPos")
    class ChunkPos:
        x: np.float64 = 0.0

    @component(name="ChunkVel")
    class ChunkVel:
        x: np.float64 = 1.0

    world = World(seed=1)
    movers = world.spawn_batch(ChunkPos(x=np.arange(1000.0)), ChunkVel())
    statics = world.spawn_batch(ChunkPos(x=np.arange(3 * CHUNK_ROWS, dtype=np.float64)))
    world.group(ChunkPos, ChunkVel)  # movers are the first rows of ChunkPos

    def tick() -> None:
        with world.query(ChunkPos, ChunkVel, readonly=(ChunkVel,)) as q:
            q[ChunkPos]["x"] += q[ChunkVel]["x"]

    first = world.snapshot()
    state_first = world_state(world)
    tick()
    second = world.snapshot()
    state_second = world_state(world)
    a, b = first.store("ChunkPos"), second.store("ChunkPos")
    assert len(a.chunks) == len(b.chunks) == 4
    assert a.chunks[0] is not b.chunks[0]  # the movers' chunk was copied again
    assert all(x is y for x, y in zip(a.chunks[1:], b.chunks[1:], strict=True))  # rest shared
    # A write to one entity moves only the chunk its row is in (the last one here).
    world.get(statics[-1], ChunkPos)["x"] = -5.0
    third = world.snapshot().store("ChunkPos")
    assert third.chunks[0] is b.chunks[0] and third.chunks[1] is b.chunks[1]
    assert third.chunks[3] is not b.chunks[3]
    world.restore(first)
    assert world_state(world) == state_first
    world.restore(second)
    assert world_state(world) == state_second
    check_invariants(world)
    # A churned layout (every row may move) copies every chunk back.
    world.despawn_batch(movers[:10])
    world.restore(first)
    assert world_state(world) == state_first
    loaded = World()
    loaded.register(ChunkPos, ChunkVel)
    loaded.restore(Snapshot.from_bytes(second.to_bytes()))
    assert world_state(loaded)["stores"] == state_second["stores"]


def test_failing_on_restore_callbacks_all_run_then_one_error_says_the_restore_succeeded(
    tmp_path: pytest.TempPathFactory,
) -> None:
    from pathlib import Path

    from ecs_engine import History, RestoreCallbackError

    world = World(seed=1)
    world.spawn_batch(Pos(x=np.arange(4.0)), count=4)
    snap = world.snapshot()
    ran: list[str] = []

    def first(w: World, e: RestoreEvent) -> None:
        ran.append("first")
        raise ValueError("grid rebuild failed")

    def second(w: World, e: RestoreEvent) -> None:
        ran.append("second")

    def third(w: World, e: RestoreEvent) -> None:
        ran.append("third")
        raise KeyError("sprite atlas")

    for cb in (first, second, third):
        world.on_restore(cb)
    world.spawn(Pos())
    world.tick = 9
    with pytest.raises(RestoreCallbackError, match=r"the restore succeeded, but 2 on_restore "
                       r"callback\(s\) failed; first .*first: ValueError: grid rebuild "
                       r"failed \(and 1 more\)") as info:
        world.restore(snap)
    assert ran == ["first", "second", "third"]
    assert [type(exc) for _, exc in info.value.errors] == [ValueError, KeyError]
    assert isinstance(info.value.__cause__, ValueError)
    assert world.tick == 0 and len(world) == 4  # restored
    assert world.snapshot().slots is snap.slots  # and known as restored from snap

    path = Path(str(tmp_path)) / "s.sav"
    snap.save(path)
    world.spawn(Pos())
    ran.clear()
    with pytest.raises(RestoreCallbackError):
        world.load(path)
    assert ran == ["first", "second", "third"] and len(world) == 4

    history = History()
    history.record(world)
    world.tick = 5
    with pytest.raises(RestoreCallbackError):
        history.rewind(world)
    assert world.tick == 0 and len(history) == 1
    assert history.rewind(world) is None  # the rewind counted: nothing older is left


def test_load_rows_replaces_every_row_and_adopts_the_index() -> None:
    world = World()
    keys = world.spawn_batch(Pos(x=np.arange(3.0)), count=3)
    store = world.store(Pos)
    rows = np.zeros(40, store.schema.dtype)  # more rows than the store holds: it grows
    rows["x"] = np.arange(40.0)
    new_keys = np.arange(40, dtype=np.uint64) | (np.uint64(1) << np.uint64(32))
    sparse = np.full(8, -1, np.int32)  # shorter than the store's index: extended with -1
    sparse[:8] = np.arange(8)
    before = store.layout_version
    store.load_rows(rows, new_keys, sparse)
    assert store.n == 40 and store.capacity >= 40 and store.layout_version != before
    assert np.array_equal(store.data["x"][:40], np.arange(40.0))
    assert np.array_equal(store.entities[:40], new_keys)
    assert len(store.sparse) >= len(sparse) and np.all(store.sparse[8:] == -1)
    assert np.array_equal(store.sparse[:8], np.arange(8))
    del keys


def test_loading_a_file_snapshot_builds_sparse_indexes_that_agree_with_rows() -> None:
    world = World(seed=3)
    keys = world.spawn_batch(Pos(x=np.arange(50.0)), Vel(), count=50)
    world.despawn_batch(keys[::7])
    world.add_batch(keys[1::7], Vel())  # not all: Pos and Vel keys differ in order
    other = World()
    other.register(Pos, Vel)
    other.spawn_batch(Pos(), count=200)  # a larger slot table than the file's
    other.restore(Snapshot.from_bytes(world.snapshot().to_bytes()), source="file")
    check_invariants(other)
    assert world_state(other) == world_state(world)


@pytest.mark.parametrize("seed", range(8))
def test_restore_after_churn_keeps_sparse_indexes_exact(seed: int) -> None:
    """Restoring a snapshot after despawns, respawns (recycled slots), adds and removes
    of a sparse component: the index of every store agrees with its rows again."""
    rng = np.random.default_rng(seed)
    world = World(seed=seed)
    keys = world.spawn_batch(Pos(x=np.arange(400.0)), count=400)
    world.add_batch(keys[rng.choice(400, 30, replace=False)], Vel(dx=1.0))  # sparse store
    snap = world.snapshot()
    expected = world_state(world)
    for _ in range(3):
        alive = keys[[world.is_alive(k) for k in keys]]
        world.despawn_batch(rng.choice(alive, 20, replace=False))
        fresh = world.spawn_batch(Pos(), Vel(dx=2.0), count=15)
        keys = np.concatenate([keys, fresh])
        alive = keys[[world.is_alive(k) for k in keys]]
        for k in rng.choice(alive, 10, replace=False):
            if world.has(k, Vel):
                world.remove(k, Vel)
            else:
                world.add(k, Vel(dx=3.0))
        world.restore(snap)
        check_invariants(world)
        assert world_state(world) == expected


def _churn_and_write(world: World, keys: np.ndarray, rng: np.random.Generator) -> None:
    """Despawn a few, spawn as many (recycled slots), write new values everywhere."""
    alive = keys[[world.is_alive(k) for k in keys]]
    world.despawn_batch(rng.choice(alive, 7, replace=False))
    world.spawn_batch(Pos(x=-1.0), Inventory(count=9), count=7)
    for ctype in (Pos, Inventory, Target):
        with world.query(ctype) as q:
            q[ctype].view(np.uint8)[:] += np.uint8(3)  # every byte of every row


def test_whole_store_copies_restore_small_big_and_odd_sized_rows_after_churn() -> None:
    """A store copied whole by one snapshot (``rows``; small stores always, big ones when
    no chunk is shared) goes back in one copy; a big store with shared chunks goes back
    chunk by chunk. Both after churn: every key valid, also keys inside components."""
    from ecs_engine.storage import CHUNK_ROWS

    rng = np.random.default_rng(3)
    world = World(seed=3)
    n = 2 * CHUNK_ROWS + 100  # Pos: three chunks; Inventory (9-byte rows): one
    keys = world.spawn_batch(Pos(x=np.arange(n, dtype=np.float64)), count=n)
    world.add_batch(keys[:50], Inventory(count=2))
    world.add_batch(keys[:: CHUNK_ROWS // 4], Target(entity=keys[1]))
    first = world.snapshot()
    state_first = world_state(world)
    for name in ("Pos", "Inventory", "Target"):
        s = first.store(name)
        assert s.rows is not None and len(s.rows) == s.n
        assert all(np.shares_memory(c, s.rows) for c in s.chunks)
    assert len(first.store("Pos").chunks) == 3
    world.get(keys[-1], Pos)["x"] = -3.0  # moves only the last chunk of Pos
    second = world.snapshot()
    state_second = world_state(world)
    mixed = second.store("Pos")
    assert mixed.rows is None and mixed.chunks[0] is first.store("Pos").chunks[0]
    assert second.store("Inventory") is not None
    for snap, state in ((first, state_first), (second, state_second), (first, state_first)):
        _churn_and_write(world, keys, rng)
        world.restore(snap)
        check_invariants(world)
        assert world_state(world) == state
        with world.query(Target) as q:
            assert all(world.is_alive(k) for k in q[Target]["entity"])
    world.restore(second)  # only the last chunk of Pos differs: copied alone
    assert world_state(world) == state_second
    world.restore(first)
    assert world_state(world) == state_first


def test_a_kept_view_is_caught_by_the_one_copy_paths() -> None:
    """A view kept past its block writes without moving versions: a snapshot copies its
    store anyway and a restore copies it back, also on the whole-store paths."""
    world, _ = populated()
    store = world.store(Pos)
    xs = store.live()["x"]  # kept
    snap = world.snapshot()
    saved = xs.copy()
    xs[:] = -7.0  # untracked write after the snapshot
    world.restore(snap)
    assert np.array_equal(xs, saved) and store.views_outstanding()
    xs[0] = 99.0  # untracked write after the restore: the next snapshot must see it
    assert world.snapshot().store("Pos").data["x"][0] == 99.0
    del xs
    world.restore(snap)  # no view: the store now claims the snapshot's version ...
    assert np.array_equal(store.data["x"][: store.n], saved)
    ys = store.live()["x"]  # ... until a view taken now writes behind its back
    ys[:] = 5.0
    world.restore(snap)
    assert np.array_equal(ys, saved)


@pytest.mark.parametrize("entities", [400, 20_000])
def test_sparse_stores_keep_their_index_in_small_worlds_and_rebuild_it_in_big_ones(
        entities: int) -> None:
    """A store with few rows keeps its slot index in snapshots of small worlds (one copy
    back) and rebuilds it from its keys in big ones; both agree with the rows after
    churn."""
    from ecs_engine.snapshot import SMALL_INDEX_SLOTS

    rng = np.random.default_rng(entities)
    world = World(seed=1)
    keys = world.spawn_batch(Pos(x=np.arange(float(entities))), count=entities)
    world.add_batch(keys[rng.choice(entities, 30, replace=False)], Vel(dx=1.0))
    snap = world.snapshot()
    expected = world_state(world)
    assert (snap.store("Vel").sparse is not None) == (entities <= SMALL_INDEX_SLOTS)
    for _ in range(3):  # every key of ``keys`` is alive again after each restore
        world.despawn_batch(rng.choice(keys, 20, replace=False))
        world.spawn_batch(Pos(), Vel(dx=2.0), count=25)  # recycled slots
        world.restore(snap)
        check_invariants(world)
        assert world_state(world) == expected


def test_snapshots_of_the_fast_constructor_equal_the_dataclass_ones() -> None:
    """take_snapshot fills its frozen dataclasses' fields directly: every field is set,
    and each behaves as one made by the dataclass (replace, fields, immutability)."""
    import dataclasses

    world, _ = populated()
    snap = world.snapshot()
    made: list[Any] = [snap, snap.slots, *snap.stores]
    for one in made:
        again = dataclasses.replace(one)
        assert {f.name: getattr(again, f.name) for f in dataclasses.fields(again)} == vars(one)
        with pytest.raises(dataclasses.FrozenInstanceError):
            one.tick = 1
