"""Nested owning groups (EnTT's nested groups): a group over (A, B, C) nested in (A, B)
keeps its members first inside (A, B)'s prefix, so queries over (A, B, C), (B, C) or
(A, C) are views while only its members match them.

A stateful model test runs random programs (single and batched spawns and despawns, adds
and removes that cross the levels, writing queries that may nest groups themselves,
snapshots restored directly and through bytes, blueprints) against a plain dict of
entities, checking after every step that every group (nested ones too) is aligned and
complete, that queries return exactly the modelled entities and values, and that the
queries a nested group serves are views. Unit tests cover the API and bad save files.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ecs_engine import SaveFileError, Snapshot, World, component
from tests.world_state import check_invariants, world_state


@component(name="NestA")
class A:
    v: np.int64 = 0


@component(name="NestB")
class B:
    v: np.int64 = 0


@component(name="NestC")
class C:
    v: np.int64 = 0


@component(name="NestD")
class D:
    v: np.int64 = 0


@component(name="NestE")
class E:
    v: np.int64 = 0


TYPES = (A, B, C, D, E)
MIXES = ((A, B), (A, B, C), (A, B, C, D), (B, C), (A, C), (C,), (A, B, D), (A, B, C, D, E),
         (B, C, D), (A,), (E,), (A, B, E))
SHAPES = ((A, B), (A, B, C), (B, C), (A, C), (C, D), (B, C, D), (A, B, C, D), (B, D), (C,),
          (A, E), (B, C, E))
mixes = st.sampled_from(MIXES)
types = st.sampled_from(TYPES)
values = st.integers(-1000, 1000)


def served(world: World, shape: tuple[type, ...], model: dict[int, dict[type, int]]) -> bool:
    """True when a group of ``world`` holds every type of ``shape`` and every modelled
    entity with those types is one of its members: the query must then be a view."""
    matches = [k for k, comps in model.items() if all(t in comps for t in shape)]
    for group in world._groups:
        if set(shape) <= set(group.types):
            members = [k for k, comps in model.items() if all(t in comps for t in group.types)]
            if sorted(members) == sorted(matches):
                return True
    return False


class NestedGroups(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.model: dict[int, dict[type, int]] = {}
        self.saved: list[tuple[Any, dict[int, dict[type, int]]]] = []

    @initialize(levels=st.integers(0, 3), auto=st.booleans())
    def setup(self, levels: int, auto: bool) -> None:
        self.world = World(auto_group=auto)
        chain = ((A, B), (A, B, C), (A, B, C, D))
        for level in chain[:levels]:
            self.world.group(*level)

    def live(self) -> list[int]:
        return sorted(self.model)

    @rule(mix=mixes, value=values)
    def spawn(self, mix: tuple[type, ...], value: int) -> None:
        key = int(self.world.spawn(*(t(v=value + i) for i, t in enumerate(mix))))
        self.model[key] = {t: value + i for i, t in enumerate(mix)}

    @rule(mix=mixes, count=st.sampled_from([0, 1, 3, 5, 40]), value=values)
    def spawn_batch(self, mix: tuple[type, ...], count: int, value: int) -> None:
        base = np.arange(count, dtype=np.int64) + value
        keys = self.world.spawn_batch(*(t(v=base + i) for i, t in enumerate(mix)),
                                      count=count)
        for j, key in enumerate(keys.tolist()):
            self.model[key] = {t: value + j + i for i, t in enumerate(mix)}

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def despawn(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(self.live()))
        self.world.despawn(key)
        del self.model[key]

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def despawn_batch(self, data: st.DataObject) -> None:
        live = self.live()
        picked = data.draw(st.lists(st.sampled_from(live), unique=True,
                                    max_size=min(len(live), 40)))
        self.world.despawn_batch(np.array(picked, np.uint64))
        for key in picked:
            del self.model[key]

    @precondition(lambda self: self.model)
    @rule(data=st.data(), ctype=types, value=values)
    def add(self, data: st.DataObject, ctype: type, value: int) -> None:
        key = data.draw(st.sampled_from(self.live()))
        self.world.add(key, ctype(v=value))
        self.model[key][ctype] = value

    @precondition(lambda self: self.model)
    @rule(data=st.data(), ctype=types, value=values)
    def add_batch(self, data: st.DataObject, ctype: type, value: int) -> None:
        picked = data.draw(st.lists(st.sampled_from(self.live()), unique=True, max_size=30))
        self.world.add_batch(np.array(picked, np.uint64), ctype(v=value))
        for key in picked:
            self.model[key][ctype] = value

    @precondition(lambda self: self.model)
    @rule(data=st.data(), ctype=types)
    def remove(self, data: st.DataObject, ctype: type) -> None:
        having = [k for k in self.live() if ctype in self.model[k]]
        if not having:
            return
        key = data.draw(st.sampled_from(having))
        self.world.remove(key, ctype)
        del self.model[key][ctype]

    @precondition(lambda self: self.model)
    @rule(data=st.data(), ctype=types)
    def remove_batch(self, data: st.DataObject, ctype: type) -> None:
        having = [k for k in self.live() if ctype in self.model[k]]
        picked = data.draw(st.lists(st.sampled_from(having), unique=True, max_size=30)
                           if having else st.just([]))
        self.world.remove_batch(np.array(picked, np.uint64), ctype)
        for key in picked:
            del self.model[key][ctype]

    @rule(shape=st.sampled_from(SHAPES), step=st.booleans())
    def write(self, shape: tuple[type, ...], step: bool) -> None:
        """A writing query adds one to its first type (and may nest a group)."""

        def system(world: World, dt: float) -> None:
            with world.query(*shape, readonly=shape[1:]) as q:
                q[shape[0]]["v"] += 1

        if step:
            self.world.add_system(system, name="write")
            self.world.step(0.0)
            self.world.remove_system("write")
        else:
            system(self.world, 0.0)
        for comps in self.model.values():
            if all(t in comps for t in shape):
                comps[shape[0]] += 1

    @rule()
    def snapshot(self) -> None:
        snap = self.world.snapshot()
        self.saved.append((snap, {k: dict(c) for k, c in self.model.items()}))
        self.saved = self.saved[-3:]

    @precondition(lambda self: self.saved)
    @rule(data=st.data(), through_bytes=st.booleans())
    def restore(self, data: st.DataObject, through_bytes: bool) -> None:
        snap, model = data.draw(st.sampled_from(self.saved))
        if through_bytes:  # a foreign snapshot: every group checked before it applies
            snap = Snapshot.from_bytes(snap.to_bytes())
        self.world.restore(snap)
        self.model = {k: dict(c) for k, c in model.items()}

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def instantiate(self, data: st.DataObject) -> None:
        picked = data.draw(st.lists(st.sampled_from(self.live()), unique=True, min_size=1,
                                    max_size=10))
        inst = self.world.instantiate(self.world.extract(np.array(picked, np.uint64)))
        for old, new in zip(picked, inst.keys.tolist(), strict=True):
            self.model[new] = dict(self.model[old])

    @invariant()
    def matches_the_model(self) -> None:
        world = self.world
        check_invariants(world)
        assert len(world) == len(self.model)
        for shape in SHAPES:
            expected = sorted(k for k, c in self.model.items() if all(t in c for t in shape))
            with world.query(*shape, readonly=shape) as q:
                keys = q.entities.tolist()
                assert sorted(keys) == expected, [t.__name__ for t in shape]
                for t in shape:
                    assert q[t]["v"].tolist() == [self.model[k][t] for k in keys]
                if served(world, shape, self.model):
                    assert q.aligned, [t.__name__ for t in shape]


def test_nested_groups_match_the_model() -> None:
    run_state_machine_as_test(NestedGroups, settings=settings(
        max_examples=200, stateful_step_count=50, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]))


def chain_world() -> tuple[World, np.ndarray]:
    world = World(auto_group=False)
    world.group(A, B)
    world.group(A, B, C)
    keys = world.spawn_batch(A(v=np.arange(12)), B(), count=12)
    world.add_batch(keys[::3], C(v=7))
    return world, keys


def test_a_nested_group_serves_queries_over_its_types_with_views() -> None:
    world, keys = chain_world()
    outer, inner = world._groups
    assert inner.outer is outer and outer.inner is inner and inner.size == 4
    for shape in ((A, B, C), (B, C), (A, C), (A, B)):
        with world.query(*shape) as q:
            assert q.aligned
    with world.query(B, C) as q:
        assert sorted(q.entities.tolist()) == sorted(keys[::3].tolist())
        q[C]["v"] += 1  # a view: the store sees it at once
        assert world.get(int(keys[0]), C)["v"] == 8
    # an entity with B and C but not A: (B, C) is no longer the nested prefix
    loose = world.spawn(B(), C())
    with world.query(B, C) as q:
        assert not q.aligned and loose in q.entities.tolist()
    world.despawn(loose)
    with world.query(B, C) as q:
        assert q.aligned


def test_group_nests_only_in_the_innermost_group_with_all_its_types() -> None:
    world, _ = chain_world()
    with pytest.raises(ValueError, match="already belong"):
        world.group(A, B, D)  # (A, B) holds (A, B, C) already: a chain only
    with pytest.raises(ValueError, match="already belong"):
        world.group(A, C, D)  # B missing
    with pytest.raises(ValueError, match="already belong"):
        world.group(A, B, C)  # the same group again
    deeper = world.group(D, A, B, C)
    assert deeper.depth == 2 and deeper.own == (world.store(D),)


def test_a_writing_query_nests_a_group_when_its_matches_are_members() -> None:
    world = World()
    keys = world.spawn_batch(A(), B(), count=10)
    with world.query(A, B) as q:  # makes the group (A, B)
        assert q.aligned
    world.add_batch(keys[1::2], C())
    with world.query(B, C, readonly=(C,)) as q:  # every match has A: nests (C, A, B)
        assert q.aligned and len(q) == 5
    assert [len(g.types) for g in world._groups] == [2, 3]
    world.spawn_batch(A(), B(), C(), count=3)  # more members: still one view
    with world.query(B, C, readonly=(C,)) as q:
        assert q.aligned and len(q) == 8


def test_no_nested_group_for_a_query_with_matches_outside_the_group() -> None:
    world = World()
    world.spawn_batch(A(), B(), count=10)
    with world.query(A, B):
        pass
    world.spawn_batch(B(), C(), count=2)  # matches of (B, C) without A
    world.spawn_batch(A(), B(), C(), count=2)
    with world.query(B, C, readonly=(C,)) as q:
        assert len(q) == 4
    assert len(world._groups) == 1


def test_nested_groups_survive_snapshots_saves_and_restores(tmp_path: Any) -> None:
    world, keys = chain_world()
    before = world_state(world)
    snap = world.snapshot()
    world.despawn_batch(keys[:5])
    world.remove_batch(keys[6::3], C)
    world.restore(snap)
    assert world_state(world) == before
    path = tmp_path / "nested.save"
    world.save(path)
    other = World(auto_group=False)
    other.register(A, B, C)
    other.load(path)
    assert world_state(other) == before
    assert other.state_hash() == world.state_hash()
    assert other._groups[1].outer is other._groups[0]


def test_a_save_with_a_nested_group_out_of_order_is_refused() -> None:
    world, _ = chain_world()
    snap = world.snapshot()
    stores = list(snap.stores)
    i = next(j for j, s in enumerate(stores) if s.name == "NestC")
    c = stores[i]
    entities = c.entities.copy()
    entities[[0, 1]] = entities[[1, 0]]  # C's first rows no longer in the group's order
    data = c.data.copy()
    data[[0, 1]] = data[[1, 0]]
    from dataclasses import replace
    stores[i] = replace(c, entities=entities, chunks=(data,), sparse=None, rows=None)
    bad = replace(snap, stores=tuple(stores))
    fresh = World(auto_group=False)
    fresh.register(A, B, C)
    with pytest.raises(SaveFileError, match="not aligned"):
        fresh.restore(Snapshot.from_bytes(bad.to_bytes()))
    assert len(fresh) == 0 and fresh._groups == []


def test_a_save_with_two_groups_nested_in_one_is_refused() -> None:
    world = World(auto_group=False)
    world.group(A, B)
    world.spawn_batch(A(), B(), C(), D(), count=3)
    snap = world.snapshot()
    from dataclasses import replace
    bad = replace(snap, groups=(("NestA", "NestB"), ("NestC", "NestA", "NestB"),
                                ("NestD", "NestA", "NestB")))
    fresh = World()
    fresh.register(A, B, C, D)
    with pytest.raises(SaveFileError, match="two nested groups"):
        fresh.restore(Snapshot.from_bytes(bad.to_bytes()))
