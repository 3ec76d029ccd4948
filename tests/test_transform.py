"""follow_parents: children placed at their parent's Position plus LocalOffset, parents first."""

from __future__ import annotations

import numpy as np
import pytest

from ecs_engine import NULL, ChildOf, World
from ecs_engine.components import LocalOffset, Position, Velocity
from ecs_engine.systems import follow_parents, integrate


def test_a_chain_of_attachments_follows_its_root_in_one_tick() -> None:
    w = World()
    platform = w.spawn(Position(x=10, y=5), Velocity(x=2, y=0))
    sign = w.spawn(Position(), LocalOffset(x=0, y=1), ChildOf(parent=platform))
    lamp = w.spawn(Position(), LocalOffset(x=0.5, y=0.25), ChildOf(parent=sign))
    # Re-attach the sign so its ChildOf row comes after the lamp's: row order is then
    # not depth order, and only a parents-first pass places the lamp right.
    w.set_parent(sign, NULL)
    w.set_parent(sign, platform)
    rows = w.store(ChildOf).entities[: w.store(ChildOf).n].tolist()
    assert rows.index(lamp) < rows.index(sign)
    w.add_system(integrate)
    w.add_system(follow_parents)
    w.step(0.5)
    assert (float(w.get(platform, Position)["x"]), float(w.get(platform, Position)["y"])) == (11, 5)
    assert (float(w.get(sign, Position)["x"]), float(w.get(sign, Position)["y"])) == (11, 6)
    assert (float(w.get(lamp, Position)["x"]), float(w.get(lamp, Position)["y"])) == (11.5, 6.25)


def test_matches_a_per_entity_walk_on_a_random_forest() -> None:
    rng = np.random.default_rng(3)
    w = World()
    roots = w.spawn_batch(Position(x=rng.random(20, dtype=np.float32) * 100,
                                   y=rng.random(20, dtype=np.float32) * 100))
    keys = list(roots)
    for _ in range(6):  # levels, each attached to random earlier entities
        parents = rng.choice(np.array(keys, np.uint64), 30)
        offs = rng.random((2, 30), dtype=np.float32)
        kids = w.spawn_batch(Position(), LocalOffset(x=offs[0], y=offs[1]),
                             ChildOf(parent=parents))
        keys += list(kids)
    loose = w.spawn(Position(x=7, y=7))  # a parent-less entity with no offset stays
    follow_parents(w, 0.0)
    for k in keys:
        if not w.has(k, LocalOffset):
            continue
        p = w.parent(k)
        want_x = float(w.get(p, Position)["x"]) + float(w.get(k, LocalOffset)["x"])
        assert float(w.get(k, Position)["x"]) == pytest.approx(want_x, rel=1e-6)
    assert float(w.get(loose, Position)["x"]) == 7


def test_no_children_is_a_no_op() -> None:
    w = World()
    e = w.spawn(Position(x=1))
    follow_parents(w, 0.0)
    assert float(w.get(e, Position)["x"]) == 1


def test_new_offsets_parents_and_restores_are_followed() -> None:
    """The rows follow_parents works on are cached: a changed offset, a new parent, a
    despawned sibling (rows move) and a restore must all still place the child right."""
    w = World()
    a = w.spawn(Position(x=1, y=1))
    b = w.spawn(Position(x=50, y=50))
    other = w.spawn(Position(), LocalOffset(x=9, y=9), ChildOf(parent=a))
    child = w.spawn(Position(), LocalOffset(x=1, y=2), ChildOf(parent=a))

    def at() -> tuple[float, float]:
        pos = w.get(child, Position)
        return float(pos["x"]), float(pos["y"])

    follow_parents(w, 0.0)
    assert at() == (2, 3)
    snap = w.snapshot()
    w.get(child, LocalOffset)["x"] = 4  # a value write: no layout change
    follow_parents(w, 0.0)
    assert at() == (5, 3)
    w.set_parent(child, b)  # a link change (ChildOf's values)
    follow_parents(w, 0.0)
    assert at() == (54, 52)
    w.despawn(other)  # rows move
    follow_parents(w, 0.0)
    assert at() == (54, 52)
    w.restore(snap)  # back to parent a, offset (1, 2)
    w.get(a, Position)["x"] = 10
    follow_parents(w, 0.0)
    assert at() == (11, 3)


def test_a_position_only_layout_change_reuses_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spawn or despawn of something outside the hierarchy moves Position rows only:
    follow_parents re-derives the Position rows from its cached tree (no query, no depth
    sort) and still places every child right."""
    import ecs_engine.systems.transform as transform

    w = World()
    parent = w.spawn(Position(x=1, y=1))
    bystander = w.spawn(Position(x=7, y=7))
    child = w.spawn(Position(), LocalOffset(x=1, y=2), ChildOf(parent=parent))
    grandchild = w.spawn(Position(), LocalOffset(x=10, y=0), ChildOf(parent=child))
    follow_parents(w, 0.0)
    calls: list[World] = []
    real = transform._find_tree

    def counted(world: World) -> transform._Tree:
        calls.append(world)
        return real(world)

    monkeypatch.setattr(transform, "_find_tree", counted)
    w.despawn(bystander)  # the child's and grandchild's Position rows move
    w.spawn(Position(x=3, y=3))
    w.get(parent, Position)["x"] = 5
    follow_parents(w, 0.0)
    assert calls == []
    assert (float(w.get(child, Position)["x"]), float(w.get(child, Position)["y"])) == (6, 3)
    assert float(w.get(grandchild, Position)["x"]) == 16
    w.set_parent(child, NULL)  # a link change: the tree is derived again
    follow_parents(w, 0.0)
    assert calls == [w]


def test_the_stock_schedule_carries_children() -> None:
    """``add_platformer_systems`` left follow_parents out: a child added with ChildOf and
    LocalOffset stayed where it spawned while its parent walked away."""
    from ecs_engine.components import Collider, Gravity, Grounded
    from ecs_engine.systems import add_platformer_systems

    world = World()
    add_platformer_systems(world)
    hero = world.spawn(Position(x=2.0, y=3.0), Velocity(x=4.0), Collider(), Grounded(),
                       Gravity(ay=0.0))
    bag = world.spawn(Position(), LocalOffset(y=1.5), ChildOf(parent=hero))
    for _ in range(30):
        world.step(1 / 60)
    hero_at, bag_at = world.get(hero, Position), world.get(bag, Position)
    assert hero_at["x"] > 3.5  # it walked (no level: nothing stops it)
    assert (bag_at["x"], bag_at["y"]) == (hero_at["x"], np.float32(hero_at["y"] + 1.5))
    names = world.systems
    assert names.index("follow_parents") == names.index("camera_follow") - 1
