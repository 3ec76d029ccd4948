"""A gathered column's write-back: every path gives the rows the block wrote, and only
them where anything else wrote the store meanwhile.

With nothing else writing its store during the block, a small column is scattered
whole (its unchanged rows still hold their original bytes); otherwise row by row.
"""

from __future__ import annotations

import numpy as np
import pytest

from ecs_engine import World, component


@component
class Pos:
    x: np.float64 = 0.0
    y: np.float64 = 0.0


@component
class Vel:
    dx: np.float64 = 0.0


def gathered_world(n: int) -> tuple[World, np.ndarray, np.ndarray]:
    """``n`` entities with Pos and Vel, and ``n`` with Pos only (spawned before them,
    every other one of ``2n`` despawned), so a (Pos, Vel) query is driven by Vel and
    gathers Pos from rows spread over its store."""
    world = World(auto_group=False)
    only_pos = world.spawn_batch(Pos(x=-np.arange(1.0, 2 * n + 1)), count=2 * n)
    both = world.spawn_batch(Pos(x=np.arange(n, dtype=np.float64), y=2.0), Vel(dx=1.0),
                             count=n)
    world.despawn_batch(only_pos[::2])  # holes: later rows swap into them
    return world, both, only_pos[1::2]


def pos_of(world: World, keys: np.ndarray) -> list[tuple[float, float]]:
    return [tuple(r) for r in world.get_batch(keys, Pos).tolist()]


@pytest.mark.parametrize("n", [2, 5, 40, 300])  # (one row is a run: a view, not gathered)
def test_a_block_alone_on_its_store_writes_exactly_its_changed_rows(n: int) -> None:
    world, both, others = gathered_world(n)
    before_others = pos_of(world, others)
    expected = pos_of(world, both)
    store = world.store(Pos)
    version = store.data_version
    with world.query(Pos, Vel) as q:
        assert not q.aligned
        column = q[Pos]
        assert column.base is None or column.base is not store.data  # a gathered copy
        changed = np.arange(0, len(q), 3)
        column["y"][changed] += 10.0
        order = q.entities.tolist()
    where = {k: i for i, k in enumerate(both.tolist())}
    for i in changed.tolist():
        x, y = expected[where[order[i]]]
        expected[where[order[i]]] = (x, y + 10.0)
    assert pos_of(world, both) == expected
    assert pos_of(world, others) == before_others  # rows outside the query untouched
    assert store.data_version != version  # the write is tracked


def test_a_block_that_only_reads_its_gathered_column_leaves_the_version() -> None:
    world, _both, _others = gathered_world(6)
    store = world.store(Pos)
    version = store.data_version
    with world.query(Pos, Vel) as q:
        float(q[Pos]["x"].sum())
    assert store.data_version == version


@pytest.mark.parametrize("meanwhile", ["record", "inner query"])
def test_writes_made_meanwhile_to_rows_the_block_left_survive(meanwhile: str) -> None:
    world, both, _others = gathered_world(8)
    with world.query(Pos, Vel) as q:
        order = q.entities.tolist()
        q[Pos]["x"][0] = 100.0  # the block changes its first row only
        last = order[-1]
        if meanwhile == "record":
            world.get(last, Pos)["x"] = 55.0
        else:
            with world.query(Pos) as inner:  # an aligned view: writes the store directly
                inner[Pos]["x"][inner.entities == last] = 55.0
    assert world.get(order[0], Pos)["x"] == 100.0
    assert world.get(last, Pos)["x"] == 55.0
    assert len(both) == 8



@component
class Hp:
    hp: np.int32 = 0


def test_writes_through_an_open_outer_blocks_view_survive_an_inner_write_back() -> None:
    """A writable view handed out by an enclosing block writes the store without moving
    its version: an inner block's gathered copy of the same rows must still be written
    back row by row, keeping what the view wrote to rows the inner block left."""
    world = World()
    world.group(Pos, Vel)  # (Pos, Vel) queries get views of Pos
    world.spawn_batch(Pos(x=np.arange(6.0)), Vel(dx=1.0), Hp(), count=6)
    world.spawn_batch(Pos(), Vel(), count=3)  # more Pos than Hp: Hp drives the gather
    with world.query(Pos, Vel) as outer:
        assert outer.aligned
        view = outer[Pos]  # a live, writable view of Pos's rows
        with world.query(Pos, Hp) as inner:  # Hp has no group: gathers Pos's rows
            assert not inner.aligned
            first, other = inner.entities.tolist()[:2]
            inner[Pos]["y"][0] = 7.0  # the inner block changes its first row only
            view["y"][outer.entities == other] = 99.0  # the view, on a row it left
    assert world.get(first, Pos)["y"] == 7.0
    assert world.get(other, Pos)["y"] == 99.0


def test_a_view_kept_past_its_block_and_dropped_inside_a_later_one_keeps_its_write() -> None:
    """A field view kept past its block (misuse the snapshots tolerate) writes the store
    untracked; if it writes inside a later block that gathers the same rows and is dropped
    before that block ends, the block must still scatter only what it changed."""
    world = World(auto_group=False)  # (no nested group for (Pos, Hp): a gather)
    world.group(Pos, Vel)
    for i in range(6):  # Hp's entities on every other Pos row: a gather, not a run
        world.spawn(Pos(x=float(i)), Vel(dx=1.0), Hp())
        world.spawn(Pos(), Vel())
    with world.query(Pos, Vel) as outer:
        kept = outer[Pos]["y"]  # escapes the block, still writable
        keys = outer.entities.tolist()
    with world.query(Pos, Hp) as q:
        assert not q.aligned
        assert q[Pos].base is None or q[Pos].base is not world.store(Pos).data  # a copy
        first, other = q.entities.tolist()[:2]
        q[Pos]["y"][0] = 7.0  # the block changes its first row only
        kept[keys.index(other)] = 99.0  # the escaped view, on a row the block left
        del kept
    assert world.get(first, Pos)["y"] == 7.0
    assert world.get(other, Pos)["y"] == 99.0
