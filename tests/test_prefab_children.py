"""Prefab collections: child prefabs build a subtree that saves and blueprints keep."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ecs_engine import (
    Blueprint,
    ChildOf,
    ChildPrefab,
    PrefabError,
    PrefabRegistry,
    World,
    component,
)


@component(name="Item")
class Item:
    kind: np.uint8 = 0
    size: np.uint8 = 1


@component(name="Box")
class Box:
    x: np.float32 = 0.0


def registry() -> PrefabRegistry:
    reg = PrefabRegistry()
    # Names may refer to prefabs registered later.
    reg.register("chest", Box(), children=["lid", ("slot", 8, {"size": 2})])
    reg.register("lid", Item(kind=9))
    reg.register("slot", Item(kind=1), children=[ChildPrefab("gem", 1)])
    reg.register("gem", Item(kind=7))
    return reg


def test_a_chest_gets_a_lid_and_eight_slots_each_with_a_gem() -> None:
    w = World()
    chest = registry().instantiate(w, "chest", x=4)
    kids = w.children(chest)
    assert len(kids) == 9 and len(w) == 1 + 9 + 8
    assert [int(w.get(k, Item)["kind"]) for k in kids] == [9] + [1] * 8  # declared order
    assert [int(w.get(k, Item)["size"]) for k in kids[1:]] == [2] * 8  # child params
    assert all(int(w.get(w.children(k)[0], Item)["kind"]) == 7 for k in kids[1:])
    assert float(w.get(chest, Box)["x"]) == 4
    assert int(w.get(w.children(kids[1])[0], ChildOf)["depth"]) == 2


def test_a_batch_builds_every_subtree_with_one_spawn_per_child_kind() -> None:
    w = World()
    calls: list[int] = []
    spawn_batch = w.spawn_batch

    def counting(*comps: object, count: int | None = None) -> np.ndarray:
        calls.append(0 if count is None else count)
        return spawn_batch(*comps, count=count)

    w.spawn_batch = counting  # type: ignore[method-assign]
    chests = registry().instantiate_batch(w, "chest", count=50, x=np.arange(50))
    assert calls == [50, 50, 400, 400]  # chests, lids, slots, gems
    assert len(w) == 50 * 18
    for chest in chests[[0, 49]]:
        assert len(w.children(chest)) == 9 and len(w.descendants(chest)) == 17


def test_bad_trees_fail_before_anything_is_spawned() -> None:
    reg = registry()
    reg.register("matryoshka", Box(), children=["doll"])
    reg.register("doll", Box(), children=[("matryoshka", 1)])
    reg.register("orphanage", Box(), children=["nobody"])
    reg.register("strict", Box(), children=[("slot", 2, {"colour": 1})])
    w = World()
    with pytest.raises(PrefabError, match="matryoshka -> doll -> matryoshka"):
        reg.instantiate(w, "matryoshka")
    with pytest.raises(PrefabError, match="unknown prefab 'nobody'"):
        reg.instantiate_batch(w, "orphanage", count=3)
    with pytest.raises(PrefabError, match="'colour' is not a parameter"):
        reg.instantiate(w, "strict")
    assert len(w) == 0
    with pytest.raises(PrefabError, match="count must be an int"):
        reg.register("neg", Box(), children=[("slot", -1)])
    with pytest.raises(PrefabError, match="a child is a prefab name"):
        reg.register("odd", Box(), children=[42])  # type: ignore[list-item]
    with pytest.raises(PrefabError, match="ChildOf is set by instantiating"):
        reg.register("linked", Box(), ChildOf())


def test_the_collection_grows_shrinks_and_survives_saves_and_blueprints(tmp_path: Path) -> None:
    reg = registry()
    w = World()
    chest = reg.instantiate(w, "chest")
    slots = w.children(chest)[1:]
    w.despawn(slots[0])  # a slot (and its gem) goes
    extra = reg.instantiate(w, "slot")
    w.set_parent(extra, chest)  # and one is added: the save format does not care
    w.save(tmp_path / "s.save")
    loaded = World()
    loaded.register(Item, Box)
    loaded.load(tmp_path / "s.save")
    assert len(loaded.children(chest)) == 9 and len(loaded.descendants(chest)) == 17
    w.extract([chest]).save(tmp_path / "chest.bp")
    inst = loaded.instantiate(Blueprint.load(tmp_path / "chest.bp"))
    copy = inst.keys[0]
    assert [int(loaded.get(k, Item)["kind"]) for k in loaded.children(copy)] == [9] + [1] * 8
    assert len(loaded.descendants(copy)) == 17
    loaded.despawn(copy)
    assert len(loaded) == 18


def test_instantiate_inside_a_query_block_builds_the_tree_at_the_end() -> None:
    w = World()
    with w.query(Item):
        chest = registry().instantiate(w, "chest")
        assert len(w.children(chest)) == 0
    assert len(w.children(chest)) == 9
