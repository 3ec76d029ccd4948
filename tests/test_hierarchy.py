"""Hierarchy: ChildOf links, set_parent, children/descendants, cascading despawn, saves."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from ecs_engine import (
    NULL,
    ChildOf,
    Entity,
    SaveFileError,
    Snapshot,
    StoreSnapshot,
    World,
    component,
    depth_levels,
)
from ecs_engine.entity import key_str

DATA = Path(__file__).parent / "data"


@component(name="HPos")
class Pos:
    x: np.float32 = 0.0


def tree(world: World) -> dict[str, Entity]:
    """root -> (a -> (a1, a2), b)"""
    root = world.spawn(Pos(x=0))
    a = world.spawn(Pos(x=1), ChildOf(parent=root))
    b = world.spawn(Pos(x=2), ChildOf(parent=root))
    a1 = world.spawn(Pos(x=3), ChildOf(parent=a))
    a2 = world.spawn(Pos(x=4), ChildOf(parent=a))
    return {"root": root, "a": a, "b": b, "a1": a1, "a2": a2}


def depth(world: World, key: int) -> int:
    return int(world.get(key, ChildOf)["depth"]) if world.has(key, ChildOf) else 0


def test_links_children_in_attach_order_and_breadth_first_descendants() -> None:
    w = World()
    t = tree(w)
    assert w.parent(t["a1"]) == t["a"] and w.parent(t["root"]) == NULL
    assert w.children(t["root"]).tolist() == [t["a"], t["b"]]
    assert w.descendants(t["root"]).tolist() == [t["a"], t["b"], t["a1"], t["a2"]]
    assert [depth(w, t[k]) for k in ("root", "a", "b", "a1", "a2")] == [0, 1, 1, 2, 2]
    assert w.children(t["b"]).dtype == np.uint64 and len(w.children(t["b"])) == 0
    # Re-attaching to the same parent keeps the place; moving goes last.
    w.set_parent(t["a"], t["root"])
    assert w.children(t["root"]).tolist() == [t["a"], t["b"]]
    w.set_parent(t["a1"], t["b"])
    w.set_parent(t["a1"], t["a"])
    assert w.children(t["a"]).tolist() == [t["a2"], t["a1"]]


def test_moving_a_subtree_updates_every_depth_and_detach_makes_roots() -> None:
    w = World()
    t = tree(w)
    w.set_parent(t["a"], t["b"])
    assert [depth(w, t[k]) for k in ("a", "a1", "a2")] == [2, 3, 3]
    w.set_parent(t["a"], NULL)
    assert not w.has(t["a"], ChildOf)
    assert [depth(w, t[k]) for k in ("a", "a1", "a2")] == [0, 1, 1]
    assert w.descendants(t["root"]).tolist() == [t["b"]]
    w.remove(t["a1"], ChildOf)  # remove goes through set_parent too
    assert w.parent(t["a1"]) == NULL and w.children(t["a"]).tolist() == [t["a2"]]


def test_batch_set_parent_with_one_parent_per_child() -> None:
    w = World()
    roots = w.spawn_batch(Pos(x=np.arange(3, dtype=np.float32)))
    kids = w.spawn_batch(Pos(x=np.arange(6, dtype=np.float32)))
    w.set_parent(kids, np.repeat(roots, 2))
    for i, r in enumerate(roots):
        assert w.children(r).tolist() == kids[2 * i : 2 * i + 2].tolist()
    w.set_parent(kids[:2], roots[2])  # one parent for all
    assert w.children(roots[2]).tolist() == [*kids[4:], *kids[:2]]


@pytest.mark.parametrize("case", ["self", "direct", "deep", "batch"])
def test_cycles_raise_value_error_naming_keys_and_change_nothing(case: str) -> None:
    w = World()
    t = tree(w)
    before = w.snapshot()
    children, parents = {
        "self": ([t["a"]], [t["a"]]),
        "direct": ([t["root"]], [t["a"]]),
        "deep": ([t["root"]], [t["a2"]]),
        "batch": ([t["b"], t["a"]], [t["a2"], t["b"]]),  # fine one by one, a cycle together
    }[case]
    with pytest.raises(ValueError, match="cycle|own parent") as err:
        w.set_parent(np.array(children, np.uint64), np.array(parents, np.uint64))
    assert "Entity(slot=" in str(err.value)
    assert all(int(w.store(ChildOf).data_version) == int(s.data_version)
               for s in before.stores if s.name == "ChildOf")
    assert w.descendants(t["root"]).tolist() == [t["a"], t["b"], t["a1"], t["a2"]]


def test_dead_keys_raise_key_error_naming_them() -> None:
    w = World()
    t = tree(w)
    ghost = w.spawn()
    w.despawn(ghost)
    with pytest.raises(KeyError, match=r"set_parent \(parent\).*despawned"):
        w.set_parent(t["a"], ghost)
    with pytest.raises(KeyError, match="set_parent.*not alive"):
        w.set_parent([t["a"], ghost], t["b"])
    with pytest.raises(KeyError, match="parent at index 1"):
        w.set_parent([t["a"], t["b"]], np.array([t["root"], ghost], np.uint64))
    with pytest.raises(KeyError, match=key_str(ghost).replace("(", r"\(").replace(")", r"\)")):
        w.children(ghost)
    n = len(w)
    with pytest.raises(KeyError, match="spawn"):
        w.spawn(Pos(), ChildOf(parent=ghost))
    assert len(w) == n  # nothing was spawned


def test_despawn_removes_the_whole_subtree_and_keeps_the_rest() -> None:
    w = World()
    t = tree(w)
    other = w.spawn(Pos(x=9))
    w.despawn(t["a"])
    assert not any(w.is_alive(t[k]) for k in ("a", "a1", "a2"))
    assert w.is_alive(t["b"]) and w.is_alive(other)
    assert w.children(t["root"]).tolist() == [t["b"]]
    assert w.count(ChildOf) == 1 and w.count(Pos) == 3
    # A batch naming an entity and its descendant frees each slot once.
    t2 = tree(w)
    w.despawn_batch([t2["a1"], t2["root"], t2["a"]])
    assert len(w) == 3
    fresh = w.spawn_batch(count=5)
    assert len(np.unique(fresh)) == 5 and all(w.is_alive(k) for k in fresh)


@pytest.mark.parametrize("names", [["a1"], ["b", "a2"], ["a"], ["a1", "root"], ["b"]])
def test_despawning_leaves_and_subtrees_matches_the_batch_path(names: list[str]) -> None:
    """A few keys with no children go row by row in a world with a hierarchy (the
    projectile case); the state must be what the batch path makes of them, and a key
    that is a parent still takes its subtree along."""
    worlds = []
    for way in ("despawn_batch", "despawn", "batch path"):
        w = World(seed=1)
        t = tree(w)
        w.spawn(Pos(x=9), ChildOf(parent=t["b"]))  # b has a child too
        keys = [int(t[n]) for n in names]
        if way == "despawn_batch":
            w.despawn_batch(keys)
        elif way == "despawn":
            for k in keys:
                if w.is_alive(k):
                    w.despawn(k)
        else:
            w._destroy(np.array(keys, np.uint64))  # the general path, subtrees included
        worlds.append(w)
    assert worlds[0].state_hash() == worlds[2].state_hash()
    if len(names) == 1:
        assert worlds[1].state_hash() == worlds[2].state_hash()


def test_deferred_inside_a_query_block() -> None:
    w = World()
    t = tree(w)
    with w.query(Pos):
        w.set_parent(t["b"], t["a"])
        assert w.parent(t["b"]) == t["root"]  # not yet
        w.despawn(t["a"])
        with pytest.raises(KeyError, match="being despawned"):
            w.add(t["a1"], Pos(x=5))  # doomed with its parent
    assert w.descendants(t["root"]).tolist() == []
    assert not w.is_alive(t["b"])  # it had become a child of a before a went


def test_deferred_op_on_an_entity_that_died_with_a_new_ancestor_fails_cleanly() -> None:
    w = World()
    t = tree(w)
    with pytest.raises(KeyError, match="despawned earlier in the same query block"):
        with w.query(Pos):
            w.set_parent(t["b"], t["a"])
            w.despawn(t["a"])
            w.add(t["b"], Pos(x=7))  # b was not yet a's child: accepted, fails at the flush
    assert not w.is_alive(t["b"])
    assert w.count(Pos) == 1  # no row was written for the dead entity
    assert w.store(Pos).entities[: w.store(Pos).n].tolist() == [t["root"]]


def test_spawn_batch_and_add_with_child_of() -> None:
    w = World()
    root = w.spawn()
    kids = w.spawn_batch(Pos(x=np.arange(4, dtype=np.float32)), ChildOf(parent=root))
    assert w.children(root).tolist() == kids.tolist()
    grand = w.spawn_batch(ChildOf(parent=kids[:2], depth=99), count=2)
    assert [depth(w, k) for k in grand] == [2, 2]  # depth is computed, never taken
    w.add(kids[3], ChildOf(parent=kids[0]))
    assert w.parent(kids[3]) == kids[0]
    with pytest.raises(ValueError, match="cycle"):
        w.add(kids[0], ChildOf(parent=grand[0]))
    w.add_batch(grand, ChildOf(parent=root))
    assert w.children(root).tolist()[-2:] == grand.tolist()


def test_queries_see_child_of_read_only() -> None:
    w = World()
    t = tree(w)
    with pytest.raises(ValueError, match="read-only") as raised:
        with w.query(ChildOf, Pos) as q:
            assert len(q) == 4
            q[ChildOf]["parent"][0] = t["b"]
    # the query declared no readonly=: the message says why, and what to do instead
    assert "declared" not in str(raised.value)
    assert "world.set_parent" in str(raised.value)
    with pytest.raises(ValueError, match=r"readonly=\(HPos\).*ChildOf is read-only"):
        with w.query(ChildOf, Pos, readonly=(Pos,)) as q:
            q[Pos]["x"][0] = 1.0


def test_depth_levels_order_parents_before_children() -> None:
    depths = np.array([2, 0, 1, 2, 1, 3])
    levels = [lvl.tolist() for lvl in depth_levels(depths)]
    assert levels == [[1], [2, 4], [0, 3], [5]]
    assert list(depth_levels(np.zeros(0, np.int64))) == []


def test_save_load_keeps_the_hierarchy(tmp_path: Path) -> None:
    w = World()
    t = tree(w)
    w.save(tmp_path / "h.save")
    fresh = World()  # ChildOf is found by name without registering it
    fresh.register(Pos)
    fresh.load(tmp_path / "h.save")
    assert fresh.descendants(t["root"]).tolist() == [t["a"], t["b"], t["a1"], t["a2"]]
    assert [depth(fresh, t[k]) for k in ("a", "a1")] == [1, 2]
    fresh.despawn(t["a"])
    assert len(fresh) == 2


def test_hierarchy_survives_a_schema_change(tmp_path: Path) -> None:
    @component(name="Shape")
    class OldShape:
        w: np.float32 = 1.0

    w = World()
    root = w.spawn(OldShape(w=2))
    kid = w.spawn(OldShape(w=3), ChildOf(parent=root))
    w.save(tmp_path / "s.save")

    @component(name="Shape")
    class NewShape:
        w: np.float64 = 1.0  # widened
        h: np.float32 = 5.0  # added

    fresh = World()
    fresh.register(NewShape)
    fresh.load(tmp_path / "s.save")
    assert fresh.parent(kid) == root and fresh.children(root).tolist() == [kid]
    assert float(fresh.get(kid, NewShape)["h"]) == 5.0


def test_save_files_from_before_the_hierarchy_still_load() -> None:
    @component(name="OldPos")
    class OldPos:
        x: np.float32 = 0.0
        y: np.float32 = 0.0

    @component(name="OldLink")
    class OldLink:
        target: Entity = NULL

    w = World()
    w.register(OldPos, OldLink)
    w.load(DATA / "pre_hierarchy.save")  # written by the engine before ChildOf existed
    keys = w.entities()
    assert len(keys) == 5 and w.tick == 42 and w.resources == {"level": "old"}
    assert [float(w.get(k, OldPos)["x"]) for k in keys] == [0, 1, 2, 4, 5]
    assert all(w.parent(k) == NULL for k in keys)
    w.set_parent(keys[1], keys[0])
    assert w.children(keys[0]).tolist() == [keys[1]]


def _tampered(w: World, change: str) -> bytes:
    snap = w.snapshot()
    stores = []
    for s in snap.stores:
        if s.name == "ChildOf":
            data = s.data.copy()
            if change == "cycle":
                data["parent"][0], data["parent"][1] = s.entities[1], s.entities[0]
            elif change == "dead":
                data["parent"][0] = np.uint64((7 << 32) | 1)
            else:
                data["depth"][0] += 1
            s = StoreSnapshot(s.name, (data,), s.entities)
        stores.append(s)
    forged = Snapshot(tuple(stores), snap.slots, snap.groups, snap.resources, snap.tick,
                      snap.rng_state)
    return bytes(forged.to_bytes())


@pytest.mark.parametrize(("change", "message"), [
    ("cycle", "cycle"), ("dead", "not alive"), ("depth", "has depth"),
])
def test_loading_a_broken_hierarchy_is_a_save_file_error(change: str, message: str) -> None:
    w = World()
    t = tree(w)
    blob = _tampered(w, change)
    fresh = World()
    fresh.register(Pos)
    keep = fresh.spawn(Pos(x=42))
    with pytest.raises(SaveFileError, match=f"ChildOf.*{message}"):
        fresh.restore(Snapshot.from_bytes(blob))
    assert fresh.entities().tolist() == [keep]  # unchanged
    del t


def test_two_worlds_keep_separate_indexes() -> None:
    w1, w2 = World(), World()
    t1, t2 = tree(w1), tree(w2)
    w1.set_parent(t1["b"], t1["a"])
    assert w2.children(t2["a"]).tolist() == [t2["a1"], t2["a2"]]
    assert w1.children(t1["a"]).tolist() == [t1["a1"], t1["a2"], t1["b"]]


def test_no_warnings_from_ordinary_use() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w = World()
        t = tree(w)
        w.despawn(t["root"])
        assert len(w) == 0


@pytest.mark.parametrize("link", ["set_parent", "spawn"])
def test_a_deferred_despawn_of_a_key_an_earlier_one_took_along_frees_its_slot_once(
        link: str) -> None:
    """Despawning p took x (its child by then) with it; the later despawn of x at the
    same flush freed x's slot a second time, and the next two spawns got one key."""
    world = World()
    p = world.spawn(Pos())
    x = world.spawn(Pos()) if link == "set_parent" else None
    with world.query(Pos):
        if x is None:
            x = world.spawn(Pos(), ChildOf(parent=p))
        else:
            world.set_parent(x, p)
        world.despawn(p)  # x is not p's child yet when this is called
        world.despawn_batch([x])
    assert len(world) == 0 and not world.is_alive(x)
    k1, k2 = world.spawn(Pos(x=1)), world.spawn(Pos(x=2))
    assert k1 != k2 and len(world) == 2 and world.count(Pos) == 2
    assert world.get(k1, Pos)["x"] == 1 and world.get(k2, Pos)["x"] == 2


