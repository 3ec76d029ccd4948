"""Rollback frames decide inline whether a store has views out (``_Frame._match``): the
count must be the store's own, which includes the flat pair ``Query.unstructured`` uses.
Counted without it, every store whose fields share one dtype looked viewed on every
frame: recorded in full and touched twice, so nothing was ever skipped or shared."""

import numpy as np

from ecs_engine import World, component
from ecs_engine.components import Position  # one dtype: has the flat views
from ecs_engine.rollback import Rollback


@component
class Mixed:
    hp: np.int16 = 0
    speed: np.float32 = 0.0


def test_an_unchanged_store_is_not_taken_for_a_viewed_one() -> None:
    world = World()
    world.spawn_batch(Position(x=np.arange(10.0)), Mixed(hp=1), count=10)
    rollback = Rollback(world, frames=4)
    store = world.store(Position)
    assert not store.views_outstanding()
    before = store.data_version
    for _ in range(6):  # no systems: nothing changes
        rollback.advance()
    assert store.data_version == before  # (a "viewed" store is touched on every record)


def test_a_kept_view_is_still_seen() -> None:
    """A view kept past its block (derived, so still writable) makes the record copy the
    store and move its version: writes through it are never taken for recorded rows."""
    world = World()
    keys = world.spawn_batch(Position(x=np.arange(4.0)), count=4)
    rollback = Rollback(world, frames=4)
    with world.query(Position) as q:
        kept = q.unstructured(Position)[:]  # writable: derived from the block's view
    store = world.store(Position)
    assert store.views_outstanding()
    before = store.data_version
    rollback.advance()
    assert store.data_version != before
    kept[0, 0] = 99.0  # written after frame 0 was recorded
    rollback.advance()
    rollback.restore(0)
    assert float(world.get(int(keys[0]), Position)["x"]) == 0.0
