"""``world.query(...)`` hands out the plan's last Query again when nothing else holds it
(no open block, no name kept by a caller), instead of building one per call. A query
someone holds is never handed out twice: these tests fail if it were, or if nothing
were reused."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

from ecs_engine import World, component
from ecs_engine.query import Query


@component
class A:
    v: np.int64 = 0


@component
class B:
    v: np.int64 = 0


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ids of every Query built from here on (ids: a reference would keep it busy)."""
    made: list[int] = []
    init = Query.__init__

    def counting(self: Query, *args: Any, **kwargs: Any) -> None:
        made.append(id(self))
        init(self, *args, **kwargs)

    monkeypatch.setattr(Query, "__init__", counting)
    return made


def _world() -> World:
    world = World()
    for i in range(4):
        world.spawn(A(v=i), B(v=10 * i))
    return world


def test_a_system_run_each_tick_builds_its_query_once(built: list[int]) -> None:
    world = _world()

    def system() -> None:
        with world.query(A, B, readonly=(B,)) as q:
            q[A]["v"] += q[B]["v"]

    for _ in range(5):
        system()
    assert len(built) == 1
    with world.query(A, readonly=(A,)) as q:
        assert q[A]["v"].tolist() == [0, 51, 102, 153]


def test_a_kept_query_is_not_handed_out_again(built: list[int]) -> None:
    world = _world()
    kept = world.query(A, B)
    other = world.query(A, B)
    assert other is not kept and len(built) == 2
    with kept as k, other as o:  # both usable, each its own block
        k[A]["v"] += 1
        assert o[A]["v"].tolist() == [1, 2, 3, 4]  # an aligned view: the write shows
    with kept as k:
        assert k[A]["v"].tolist() == [1, 2, 3, 4]


def test_a_nested_block_of_the_same_shape_gets_its_own_query(built: list[int]) -> None:
    world = _world()
    with world.query(A, B) as outer:
        with world.query(A, B) as inner:
            assert inner is not outer
            inner[A]["v"] += 1
        # the outer block is still open, its column cache its own
        outer[A]["v"] += 10
        assert outer[A]["v"].tolist() == [11, 12, 13, 14]
    assert len(built) == 2
    del inner, outer
    with world.query(A, B) as again:  # both idle now: the plan's last one comes back
        assert id(again) in built
    assert len(built) == 2


def test_a_reused_query_starts_closed_and_empty(built: list[int]) -> None:
    world = _world()
    with world.query(A) as q:
        column = q[A]
    with pytest.raises(RuntimeError, match="with-block"):
        q[A]
    del q
    with pytest.raises(ValueError, match="read-only"):
        column["v"][0] = 5  # the last block's column stays frozen
    with world.query(A) as q:
        fresh = q[A]
        assert fresh is not column and fresh.flags.writeable
        fresh["v"][0] = 7
    assert len(built) == 1
    assert world.get(_first(world), A)["v"] == 7


def _first(world: World) -> int:
    with world.query(A, readonly=(A,)) as q:
        return int(q.entities[0])


def test_a_block_that_raised_leaves_its_query_reusable(built: list[int]) -> None:
    world = _world()
    with pytest.raises(KeyError, match="not part of this query"), world.query(A) as q:
        q[B]
    del q
    assert not world._open_queries
    with world.query(A) as q:
        assert len(q) == 4
    assert len(built) == 1


def test_deferred_changes_flush_when_a_columnless_block_closes() -> None:
    """The exit of a block that took no column (its short path) still applies the
    block's deferred spawns."""
    world = _world()
    with world.query(A) as q:
        world.spawn(A(v=99))
        assert len(q) == 4
    with world.query(A) as q:
        assert len(q) == 5


def test_a_query_kept_past_its_world_says_so() -> None:
    world = _world()
    kept = world.query(A)
    del world
    with pytest.raises(RuntimeError, match="world is gone"), kept:
        pass


def test_a_reused_query_shows_no_keys_of_its_last_block(built: list[int]) -> None:
    """A query handed out again is as a fresh one until its block opens: the last
    block's keys (for an aligned plan, a live view of a store's keys) do not come with it
    (found by the query-reuse review)."""
    world = _world()
    with world.query(A, B) as q:
        assert len(q.entities) == 4
    del q
    again = world.query(A, B)
    assert len(built) == 1  # the same object ...
    assert len(again.entities) == 0  # ... without the last block's keys
    with again as q:
        assert len(q.entities) == 4