def test_a_deferred_instantiate_under_a_parent_that_dies_first_links_no_dead_parent(
        tmp_path: Path) -> None:
    """The parent was checked only at the call: at the flush the instance's root was
    attached to a dead entity, and the world saved a file its own load refused."""
    source = World()
    root = source.spawn(Pos(x=1))
    source.spawn(Pos(x=2), ChildOf(parent=root))
    blueprint = source.extract([root])
    world = World()
    p, q = world.spawn(Pos()), world.spawn(Pos())
    with pytest.raises(KeyError, match=r"instantiate \(deferred, parent\): .* despawned"):
        with world.query(Pos):
            world.set_parent(p, q)
            world.despawn(q)  # takes p along at the flush
            inst = world.instantiate(blueprint, parent=p)
    assert not world.is_alive(p)
    assert all(world.is_alive(k) for k in inst.keys)
    assert world.parent(int(inst.keys[0])) == NULL  # a root, like a deferred spawn's
    assert world.parent(int(inst.keys[1])) == int(inst.keys[0])
    world.save(tmp_path / "w.sav")
    loaded = World()
    loaded.register(Pos)
    loaded.load(tmp_path / "w.sav")
    assert loaded.state_hash() == world.state_hash()


def test_removing_a_missing_parent_link_inside_a_block_fails_at_the_flush() -> None:
    """Outside a block ``remove(e, ChildOf)`` of a root is a KeyError, as for any missing
    component; inside one it passed silently."""
    world = World()
    a, b = world.spawn(Pos()), world.spawn(Pos())
    for remove in (lambda: world.remove(a, ChildOf),
                   lambda: world.remove_batch([a, b], ChildOf)):
        with pytest.raises(KeyError, match="has no ChildOf"):
            remove()
        with pytest.raises(KeyError, match="has no ChildOf"):
            with world.query(Pos):
                remove()
    with world.query(Pos):  # a link made earlier in the same block counts
        world.set_parent(a, b)
        world.remove(a, ChildOf)
    assert world.parent(a) == NULL and len(world) == 2


