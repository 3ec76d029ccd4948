"""An aligned plan whose rows are a prefix (all of its one store, or an owning group's
prefix) is reused by one check: the same key array, the same size, and for a group the
same group owning the first store. Each part of that check is needed: these tests fail
when one is dropped."""

from __future__ import annotations

import numpy as np

from ecs_engine import World, component


@component
class A:
    v: np.int64 = 0


@component
class B:
    v: np.int64 = 0


@component
class C:
    v: np.int64 = 0


def test_another_group_of_the_same_size_on_the_first_store_is_not_taken_for_it() -> None:
    """(A, B)'s plan was served by the (A, B) group's prefix; after a restore to before
    that group and a (A, C) group of the same size, A's prefix holds A and C's shared
    entities: the (A, B) query must resolve again, not reuse rows [0, size)."""
    world = World(auto_group=False)
    only_b = [int(world.spawn(A(v=i), B(v=10 + i))) for i in range(3)]
    for i in range(3):
        world.spawn(A(v=20 + i), C(v=30 + i))
    before = world.snapshot()
    world.group(A, B)
    with world.query(A, B) as q:
        assert q.aligned and sorted(q.entities.tolist()) == only_b
    world.restore(before)
    world.group(A, C)  # the same size, 3, in A's store
    assert world.store(A).group_size == 3
    with world.query(A, B) as q:
        assert sorted(q.entities.tolist()) == only_b
        assert sorted(q[B]["v"].tolist()) == [10, 11, 12]
        assert dict(zip(q.entities.tolist(), q[A]["v"].tolist(), strict=True)) == {
            k: i for i, k in enumerate(only_b)}


def test_a_store_that_shrank_and_grew_back_to_its_size_keeps_its_rows_right() -> None:
    """Same size, same key array, other entities: the rows [0, n) are views, so the kept
    plan shows the store's current keys and values."""
    world = World()
    keys = [int(world.spawn(A(v=i))) for i in range(4)]
    with world.query(A) as q:
        assert q.entities.tolist() == keys
    world.despawn(keys[1])
    new = int(world.spawn(A(v=99)))
    with world.query(A) as q:
        assert sorted(q.entities.tolist()) == sorted([keys[0], keys[2], keys[3], new])
        assert dict(zip(q.entities.tolist(), q[A]["v"].tolist(), strict=True))[new] == 99
    world.spawn_batch(A(v=np.arange(40)))  # past the capacity: a new key array
    with world.query(A) as q:
        assert len(q) == 44 and q[A]["v"].tolist()[-40:] == list(range(40))



def test_a_store_that_grew_into_a_new_key_array_and_shrank_back_resolves_again() -> None:
    """Same size, a new key array: the plan's keys were a view of the old one, which
    still holds the entities that were there before."""
    world = World()
    keys = [int(world.spawn(A(v=i))) for i in range(4)]
    with world.query(A) as q:
        assert q.entities.tolist() == keys
    store = world.store(A)
    old = store.entities
    more = world.spawn_batch(A(v=np.arange(100, 113)), count=13).tolist()  # past capacity
    assert store.entities is not old
    world.despawn_batch(keys[:3] + more[:10])  # back to 4 rows: 1 old key, 3 new ones
    with world.query(A) as q:
        assert sorted(q.entities.tolist()) == sorted(keys[3:] + more[10:])
        assert sorted(q[A]["v"].tolist()) == [3, 110, 111, 112]


def test_a_prefix_checked_after_another_stores_change_is_noted_for_the_clock() -> None:
    """A structural change elsewhere moves the world's layout clock; the first block of
    a prefix plan checks its prefix and notes the clock, so the blocks after it take the
    clock's one-comparison path (the C enter) instead of checking again each time."""
    world = World()
    world.spawn_batch(A(v=np.arange(4)), count=4)
    with world.query(A) as q:
        plan = q._plan
        assert q.entities.tolist() == world.entities().tolist()
    world.spawn(C(v=1))  # another store's rows: the clock moves, A's prefix stands
    assert plan._stamp != plan._clock.stamp
    with world.query(A) as q:
        assert len(q) == 4
    assert plan._stamp == plan._clock.stamp
    world.spawn(A(v=9))  # A's own rows: the prefix grows
    with world.query(A) as q:
        assert q[A]["v"].tolist() == [0, 1, 2, 3, 9]


def test_a_group_prefix_checked_after_another_stores_change_is_noted_for_the_clock() -> None:
    world = World()
    world.group(A, B)
    keys = world.spawn_batch(A(v=np.arange(3)), B(v=7), count=3).tolist()
    alone = world.spawn(A(v=50))  # A alone: outside the group's prefix
    with world.query(A, B) as q:
        plan = q._plan
        assert q.entities.tolist() == keys
    world.spawn(C(v=1))  # another store's rows: the clock moves, the prefix stands
    assert plan._stamp != plan._clock.stamp
    with world.query(A, B) as q:
        assert q.entities.tolist() == keys and q[A]["v"].tolist() == [0, 1, 2]
    assert plan._stamp == plan._clock.stamp
    world.add(alone, B(v=8))  # the A-only entity joins the group
    with world.query(A, B) as q:
        assert sorted(q[A]["v"].tolist()) == [0, 1, 2, 50]
    world.despawn(keys[0])  # the group shrinks
    with world.query(A, B) as q:
        assert sorted(q[A]["v"].tolist()) == [1, 2, 50]
