"""Query blocks opened and closed in C (``_queryblock.c``): each case the C fast paths hand
back to the Python methods must behave exactly as those do (this file also runs with
``ECS_NO_C=1``, on the Python methods alone: see test_keyindex.py)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecs_engine import World, component
from ecs_engine import world as world_module
from ecs_engine.query import QueryPlan
from tests.test_nested_groups import A as NA
from tests.test_nested_groups import B as NB
from tests.test_nested_groups import C as NC
from tests.test_nested_groups import D as ND


@component
class A:
    x: np.float32 = 0.0


@component
class B:
    n: np.int16 = 0


def make(count: int = 5) -> World:
    world = World()
    world.spawn_batch(A(x=np.arange(count, dtype=np.float32)), B(n=1), count=count)
    return world


def test_the_fast_paths_are_installed_where_the_extension_is() -> None:
    from ecs_engine.query import Query

    try:
        from ecs_engine import _queryblock
    except ImportError:
        pytest.skip("ecs_engine._queryblock was not built")
    installed = Query.__dict__["__enter__"] is _queryblock.enter
    assert world_module.QUERY_BLOCKS_IN_C == installed


def test_a_block_opens_counts_and_closes() -> None:
    world = make()
    with world.query(A, B) as q:
        assert world._deferring and len(q) == 5
        assert q.entities.tolist() == world.entities().tolist()
    assert not world._deferring
    with pytest.raises(RuntimeError, match="inside a with-block"):
        len(q)


def test_the_plans_last_query_is_handed_out_again_only_when_nobody_holds_it() -> None:
    world = make()
    with world.query(A) as first:
        pass
    first_id = id(first)
    del first
    again = world.query(A)
    assert id(again) == first_id  # nothing held it but the plan: handed out again
    del again
    kept = world.query(A)
    other = world.query(A)
    assert other is not kept  # a kept query is never shared
    with kept as k1, other as k2:
        assert len(k1) == len(k2) == 5
    assert not world._deferring


def test_a_block_inside_a_block_of_the_same_query_object() -> None:
    world = make()
    q = world.query(A)
    with q:
        with q:
            assert world._deferring
        assert world._deferring and len(q) == 5  # the outer block is still open
    assert not world._deferring


def test_changes_inside_blocks_run_when_the_outermost_closes() -> None:
    world = make()
    with world.query(A) as outer:
        with world.query(B) as inner:
            world.spawn(A(x=9.0), B(n=2))
            gone = int(inner.entities[0])
            world.despawn(gone)
            assert world.is_alive(gone)  # deferred: a block is open
        assert world.is_alive(gone) and len(outer) == 5
    assert not world.is_alive(gone) and len(world) == 5
    assert 9.0 in world.store(A).data["x"][: world.store(A).n]
    with world.query(A, B) as q:  # the plan re-resolves after the change
        assert len(q) == 5


def test_a_failing_deferred_change_raises_at_the_blocks_end_and_closes_it() -> None:
    world = make()
    key = int(world.entities()[0])
    with pytest.raises(KeyError):
        with world.query(A):
            world.despawn(key)
            world.despawn(key)
    assert not world._deferring
    with world.query(A) as q:
        assert len(q) == 4


def test_an_error_inside_the_block_is_explained_and_the_block_closed() -> None:
    world = make()
    with pytest.raises(ValueError, match="readonly"):
        with world.query(A, readonly=(A,)) as q:
            q[A]["x"] += 1
    assert not world._deferring
    with pytest.raises(OverflowError, match="B.n"):
        with world.query(B) as q:
            q[B]["n"] = 100_000
    assert not world._deferring


def test_columns_taken_in_a_block_are_read_only_after_it() -> None:
    world = make()
    with world.query(A, B) as q:
        xs = q[A]
        xs["x"] += 1
    with pytest.raises(ValueError):
        xs["x"] += 1
    assert world.store(A).data["x"][:5].tolist() == [1, 2, 3, 4, 5]


def test_keyword_arguments_and_unhashable_ones() -> None:
    world = make()
    world.spawn(A(x=7.0))
    with world.query(A, without=[B]) as q:  # a list: normalised by the Python method
        assert len(q) == 1
    with world.query(A, without=(B,)) as q:
        assert len(q) == 1
    with pytest.raises(TypeError):
        world.query(A, wrong=(B,))  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="at least one component type"):
        world.query()


def test_a_query_whose_world_is_gone() -> None:
    world = make()
    q = world.query(A)
    del world
    gc.collect()
    with pytest.raises(RuntimeError, match="world is gone"):
        with q:
            pass


def test_two_worlds_never_share_a_query_or_a_count() -> None:
    one, two = make(3), make(4)
    with one.query(A) as q1:
        with two.query(A) as q2:
            assert (len(q1), len(q2)) == (3, 4)
            assert one._deferring and two._deferring
        assert one._deferring and not two._deferring
        two.spawn(A())  # not deferred: two has no block open
        assert len(two) == 5
    assert not one._deferring


def test_enter_and_exit_by_hand() -> None:
    world = make()
    q = world.query(A)
    assert q.__enter__() is q
    assert world._deferring
    q.__exit__(None, None, None)
    assert not world._deferring
    q.__exit__(None, None, None)  # (a second exit: nothing open, nothing changes)
    assert not world._deferring


def test_installing_twice_keeps_the_python_methods_as_the_slow_paths() -> None:
    from ecs_engine import queryblock
    from ecs_engine.query import NO_KEYS, Query, QueryPlan
    from ecs_engine.storage import CHUNK_ROWS, ComponentStore, LayoutClock
    from ecs_engine.world import _QueryState

    installed = queryblock.install(World, _QueryState, Query, QueryPlan, LayoutClock, NO_KEYS,
                                   ComponentStore, CHUNK_ROWS)
    assert installed == world_module.QUERY_BLOCKS_IN_C
    world = make()
    q = world.query(A)
    with q:
        with q:  # a nested block takes the slow path: it must not call itself
            assert len(q) == 5
    assert not world._deferring
    world.spawn(A(x=9.0))  # A alone: (A, B) is gathered, its columns take the slow paths
    with world.query(A, B) as q:
        q[A]["x"] += 1
        assert q.unstructured(A).shape == (5, 1)
    with world.query(A, B, readonly=(A, B)) as q:
        assert q[A]["x"].tolist() == [1, 2, 3, 4, 5]


def test_keyword_queries_reuse_their_plan_and_query() -> None:
    world = make()
    with world.query(A, readonly=(A,)) as q:
        first_id, plan = id(q), q._plan
        assert not q[A].flags.writeable
    del q
    again = world.query(A, readonly=(A,))
    assert id(again) == first_id and again._plan is plan
    assert world.query(A, without=(), readonly=()) is not again  # (held: a new one)
    del again
    with world.query(A, without=(), readonly=()) as plain:  # empty: the plain call's plan
        assert plain._plan is world.query(A)._plan


def test_unstructured_columns_are_read_only_after_the_block() -> None:
    world = make()
    with world.query(A, B) as q:
        flat = q.unstructured(A)
        flat += 1
    with pytest.raises(ValueError):
        flat += 1
    assert world.store(A).data["x"][:5].tolist() == [1, 2, 3, 4, 5]


def test_odd_objects_in_the_slots_take_the_python_path() -> None:
    """(outside review: user objects whose methods run code while C held borrowed
    pointers crashed the interpreter; a failing truth test raised a SystemError)"""
    world = make()
    q = world.query(A)
    with q:
        pass

    class Stamp:
        def __eq__(self, other: object) -> bool:
            nonlocal world
            del world  # drops the caller's last name of the world mid-compare
            return True

    holder = [world]
    q._plan._stamp = Stamp()  # type: ignore[assignment]
    with q:
        assert type(q._in) is World
    del holder

    other = make()
    for i in range(20):
        other._plans[("k", i)] = i  # type: ignore[assignment]

    class Without:
        def __iter__(self) -> Iterator[type]:
            return iter((B,))

        def __bool__(self) -> bool:
            return True

        def __hash__(self) -> int:
            other._plans = None  # type: ignore[assignment]
            return 1

    with pytest.raises((TypeError, AttributeError)):  # (no crash: the dict went mid-lookup)
        other.query(A, without=Without())

    class Bad:
        def __bool__(self) -> bool:
            raise ZeroDivisionError("bool")

    third = make()
    third._deferred = Bad()  # type: ignore[assignment]
    with pytest.raises(ZeroDivisionError):
        with third.query(A):
            pass


def test_a_block_count_at_the_int_limit_keeps_counting() -> None:
    world = make()
    world._open_queries = sys.maxsize
    with world.query(A):
        assert world._open_queries == sys.maxsize + 1 and world._deferring
    assert world._open_queries == sys.maxsize


def test_the_methods_keep_their_signatures_and_keywords() -> None:
    import inspect

    params = inspect.signature(World.query).parameters
    assert [p for p in params if p != "self"] == ["types", "without", "readonly"]
    world = make()
    q = world.query(A)
    q.__enter__()
    getattr(q, "__exit__")(None, None, tb=None)  # noqa: B009 (by keyword, as Python allows)
    assert not world._deferring


def test_a_failed_configure_changes_nothing() -> None:
    try:
        from ecs_engine import _queryblock
    except ImportError:
        pytest.skip("ecs_engine._queryblock was not built")
    from ecs_engine.query import NO_KEYS, QueryPlan
    from ecs_engine.storage import LayoutClock

    class FakeQuery:  # slots in other places, and no _cache
        __slots__ = ("_a", "_depth", "_e", "_in", "_plan", "_world", "_x", "_y", "entities")

    with pytest.raises(AttributeError, match="_cache"):
        _queryblock.configure(FakeQuery, QueryPlan, LayoutClock, FakeQuery, NO_KEYS, None,
                              None, None)
    world = make()
    for _ in range(3):
        with world.query(A, B) as q:
            assert len(q) == 5
    assert not world._deferring


@component
class Pair:
    a: np.float64 = 0.0
    b: np.float64 = 0.0


@component
class Mixed:
    a: np.float64 = 0.0
    n: np.int32 = 0


def test_a_column_counts_as_a_write_to_its_rows_a_read_only_one_does_not() -> None:
    world = make()
    store = world._stores[A]
    before = store.data_version
    with world.query(A, readonly=(A,)) as q:
        assert not q[A].flags.writeable
    assert store.data_version == before
    with world.query(A) as q:
        column = q[A]
        assert column is q[A] and column.flags.writeable  # taken once per block
        assert store.data_version > before
        assert store.chunk_versions[0] == store.data_version
        column["x"] += 1
    assert not column.flags.writeable  # dead after the block
    assert world._stores[A].data["x"][:5].tolist() == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("how", ["column", "unstructured"])
def test_a_column_over_several_chunks_marks_each_of_them(how: str) -> None:
    from ecs_engine.storage import CHUNK_ROWS

    world = World()
    count = 2 * CHUNK_ROWS + 7
    world.spawn_batch(Pair(a=np.arange(count, dtype=np.float64)), count=count)
    store = world._stores[Pair]
    store.touch_rows(0, 1)  # chunk 0 ahead of the others
    with world.query(Pair) as q:
        taken = q[Pair] if how == "column" else q.unstructured(Pair)
        assert len(taken) == count
    assert store.chunk_versions.tolist() == [store.data_version] * 3
    assert not taken.flags.writeable


def test_unstructured_views_share_the_store_and_follow_readonly() -> None:
    world = World()
    world.spawn_batch(Pair(a=np.arange(4.0), b=1.0), count=4)
    with world.query(Pair) as q:
        flat = q.unstructured(Pair)
        assert flat.shape == (4, 2) and flat.flags.writeable
        flat += 1
    assert not flat.flags.writeable
    with world.query(Pair, readonly=(Pair,)) as q:
        frozen = q.unstructured(Pair)
        assert frozen[:, 0].tolist() == [1, 2, 3, 4] and not frozen.flags.writeable
        assert frozen[:, 1].tolist() == [2, 2, 2, 2]


def test_column_errors_are_the_python_methods() -> None:
    world = make()
    world.spawn(Mixed())
    with world.query(A) as q:
        with pytest.raises(KeyError, match="is not part of this query"):
            q[B]
        with pytest.raises(TypeError):
            q[[A]]  # type: ignore[index]  # (unhashable)
        with pytest.raises(TypeError):
            q.__getitem__()  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            q.unstructured(A, A)  # type: ignore[call-arg]
    with pytest.raises(RuntimeError, match="inside a with-block"):
        q[A]
    with pytest.raises(RuntimeError, match="inside a with-block"):
        q.unstructured(A)
    with world.query(Mixed) as q2:
        with pytest.raises(TypeError, match="no single field dtype"):
            q2.unstructured(Mixed)


def test_a_key_whose_hash_changes_the_query_does_not_crash_it() -> None:
    world = make()
    q = world.query(A)

    class Meta(type):
        def __hash__(cls) -> int:
            q._plan.rows.clear()  # the plan's rows go while C looks them up
            q._plan.store_of.clear()
            return 1

    class Odd(metaclass=Meta):
        pass

    with q:
        with pytest.raises((KeyError, TypeError)):
            q[Odd]
        with pytest.raises((KeyError, TypeError)):
            q.unstructured(Odd)
    assert not world._deferring


@pytest.mark.parametrize("change", ["writable", "exit"])
@pytest.mark.parametrize("how", ["column", "unstructured"])
def test_a_key_whose_compare_changes_the_block_is_handled_as_in_python(change: str,
                                                                        how: str) -> None:
    """A key equal to a queried type whose ``__eq__`` replaces the block's column list
    (or closes the block) while C looks it up: no crash, and the column is frozen at the
    block's end as in Python (a freed list once took it, and it stayed writable)."""
    world = World(auto_group=False)
    world.spawn_batch(Pair(a=np.arange(5.0)), Mixed(), count=5)
    q = world.query(Pair, Mixed)
    done: list[bool] = []

    class Key:
        def __hash__(self) -> int:
            return hash(Pair)

        def __eq__(self, other: object) -> bool:
            if other is Pair and not done:
                done.append(True)
                if change == "writable":
                    q._writable = []
                else:
                    q.__exit__(None, None, None)
            return other is Pair

    taken: list[np.ndarray] = []
    try:
        with q:
            q[Mixed]  # the block's column list holds one column
            taken.append(q[Key()] if how == "column"  # type: ignore[index]
                         else q.unstructured(Key()))  # type: ignore[arg-type]
    except RuntimeError:
        assert change == "exit"  # (the block was closed under it: Python says so)
    if taken and change == "writable":
        assert not taken[0].flags.writeable
    assert not world._deferring