def _use_queries(world: World) -> None:
    with world.query(A, B) as q, world.query(A, B) as inner:  # nested, one shape
        inner[B]["v"] += 1
        q[A]["v"] += 1
        world.spawn(A(v=7))  # deferred
    kept = world.query(A, without=(B,))
    with kept as k:
        k[A]["v"] += 1
    with pytest.raises(ZeroDivisionError), world.query(B) as q:
        q[B]["v"] += 1
        raise ZeroDivisionError


def _use_restores(world: World) -> None:
    snap = world.snapshot()
    world.spawn(A(), B())
    world.restore(snap)
    world.on_restore(lambda w, event: len(w))
    world.restore(snap)
    world.restore(type(snap).from_bytes(snap.to_bytes()))


def _use_groups_and_steps(world: World) -> None:
    world.group(A, B)

    def system(w: World, dt: float) -> None:
        with w.query(A, B) as q:
            q[A]["v"] += 1

    world.add_system(system)
    world.step(1 / 60)


def _use_hierarchy_and_blueprints(world: World) -> None:
    with world.query(A, readonly=(A,)) as q:
        parent, child = (int(k) for k in q.entities[:2])
    world.set_parent(child, parent)
    world.instantiate(world.extract(parent))


def _use_a_failed_load(world: World) -> None:
    with pytest.raises(RuntimeError), world._all_or_nothing():
        world.spawn(A(), B())
        with world.query(A) as q:
            len(q)
        raise RuntimeError


@pytest.mark.parametrize("use", [_use_queries, _use_restores, _use_groups_and_steps,
                                 _use_hierarchy_and_blueprints, _use_a_failed_load],
                         ids=lambda f: f.__name__)
def test_a_world_is_freed_with_its_last_name_after_any_use(use: Any) -> None:
    """Whatever ran on it (queries nested, kept, raising; restores, callbacks, groups,
    systems, parent links, blueprints, a failed level load), a world is freed by
    reference counting alone: none of the engine's parts closes a cycle through it."""
    world = _world()
    use(world)
    gone = weakref.ref(world)
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        del world
        assert gone() is None
    finally:
        if was_enabled:
            gc.enable()


def test_an_open_query_nobody_names_is_not_handed_out(built: list[int]) -> None:
    """A block entered by hand (``__enter__``, as a framework driving context managers
    may) whose query lost its last name is still open: the reference count alone
    would call it idle (found by the query-reuse review)."""
    world = _world()
    opened = world.query(A)
    opened.__enter__()
    first = id(opened)
    del opened
    other = world.query(A)
    assert id(other) != first and other._in is None
    with other as q:
        assert len(q) == 4
    assert world._open_queries == 1  # the one entered by hand


def test_a_query_of_a_world_named_nowhere_says_why_it_fails() -> None:
    """``with make_world().query(A)``: the world's last reference goes when ``query``
    returns (a query names its world weakly), so the block cannot open; the error says
    what to do instead."""
    with pytest.raises(RuntimeError, match="name the world"), _world().query(A) as q:
        len(q)


def test_a_kept_query_entered_again_inside_its_own_block_closes_both() -> None:
    """A system keeping its query in an attribute and recursing enters the same Query
    inside its open block. Leaving the inner block must not end the outer one, and
    leaving the outer one must close the world's count (the outer exit took the query
    for never entered: the world stayed 'in a query' for good, deferring every change
    and refusing snapshots; found by the query-reuse review)."""
    world = _world()

    class System:
        def __init__(self) -> None:
            self.q = world.query(A)

        def run(self, depth: int) -> None:
            with self.q as q:
                q[A]["v"] += 1
                if depth:
                    self.run(depth - 1)
                    world.spawn(A(v=100))  # deferred to the outermost block's end
                assert len(q) == 4

    System().run(2)
    assert world._open_queries == 0
    assert len(world) == 6
    world.snapshot()
    with world.query(A, readonly=(A,)) as q:
        assert sorted(q[A]["v"].tolist()) == [3, 4, 5, 6, 100, 100]
