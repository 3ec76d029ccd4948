"""Snapshot memory: one buffer per snapshot, recycled only when nothing references it.

Snapshots copy everything that moved into one allocation, and a world reuses the buffer
of a snapshot that is gone (evicted from a History, replaced by the next quicksave). Reuse
must never reach memory that anything still sees: a snapshot held elsewhere, a view of one
of its arrays, a memoryview of its bytes.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from ecs_engine import History, Snapshot, World, component
from ecs_engine.memcopy import BufferPool, pack_copies, root_of

N = 70_000  # rows: with keys and indexes over 1 MB per snapshot, so buffers are pooled


@component
class Pos:
    x: np.float64 = 0.0
    y: np.float64 = 0.0


@component
class Tag:
    level: np.int32 = 0


def make_world() -> World:
    world = World(seed=1)
    world.spawn_batch(Pos(x=np.arange(N, dtype=np.float64), y=np.zeros(N)), count=N)
    world.spawn_batch(Tag(level=3), count=N // 10)
    return world


def step(world: World, k: int) -> None:
    """Change every value and the layout, so a snapshot copies every array."""
    with world.query(Pos) as q:
        q[Pos]["x"] += 1
        q[Pos]["y"] = k
    world.despawn(world.entities()[k])
    world.spawn(Pos(x=-k))


def address(snap: Snapshot) -> int:
    return int(root_of(snap.store("Pos").chunks[0]).__array_interface__["data"][0])


def test_chunks_keys_and_slot_table_share_one_buffer() -> None:
    world = make_world()
    snap = world.snapshot()
    roots = {id(root_of(a)) for a in snap.arrays() if a.nbytes}  # empty ones own nothing
    assert len(roots) == 1
    assert all(not a.flags.writeable for a in snap.arrays())
    assert root_of(snap.arrays()[0]).nbytes >= snap.nbytes


def test_history_reuses_evicted_buffers() -> None:
    world = make_world()
    history = History(capacity=2)
    seen = []
    for k in range(6):
        step(world, k)
        seen.append(address(history.record(world)))
    # a ring of 2 evicts one snapshot per record: the new one copies into its memory
    assert len(set(seen[2:])) <= 3 and len(set(seen)) < len(seen)
    history.rewind(world)
    history.rewind(world)


def test_a_snapshot_held_elsewhere_is_never_overwritten() -> None:
    world = make_world()
    history = History(capacity=2)
    step(world, 0)
    kept = history.record(world)
    expected = {s.name: (s.data.copy(), s.entities.copy()) for s in kept.stores}
    slots = (kept.slots.generations.copy(), kept.slots.alive.copy(), kept.slots.free.copy())
    for k in range(1, 8):  # evicts `kept` from the history several times over
        step(world, k)
        history.record(world)
        gc.collect()
    for s in kept.stores:
        data, entities = expected[s.name]
        assert np.array_equal(s.data, data) and np.array_equal(s.entities, entities)
    assert all(np.array_equal(a, b) for a, b in zip(
        (kept.slots.generations, kept.slots.alive, kept.slots.free), slots, strict=True))
    world.restore(kept)
    assert np.array_equal(world.store(Pos).live(), expected["Pos"][0])


@pytest.mark.parametrize("hold", ["view", "memoryview", "bytes view"])
def test_a_view_of_a_dropped_snapshot_keeps_its_memory(hold: str) -> None:
    world = make_world()
    step(world, 0)
    snap = world.snapshot()
    chunk = snap.store("Pos").chunks[0]
    column = chunk["x"]
    held: object = {"view": column, "memoryview": chunk.data,
                    "bytes view": chunk.view(np.uint8)}[hold]
    before = column.copy()
    del snap, chunk, column
    for k in range(1, 6):  # quicksave rhythm: each snapshot replaces the previous one
        step(world, k)
        world.snapshot()
        gc.collect()
    if hold == "memoryview":
        got = np.frombuffer(held, dtype=world.store(Pos).schema.dtype)["x"]  # type: ignore[call-overload]
    elif hold == "bytes view":
        got = held.view(world.store(Pos).schema.dtype)["x"]  # type: ignore[attr-defined]
    else:
        got = held
    assert np.array_equal(got, before)


def test_quicksave_rhythm_alternates_two_buffers() -> None:
    world = make_world()
    snap = None
    seen = []
    for k in range(6):
        step(world, k)
        snap = world.snapshot()  # the previous one dies only after this one exists
        seen.append(address(snap))
    assert len(set(seen[1:])) <= 3
    assert snap is not None


def test_pool_limits_and_sizes() -> None:
    pool = BufferPool(keep=2)
    small = pool.take(1000)
    assert small.size == 1000 and pool.nbytes == 0  # small buffers are not pooled
    size = 2 * BufferPool.MIN_BYTES
    big = pool.take(size)
    address_of = big.__array_interface__["data"][0]
    assert pool.take(size).__array_interface__["data"][0] != address_of  # big is in use
    del big
    again = pool.take(size - 10)
    assert again.__array_interface__["data"][0] == address_of  # free again: reused
    assert again.size == size - 10
    del again
    assert pool.take(size // 4).base is None  # less than half of it: a new buffer
    for _ in range(5):
        pool.take(BufferPool.MIN_BYTES)
    assert len(pool._buffers) == 2
    pool.clear()
    assert pool.nbytes == 0


def test_pack_copies_copies_exactly() -> None:
    rng = np.random.default_rng(0)
    dtype = np.dtype([("a", "<f4"), ("b", "u1", (3,))])
    rows = np.zeros(1000, dtype)
    rows["a"] = rng.random(1000)
    rows["b"] = rng.integers(0, 255, (1000, 3))
    sources = [rows, np.arange(7, dtype=np.int64), np.zeros(0, np.uint32), rows[:0]]
    copies = pack_copies(sources)
    for src, out in zip(sources, copies, strict=True):
        assert out.dtype == src.dtype and out.shape == src.shape
        assert np.array_equal(out, src) and not np.shares_memory(out, src)
        assert not out.flags.writeable
        if out.nbytes:
            assert out.__array_interface__["data"][0] % 64 == 0