PREFIX_SHAPES: tuple[tuple[type, ...], ...] = ((NA,), (NA, NB), (NA, NB, NC), (NB, NC), (NC,),
                                               (NA, NB, NC, ND), (ND,))
SPAWN_MIXES: tuple[tuple[type, ...], ...] = ((NA, NB), (NA, NB, NC), (NA, NB, NC, ND), (NA,),
                                             (NC,), (NA, NC), (NB, NC, ND))


def plan_state(plan: Any) -> tuple[Any, ...]:
    """What a plan's blocks and its next checks read, with stores and groups named by
    their types (to compare the plans of two worlds)."""
    def name(obj: Any) -> Any:
        if obj is None:
            return None
        if hasattr(obj, "schema"):
            return obj.schema.name
        return tuple(s.schema.name for s in obj.stores)

    def layouts(items: Any) -> Any:
        return tuple((v, size, name(owner)) for v, size, owner in items)

    sig = plan._signature
    rows = tuple((t.__name__, r if isinstance(r, slice) else r.tolist())
                 for t, r in plan.rows.items())
    return (rows, plan.entities.tolist(), plan.entities.flags.writeable, plan.aligned,
            name(plan._prefix), name(plan._within), name(plan._prefix_lead),
            plan._prefix_keys is plan.stores[0].entities, plan._prefix_size, plan.settled,
            layouts(plan._layouts),
            (sig[0], name(sig[1]), sig[2] is plan.stores[0].entities, sig[3], sig[4]))