def test_despawn_batch_of_nested_keys_despawns_each_subtree_once() -> None:
    """Keys whose subtrees overlap (a parent and its own child, listed twice, in any
    order) leave nothing behind and free every slot once."""
    from ecs_engine.hierarchy import unique_in_order

    world = World()
    t = tree(world)
    other = world.spawn(Pos(x=9))
    world.despawn_batch(np.array([t["a1"], t["root"], t["a"], t["a1"]], np.uint64)
                        [[0, 1, 2]])
    assert len(world) == 1 and world.is_alive(other)
    fresh = [world.spawn(Pos()) for _ in range(6)]
    assert len(set(fresh)) == 6 and len(world) == 7
    keys = np.array(fresh + fresh[::-1] + [fresh[2]], np.uint64)
    assert unique_in_order(keys).tolist() == fresh


def test_a_refused_remove_batch_of_parent_links_in_a_block_detaches_none() -> None:
    """Inside a block the check and the detach were two deferred ops: the flush raised
    for the key without a link, and detached the others anyway."""
    world = World()
    a = world.spawn(Pos())
    b = world.spawn(Pos(), ChildOf(parent=a))
    c = world.spawn(Pos())
    with pytest.raises(KeyError, match="has no ChildOf"):
        with world.query(Pos):
            world.remove_batch([b, c], ChildOf)
    assert world.parent(b) == a


def test_query_columns_and_blueprint_rows_name_an_instance_for_a_type() -> None:
    from typing import Any

    world = World()
    world.spawn(Pos())
    pos: Any = Pos()
    with world.query(Pos) as q:
        for call in (lambda: q[pos], lambda: q.unstructured(pos)):
            with pytest.raises(TypeError, match="pass the component class HPos itself"):
                call()
    with pytest.raises(TypeError, match="pass the component class HPos itself"):
        world.extract(world.entities()).rows(pos)
