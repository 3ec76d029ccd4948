"""The world's layout clock moves with every structural change, and query plans trust it:
while it stands, a plan's rows are reused without looking at any store. Each change
below must move it (a plan would otherwise keep stale rows), and a tick that changes no
structure must not (or every plan would check every store again)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ecs_engine import World, component


@component
class A:
    v: np.int64 = 0


@component
class B:
    v: np.int64 = 0


def _world() -> tuple[World, list[int]]:
    world = World(auto_group=False)
    keys = [int(world.spawn(A(v=i), B(v=i))) for i in range(4)]
    keys.append(int(world.spawn(A(v=9))))
    return world, keys


def _matches(world: World) -> set[int]:
    with world.query(A, B, readonly=(A, B)) as q:
        return set(q.entities.tolist())


CHANGES: dict[str, Callable[[World, list[int]], object]] = {
    "spawn": lambda w, k: w.spawn(A(v=5), B(v=5)),
    "spawn_batch": lambda w, k: w.spawn_batch(A(v=np.arange(3)), B(), count=3),
    "despawn": lambda w, k: w.despawn(k[1]),
    "despawn_batch": lambda w, k: w.despawn_batch(np.array(k[:2], np.uint64)),
    "add": lambda w, k: w.add(k[4], B(v=4)),
    "remove": lambda w, k: w.remove(k[0], B),
    "group": lambda w, k: w.group(A, B),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_structural_change_moves_the_clock_and_queries_follow(change: str) -> None:
    world, keys = _world()
    before = _matches(world)
    stamp = world._layout_clock.stamp
    CHANGES[change](world, keys)
    assert world._layout_clock.stamp != stamp
    with world.query(A, B, readonly=(A, B)) as q:
        fresh = {int(e) for e in q.entities if world.has(int(e), B)}
        assert set(q.entities.tolist()) == fresh  # every match really has both
    assert _matches(world) == fresh
    if change == "group":
        assert fresh == before


def test_a_group_over_rows_already_in_order_moves_the_clock() -> None:
    """Creating a group moves no row when its entities already lead every store: its
    owner and size still change what plans over those stores resolve to."""
    world = World(auto_group=False)
    for i in range(3):
        world.spawn(A(v=i), B(v=i))
    stamp = world._layout_clock.stamp
    versions = [world.store(t).layout_version for t in (A, B)]
    world.group(A, B)
    assert [world.store(t).layout_version for t in (A, B)] == versions  # no row moved
    assert world._layout_clock.stamp != stamp
    with world.query(A, B) as q:
        assert q.aligned


def test_restore_and_load_move_the_clock(tmp_path: Path) -> None:
    world, keys = _world()
    snap = world.snapshot()
    path = tmp_path / "w.save"
    world.save(path)
    world.despawn(keys[0])
    stamp = world._layout_clock.stamp
    world.restore(snap)
    assert world._layout_clock.stamp != stamp
    assert keys[0] in _matches(world)
    world.despawn(keys[0])
    stamp = world._layout_clock.stamp
    world.load(path)
    assert world._layout_clock.stamp != stamp
    assert keys[0] in _matches(world)


def test_values_alone_leave_the_clock_where_it_was() -> None:
    world, keys = _world()
    _matches(world)
    stamp = world._layout_clock.stamp
    with world.query(A, B) as q:
        q[A]["v"] += 1
    world.get(keys[0], B)["v"] = 7
    world.set_batch(np.array(keys[:2], np.uint64), B, {"v": np.array([1, 2])})
    assert world._layout_clock.stamp == stamp


def test_two_worlds_have_their_own_clocks() -> None:
    first, _ = _world()
    second, _ = _world()
    stamp = second._layout_clock.stamp
    first.spawn(A(), B())
    assert second._layout_clock.stamp == stamp