def python_check(plan: Any, world: World) -> None:
    """What Query.__enter__'s Python method does to a plan before its block."""
    if plan._stamp == plan._clock.stamp and (plan.aligned or plan.settled):
        return
    prefix, lead = plan._prefix, plan._prefix_lead
    if prefix is not None and lead is not None and \
            plan.stores[0].entities is plan._prefix_keys and plan._prefix_size == (
                lead.n if prefix is lead else lead.group_size if lead.owner is prefix else -1):
        plan._stamp = plan._clock.stamp
        return
    plan.resolve(world)


def twin() -> World:
    world = World(auto_group=False)
    world.register(NA, NB, NC, ND)
    world.group(NA, NB)
    world.group(NA, NB, NC)
    world.spawn_batch(NA(v=np.arange(6)), NB(), NC(), count=6)
    return world


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["spawn", "spawn_batch", "despawn", "grow"]),
                          st.sampled_from(SPAWN_MIXES), st.integers(0, 10**6)),
                min_size=1, max_size=25))
def test_a_prefix_plan_resized_in_c_is_the_python_resolve(
        program: list[tuple[str, tuple[type, ...], int]]) -> None:
    """After spawns and despawns move the prefix serving a plan (its size, or its store's
    key array), the block that finds it out re-resolves it (in C where built, as
    QueryPlan._resize and _remember do): a twin world whose plans QueryPlan.resolve
    brings up to date before each block must hold the same plans."""
    worlds = twin(), twin()
    plans: list[dict[tuple[type, ...], Any]] = [{}, {}]
    for world, found in zip(worlds, plans, strict=True):
        for shape in PREFIX_SHAPES:  # (resolved once: later blocks check or resize)
            with world.query(*shape, readonly=shape) as q:
                found[shape] = q._plan
    served = 0
    for op, mix, value in program:
        for world in worlds:
            if op == "spawn":
                world.spawn(*(t(v=value % 100) for t in mix))
            elif op == "spawn_batch":
                world.spawn_batch(*(t(v=value % 100) for t in mix), count=1 + value % 4)
            elif op == "grow":  # past the stores' capacity: new key arrays
                world.spawn_batch(*(t(v=value % 100) for t in mix), count=20 + value % 30)
            elif len(world):
                live = world.entities().tolist()
                world.despawn(live[value % len(live)])
        for shape in PREFIX_SHAPES:
            in_c, in_python = plans[0][shape], plans[1][shape]
            python_check(in_python, worlds[1])  # (its block then finds it current)
            for world in worlds:
                with world.query(*shape, readonly=shape) as q:
                    assert q._plan is plans[worlds.index(world)][shape]
            assert plan_state(in_c) == plan_state(in_python), shape
            served += in_c._prefix is not None or in_c._within is not None
    assert served


def test_a_resized_prefix_plan_skips_the_python_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(auto_group=False)
    world.register(NA, NB)
    world.group(NA, NB)
    world.spawn_batch(NA(v=np.arange(4)), NB(), count=4)
    with world.query(NA, NB) as q:
        plan = q._plan
    assert plan._prefix is not None
    resolves: list[Any] = []
    original = QueryPlan.resolve

    def counted(self: Any, w: World) -> None:
        resolves.append(self)
        original(self, w)

    monkeypatch.setattr(QueryPlan, "resolve", counted)
    key = world.spawn(NA(v=9), NB())
    with world.query(NA, NB) as q:
        assert q.entities.tolist()[-1] == key
        assert q[NA]["v"].tolist() == [0, 1, 2, 3, 9]
    assert resolves == ([] if world_module.QUERY_BLOCKS_IN_C else [plan])
