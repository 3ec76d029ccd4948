"""Nested owning groups, adversarially: paths the model test in test_nested_groups does not
take (cached plans across restores, deferred changes, hierarchies, failed all-or-nothing
blocks, rollbacks, hand-made save files). Each test pins a bug found in review."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ecs_engine import Rollback, SaveFileError, Snapshot, World
from tests.test_nested_groups import A, B, C, D
from tests.world_state import check_invariants, world_state


def nest_world() -> World:
    """The group (A, B) over two entities with C and two with D, in that row order: a
    query over (B, C) nests (C, A, B) without moving a row, and so would one over (B, D)
    (D, A, B) were (A, B) still free to hold a nested group."""
    world = World(seed=1)
    world.group(A, B)
    world.spawn(A(), B(), C())
    world.spawn(A(), B(), C())
    world.spawn(A(), B(), D())
    world.spawn(A(), B(), D())
    return world


def write(world: World, *types: type) -> bool:
    """A writing query over ``types`` (adds one to the first); whether it was a view."""
    with world.query(*types, readonly=types[1:]) as q:
        q[types[0]]["v"] += 1
        return q.aligned


@pytest.mark.parametrize("shape", [(D, B), (B, D)])
def test_a_gathered_plan_nests_after_a_restore_to_before_the_nest_it_saw(
        shape: tuple[type, ...]) -> None:
    """A plan gathered beside a nested group (its matches are not the nested members)
    must nest its own group once a restore takes that nested group away, as the same
    query in a fresh world does: the cached rows (the plan's last, or its memo's) are
    the same, the decision is not. Otherwise the restored world's state (its groups)
    parts from the one it was restored from."""
    world = nest_world()
    snap = world.snapshot()
    assert write(world, B, C)  # nests (C, A, B)
    assert not write(world, *shape)  # gathered: its matches are not (C, A, B)'s
    world.restore(snap)  # back to before (C, A, B)
    fresh = nest_world()
    assert write(fresh, *shape)  # nests (D, A, B)
    assert write(world, *shape)
    check_invariants(world)
    assert world.state_hash() == fresh.state_hash()


def stepped(world: World, *types: type) -> bool:
    """``write`` inside ``world.step`` (where a query may also follow the first group)."""
    out: list[bool] = []
    world.add_system(lambda w, dt: out.append(write(w, *types)), name="write")
    world.step(0.0)
    world.remove_system("write")
    return out[0]


@pytest.mark.parametrize("shape", [(D, B), (B, D)])
def test_a_plan_that_followed_the_group_nests_after_a_restore_to_before_the_nest(
        shape: tuple[type, ...]) -> None:
    """Inside a step a query beside (A, B) whose matches are a run of its prefix but not
    the members of the group nested in it is a view by following (A, B)'s order; after a
    restore to before that nested group it must nest its own, as in a fresh world: the
    plan's cached view (its rows are right) held the decision made beside the nest."""
    world = nest_world()
    snap = world.snapshot()
    assert stepped(world, B, C)  # nests (C, A, B)
    assert stepped(world, *shape)  # D follows (A, B)'s order: a view, no group
    assert len(world._groups) == 2
    world.restore(snap)
    fresh = nest_world()
    assert stepped(fresh, *shape)
    assert stepped(world, *shape)
    check_invariants(world)
    assert len(world._groups) == len(fresh._groups) == 2
    assert world.state_hash() == fresh.state_hash()


def input_world() -> World:
    """``nest_world`` with a system that runs a writing query chosen by the tick's input:
    1 nests (C, A, B), 2 queries (D, B)."""
    world = nest_world()

    def system(w: World, dt: float) -> None:
        shape = {1: (B, C), 2: (D, B)}.get(w.resources.get("input", 0))
        if shape is not None:
            write(w, *shape)

    world.add_system(system)
    return world


def test_a_rollback_past_a_nest_lands_where_the_corrected_inputs_lead() -> None:
    """A misprediction nests (C, A, B); the rollback to before it re-simulates with the
    right inputs, and must reach the state of a world that got them on time (a peer):
    there (D, B) nests (D, A, B)."""
    world = input_world()
    rollback = Rollback(world, frames=4)
    rollback.advance(1)  # (B, C) nests (C, A, B)
    rollback.advance(2)  # (D, B) beside it: no nest of its own
    rollback.rollback(0, [0, 2])
    peer = input_world()
    on_time = Rollback(peer, frames=4)
    on_time.advance(0)
    on_time.advance(2)
    assert [len(g.types) for g in world._groups] == [len(g.types) for g in peer._groups]
    assert world.state_hash() == peer.state_hash()


