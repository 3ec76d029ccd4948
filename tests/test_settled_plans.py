"""Gathered query plans that nothing but a structural change could serve better are
"settled": while the world's layout clock stands, their blocks take the rows as they are,
without calling ``QueryPlan.resolve`` (as aligned plans do). A plan gathered only because
of when it ran (inside another block, or outside a step) is not, and switching
``auto_group`` moves the clock so settled plans look again."""

from __future__ import annotations

import numpy as np
import pytest

from ecs_engine import World, component
from tests.plan_counting import count_resolves


@component(name="SettleA")
class A:
    v: np.int64 = 0


@component(name="SettleB")
class B:
    v: np.int64 = 0


def count_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    return count_resolves(monkeypatch, "resolve")


def scattered(auto_group: bool) -> tuple[World, list[int]]:
    """B on every other A: a query over (A, B) gathers unless a group is made."""
    world = World(auto_group=auto_group)
    keys = []
    for i in range(6):
        comps: list[object] = [A(v=i)] + ([B(v=i)] if i % 2 == 0 else [])
        keys.append(int(world.spawn(*comps)))
    return world, keys


def bump(world: World, dt: float) -> None:
    with world.query(A, B, readonly=(A,)) as q:
        q[B]["v"] += 1


def test_a_settled_gathered_plan_skips_resolve_until_the_clock_moves(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world, keys = scattered(auto_group=False)
    world.add_system(bump)
    world.step(0.0)  # resolves (gathered: no group may be made)
    calls = count_calls(monkeypatch)
    for _ in range(3):
        world.step(0.0)
    assert calls[0] == 0
    assert [world.get(k, B)["v"] for k in keys[::2]] == [4, 6, 8]
    key = int(world.spawn(A(v=10), B(v=10)))  # the clock moves: rows are looked at again
    world.step(0.0)
    assert calls[0] == 1
    assert world.get(key, B)["v"] == 11
    with world.query(A, B, readonly=(A, B)) as q:
        assert not q.aligned and len(q) == 4


def test_switching_auto_group_on_lets_a_settled_plan_make_its_group() -> None:
    world, _ = scattered(auto_group=False)
    world.add_system(bump)
    world.step(0.0)
    with world.query(A, B, readonly=(A, B)) as q:
        assert not q.aligned
    world.auto_group = True
    world.step(0.0)  # the same plan, no structural change: it makes the group now
    with world.query(A, B, readonly=(A, B)) as q:
        assert q.aligned
    assert len(world._groups) == 1


def test_a_plan_gathered_inside_another_block_is_not_settled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world, _ = scattered(auto_group=True)

    def nested(world: World, dt: float) -> None:
        with world.query(A, readonly=(A,)):
            bump(world, dt)  # inside another block: gathered, no group made here

    world.add_system(nested)
    world.step(0.0)
    calls = count_calls(monkeypatch)
    world.step(0.0)
    assert calls[0] >= 1  # still looks on every call: an outermost one could do better
    world.remove_system(nested)
    world.add_system(bump)
    world.step(0.0)  # outermost in a step: makes the group
    with world.query(A, B, readonly=(A, B)) as q:
        assert q.aligned


@component(name="SettleF")
class F:
    v: np.int64 = 0


def test_a_plan_seen_from_inside_another_block_is_not_settled_for_outer_calls() -> None:
    """(D, B) gathers in a step beside a nested (C, A, B) whose chain is not the world's
    first group (so it does not follow (A, B)'s order); its matches then join (C, A, B)
    where they sit (the clock moves, no row of its stores does). Asked first from inside
    another block (which cannot nest), the plan must not settle: the next outermost call
    nests (D, C, A, B), as a world loaded from a save of that state does."""
    from tests.test_nested_groups import A as A_
    from tests.test_nested_groups import B as B_
    from tests.test_nested_groups import C, D, E
    from tests.test_nested_groups_review import stepped, write
    from tests.world_state import check_invariants

    world = World(seed=1)
    world.group(E, F)  # the first group: (D, B) cannot follow (A, B)'s order
    world.group(A_, B_)
    for extra in (C, C, D, D):
        world.spawn(A_(), B_(), extra())
    world.group(C, A_, B_)  # over the first two rows: nothing moves
    assert not stepped(world, D, B_)  # gathered: its matches are not (C, A, B)'s
    assert not stepped(world, D, B_)  # (settled: its rows wait for the clock)
    for key in world.entities()[2:4].tolist():
        world.add(key, C())  # they join (C, A, B) where they sit

    def inner(w: World, dt: float) -> None:
        with w.query(A_, readonly=(A_,)):
            assert not write(w, D, B_)  # inside a block: gathered, nothing nests

    world.add_system(inner)
    world.step(0.0)
    world.remove_system(inner)
    assert stepped(world, D, B_)  # outermost in a step: nests
    check_invariants(world)
    assert [len(g.types) for g in world._groups] == [2, 2, 3, 4]
