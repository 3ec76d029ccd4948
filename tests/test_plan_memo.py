"""Query plans keep the rows of the last few layouts they resolved (``planmemo``), so a
restore back to one of them resolves nothing. These tests fail if a kept result goes
stale: after restores to other layouts, to other group sizes, after key arrays were
reallocated, every query must still return exactly what a fresh plan returns and what a
plain model of the entities says."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecs_engine import Snapshot, World, component
from ecs_engine.query import Query, QueryPlan
from tests.plan_counting import count_resolves


@component
class A:
    v: np.int64 = 0


@component
class B:
    v: np.int64 = 0


@component
class C:
    v: np.int64 = 0


TYPES = (A, B, C)
SHAPES = (((A, B), ()), ((A, B, C), ()), ((A, C), (B,)), ((B,), ()), ((C, A), ()),
          ((A,), (C,)))
EXAMPLES = int(os.environ.get("DETERMINISM_EXAMPLES", "1000"))


def _check(world: World) -> None:
    """Every query shape (through the world's cached plans, in a step and outside one)
    agrees with a fresh plan and with ``world.has``/``world.get``."""
    for types, without in SHAPES:
        fresh = Query(world, QueryPlan(world, types, without))
        with fresh as f:
            expected_keys = f.entities.tolist()
            expected = {t: f[t]["v"].tolist() for t in types}
        with world.query(*types, without=without) as q:
            keys = q.entities.tolist()
            assert sorted(keys) == sorted(expected_keys)
            model = [k for k in world.entities().tolist()
                     if all(world.has(k, t) for t in types)
                     and not any(world.has(k, t) for t in without)]
            assert sorted(keys) == sorted(model)
            for t in types:
                got = dict(zip(keys, q[t]["v"].tolist(), strict=True))
                assert got == dict(zip(expected_keys, expected[t], strict=True))
                assert got == {k: int(world.get(k, t)["v"]) for k in keys}


ops = st.lists(st.tuples(st.sampled_from(["spawn", "despawn", "add", "remove", "snap",
                                          "restore", "write", "step"]),
                         st.integers(1, 7), st.integers(0, 1000)), max_size=40)


@settings(max_examples=max(30, EXAMPLES // 5), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.booleans())
def test_queries_after_restores_match_fresh_plans(script: list[tuple[str, int, int]],
                                                  grouped: bool) -> None:
    world = World(auto_group=not grouped)
    if grouped:
        world.group(A, B)

    def system(w: World, dt: float) -> None:
        _check(w)  # inside a step: writing queries may align rows (row order is state)

    world.add_system(system)
    snaps: list[Snapshot] = []
    counter = 0
    for op, mask, pick in script:
        keys = world.entities()
        if op == "spawn":
            types = [t for j, t in enumerate(TYPES) if mask >> j & 1]
            for _ in range(1 + pick % 3):
                counter += 1
                world.spawn(*(t(v=counter) for t in types))
        elif op == "despawn" and len(keys):
            world.despawn(int(keys[pick % len(keys)]))
        elif op in ("add", "remove") and len(keys):
            key, t = int(keys[pick % len(keys)]), TYPES[mask % 3]
            if op == "add":  # (changes one store's layout: the others keep theirs)
                counter += 1
                world.add(key, t(v=counter))
            elif world.has(key, t):
                world.remove(key, t)
        elif op == "snap":
            snaps.append(world.snapshot())
        elif op == "restore" and snaps:
            world.restore(snaps[pick % len(snaps)])
        elif op == "write" and len(keys):
            counter += 1
            key = int(keys[pick % len(keys)])
            t = TYPES[mask % 3]
            if world.has(key, t):
                world.get(key, t)["v"] = counter
        elif op == "step":
            world.step(1 / 60)
        _check(world)


def test_a_restore_to_another_layout_resolves_again() -> None:
    """A restore to a layout the plan never saw (fresh rows in the same versions' place
    would be a stale hit) and one back to a layout it saw (a hit) both give the truth."""
    world = World(auto_group=False)
    world.group(A, B)
    first = [int(world.spawn(A(v=i), B(v=10 * i))) for i in range(3)]
    world.spawn(A(v=99))
    before = world.snapshot()
    _check(world)  # resolved at ``before``'s layout
    world.despawn(first[0])
    more = [int(world.spawn(A(v=50 + i), B(v=500 + i), C(v=i))) for i in range(40)]
    _check(world)  # resolved at a second layout (the key arrays grew: new arrays)
    world.add(first[1], C(v=3))  # a layout of C only
    _check(world)
    after = world.snapshot()
    world.restore(before)
    _check(world)  # back to the first layout: kept rows, checked against the model
    with world.query(A, B) as q:
        assert q.entities.tolist() == first
    world.restore(after)
    _check(world)
    with world.query(A, B) as q:
        assert sorted(q.entities.tolist()) == sorted(first[1:] + more)
    # A third layout made from the restored first one: new versions, resolved afresh.
    world.restore(before)
    world.spawn(A(v=7), B(v=8))
    _check(world)


def test_restores_forget_nothing_a_rollback_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many restores of the same snapshot hit the kept rows: the plan does not resolve."""
    world = World(auto_group=False)
    world.group(A, B)
    for i in range(5):
        world.spawn(A(v=i), B(v=i))
        world.spawn(A(v=i), C(v=i))
    counts: list[int] = []

    def system(w: World, dt: float) -> None:  # (gathered queries resolve again outside
        with w.query(A, C, readonly=(A, C)) as q:  # a step: they could get views)
            counts.append(len(q))

    world.add_system(system)
    snap = world.snapshot()
    world.step(1 / 60)
    world.spawn(A(v=1), C(v=2))
    calls = count_resolves(monkeypatch)
    for _ in range(3):
        world.restore(snap)
        world.step(1 / 60)
        world.spawn(A(v=1), C(v=2))
        world.step(1 / 60)
    assert counts == [5] + [5, 6] * 3
    # The first spawn's layout resolves; after each restore the spawn replays the same
    # key (the slot table came back too) into the same rows: the kept rows serve.
    assert calls[0] == 1
    world.restore(snap)
    world.spawn(C(v=1))  # another layout (C's key bytes differ): resolved afresh
    world.step(1 / 60)
    assert calls[0] == 2 and counts[-1] == 5


def test_a_resolve_that_makes_a_group_is_kept_under_the_layout_it_made() -> None:
    """The first outermost resolve of a query that ran nested creates its group and moves
    rows; what it found belongs to the new layout, never to the one it started from (a
    restore back to that layout must resolve again, not reuse the grouped rows)."""
    world = World()
    keys = world.spawn_batch(A(v=np.arange(6)))
    world.add_batch(keys[1::2], B(v=np.arange(3) * 10))  # B on every other entity
    with world.query(C):  # another block open: the plan resolves nested, gathered
        with world.query(A, B) as nested:
            assert not nested.aligned
    before = world.snapshot()  # no group, rows interleaved
    assert not world._groups
    with world.query(A, B) as q:  # outermost now: makes the group, moves rows
        assert q.aligned
    world.restore(before)  # back to the layout the resolve started from
    assert not world._groups
    with world.query(A, B) as q:  # (before _check: its fresh plans make the group too)
        assert sorted(q.entities.tolist()) == sorted(keys[1::2].tolist())
        assert {k: int(v) for k, v in zip(q.entities.tolist(), q[B]["v"], strict=True)} == {
            k: int(world.get(k, B)["v"]) for k in keys[1::2].tolist()}
    _check(world)


def test_a_stores_key_bytes_are_made_once_per_layout() -> None:
    """Memo keys share one bytes object per store layout (copied and hashed once for
    every plan over the store), and it follows the keys through spawns, despawns and a
    restore; the plans over it stay right."""
    from ecs_engine.planmemo import key_bytes

    w = World()
    keys = [w.spawn(A(v=i), B(v=i)) for i in range(4)]
    store = w.store(A)
    first = key_bytes(store)
    assert key_bytes(store) is first  # the same layout: no new copy
    assert first == store.entities[: store.n].tobytes()
    snap = w.snapshot()
    w.despawn(keys[0])  # the last row moves into the hole
    moved = key_bytes(store)
    assert moved != first and moved == store.entities[: store.n].tobytes()
    w.restore(snap)
    assert key_bytes(store) == first
    with w.query(A, B, readonly=(A, B)) as q:
        assert q.entities.tolist() == [int(k) for k in keys]
        assert q[B]["v"].tolist() == [0, 1, 2, 3]
