"""Queries over part of an owning group, and queries excluding a grouped type, are served
from the group's prefix: they must return exactly the entities a plain model says, with
aligned columns, whatever mix of components the entities have."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


@component
class D:
    v: np.int64 = 0


TYPES = (A, B, C, D)
EXAMPLES = int(os.environ.get("DETERMINISM_EXAMPLES", "1000"))
subsets = st.lists(st.sampled_from(TYPES), min_size=1, max_size=4, unique=True)


@settings(max_examples=max(30, EXAMPLES // 5), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 15), max_size=40), subsets, st.lists(st.sampled_from(TYPES),
                                                                     max_size=2, unique=True))
def test_prefix_served_queries_match_the_model(masks: list[int], wanted: list[type],
                                               without: list[type]) -> None:
    world = World(auto_group=False)
    world.group(A, B, C)
    have: dict[int, set[type]] = {}
    for i, mask in enumerate(masks):
        types = [t for j, t in enumerate(TYPES) if mask >> j & 1]
        key = int(world.spawn(*(t(v=i) for t in types)))
        have[key] = set(types)
    without = [t for t in without if t not in wanted]
    expected = {k for k, ts in have.items() if set(wanted) <= ts and not ts & set(without)}
    with world.query(*wanted, without=without) as q:
        keys = [int(k) for k in q.entities]
        assert sorted(keys) == sorted(expected)
        for t in wanted:  # every column row belongs to the entity in that row
            values = q[t]["v"].tolist()
            assert values == [world.get(k, t)["v"] for k in keys]
            q[t]["v"] += 100  # writes reach the store
    for k in expected:
        for t in wanted:
            assert world.get(k, t)["v"] >= 100


def test_a_subset_of_a_group_is_aligned_when_no_outsider_matches() -> None:
    world = World(auto_group=False)
    world.group(A, B, C)
    world.spawn_batch(A(), B(), C(), count=5)
    world.spawn_batch(A(), D(), count=3)  # has A but not B: outside the group, no match
    with world.query(A, B) as q:
        assert q.aligned and len(q) == 5
    world.spawn(A(), B())  # an outsider with both: the prefix no longer covers the query
    with world.query(A, B) as q:
        assert not q.aligned and len(q) == 6
    with world.query(A, without=(C,)) as q:
        assert len(q) == 4


@component
class E:
    v: np.int64 = 0


def in_step(world: World, fn: Callable[[World], None]) -> None:
    """Run ``fn(world)`` as a system in one ``world.step`` (queries reorder rows for views
    only while systems run)."""
    world.add_system(lambda w, dt: fn(w), name="probe")
    try:
        world.step(1 / 60)
    finally:
        world.remove_system("probe")


@settings(max_examples=max(30, EXAMPLES // 5), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 31), max_size=40),
       st.lists(st.tuples(st.sampled_from([(B, D), (A, C, D), (D, A), (B, D, E), (E, C)]),
                          st.lists(st.integers(0, 39), max_size=4),
                          st.lists(st.integers(1, 31), max_size=3)), min_size=1, max_size=6))
def test_queries_mixing_a_group_with_free_stores_match_the_model(
        masks: list[int], program: list[tuple[tuple[type, ...], list[int], list[int]]]) -> None:
    """Queries over some group stores plus stores no group owns reorder rows to serve
    views when every match is in the group; results, writes and the group's alignment
    stay right through despawns and spawns between queries, and two worlds running the
    same program end in the same state (the reordering is a function of the state)."""
    types5 = (A, B, C, D, E)
    worlds = [World(seed=1, auto_group=False), World(seed=1, auto_group=False)]
    have: dict[int, set[type]] = {}
    for world in worlds:
        world.group(A, B, C)
    for i, mask in enumerate(masks):
        types = [t for j, t in enumerate(types5) if mask >> j & 1]
        for world in worlds:
            key = int(world.spawn(*(t(v=i) for t in types)))
        have[key] = set(types)
    for step, (wanted, doomed, spawns) in enumerate(program):
        def check(world: World, wanted: tuple[type, ...] = wanted) -> None:
            expected = {k for k, ts in have.items() if set(wanted) <= ts}
            with world.query(*wanted) as q:
                keys = [int(k) for k in q.entities]
                assert sorted(keys) == sorted(expected)
                group = world._groups[0]
                rows = sorted(group.stores[0].sparse[k & 0xFFFFFFFF] for k in expected)
                one_run = (all({A, B, C} <= have[k] for k in expected)
                           and (not rows or rows[-1] - rows[0] + 1 == len(rows)))
                if one_run and any(t in (A, B, C) for t in wanted):
                    assert q.aligned  # served by views: the free stores follow the group
                for t in wanted:
                    assert q[t]["v"].tolist() == [world.get(k, t)["v"] for k in keys]
                    q[t]["v"] += 1
            group = world._groups[0]
            lead = group.stores[0].entities[: group.size]
            for store in group.stores[1:]:
                assert np.array_equal(store.entities[: group.size], lead)

        for world in worlds:
            in_step(world, check)
        for index in sorted(set(doomed), reverse=True):
            live = sorted(have)
            if index < len(live):
                key = live[index]
                for world in worlds:
                    world.despawn(key)
                del have[key]
        for mask in spawns:
            types = [t for j, t in enumerate(types5) if mask >> j & 1]
            for world in worlds:
                key = int(world.spawn(*(t(v=100 + step) for t in types)))
            have[key] = set(types)
    assert worlds[0].state_hash() == worlds[1].state_hash()


def test_an_inner_query_never_moves_rows_under_an_open_block() -> None:
    world = World(auto_group=False)
    world.group(A, B)
    keys = [int(world.spawn(A(v=i), B(v=i), *([D(v=i)] if i >= 3 else []))) for i in range(6)]
    world.spawn(D(v=9))  # outside the group: D's rows must follow the group's order
    def nested(w: World) -> None:
        with w.query(A, B) as outer:
            before = outer.entities.tolist()
            with w.query(B, D) as inner:
                assert not inner.aligned  # nested: gathered, nothing moves
                inner[B]["v"] += 10
            assert outer.entities.tolist() == before

    def outermost(w: World) -> None:
        with w.query(B, D) as q:  # outermost in a step: served by views from now on
            assert q.aligned
            assert sorted(q.entities.tolist()) == keys[3:]
            assert q[B]["v"].tolist() == [w.get(k, D)["v"] + 10 for k in q.entities.tolist()]

    in_step(world, nested)
    with world.query(B, D) as q:  # between steps: gathered, nothing moves
        assert not q.aligned
    in_step(world, outermost)


# -- regressions from review: stale keys, read-only reorders, two groups, big free stores --

@component
class F:
    v: np.float32 = 0.0


def test_mixed_query_keys_stay_right_after_a_restore_into_grown_arrays() -> None:
    world = World(seed=1, auto_group=False)
    world.group(A, B)
    keys = [int(world.spawn(A(v=i), B(v=i), F(v=i))) for i in range(4)]

    def aligned(w: World) -> None:
        with w.query(F, A) as q:
            assert q.aligned
            found = q.entities.tolist()
            assert sorted(found) == sorted(keys)
            assert q[F]["v"].tolist() == [w.get(k, F)["v"] for k in found]

    in_step(world, aligned)
    snap = world.snapshot()
    world.despawn(keys[0])
    world.spawn_batch(A(), B(), count=40)  # A's arrays grow: the old key array is dropped
    world.restore(snap)
    in_step(world, aligned)


def test_read_only_queries_never_change_the_state() -> None:
    """A renderer's or an on_restore callback's read-only query between ticks must not
    reorder rows: row order is part of the state hash that rollback peers compare."""
    from ecs_engine.rollback import SyncTest

    def make() -> World:
        world = World(seed=1, auto_group=False)
        world.group(A, B)
        for i in range(6):
            world.spawn(A(v=i), B(v=i))

        def grow(w: World, dt: float) -> None:  # one more grouped entity gets F per tick
            with w.query(A, B, readonly=(A, B)) as q:
                todo = [int(k) for k in q.entities if not w.has(int(k), F)]
            if todo:
                w.add(todo[-1], F(v=1.0))

        world.add_system(grow)
        world.on_restore(lambda w, event: w.caches.__setitem__("total", total(w)))
        return world

    def total(world: World) -> float:
        with world.query(A, F, readonly=(A, F)) as q:
            return float(q[F]["v"].sum())

    world = make()
    for _ in range(3):
        world.step(1 / 60)
    before = world.state_hash()
    total(world)
    with world.query(A, F) as q:  # a writing query between ticks (a tool, a test) too
        q[F]["v"] += 0
    assert world.state_hash() == before
    sync = SyncTest(make(), rewind=2)
    for _ in range(6):
        sync.step()
        total(sync.world)  # as a renderer would, between ticks


def test_a_free_store_follows_one_group_only() -> None:
    """Two groups with queries mixing each of them with one free store: the store follows
    the first group, the other query gathers, and nothing moves tick after tick."""
    world = World(seed=1)
    rng = np.random.default_rng(3)
    n = 200
    keys = world.spawn_batch(F(), count=n)
    world.add_batch(keys[rng.permutation(n)], A())
    world.add_batch(keys, B())
    world.add_batch(keys[rng.permutation(n)], C())
    world.add_batch(keys, D())

    def tick() -> None:
        in_step(world, systems)

    def systems(world: World) -> None:
        with world.query(A, B) as q:  # auto-groups (A, B) first
            q[A]["v"] += 1
        with world.query(C, D) as q:  # then (C, D)
            q[C]["v"] += 1
        with world.query(A, F) as q:
            assert q.aligned
            q[F]["v"] += 1
        with world.query(C, F) as q:
            assert not q.aligned
            q[F]["v"] += 1

    tick()
    layout = world.store(F).layout_version
    for _ in range(5):
        tick()
    assert world.store(F).layout_version == layout
    assert world.store(F).data["v"][:n].tolist() == [12.0] * n


def test_reordering_a_big_free_store_moves_only_rows_out_of_place() -> None:
    world = World(seed=1, auto_group=False)
    world.group(A, B)
    particles = world.spawn_batch(F(), count=2000)
    members = [int(world.spawn(A(), B(), F())) for _ in range(10)]  # F rows 2000..2009
    store = world.store(F)
    moved: list[int] = []
    place = store.place_rows
    def counting(dst: np.ndarray, src: np.ndarray) -> None:
        moved.append(len(dst))
        place(dst, src)

    store.place_rows = counting  # type: ignore[method-assign]
    def members_first(w: World) -> None:
        with w.query(A, F) as q:
            assert q.aligned and sorted(q.entities.tolist()) == sorted(members)
            assert q[F].shape == (len(members),)

    in_step(world, members_first)  # the 10 members come to the front once
    first_move = moved[:]
    for i in range(20):  # churn among the particles and in the group
        world.despawn(int(particles[i]))
        world.spawn(F())
        if i % 5 == 0:
            world.despawn(members.pop())
            members.append(int(world.spawn(A(), B(), F())))
        in_step(world, members_first)
    assert first_move and max(moved) <= 20  # a few rows per change, never the whole store
