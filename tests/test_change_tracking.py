"""No write escapes change tracking: arrays a query hands out are dead after its block,
views derived inside the block that outlive it are caught by the next snapshot, save or
restore, and records hand out copies of subarray fields."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ecs_engine import History, World, component, field
from ecs_engine.savefile import read_file


@component
class Pos:
    x: np.float64 = 0.0
    y: np.float64 = 0.0


@component
class Vel:
    dx: np.float64 = 0.0


@component
class Bag:
    kinds: np.ndarray = field(np.uint8, shape=4)


def world_with(n: int = 10) -> World:
    world = World(seed=1)
    world.spawn_batch(Pos(x=np.arange(n, dtype=np.float64)), Vel(dx=1.0), count=n)
    world.spawn_batch(Pos(x=-1.0), count=3)  # Pos without Vel: (Pos, Vel) queries gather
    return world


@pytest.mark.parametrize("types", [(Pos,), (Pos, Vel)])
def test_columns_and_entities_kept_past_the_block_are_read_only(types: tuple[type, ...]) -> None:
    world = world_with()
    with world.query(*types) as q:
        kept = {t: q[t] for t in types}
        keys = q.entities
        assert kept[Pos].flags.writeable
    for arr in kept.values():
        assert arr.dtype.names is not None
        with pytest.raises(ValueError, match="read-only"):
            arr[arr.dtype.names[0]][0] = 99.0
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = arr[1]
    with pytest.raises(ValueError, match="read-only"):
        keys[0] = 0
    with pytest.raises(RuntimeError, match="with-block"):
        q[Pos]


@pytest.mark.parametrize("types", [(Pos,), (Pos, Vel)])
def test_a_kept_derived_view_written_after_a_snapshot_is_seen_by_save_and_restore(
    types: tuple[type, ...], tmp_path: Path
) -> None:
    """The review's case: a view kept past the block, written after a snapshot. Later
    snapshots must not share the stale chunk, save must write the new values and restore
    must undo the write."""
    world = world_with()
    world.group(Pos, Vel) if len(types) == 2 else None
    with world.query(*types) as q:
        xs = q[Pos]["x"]  # derived inside the block: numpy keeps it writable
    before = world.snapshot()
    xs[:] = 1234.0  # bypasses every tracked path
    after = world.snapshot()
    assert np.all(after.store("Pos").data["x"][: len(xs)] == 1234.0)
    assert not np.any(before.store("Pos").data["x"] == 1234.0)
    world.save(tmp_path / "s.sav")
    assert np.all(read_file(tmp_path / "s.sav").store("Pos").data["x"][: len(xs)] == 1234.0)
    world.restore(before)
    assert not np.any(world.store(Pos).live()["x"] == 1234.0)
    xs[:] = 77.0
    world.restore(before)  # restoring the same snapshot again still undoes the write
    assert not np.any(world.store(Pos).live()["x"] == 77.0)
    assert np.array_equal(world.store(Pos).live()["x"], before.store("Pos").data["x"])


def test_a_kept_view_makes_rewind_restore_then_progress() -> None:
    world = world_with()
    history = History()
    history.record(world)
    world.tick += 1
    history.record(world)
    xs = world.store(Pos).live()["x"]  # an engine-extension view, kept
    xs[0] = 555.0  # untracked write after the newest snapshot
    snap = history.rewind(world)  # the live state differs from the newest: restore it
    assert snap is history.latest and world.tick == 1 and xs[0] == 0.0
    assert history.rewind(world) is history.latest and world.tick == 0  # then further back
    assert history.rewind(world) is None


def test_once_views_are_gone_unchanged_chunks_are_shared_again() -> None:
    world = world_with()
    with world.query(Pos) as q:
        q[Pos]["x"] += 1.0
    first = world.snapshot()
    second = world.snapshot()
    assert second.store("Pos").chunks[0] is first.store("Pos").chunks[0]
    view = world.store(Pos).live()
    third = world.snapshot()  # a view exists: copied, not shared
    assert third.store("Pos").chunks[0] is not second.store("Pos").chunks[0]
    del view
    fourth = world.snapshot()  # the view may have written after third: copied once more
    assert fourth.store("Pos").chunks[0] is not third.store("Pos").chunks[0]
    fifth = world.snapshot()
    assert fifth.store("Pos").chunks[0] is fourth.store("Pos").chunks[0]


def test_record_subarrays_are_read_only_copies_and_element_writes_are_tracked() -> None:
    world = World()
    e = world.spawn(Bag(kinds=[1, 2, 3, 4]))
    rec = world.get(e, Bag)
    kinds = rec["kinds"]
    assert kinds.tolist() == [1, 2, 3, 4] and not kinds.flags.writeable
    assert not np.shares_memory(kinds, world.store(Bag).data)
    snap = world.snapshot()
    rec["kinds", 2] = 9
    rec["kinds", 0:2] = [7, 8]
    assert rec["kinds"].tolist() == [7, 8, 9, 4] and rec["kinds", 2] == 9
    assert kinds.tolist() == [1, 2, 3, 4]  # the earlier copy is a copy
    assert world.snapshot().store("Bag").data["kinds"][0].tolist() == [7, 8, 9, 4]
    world.restore(snap)
    assert rec["kinds"].tolist() == [1, 2, 3, 4]
    with pytest.raises(ValueError, match=r"Bag\.kinds: value 256 out of range for uint8"):
        rec["kinds", 1] = 256
    with pytest.raises(ValueError, match=r"Bag\.kinds: .*whole numbers"):
        rec["kinds", 1] = 1.5
    with pytest.raises(KeyError, match="not a subarray field"):
        world.get(world.spawn(Pos()), Pos)["x", 0] = 1.0
    assert rec["kinds"].tolist() == [1, 2, 3, 4]
    other = world.spawn(Bag(kinds=[5, 5, 5, 5]))
    world.despawn(e)  # rows move: a view would now show the other entity's row
    assert kinds.tolist() == [1, 2, 3, 4] and world.get(other, Bag)["kinds"].tolist() == [5] * 4
