"""Stateful model test of the paths that let a query skip checking its rows and reuse its
Query object: the world's layout clock (a plan trusts its rows while the clock stands),
the prefix check in ``Query.__enter__``, and ``World.query`` handing out a plan's last
Query again when nothing else holds it.

Random programs over two worlds (each its own clock and plans) of spawns and despawns
(row by row and batched), adds and removes, groups made by hand or by writing queries,
parent links and their cascading despawns, blueprint instantiation, snapshot restores
(own and through bytes, the load path), ``_all_or_nothing`` blocks that fail halfway after
a query resolved inside them, queries kept by the caller across all of that, nested blocks
of the same and different shapes with deferred spawns and despawns and exceptions inside,
and a system that nests queries inside ``world.step`` (where writing queries align rows).
After every step every query shape, and every kept query, must show exactly the model's
entities and values, and no Query handed out may be one whose block is open.

Each mechanism broken on purpose makes this fail within its examples, random or the CI
profile's (checked while writing it: no clock bump in ``touch_layout``,
``_touch_layout_rows``, ``place_rows``, a restore's layout or a failed
``_all_or_nothing``; reuse without the reference count check). The bumps in ``Group``
come with a row change in every path the model reaches; tests/test_layout_clock.py has
the one that does not (a group over rows already in order).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ecs_engine import ChildOf, Query, Snapshot, World, component
from ecs_engine.query import IDLE_REFS


@component
class CA:
    v: np.int64 = 0


@component
class CB:
    v: np.int64 = 0


@component
class CC:
    v: np.int64 = 0


@component
class CFresh:  # registered only inside failing _all_or_nothing blocks (dropped again)
    v: np.int64 = 0


VALUED: tuple[type, ...] = (CA, CB, CC)
Shape = tuple[tuple[type, ...], tuple[type, ...], tuple[type, ...]]  # types, without, readonly
SHAPES: tuple[Shape, ...] = (
    ((CA,), (), ()), ((CA, CB), (), ()), ((CB, CA), (), (CB,)), ((CA, CB, CC), (), ()),
    ((CA, CC), (CB,), ()), ((CA,), (CFresh,), ()), ((CB,), (CC,), ()), ((CC,), (), ()),
    ((CA, CB), (CFresh,), ()), ((CB, CC), (), ()), ((CA, ChildOf), (), ()),
    ((CC, CA), (), (CC, CA)))
GROUPS: tuple[tuple[type, type], ...] = ((CA, CB), (CA, CC), (CB, CC))
Model = dict[int, dict[type, int]]  # key -> type -> value (ChildOf: the parent key)


def _copy(model: Model) -> Model:
    return {k: dict(c) for k, c in model.items()}


def _matches(model: Model, shape: Shape) -> list[int]:
    types, without, _ = shape
    return [k for k, c in model.items()
            if all(t in c for t in types) and not any(t in c for t in without)]


def _column(q: Query, t: type) -> list[int]:
    return (q[t]["parent"] if t is ChildOf else q[t]["v"]).tolist()


def _writable(shape: Shape) -> list[type]:
    types, _, readonly = shape
    return [t for t in types if t not in readonly and t is not ChildOf]


class Boom(Exception):
    pass


class Side:
    """One world and its model."""

    def __init__(self, auto_group: bool) -> None:
        self.world = World(auto_group=auto_group)
        self.world.register(*VALUED)
        self.model: Model = {}
        self.snaps: list[tuple[Snapshot, Model]] = []
        self.kept: list[tuple[Shape, Query]] = []
        self.counter = 0
        self.open: set[int] = set()  # ids of queries whose block is open
        self.world.add_system(self.system)

    def system(self, world: World, dt: float) -> None:
        """In ``world.step`` (writing queries may make groups and align rows): a second
        shape nested inside the first, then a third."""
        model = self.model
        with world.query(CA, CB) as q:
            q[CA]["v"] += 1
            for k in q.entities.tolist():
                model[k][CA] += 1
            with world.query(CC, CA, readonly=(CA,)) as r:
                r[CC]["v"] += 2
                for k in r.entities.tolist():
                    model[k][CC] += 2
        with world.query(CB, CC) as q:
            q[CB]["v"] += 3
            for k in q.entities.tolist():
                model[k][CB] += 3

    def value(self) -> int:
        self.counter += 1
        return self.counter

    def query(self, shape: Shape) -> Query:
        types, without, readonly = shape
        q = self.world.query(*types, without=without, readonly=readonly)
        assert id(q) not in self.open and q._in is None, "an open query was handed out"
        return q

    def check_block(self, q: Query, shape: Shape, model: Model,
                    pending: tuple[type, ...] = ()) -> None:
        """``pending``: types an enclosing block wrote (a gathered copy reaches the
        store at that block's end), not compared."""
        keys = q.entities.tolist()
        assert sorted(keys) == sorted(_matches(model, shape)), shape
        for t in shape[0]:
            if t not in pending:
                assert _column(q, t) == [model[k][t] for k in keys], (shape, t)

    def check(self, shape: Shape, q: Query | None = None) -> None:
        q = self.query(shape) if q is None else q
        with q:
            self.check_block(q, shape, self.model)

    def dead_with_children(self, doomed: set[int]) -> set[int]:
        dead = set(doomed)
        grew = True
        while grew:
            below = {k for k, c in self.model.items()
                     if k not in dead and c.get(ChildOf) in dead}
            dead |= below
            grew = bool(below)
        return dead


class ClockMachine(RuleBasedStateMachine):
    steps = 0  # invariant checks run (across examples)

    def __init__(self) -> None:
        super().__init__()
        self.sides = [Side(True), Side(False)]

    # -- structural changes ---------------------------------------------------------
    @rule(w=st.integers(0, 1), types=st.sets(st.sampled_from(VALUED), min_size=1),
          count=st.integers(1, 5), batch=st.booleans())
    def spawn(self, w: int, types: set[type], count: int, batch: bool) -> None:
        side = self.sides[w]
        ordered = [t for t in VALUED if t in types]
        if count == 1 and not batch:
            v = side.value()
            key = int(side.world.spawn(*(t(v=v) for t in ordered)))
            side.model[key] = dict.fromkeys(ordered, v)
            return
        values = np.array([side.value() for _ in range(count)], np.int64)
        keys = side.world.spawn_batch(*(t(v=values) for t in ordered), count=count).tolist()
        for key, v in zip(keys, values.tolist(), strict=True):
            side.model[int(key)] = dict.fromkeys(ordered, v)

    @precondition(lambda self: any(s.model for s in self.sides))
    @rule(w=st.integers(0, 1), data=st.data(), batch=st.booleans())
    def despawn(self, w: int, data: st.DataObject, batch: bool) -> None:
        side = self.sides[w]
        if not side.model:
            return
        keys = sorted(side.model)
        doomed = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=4, unique=True))
        if batch:
            side.world.despawn_batch(np.array(doomed, np.uint64))
        else:
            for key in doomed:
                if side.world.is_alive(key):
                    side.world.despawn(key)
        for key in side.dead_with_children(set(doomed)):
            del side.model[key]

    @precondition(lambda self: any(s.model for s in self.sides))
    @rule(w=st.integers(0, 1), data=st.data(), t=st.sampled_from(VALUED))
    def add_or_remove(self, w: int, data: st.DataObject, t: type) -> None:
        side = self.sides[w]
        if not side.model:
            return
        key = data.draw(st.sampled_from(sorted(side.model)))
        if t in side.model[key]:
            side.world.remove(key, t)
            del side.model[key][t]
        else:
            v = side.value()
            side.world.add(key, t(v=v))
            side.model[key][t] = v

    @rule(w=st.integers(0, 1), pair=st.sampled_from(GROUPS))
    def group(self, w: int, pair: tuple[type, type]) -> None:
        world = self.sides[w].world
        if all(world.store(t).owner is None for t in pair):
            world.group(*pair)

    @precondition(lambda self: any(len(s.model) >= 2 for s in self.sides))
    @rule(w=st.integers(0, 1), data=st.data())
    def parent(self, w: int, data: st.DataObject) -> None:
        side = self.sides[w]
        if len(side.model) < 2:
            return
        child, parent = data.draw(st.lists(st.sampled_from(sorted(side.model)), min_size=2,
                                           max_size=2, unique=True))
        up: int | None = parent
        while up is not None and up != child:
            up = side.model[up].get(ChildOf)
        if up is None and ChildOf not in side.model[child]:  # no cycle, no second parent
            side.world.set_parent(child, parent)
            side.model[child][ChildOf] = parent

    @precondition(lambda self: any(s.model for s in self.sides))
    @rule(w=st.integers(0, 1), data=st.data())
    def instantiate(self, w: int, data: st.DataObject) -> None:
        side = self.sides[w]
        if not side.model:
            return
        root = data.draw(st.sampled_from(sorted(side.model)))
        subtree = {root}
        grew = True
        while grew:
            below = {k for k, c in side.model.items()
                     if k not in subtree and c.get(ChildOf) in subtree}
            subtree |= below
            grew = bool(below)
        inst = side.world.instantiate(side.world.extract(root))
        for old in subtree:
            new = int(inst.map(old))
            comps = dict(side.model[old])
            if old == root:
                comps.pop(ChildOf, None)
            elif ChildOf in comps:
                comps[ChildOf] = int(inst.map(comps[ChildOf]))
            side.model[new] = comps

    # -- restores -------------------------------------------------------------------
    @rule(w=st.integers(0, 1))
    def snapshot(self, w: int) -> None:
        side = self.sides[w]
        side.snaps.append((side.world.snapshot(), _copy(side.model)))

    @precondition(lambda self: any(s.snaps for s in self.sides))
    @rule(w=st.integers(0, 1), data=st.data(), through_bytes=st.booleans())
    def restore(self, w: int, data: st.DataObject, through_bytes: bool) -> None:
        side = self.sides[w]
        if not side.snaps:
            return
        snap, model = data.draw(st.sampled_from(side.snaps))
        side.world.restore(Snapshot.from_bytes(snap.to_bytes()) if through_bytes else snap)
        side.model = _copy(model)

    @rule(w=st.integers(0, 1), shape=st.sampled_from(SHAPES), fresh=st.booleans(),
          spawn=st.booleans())
    def failed_level_load(self, w: int, shape: Shape, fresh: bool, spawn: bool) -> None:
        """An ``_all_or_nothing`` block that changes structure, resolves a query (which
        then trusts the clock) and fails: the world must come back whole."""
        side = self.sides[w]
        world = side.world
        try:
            with world._all_or_nothing():
                v = side.value()
                if spawn:
                    world.spawn(CA(v=v), CB(v=v))
                if side.model:
                    key = max(side.model)
                    if fresh:
                        world.add(key, CFresh(v=v))
                    elif side.model[key].get(CC) is None:
                        world.add(key, CC(v=v))
                    else:
                        world.remove(key, CC)
                with world.query(*shape[0], without=shape[1], readonly=shape[2]) as q:
                    len(q)
                with world.query(CA, without=(CFresh,)) as q:
                    len(q)
                raise Boom
        except Boom:
            pass

    # -- queries --------------------------------------------------------------------
    @rule(w=st.integers(0, 1), shape=st.sampled_from(SHAPES))
    def keep(self, w: int, shape: Shape) -> None:
        side = self.sides[w]
        side.kept.append((shape, side.query(shape)))
        del side.kept[:-3]

    @rule(w=st.integers(0, 1), outer=st.sampled_from(SHAPES), inner=st.sampled_from(SHAPES),
          spawn_inside=st.booleans(), despawn_inside=st.booleans(),
          raise_inside=st.booleans(), use_kept=st.booleans(), reenter=st.booleans())
    def nested(self, w: int, outer: Shape, inner: Shape, spawn_inside: bool,
               despawn_inside: bool, raise_inside: bool, use_kept: bool,
               reenter: bool) -> None:
        """An outer block writing its first writable column, an inner block (maybe the
        same shape, maybe a kept query, maybe the outer Query object itself entered
        again) checking and writing the others, structural changes deferred inside,
        maybe an exception leaving both."""
        side = self.sides[w]
        world = side.world
        model = side.model
        later: list[Any] = []  # deferred changes: applied to the model at the end
        q_outer = side.query(outer)
        try:
            with q_outer as q:
                side.open.add(id(q))
                side.check_block(q, outer, model)
                written = _writable(outer)[:1]
                for t in written:
                    q[t]["v"] += 1
                    for k in q.entities.tolist():
                        model[k][t] += 1
                kept = [k for s, k in side.kept if s == inner]
                if reenter:
                    q_inner, inner = q, outer
                else:
                    q_inner = kept[-1] if use_kept and kept else side.query(inner)
                    assert q_inner is not q
                with q_inner as r:
                    side.open.add(id(r))
                    side.check_block(r, inner, model, tuple(written))
                    for t in _writable(inner):
                        if t not in written:
                            r[t]["v"] += 10
                            for k in r.entities.tolist():
                                model[k][t] += 10
                    if spawn_inside:
                        v = side.value()
                        key = int(world.spawn(CA(v=v), CC(v=v)))
                        later.append(lambda m, key=key, v=v: m.__setitem__(key, {CA: v, CC: v}))
                    if despawn_inside and r.entities.size:
                        victim = int(r.entities[0])
                        world.despawn(victim)
                        later.append(lambda m, victim=victim: [
                            m.pop(k, None) for k in side.dead_with_children({victim})])
                    if r is not q:
                        side.open.discard(id(r))
                    if raise_inside:
                        raise Boom
                side.open.discard(id(q))
        except Boom:
            pass
        finally:
            side.open.clear()
        for change in later:
            change(model)

    @rule(w=st.integers(0, 1))
    def step(self, w: int) -> None:
        self.sides[w].world.step(1 / 60)

    # -- the invariant --------------------------------------------------------------
    @invariant()
    def every_query_matches_the_model(self) -> None:
        ClockMachine.steps += 1
        for side in self.sides:
            for shape in SHAPES:
                side.check(shape)
            for shape, q in side.kept:
                side.check(shape, q)
            assert not side.world._open_queries


SETTINGS = settings(
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_queries_match_the_model_through_clock_and_reuse_paths() -> None:
    ClockMachine.steps = 0
    run_state_machine_as_test(ClockMachine, settings=SETTINGS)
    assert ClockMachine.steps >= 5000, ClockMachine.steps  # (~13,000 in ~10 s)


def test_the_idle_reference_count_is_what_world_query_sees() -> None:
    """The measured count is the one a plan's idle, unreferenced query shows in
    ``World.query``: otherwise nothing would ever be reused (or, lower, everything)."""
    world = World()
    world.spawn(CA())
    with world.query(CA) as q:
        first = id(q)
    del q
    assert id(world.query(CA)) == first
    assert IDLE_REFS >= 2
