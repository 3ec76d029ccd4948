"""The small-batch fast paths (``despawn_batch`` of a few keys, ``spawn_batch`` of a few
entities, ``spawn`` of one) must leave exactly the rows the general path leaves: row
order is state (``state_hash`` covers it; aligned queries return entities in row order),
and the same call made inside an open query block (deferred: the general path runs at
the flush) gives the general path's result, so a program's state must not depend on
whether a query block is open."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ecs_engine.world as world_module
from ecs_engine import World, component, field
from ecs_engine.hierarchy import ChildOf
from ecs_engine.storage import removal_plan


@component(name="RowsA")
class A:
    x: np.float32 = 0.0


@component(name="RowsB")
class B:
    dx: np.float64 = 0.0


@component(name="RowsC")
class C:
    hp: np.int16 = 5


@component(name="RowsD")
class D:
    v: np.int32 = 0


@component(name="RowsProbe")
class Probe: ...


GROUPS: dict[str, list[tuple[type, ...]]] = {
    "none": [],
    "flat": [(A, B)],
    "nested": [(A, B), (A, B, C)],
    "nested3": [(A, B), (A, B, C), (A, B, C, D)],
    "two roots": [(A, B), (C, D)],
    "nested other": [(A, B), (A, B, D)],
}
TYPESETS: list[tuple[type, ...]] = [(A,), (A, B), (A, B, C), (A, B, C, D), (B,), (C, D),
                                    (A, C), (A, B, D), (C,), (B, C, D)]


def new_world(groups: list[tuple[type, ...]]) -> World:
    world = World(seed=1, auto_group=False)
    world.register(A, B, C, D, Probe)
    for types in groups:
        world.group(*types)
    return world


def layout(world: World) -> dict[str, Any]:
    """Everything row order shows in: each store's keys and bytes in row order, group
    sizes, the free list and the hash."""
    out: dict[str, Any] = {"hash": world.state_hash(),
                           "free": world.slot_table().free.tolist()}
    for store in world._stores.values():
        n = store.n
        out[store.schema.name] = (store.entities[:n].tolist(), store.data[:n].tobytes(),
                                  store.group_size)
    return out


@contextlib.contextmanager
def general_paths() -> Iterator[None]:
    """The vectorised paths for every batch size (what a flush runs)."""
    saved = world_module.SMALL_SPAWN, world_module.SMALL_DESPAWN
    world_module.SMALL_SPAWN, world_module.SMALL_DESPAWN = 0, 0
    try:
        yield
    finally:
        world_module.SMALL_SPAWN, world_module.SMALL_DESPAWN = saved


def run_three(op: Callable[[World], Any], worlds: tuple[World, World, World]) -> None:
    """``op`` on the fast path, the forced general path and deferred in a query block."""
    fast, general, deferred = worlds
    op(fast)
    with general_paths():
        op(general)
    with deferred.query(Probe, readonly=(Probe,)):
        op(deferred)
    want = layout(general)
    assert layout(fast) == want
    assert layout(deferred) == want


def spawn_op(types: tuple[type, ...], k: int, tick: int) -> Callable[[World], Any]:
    def op(world: World) -> Any:
        comps: list[Any] = []
        for t in types:
            if t is A:
                comps.append(A(x=np.arange(k, dtype=np.float32) + 100 * tick))
            elif t is B:
                comps.append(B(dx=np.arange(k, dtype=np.float64) - tick))
            elif t is C:
                comps.append(C(hp=tick % 100))
            else:
                comps.append(D(v=np.arange(k, dtype=np.int32) * tick))
        return world.spawn_batch(*comps, count=k)
    return op


def despawn_op(picks: list[int]) -> Callable[[World], Any]:
    def op(world: World) -> Any:
        live = sorted(world.entities().tolist())
        if not live:
            return None
        keys = list(dict.fromkeys(live[p % len(live)] for p in picks))
        return world.despawn_batch(keys)
    return op


OPS = st.lists(st.one_of(
    st.tuples(st.just("spawn"), st.sampled_from(range(len(TYPESETS))), st.integers(1, 5)),
    st.tuples(st.just("despawn"), st.lists(st.integers(0, 1000), max_size=7))),
    max_size=30)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.sampled_from(sorted(GROUPS)), ops=OPS)
def test_few_spawns_and_despawns_leave_the_general_rows(
        config: str, ops: list[tuple[Any, ...]]) -> None:
    worlds = (new_world(GROUPS[config]), new_world(GROUPS[config]),
              new_world(GROUPS[config]))
    for tick, (kind, arg, *rest) in enumerate(ops):
        if kind == "spawn":
            run_three(spawn_op(TYPESETS[arg], rest[0], tick), worlds)
        else:
            run_three(despawn_op(arg), worlds)


@pytest.mark.parametrize("config", sorted(GROUPS))
@pytest.mark.parametrize("seed", range(4))
def test_churn_of_few_keys_leaves_the_general_rows(config: str, seed: int) -> None:
    """Spawns that leave non-members behind each prefix, then despawns of 2..8 keys
    spread over prefixes and non-members, in every group setup."""
    rng = random.Random(seed)
    worlds = (new_world(GROUPS[config]), new_world(GROUPS[config]),
              new_world(GROUPS[config]))
    for tick in range(40):
        types = TYPESETS[rng.randrange(len(TYPESETS))]
        run_three(spawn_op(types, rng.randint(1, 4), tick), worlds)
        if tick % 3 == 2:
            run_three(despawn_op([rng.randrange(1000) for _ in range(rng.randint(2, 8))]),
                      worlds)


def test_two_keys_of_one_group_leave_the_general_order() -> None:
    """The reviewer's case: sequential swap-removals put the last two rows in the
    other order."""
    worlds = tuple(new_world([(A, B)]) for _ in range(3))
    for w in worlds:
        w.spawn_batch(A(x=np.arange(5, dtype=np.float32)), B(), count=5)
    keys = worlds[0].store(A).entities[:2].tolist()
    run_three(lambda w: w.despawn_batch(keys), worlds)  # type: ignore[arg-type]
    assert worlds[0].store(A).entities[:3].tolist() == [keys[0] + 3, keys[0] + 4,
                                                        keys[0] + 2]


@pytest.mark.parametrize("config", ["flat", "nested", "nested3"])
@pytest.mark.parametrize("outside", range(6))
@pytest.mark.parametrize("k", range(2, 5))
def test_a_few_joining_past_non_members_leave_the_general_order(
        config: str, outside: int, k: int) -> None:
    """``k`` entities joining the groups while ``outside`` rows of each level sit past
    its prefix (the block move rotates them where they overlap the fresh rows)."""
    worlds = tuple(new_world(GROUPS[config]) for _ in range(3))
    for w in worlds:
        w.spawn_batch(A(), B(), C(), D(), count=2)
        w.spawn_batch(A(x=np.arange(outside, dtype=np.float32)), count=outside)
        w.spawn_batch(A(), B(), count=outside)
        w.spawn_batch(A(), B(), C(), count=outside)
    run_three(spawn_op((A, B, C, D), k, 7), worlds)  # type: ignore[arg-type]
    run_three(spawn_op((A, B, C), k, 8), worlds)  # type: ignore[arg-type]


def test_few_removal_plan_is_removal_plan() -> None:
    from ecs_engine.storage import few_removal_plan

    rng = random.Random(5)
    for _ in range(20000):
        bounds = sorted(rng.randint(0, 12) for _ in range(rng.randint(0, 3)))
        n = rng.randint(max(bounds, default=0), 14)
        if n == 0:
            continue
        bounds.append(n)
        rows = sorted(rng.sample(range(n), rng.randint(1, min(n, 8))))
        holes, sources, cut = removal_plan(np.array(rows, np.int64), bounds)
        assert few_removal_plan(rows, bounds) == (holes.tolist(), sources.tolist(), cut)
        # one move at a time, in order, gives the vectorised moves' rows
        want = np.arange(n)
        want[holes] = want[sources]
        got = list(range(n))
        for dst, src in zip(*few_removal_plan(rows, bounds)[:2], strict=True):
            got[dst] = got[src]
        assert got[: n - cut[-1]] == want[: n - cut[-1]].tolist()


@component(name="RowsNarrow")
class Narrow:
    a: np.float32 = 0.0
    b: np.float16 = 0.0
    c: np.int32 = 0


SNAN32 = np.array([0x7F800001, 0x7FC00000, 0xFFA00005, 0x3F800000],
                  np.uint32).view(np.float32)
SNAN16 = np.array([0x7C01, 0x7E00, 0xFD01, 0x3C00], np.uint16).view(np.float16)


@pytest.mark.parametrize("call", [
    lambda w: w.spawn(Narrow(a=SNAN32[0], b=SNAN16[0], c=1)),
    lambda w: w.spawn(Narrow(a=SNAN32[2])),
    lambda w: w.spawn_batch(Narrow(a=SNAN32, b=SNAN16)),
    lambda w: w.spawn_batch(Narrow(a=SNAN32[:2], c=np.arange(2, dtype=np.int32))),
    lambda w: w.spawn_batch(Narrow(a=SNAN32[0], b=SNAN16[2]), count=3),
    lambda w: w.spawn_batch(Narrow(b=SNAN16[:3]), A(), count=3),
    lambda w: w.spawn_batch(Narrow(a=SNAN32[:1], b=SNAN16[2:3])),  # a batch of one row
    lambda w: w.spawn_batch(Narrow(a=SNAN32[3:], c=np.ones(1, np.int32)), A()),
])
def test_signalling_nans_keep_their_bits_on_the_fast_paths(
        call: Callable[[World], Any]) -> None:
    fast, deferred = World(seed=1), World(seed=1)
    for w in (fast, deferred):
        w.register(Narrow, A, Probe)
    call(fast)
    with deferred.query(Probe, readonly=(Probe,)):
        call(deferred)
    assert layout(fast) == layout(deferred)
    store = fast.store(Narrow)
    given = store.data[: store.n]["a"].view(np.uint32).tolist()
    assert all(bits in SNAN32.view(np.uint32).tolist() + [0] for bits in given)


def test_a_signalling_nan_default_keeps_its_bits() -> None:
    snan = SNAN32[0]

    @component(name="RowsNanDefault")
    class NanDefault:
        a: np.float32 = field(np.float32, default=snan)
        b: np.float64 = 0.0

    fast, deferred = World(seed=1), World(seed=1)
    for w in (fast, deferred):
        w.register(NanDefault, Probe)

    def calls(w: World) -> None:
        w.spawn(NanDefault(b=1.0))
        w.spawn_batch(NanDefault(), count=2)
        w.spawn_batch(NanDefault(b=np.arange(3.0)))

    calls(fast)
    with deferred.query(Probe, readonly=(Probe,)):
        calls(deferred)
    assert layout(fast) == layout(deferred)
    store = deferred.store(NanDefault)
    assert set(store.data[: store.n]["a"].view(np.uint32).tolist()) == {0x7F800001}


@component(name="RowsFresh")
class Fresh:
    v: np.int32 = 0


@pytest.mark.parametrize("call", [
    lambda w, dead: w.spawn(Fresh(), ChildOf(parent=dead)),
    lambda w, dead: w.spawn_batch(Fresh(v=[1, 2]), ChildOf(parent=dead)),
    lambda w, dead: w.spawn_batch(Fresh(), ChildOf(parent=dead), count=3),
    lambda w, dead: w.spawn_batch(Fresh(v=[1, 2]), ChildOf(parent=[dead, dead])),
])
def test_a_spawn_refused_for_a_dead_parent_registers_nothing(
        call: Callable[[World, int], Any]) -> None:
    world = World(seed=1)
    dead = world.spawn(A())
    world.despawn(dead)
    before = world.component_types, world.state_hash()
    with pytest.raises(KeyError):
        call(world, dead)
    assert (world.component_types, world.state_hash()) == before
