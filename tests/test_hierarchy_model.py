"""Stateful property test of the hierarchy against a plain dict model.

The model is ``key -> {"parent", "seq", "x", "link"}``: parent links, an attach sequence
number (children are listed in it), a value and an ``Entity`` reference. Rules: spawn
(maybe under a parent), set_parent (one or a batch, cycles included, which must raise and
change nothing), despawn and despawn_batch (whole subtrees), extract + instantiate (new
keys, references remapped or nulled and reported), save/load into a fresh world and
snapshot/restore. After every step every live entity's parent, children (in attach order),
descendants (breadth-first), depth and values are compared with the model.
"""

from __future__ import annotations

from pathlib import Path
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

from ecs_engine import NULL, ChildOf, Entity, World, component


@component(name="ModelPos")
class Pos:
    x: np.float64 = 0.0


@component(name="ModelLink")
class Link:
    target: Entity = NULL


def model_children(ents: dict[int, dict[str, Any]], key: int) -> list[int]:
    kids = [k for k, e in ents.items() if e["parent"] == key]
    return sorted(kids, key=lambda k: ents[k]["seq"])


def model_descendants(ents: dict[int, dict[str, Any]], keys: list[int]) -> list[int]:
    out: list[int] = []
    frontier = list(keys)
    while frontier:
        frontier = [c for k in frontier for c in model_children(ents, k)]
        out += frontier
    return out


def model_depth(ents: dict[int, dict[str, Any]], key: int) -> int:
    depth = 0
    while ents[key]["parent"]:
        key = ents[key]["parent"]
        depth += 1
    return depth


