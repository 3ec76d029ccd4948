"""A failed ``World._all_or_nothing`` block (a level load) drops the stores it created.
A query plan resolved inside the block kept those stores for good, so the same query
afterwards read the dropped store: the block's undone entity, never the new ones."""

import numpy as np
import pytest

from ecs_engine import World, component


@component
class Fresh:  # no store before the block
    v: np.int64 = 0


def test_a_query_first_resolved_in_an_undone_block_sees_the_new_store() -> None:
    world = World()
    with pytest.raises(RuntimeError), world._all_or_nothing():
        world.spawn(Fresh(v=1))
        with world.query(Fresh) as q:
            assert q[Fresh]["v"].tolist() == [1]
        raise RuntimeError("the level failed")
    keys = [int(world.spawn(Fresh(v=5 + i))) for i in range(3)]
    with world.query(Fresh) as q:
        assert q.entities.tolist() == keys
        assert q[Fresh]["v"].tolist() == [5, 6, 7]


@component
class Base:
    v: np.int64 = 0


@component
class Marker:  # no store before the block; only excluded by the query below
    v: np.int64 = 0


def test_a_query_excluding_a_store_an_undone_block_dropped_sees_its_entities_again() -> None:
    """Only the dropped store changed: the kept stores' rows are back where they were, so
    no store moves the layout clock on the way back. A plan resolved inside the block
    (its entity then excluded) must not keep trusting those rows: dropping a store the
    plan excludes changes its matches (found by the layout-clock review)."""
    world = World()
    key = int(world.spawn(Base(v=1)))
    with world.query(Base, without=(Marker,)) as q:
        assert q.entities.tolist() == [key]
    with pytest.raises(RuntimeError), world._all_or_nothing():
        world.add(key, Marker())
        with world.query(Base, without=(Marker,)) as q:
            assert q.entities.tolist() == []
        raise RuntimeError("the level failed")
    assert not world.has(key, Marker)
    with world.query(Base, without=(Marker,)) as q:
        assert q.entities.tolist() == [key]
        assert q[Base]["v"].tolist() == [1]


@component
class Kept:  # no store before the block
    v: np.int64 = 0


def test_a_query_kept_from_an_undone_block_sees_the_new_store() -> None:
    """A caller's query kept across the failed block: its plan (dropped from the world's
    plans) held the dropped store and read it for good, the undone entity and never the
    new ones (found by the query-reuse review: kept queries share the world's plans)."""
    world = World()
    with pytest.raises(RuntimeError), world._all_or_nothing():
        world.spawn(Kept(v=1))
        kept = world.query(Kept)
        with kept as q:
            assert q[Kept]["v"].tolist() == [1]
        raise RuntimeError("the level failed")
    keys = [int(world.spawn(Kept(v=5 + i))) for i in range(3)]
    with kept as q:
        assert q.entities.tolist() == keys
        assert q[Kept]["v"].tolist() == [5, 6, 7]
    with world.query(Kept) as q:
        assert q.entities.tolist() == keys