def chain_snapshot() -> Snapshot:
    """A world with the chain (A, B) > (C, A, B) > (D, C, A, B), as a snapshot."""
    world = World(seed=2, auto_group=False)
    world.group(A, B)
    world.group(A, B, C)
    world.group(A, B, C, D)
    world.spawn_batch(A(v=np.arange(9)), B(), count=9)
    keys = world.spawn_batch(A(), B(), C(), count=6)
    world.add_batch(keys[::2], D())
    world.spawn_batch(B(), C(), D(), count=2)  # not members: A missing
    assert [g.size for g in world._groups] == [15, 6, 3]
    return world.snapshot()


def loads(groups: tuple[tuple[str, ...], ...]) -> World:
    """A world holding one entity, after restoring ``chain_snapshot`` with ``groups`` as
    its groups through bytes (raises what the restore raises, after checking that a
    refused file left the world as it was)."""
    bad = replace(chain_snapshot(), groups=groups)
    world = World(seed=3)
    world.register(A, B, C, D)
    world.spawn(A(), B())
    before = world_state(world)
    try:
        world.restore(Snapshot.from_bytes(bad.to_bytes()))
    except SaveFileError:
        assert world_state(world) == before
        raise
    return world


GOOD = (("NestA", "NestB"), ("NestC", "NestA", "NestB"),
        ("NestD", "NestC", "NestA", "NestB"))


def test_a_save_with_a_chain_of_nested_groups_loads_back_to_the_same_state() -> None:
    source = World(seed=2)
    source.restore(chain_snapshot())
    world = loads(GOOD)
    check_invariants(world)
    assert world.state_hash() == source.state_hash()


@pytest.mark.parametrize("groups", [
    (("NestA", "NestB"), ("NestA", "NestB", "NestC"), GOOD[2]),  # own names last
    (GOOD[0], GOOD[1], ("NestD", "NestA", "NestB", "NestC")),  # the outer's names reordered
    (("NestA", "NestB"), ("NestC", "NestB", "NestA"), GOOD[2]),
])
def test_a_save_with_a_nested_groups_names_out_of_order_is_refused(
        groups: tuple[tuple[str, ...], ...]) -> None:
    """A nested group's names are its own, then its outer group's in that group's order
    (as saves write them): another order is not a state any world holds (loading it
    would put the group in the order a save writes, whose state hash differs)."""
    with pytest.raises(SaveFileError, match="out of order"):
        loads(groups)


def test_a_save_listing_a_nested_group_before_its_outer_group_is_refused() -> None:
    with pytest.raises(SaveFileError, match="before"):
        loads((GOOD[1], GOOD[0], GOOD[2]))


@pytest.mark.parametrize("in_step", [True, False])
@pytest.mark.parametrize("shape", [(D, B), (B, D)])
def test_a_plan_nests_once_its_matches_join_the_nested_group_without_moving_rows(
        shape: tuple[type, ...], in_step: bool) -> None:
    """(D, B) beside (C, A, B) gathers (or, in a step, follows (A, B)'s order); when its
    matches gain C and join (C, A, B) where they already sit (no row of its stores
    moves), its next resolve must nest (D, C, A, B), as the same query does in a world
    loaded from a save of that state: the cached rows still hold, the decision not."""
    run = stepped if in_step else write
    world = nest_world()
    assert run(world, B, C)  # nests (C, A, B) over the first two entities
    assert run(world, *shape) == in_step  # its matches are not (C, A, B)'s
    layout = world.store(B).layout_version, world.store(D).layout_version
    for key in world.entities()[2:4].tolist():  # (D's entities, next in (A, B)'s order)
        world.add(key, C())
    assert (world.store(B).layout_version, world.store(D).layout_version) == layout
    loaded = World(seed=1)
    loaded.register(A, B, C, D)
    loaded.restore(Snapshot.from_bytes(world.snapshot().to_bytes()))
    assert run(loaded, *shape)
    assert run(world, *shape)
    check_invariants(world)
    assert [len(g.types) for g in world._groups] == [2, 3, 4]
    assert world.state_hash() == loaded.state_hash()


def test_a_failed_all_or_nothing_block_takes_its_nested_groups_and_their_stores_away() -> None:
    """A level load that fails after writing queries nested groups over stores it made
    (C, then D) leaves the world as it was, and the same types nest again later."""
    world = World(seed=4)
    world.group(A, B)
    world.spawn_batch(A(), B(), count=4)
    before = world_state(world)
    with pytest.raises(RuntimeError), world._all_or_nothing():
        world.spawn_batch(A(), B(), C(), D(), count=3)
        assert write(world, B, C) and write(world, C, D)  # nests (C, A, B), (D, C, A, B)
        assert len(world._groups) == 3
        raise RuntimeError("the level failed")
    assert world_state(world) == before
    assert world._groups[0].inner is None and world.component_types == (A, B)
    world.spawn_batch(A(), B(), C(), D(), count=3)
    assert write(world, B, C) and write(world, C, D)
    check_invariants(world)
    assert [g.depth for g in world._groups] == [0, 1, 2]