class HierarchyMachine(RuleBasedStateMachine):
    _tmp = ""  # a folder for save files, set by the test

    def __init__(self) -> None:
        super().__init__()
        self.world = World(seed=0)
        self.ents: dict[int, dict[str, Any]] = {}
        self.seq = 0
        self.label = 0.0
        self.steps = 0

    # -- helpers --------------------------------------------------------------------------
    def _pick(self, data: st.DataObject, label: str) -> int:
        return data.draw(st.sampled_from(sorted(self.ents)), label=label)

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _would_cycle(self, pairs: list[tuple[int, int]]) -> bool:
        parents = {k: e["parent"] for k, e in self.ents.items()}
        for child, parent in pairs:
            parents[child] = parent
        for start in parents:
            seen = set()
            k = start
            while k:
                if k in seen:
                    return True
                seen.add(k)
                k = parents[k]
        return False

    def _apply_pairs(self, pairs: list[tuple[int, int]]) -> None:
        for child, parent in pairs:
            if self.ents[child]["parent"] != parent:
                self.ents[child]["parent"] = parent
                self.ents[child]["seq"] = self._next_seq()

    # -- rules ----------------------------------------------------------------------------
    @initialize()
    def start(self) -> None:
        for _ in range(3):
            self.spawn_root(link=False)

    @rule(link=st.booleans())
    def spawn_root(self, link: bool) -> None:
        self.label += 1
        comps: list[Any] = [Pos(x=self.label)]
        target = 0
        if link and self.ents:
            target = max(self.ents)
            comps.append(Link(target=target))
        key = int(self.world.spawn(*comps))
        self.ents[key] = {"parent": 0, "seq": 0, "x": self.label,
                          "link": target if link and target else None}
        self.steps += 1

    @precondition(lambda self: self.ents)
    @rule(data=st.data(), count=st.integers(1, 4))
    def spawn_children(self, data: st.DataObject, count: int) -> None:
        parent = self._pick(data, "parent")
        xs = self.label + 1 + np.arange(count, dtype=np.float64)
        self.label += count
        keys = self.world.spawn_batch(Pos(x=xs), Link(target=parent), ChildOf(parent=parent))
        for k, x in zip(keys.tolist(), xs.tolist(), strict=True):
            self.ents[k] = {"parent": parent, "seq": self._next_seq(), "x": x, "link": parent}
        self.steps += 1

    @precondition(lambda self: len(self.ents) >= 2)
    @rule(data=st.data(), detach=st.booleans())
    def set_parent_one(self, data: st.DataObject, detach: bool) -> None:
        child = self._pick(data, "child")
        parent = 0 if detach else self._pick(data, "parent")
        pairs = [(child, parent)]
        if child == parent or self._would_cycle(pairs):
            with pytest.raises(ValueError, match="cycle|own parent"):
                self.world.set_parent(child, parent)
            return  # the invariant checks that nothing changed
        self.world.set_parent(child, parent)
        self._apply_pairs(pairs)
        self.steps += 1

    @precondition(lambda self: len(self.ents) >= 3)
    @rule(data=st.data())
    def set_parent_batch(self, data: st.DataObject) -> None:
        keys = sorted(self.ents)
        children = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=4,
                                      unique=True), label="children")
        parents = data.draw(st.lists(st.sampled_from([0, *keys]), min_size=len(children),
                                     max_size=len(children)), label="parents")
        pairs = list(zip(children, parents, strict=True))
        if any(c == p for c, p in pairs) or self._would_cycle(pairs):
            with pytest.raises(ValueError, match="cycle|own parent"):
                self.world.set_parent(np.array(children, np.uint64),
                                      np.array(parents, np.uint64))
            return
        self.world.set_parent(np.array(children, np.uint64), np.array(parents, np.uint64))
        self._apply_pairs(pairs)
        self.steps += 1

    @precondition(lambda self: len(self.ents) >= 2)
    @rule(data=st.data())
    def despawn(self, data: st.DataObject) -> None:
        key = self._pick(data, "doomed")
        self.world.despawn(key)
        for k in [key, *model_descendants(self.ents, [key])]:
            del self.ents[k]
        self.steps += 1

    @precondition(lambda self: len(self.ents) >= 3)
    @rule(data=st.data())
    def despawn_batch_in_query(self, data: st.DataObject) -> None:
        """Inside a query block: deferred, and a key already doomed by its ancestor's
        despawn in the same block is skipped at the flush instead of freed twice."""
        keys = data.draw(st.lists(st.sampled_from(sorted(self.ents)), min_size=1, max_size=3,
                                  unique=True), label="doomed")
        gone: set[int] = set()
        with self.world.query(Pos):
            for k in keys:
                if k in gone:  # below an entity despawned earlier in this block
                    with pytest.raises(KeyError, match="being despawned"):
                        self.world.despawn(k)
                else:
                    self.world.despawn(k)
                    gone |= {k, *model_descendants(self.ents, [k])}
            assert all(self.world.is_alive(k) for k in keys)  # deferred
        for k in gone:
            del self.ents[k]
        self.steps += 1

    @precondition(lambda self: self.ents)
    @rule(data=st.data(), under=st.booleans())
    def extract_instantiate(self, data: st.DataObject, under: bool) -> None:
        roots = data.draw(st.lists(st.sampled_from(sorted(self.ents)), min_size=1,
                                   max_size=2, unique=True), label="roots")
        parent = self._pick(data, "under") if under else 0
        bp = self.world.extract(roots)
        order = list(dict.fromkeys(roots + model_descendants(self.ents, roots)))
        assert bp.keys.tolist() == order
        inst = self.world.instantiate(bp, parent=parent)
        new = dict(zip(order, inst.keys.tolist(), strict=True))
        assert inst.map(np.array(order, np.uint64)).tolist() == inst.keys.tolist()
        inside = set(order)
        dangling = []
        internal = sorted((k for k in order if self.ents[k]["parent"] in inside),
                          key=lambda k: self.ents[k]["seq"])
        base = self.seq
        for rank, k in enumerate(internal):
            self.ents[k]["_new_seq"] = base + 1 + rank
        roots_new = [k for k in order if self.ents[k]["parent"] not in inside]
        for k in order:
            old = self.ents[k]
            link = old["link"]
            if link is not None and link not in inside and link != 0:
                dangling.append(("ModelLink", "target", link))
            new_link = None if link is None else new.get(link, 0)
            if old["parent"] in inside:
                new_parent, seq = new[old["parent"]], old.pop("_new_seq")
            elif parent:
                new_parent, seq = parent, base + len(internal) + 1 + roots_new.index(k)
            else:
                new_parent, seq = 0, 0
            self.ents[new[k]] = {"parent": new_parent, "seq": seq, "x": old["x"],
                                 "link": new_link}
        self.seq = base + len(internal) + len(roots_new)
        assert sorted(inst.dangling) == sorted(dangling)
        self.steps += 1

    @rule()
    def save_load_fresh_world(self) -> None:
        path = Path(self._tmp) / "h.save"
        self.world.save(path)
        fresh = World()
        fresh.register(Pos, Link)
        fresh.load(path)
        self.world = fresh
        self.steps += 1

    @rule(data=st.data())
    def snapshot_restore(self, data: st.DataObject) -> None:
        snap = self.world.snapshot()
        mutate = data.draw(st.booleans(), label="mutate")
        if self.ents and mutate:
            self.world.despawn(self._pick(data, "victim"))
        self.world.restore(snap)
        self.steps += 1

    # -- invariant ------------------------------------------------------------------------
    @invariant()
    def matches_model(self) -> None:
        w = self.world
        assert len(w) == len(self.ents)
        for key, e in self.ents.items():
            assert w.is_alive(key)
            assert int(w.parent(key)) == e["parent"], key
            assert w.children(key).tolist() == model_children(self.ents, key)
            assert w.descendants(key).tolist() == model_descendants(self.ents, [key])
            depth = model_depth(self.ents, key)
            if e["parent"]:
                assert int(w.get(key, ChildOf)["depth"]) == depth
            else:
                assert not w.has(key, ChildOf)
            assert float(w.get(key, Pos)["x"]) == e["x"]
            if e["link"] is None:
                assert not w.has(key, Link)
            else:
                assert int(w.get(key, Link)["target"]) == e["link"]


def test_hierarchy_matches_dict_model(tmp_path: Path) -> None:
    machine_steps: list[int] = []

    class Machine(HierarchyMachine):
        _tmp = str(tmp_path)

        def teardown(self) -> None:
            machine_steps.append(self.steps)

    run_state_machine_as_test(
        Machine,
        settings=settings(max_examples=80, stateful_step_count=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow]),
    )
    assert sum(machine_steps) >= 1000
