"""Stateful model test: structural changes deferred inside query blocks, mixed with the
hierarchy, owning groups, blueprints and snapshots, against a plain-dict model.

The model is ``key -> {component type -> {field -> value}}`` plus parent links and an attach
counter. Rules spawn, despawn (whole subtrees), add, remove, set parents, create groups,
write through queries, extract/instantiate, snapshot/restore and try dead keys (``KeyError``,
world unchanged); inside a query block any mix of them is deferred, with half the keys drawn
from those the block already used, and the model applies them in call order and predicts
the first error the flush raises. The other model tests never overlap ops of one flush, so
they missed two deferred despawns freeing one slot twice (fixed in ba12434). After every
step the entities, values, parents, children, depths, sparse sets and group prefixes are
compared; five start-up group configurations are covered. ``max(20, DETERMINISM_EXAMPLES //
2)`` examples (500 by default: 13-16 s on the shared 2-core dev machine) of up to 40 steps.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from ecs_engine import (
    NULL,
    Blueprint,
    ChildOf,
    Entity,
    Snapshot,
    World,
    component,
    field,
    schema_of,
)
from tests.world_state import check_invariants, world_state

EXAMPLES = int(os.environ.get("DETERMINISM_EXAMPLES", "1000"))
STEPS = 40


@component(name="DMA")
class A:
    x: np.int32 = 0


@component(name="DMB")
class B:
    y: np.int16 = 0


@component(name="DMC")
class C: ...


@component(name="DMD")
class D:
    v: np.int8 = 0


@component(name="DMR")
class R:
    ref: Entity = NULL
    refs: np.ndarray = field(Entity, shape=2)


TYPES: list[type] = [A, B, C, D, R]
VALUED: dict[type, list[str]] = {A: ["x"], B: ["y"], C: [], D: ["v"], R: ["ref", "refs"]}
SMALL_INT = {A: "x", B: "y", D: "v"}

Values = dict[str, Any]  # field -> int, or a tuple of ints for R.refs
Comps = dict[type, Values]
# (blueprint key, components, parent inside the blueprint or 0, attach order) in key order
Content = list[tuple[int, Comps, int, int]]
Deferred = tuple[Any, ...]  # ("spawn" | "despawn" | "add" | "remove" | ..., *arguments)


class ModelError(Exception):
    def __init__(self, kind: type[Exception]) -> None:
        super().__init__(kind.__name__)
        self.kind = kind


class Model:
    def __init__(self) -> None:
        self.ents: dict[int, Comps] = {}
        self.parent: dict[int, int] = {}
        self.order: dict[int, int] = {}  # child -> attach counter when it got its parent
        self.ctr = 0

    def clone(self) -> Model:
        return copy.deepcopy(self)

    def children(self, p: int) -> list[int]:
        ks = [c for c, pp in self.parent.items() if pp == p]
        ks.sort(key=lambda c: self.order[c])
        return ks

    def descendants(self, p: int) -> list[int]:
        """Breadth-first, each level in attach order."""
        out: list[int] = []
        frontier = [p]
        while frontier:
            nxt: list[int] = []
            for f in frontier:
                nxt += self.children(f)
            out += nxt
            frontier = nxt
        return out

    def depth(self, e: int) -> int:
        d = 0
        while e in self.parent:
            e = self.parent[e]
            d += 1
        return d

    def despawn(self, keys: list[int]) -> list[int]:
        """Remove the live ones of ``keys`` with their subtrees; returns the keys removed."""
        allk: list[int] = []
        for k in keys:
            if k in self.ents and k not in allk:
                allk.append(k)
        for k in list(allk):
            for d in self.descendants(k):
                if d not in allk:
                    allk.append(d)
        for k in allk:
            del self.ents[k]
            self.parent.pop(k, None)
            self.order.pop(k, None)
        return allk

    def set_parent(self, children: list[int], parents: list[int],
                   check_alive: bool = False) -> None:
        """Raises ModelError(KeyError | ValueError) and changes nothing when the world must
        refuse: a dead key (``check_alive``), a self-parent, a cycle."""
        if check_alive:
            for c in children:
                if c not in self.ents:
                    raise ModelError(KeyError)
            for p in parents:
                if p != 0 and p not in self.ents:
                    raise ModelError(KeyError)
        pairs = [(c, p) for c, p in zip(children, parents, strict=True)
                 if self.parent.get(c, 0) != p]
        for c, p in pairs:
            if c == p:
                raise ModelError(ValueError)
        newpar = dict(self.parent)
        for c, p in pairs:
            if p == 0:
                newpar.pop(c, None)
            else:
                newpar[c] = p
        for c, _ in pairs:
            seen: set[int] = set()
            e = c
            while e in newpar:
                if e in seen:
                    raise ModelError(ValueError)
                seen.add(e)
                e = newpar[e]
        self.parent = newpar
        for c, p in pairs:
            if p == 0:
                self.order.pop(c, None)
            else:
                self.ctr += 1
                self.order[c] = self.ctr


def keyset(arr: Any) -> set[int]:
    return {int(k) for k in np.asarray(arr).tolist()}


def touched_keys(op: Deferred) -> list[int]:
    """The keys a deferred op names (new keys and parents included)."""
    if op[0] == "spawn":
        return [*op[1], op[3]]
    if op[0] == "despawn":
        return list(op[1])
    if op[0] in ("add", "remove"):
        return [op[1]]
    if op[0] == "set_parent":
        return [op[1], op[2]]
    return [*op[2], op[3]]  # instantiate: the new keys and the parent


def has(m: Model, k: int, t: type) -> bool:
    return k in m.parent if t is ChildOf else t in m.ents[k]


class DeferredMachine(RuleBasedStateMachine):
    steps = 0  # invariant checks (one per rule step), summed over all examples

    def __init__(self) -> None:
        super().__init__()
        self.w = World(auto_group=True)
        self.m = Model()
        self.snaps: list[tuple[Snapshot, Model, list[int]]] = []
        self.bps: list[tuple[Blueprint, Content]] = []
        self.dead: list[int] = []

    @initialize(cfg=st.sampled_from(["auto", "noauto", "nested", "nested_childof",
                                     "childof_outer"]))
    def setup(self, cfg: str) -> None:
        note(f"config {cfg}")
        if cfg != "auto":
            self.w = World(auto_group=cfg not in ("noauto", "nested"))
        if cfg == "nested":
            self.w.group(A, B)
            self.w.group(A, B, C)
            self.w.group(A, B, C, D)
        elif cfg == "nested_childof":
            self.w.group(A, B)
            self.w.group(A, B, ChildOf)
        elif cfg == "childof_outer":
            self.w.group(ChildOf, A)
            self.w.group(ChildOf, A, R)

    # -- helpers ---------------------------------------------------------------------------
    def live(self) -> list[int]:
        return sorted(self.m.ents)

    def draw_key(self, data: st.DataObject) -> int | None:
        pool = self.live()
        return data.draw(st.sampled_from(pool)) if pool else None

    def draw_comp(self, data: st.DataObject, t: type) -> tuple[Any, Values]:
        vals: Values = {}
        if t in SMALL_INT:
            vals[SMALL_INT[t]] = data.draw(st.integers(-5, 5))
        elif t is R:  # live keys, NULL and dead keys (these dangle in a blueprint)
            pool = [*self.live(), 0, *self.dead[:3]]
            vals["ref"] = data.draw(st.sampled_from(pool))
            vals["refs"] = (data.draw(st.sampled_from(pool)), data.draw(st.sampled_from(pool)))
        kwargs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in vals.items()}
        return t(**kwargs), vals

    def draw_comps(self, data: st.DataObject) -> tuple[list[Any], Comps]:
        types = data.draw(st.lists(st.sampled_from(TYPES), unique=True, max_size=4))
        comps: list[Any] = []
        vals: Comps = {}
        for t in types:
            c, v = self.draw_comp(data, t)
            comps.append(c)
            vals[t] = v
        return comps, vals

    def expect(self, exc: type[Exception], fn: Callable[[], object]) -> None:
        """``fn`` must raise ``exc`` and leave the world unchanged."""
        h, state = self.w.state_hash(), world_state(self.w)
        try:
            fn()
        except exc:
            pass
        else:
            raise AssertionError(f"expected {exc.__name__}")
        assert self.w.state_hash() == h, "world changed after a failed call"
        assert world_state(self.w) == state, "world changed after a failed call"

    # -- spawn / despawn -------------------------------------------------------------------
    @rule(data=st.data())
    def spawn(self, data: st.DataObject) -> None:
        comps, vals = self.draw_comps(data)
        par = 0
        if bool(self.m.ents) and data.draw(st.booleans()):
            par = data.draw(st.sampled_from(self.live()))
            comps.append(ChildOf(parent=par))
        k = int(self.w.spawn(*comps))
        note(f"spawn {[type(c).__name__ for c in comps]} parent={par} -> {k}")
        assert k not in self.m.ents
        self.m.ents[k] = vals
        if par:
            self.m.set_parent([k], [par])

    @rule(data=st.data(), n=st.integers(0, 12))
    def spawn_batch(self, data: st.DataObject, n: int) -> None:
        comps, vals = self.draw_comps(data)
        par = 0
        if bool(self.m.ents) and data.draw(st.booleans()):
            par = data.draw(st.sampled_from(self.live()))
            comps.append(ChildOf(parent=par))
        keys = [int(k) for k in self.w.spawn_batch(*comps, count=n)]
        note(f"spawn_batch {[type(c).__name__ for c in comps]} n={n} parent={par} -> {keys}")
        for k in keys:
            assert k not in self.m.ents
            self.m.ents[k] = copy.deepcopy(vals)
        if par and keys:
            self.m.set_parent(keys, [par] * len(keys))

    @rule(data=st.data())
    def despawn(self, data: st.DataObject) -> None:
        k = self.draw_key(data)
        if k is None:
            return
        kind = data.draw(st.sampled_from(["int", "np", "batch1", "batch_np"]))
        note(f"despawn {k} via {kind}")
        if kind == "int":
            self.w.despawn(k)
        elif kind == "np":
            self.w.despawn(np.uint64(k))
        elif kind == "batch1":
            self.w.despawn_batch([k])
        else:
            self.w.despawn_batch(np.array([k], np.uint64))
        self.dead += self.m.despawn([k])

    @rule(data=st.data())
    def despawn_batch(self, data: st.DataObject) -> None:
        pool = self.live()
        if not pool:
            return
        ks = data.draw(st.lists(st.sampled_from(pool), unique=True, max_size=8))
        note(f"despawn_batch {ks}")
        self.w.despawn_batch(np.array(ks, np.uint64) if data.draw(st.booleans()) else ks)
        self.dead += self.m.despawn(ks)

    @rule(data=st.data())
    def stale_ops(self, data: st.DataObject) -> None:
        """Every op refuses a dead key with KeyError and changes nothing."""
        if not self.dead:
            return
        k = data.draw(st.sampled_from(self.dead))
        op = data.draw(st.sampled_from(["despawn", "get", "add", "remove", "set_parent",
                                        "set_parent_p", "despawn_batch", "add_batch",
                                        "instantiate_p"]))
        note(f"stale {op} {k}")
        w, live = self.w, self.live()
        if op == "despawn":
            self.expect(KeyError, lambda: w.despawn(k))
        elif op == "get":
            self.expect(KeyError, lambda: w.get(k, A))
        elif op == "add":
            self.expect(KeyError, lambda: w.add(k, A(x=1)))
        elif op == "remove":
            self.expect(KeyError, lambda: w.remove(k, A))
        elif op == "set_parent":
            self.expect(KeyError, lambda: w.set_parent(k, live[0] if live else 0))
        elif op == "set_parent_p":
            if live:
                self.expect(KeyError, lambda: w.set_parent(live[0], k))
        elif op == "despawn_batch":
            self.expect(KeyError, lambda: w.despawn_batch([*live[:2], k]))
        elif op == "add_batch":
            self.expect(KeyError, lambda: w.add_batch([*live[:2], k], B(y=3)))
        elif op == "instantiate_p":
            if self.bps:
                bp = self.bps[0][0]
                self.expect(KeyError, lambda: w.instantiate(bp, parent=k))

    # -- components ------------------------------------------------------------------------
    @rule(data=st.data())
    def add(self, data: st.DataObject) -> None:
        k = self.draw_key(data)
        if k is None:
            return
        t = data.draw(st.sampled_from(TYPES))
        c, v = self.draw_comp(data, t)
        note(f"add {k} {t.__name__} {v}")
        self.w.add(k, c)
        self.m.ents[k][t] = v

    @rule(data=st.data())
    def add_batch(self, data: st.DataObject) -> None:
        pool = self.live()
        if not pool:
            return
        ks = data.draw(st.lists(st.sampled_from(pool), unique=True, max_size=8))
        t = data.draw(st.sampled_from(TYPES))
        c, v = self.draw_comp(data, t)
        note(f"add_batch {ks} {t.__name__} {v}")
        self.w.add_batch(ks, c)
        for k in ks:
            self.m.ents[k][t] = dict(v)

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        k = self.draw_key(data)
        if k is None:
            return
        t = data.draw(st.sampled_from([*TYPES, ChildOf]))
        present = has(self.m, k, t)
        note(f"remove {k} {t.__name__} has={present}")
        if not present:
            self.expect(KeyError, lambda: self.w.remove(k, t))
            return
        self.w.remove(k, t)
        if t is ChildOf:
            self.m.set_parent([k], [0])
        else:
            del self.m.ents[k][t]

    @rule(data=st.data())
    def remove_batch(self, data: st.DataObject) -> None:
        t = data.draw(st.sampled_from([*TYPES, ChildOf]))
        pool = [k for k in self.live() if has(self.m, k, t)]
        if not pool:
            return
        ks = data.draw(st.lists(st.sampled_from(pool), unique=True, max_size=8))
        note(f"remove_batch {ks} {t.__name__}")
        self.w.remove_batch(ks, t)
        if t is ChildOf:
            self.m.set_parent(ks, [0] * len(ks))
        else:
            for k in ks:
                del self.m.ents[k][t]

    @rule(data=st.data())
    def set_parent(self, data: st.DataObject) -> None:
        pool = self.live()
        if not pool:
            return
        ks = data.draw(st.lists(st.sampled_from(pool), unique=True, min_size=1, max_size=4))
        one = data.draw(st.booleans())
        if one:
            ps = [data.draw(st.sampled_from([*pool, 0]))] * len(ks)
        else:
            ps = [data.draw(st.sampled_from([*pool, 0])) for _ in ks]
        note(f"set_parent {ks} {ps}")
        parents: Any = ps[0] if one else ps
        m2 = self.m.clone()
        try:
            m2.set_parent(ks, ps)
        except ModelError as e:
            self.expect(e.kind, lambda: self.w.set_parent(ks, parents))
            return
        if len(ks) == 1 and data.draw(st.booleans()):
            self.w.set_parent(ks[0], ps[0])
        else:
            self.w.set_parent(ks, parents)
        self.m = m2

    @rule(data=st.data())
    def groups(self, data: st.DataObject) -> None:
        types = data.draw(st.lists(st.sampled_from([*TYPES, ChildOf]), unique=True,
                                   min_size=2, max_size=4))
        h, state = self.w.state_hash(), world_state(self.w)
        try:
            self.w.group(*types)
            note(f"group {[t.__name__ for t in types]} ok")
        except ValueError:
            note(f"group {[t.__name__ for t in types]} refused")
            assert self.w.state_hash() == h
            assert world_state(self.w) == state

    # -- queries and deferred ops ----------------------------------------------------------
    def _check_query(self, q: Any, types: list[type], without: list[type]) -> list[int]:
        m = self.m
        want = {k for k in m.ents
                if all(has(m, k, t) for t in types) and not any(has(m, k, t) for t in without)}
        got = [int(k) for k in q.entities]
        assert len(got) == len(q) == len(set(got)), (got, len(q))
        assert set(got) == want, (types, without, sorted(got), sorted(want))
        for t in types:
            if t is ChildOf:
                col = q[ChildOf]
                for i, k in enumerate(got):
                    assert int(col["parent"][i]) == m.parent[k]
                continue
            for f in VALUED[t]:
                col = q[t][f]
                for i, k in enumerate(got):
                    exp = m.ents[k][t][f]
                    if isinstance(exp, tuple):
                        assert tuple(int(v) for v in col[i]) == exp, (k, t.__name__, f)
                    else:
                        assert int(col[i]) == exp, (k, t.__name__, f, int(col[i]), exp)
        return got

    @rule(data=st.data())
    def query_write(self, data: st.DataObject) -> None:
        all_types = [*TYPES, ChildOf]
        types = data.draw(st.lists(st.sampled_from(all_types), unique=True,
                                   min_size=1, max_size=3))
        without = data.draw(st.lists(st.sampled_from([t for t in all_types if t not in types]),
                                     unique=True, max_size=2))
        ro = data.draw(st.lists(st.sampled_from(types), unique=True, max_size=2))
        if ChildOf in types and ChildOf not in ro:
            ro.append(ChildOf)
        note(f"query {[t.__name__ for t in types]} without={[t.__name__ for t in without]} "
             f"ro={[t.__name__ for t in ro]}")
        deferred: list[Deferred] = []
        err: Exception | None = None
        try:
            with self.w.query(*types, without=without, readonly=ro) as q:
                got = self._check_query(q, types, without)
                for t in types:
                    if t in ro or t not in SMALL_INT:
                        continue
                    f = SMALL_INT[t]
                    delta = data.draw(st.integers(-3, 3))
                    if delta:
                        q[t][f] += delta
                        for k in got:
                            self.m.ents[k][t][f] += delta
                if data.draw(st.booleans()):  # a nested query sees the pre-block state
                    t2 = data.draw(st.sampled_from(TYPES))
                    with self.w.query(t2) as q2:
                        want = {k for k, c in self.m.ents.items() if t2 in c}
                        assert keyset(q2.entities) == want
                for _ in range(data.draw(st.integers(0, 6))):
                    self.deferred_op(data, deferred)
        except (KeyError, ValueError) as e:
            err = e
        self.check_flush(err, deferred)

    @rule(data=st.data())
    def deferred_block(self, data: st.DataObject) -> None:
        """More structural ops in one block than query_write makes, so they overlap more."""
        t = data.draw(st.sampled_from(TYPES))
        note(f"block in query {t.__name__}")
        deferred: list[Deferred] = []
        err: Exception | None = None
        try:
            with self.w.query(t):
                for _ in range(data.draw(st.integers(2, 8))):
                    self.deferred_op(data, deferred)
        except (KeyError, ValueError) as e:
            err = e
        self.check_flush(err, deferred)

    def check_flush(self, err: Exception | None, deferred: list[Deferred]) -> None:
        """The block raised (at a call or the flush) exactly the error the model predicts."""
        exp = self.apply_deferred(deferred)
        note(f"flush error {err!r}, model expects {exp}")
        assert (type(err) if err else None) is exp, (err, exp)

    def deferred_op(self, data: st.DataObject, deferred: list[Deferred]) -> None:
        """One structural op inside a block: checked at the call against the pre-block
        state (keys spawned in the block count as alive, pending despawns as dead)."""
        w = self.w
        pending: set[int] = set()
        for op in deferred:
            if op[0] == "despawn":
                pending |= op[2]
        spawned = {k for op in deferred if op[0] == "spawn" for k in op[1]}
        alive = (set(self.m.ents) | spawned) - pending
        pool = sorted(alive)
        # Bugs hide where ops of one flush overlap (a despawn taking along a child that an
        # earlier op attached): half the keys come from those the block already used.
        touched = sorted(alive & {k for op in deferred for k in touched_keys(op)})

        def draw(with_null: bool = False) -> int:
            if bool(touched) and data.draw(st.booleans()):
                return data.draw(st.sampled_from(touched))
            return data.draw(st.sampled_from([*pool, 0] if with_null else pool))

        kind = data.draw(st.sampled_from(["spawn", "despawn", "add", "remove", "set_parent",
                                          "despawn_twice", "instantiate"]))
        if kind == "spawn":
            comps, vals = self.draw_comps(data)
            par = 0
            if bool(pool) and data.draw(st.booleans()):
                par = draw()
                comps.append(ChildOf(parent=par))
            k = int(w.spawn(*comps))
            note(f"  [in block] spawn {[type(c).__name__ for c in comps]} parent={par} -> {k}")
            deferred.append(("spawn", [k], vals, par))
        elif kind in ("despawn", "despawn_twice"):
            if not pool:
                return
            k = draw()
            note(f"  [in block] despawn {k}")
            w.despawn(k)
            # pending: k and its descendants in the pre-block hierarchy
            desc = set(self.m.descendants(k)) if k in self.m.ents else set()
            deferred.append(("despawn", [k], {k} | desc))
            if kind == "despawn_twice":
                note(f"  [in block] despawn again {k}")
                try:
                    w.despawn(k)
                except KeyError:
                    pass
                else:
                    raise AssertionError("second despawn in a block accepted")
        elif kind == "add":
            if not pool:
                return
            k = draw()
            t = data.draw(st.sampled_from(TYPES))
            c, v = self.draw_comp(data, t)
            note(f"  [in block] add {k} {t.__name__} {v}")
            w.add(k, c)
            deferred.append(("add", k, t, v))
        elif kind == "remove":
            if not pool:
                return
            k = draw()
            t = data.draw(st.sampled_from(TYPES))
            note(f"  [in block] remove {k} {t.__name__}")
            w.remove(k, t)
            deferred.append(("remove", k, t))
        elif kind == "set_parent":
            if not pool:
                return
            c = draw()
            p = draw(with_null=True)
            note(f"  [in block] set_parent {c} {p}")
            try:
                w.set_parent(c, p)
            except ValueError:
                assert c == p
                return
            deferred.append(("set_parent", c, p))
        elif kind == "instantiate":
            if not self.bps:
                return
            i = data.draw(st.integers(0, len(self.bps) - 1))
            bp, content = self.bps[i]
            p = draw(with_null=True) if pool else 0
            inst = w.instantiate(bp, parent=p)
            keys = [int(k) for k in inst.keys]
            note(f"  [in block] instantiate bp{i} parent={p} -> {keys}")
            self.check_dangling(inst, content)
            deferred.append(("instantiate", content, keys, p))

    def apply_deferred(self, deferred: list[Deferred]) -> type[Exception] | None:
        """Apply the block's ops in call order; returns the first error the flush raises
        (every op still runs: a dead parent leaves a spawn or an instance a root)."""
        m = self.m
        first: list[type[Exception]] = []

        def fail(kind: type[Exception]) -> None:
            if not first:
                first.append(kind)

        for op in deferred:
            if op[0] == "spawn":
                _, ks, vals, par = op
                for k in ks:
                    m.ents[k] = copy.deepcopy(vals)
                if par:
                    if par in m.ents:
                        m.set_parent(ks, [par])
                    else:
                        fail(KeyError)
            elif op[0] == "despawn":
                self.dead += m.despawn(op[1])
            elif op[0] == "add":
                _, k, t, v = op
                if k in m.ents:
                    m.ents[k][t] = v
                else:
                    fail(KeyError)
            elif op[0] == "remove":
                _, k, t = op
                if k in m.ents and t in m.ents[k]:
                    del m.ents[k][t]
                else:
                    fail(KeyError)
            elif op[0] == "set_parent":
                _, c, p = op
                try:
                    m.set_parent([c], [p], check_alive=True)
                except ModelError as e:
                    fail(e.kind)
            elif op[0] == "instantiate":
                _, content, keys, p = op
                if p and p not in m.ents:
                    fail(KeyError)
                    p = 0
                self.model_instantiate(content, keys, p)
        return first[0] if first else None

    # -- blueprints ------------------------------------------------------------------------
    @rule(data=st.data())
    def extract(self, data: st.DataObject) -> None:
        pool = self.live()
        if not pool:
            return
        ks = data.draw(st.lists(st.sampled_from(pool), unique=True, min_size=1, max_size=4))
        desc = data.draw(st.booleans())
        bp = self.w.extract(ks, descendants=desc)
        order = list(ks)
        if desc:  # the keys, then all their descendants breadth-first
            frontier = list(ks)
            while frontier:
                nxt: list[int] = []
                for f in frontier:
                    nxt += self.m.children(f)
                frontier = nxt
                for d in nxt:
                    if d not in order:
                        order.append(d)
        assert [int(k) for k in bp.keys] == order, ([int(k) for k in bp.keys], order)
        inside = set(order)
        content: Content = []
        for k in order:
            p = self.m.parent.get(k, 0)
            content.append((k, copy.deepcopy(self.m.ents[k]), p if p in inside else 0,
                            self.m.order.get(k, 0)))
        if data.draw(st.booleans()):
            bp = Blueprint.from_bytes(bytes(bp.to_bytes()))
        note(f"extract {ks} desc={desc} -> bp{len(self.bps)} order={order}")
        self.bps.append((bp, content))

    def model_instantiate(self, content: Content, keys: list[int], p: int) -> None:
        """New keys in blueprint order; inner links in their old attach order, then the
        roots under ``p``; references inside remapped, the others NULL."""
        m = self.m
        old2new = {c[0]: n for c, n in zip(content, keys, strict=True)}
        linked: list[tuple[int, int, int]] = []
        roots: list[int] = []
        for (_, comps, par, order), new in zip(content, keys, strict=True):
            nc = copy.deepcopy(comps)
            if R in nc:
                nc[R]["ref"] = old2new.get(nc[R]["ref"], 0)
                nc[R]["refs"] = tuple(old2new.get(v, 0) for v in nc[R]["refs"])
            m.ents[new] = nc
            if par:
                linked.append((order, new, old2new[par]))
            elif p:
                roots.append(new)
        linked.sort()
        for _, new, new_parent in linked:
            m.parent[new] = new_parent
            m.ctr += 1
            m.order[new] = m.ctr
        for new in roots:
            m.parent[new] = p
            m.ctr += 1
            m.order[new] = m.ctr

    def check_dangling(self, inst: Any, content: Content) -> None:
        """``inst.dangling`` lists exactly the non-NULL references to keys outside."""
        inside = {c[0] for c in content}
        name = schema_of(R).name
        want: list[tuple[str, str, int]] = []
        for _, comps, _, _ in content:
            if R in comps:
                want += [(name, "ref", k) for k in [comps[R]["ref"]] if k and k not in inside]
                want += [(name, "refs", k) for k in comps[R]["refs"] if k and k not in inside]
        got = [(d.component, d.field, int(d.key)) for d in inst.dangling]
        assert sorted(got) == sorted(want), (got, want)

    @rule(data=st.data())
    def instantiate(self, data: st.DataObject) -> None:
        if not self.bps:
            return
        i = data.draw(st.integers(0, len(self.bps) - 1))
        bp, content = self.bps[i]
        pool = self.live()
        p = data.draw(st.sampled_from([*pool, 0])) if pool else 0
        inst = self.w.instantiate(bp, parent=p)
        keys = [int(k) for k in inst.keys]
        note(f"instantiate bp{i} parent={p} -> {keys}")
        for k in keys:
            assert k not in self.m.ents
        self.model_instantiate(content, keys, p)
        self.check_dangling(inst, content)

    # -- snapshots -------------------------------------------------------------------------
    @rule()
    def snapshot(self) -> None:
        self.snaps.append((self.w.snapshot(), self.m.clone(), list(self.dead)))
        note(f"snapshot {len(self.snaps) - 1}")

    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        if not self.snaps:
            return
        i = data.draw(st.integers(0, len(self.snaps) - 1))
        snap, m, dead = self.snaps[i]
        how = data.draw(st.sampled_from(["mem", "bytes"]))
        note(f"restore {i} via {how}")
        if how == "mem":
            self.w.restore(snap)
        else:
            self.w.restore(Snapshot.from_bytes(bytes(snap.to_bytes())))
        self.m = m.clone()
        self.dead = list(dead)

    # -- invariant -------------------------------------------------------------------------
    @invariant()
    def matches(self) -> None:
        DeferredMachine.steps += 1
        w, m = self.w, self.m
        assert keyset(w.entities()) == set(m.ents), (sorted(keyset(w.entities())),
                                                     sorted(m.ents))
        assert len(w) == len(m.ents)
        for k, comps in m.ents.items():
            exp = set(comps) | ({ChildOf} if k in m.parent else set())
            got = {t for t in w.components_of(k) if t.__name__ != "PrefabOf"}
            assert got == exp, (k, got, exp)
            for t, vals in comps.items():
                rec = w.get(k, t)
                for f, v in vals.items():
                    if isinstance(v, tuple):
                        assert tuple(int(x) for x in rec[f]) == v, (k, t.__name__, f)
                    else:
                        assert int(rec[f]) == v, (k, t.__name__, f, int(rec[f]), v)
            assert int(w.parent(k)) == m.parent.get(k, 0), (k, int(w.parent(k)))
            assert [int(c) for c in w.children(k)] == m.children(k), (k, w.children(k))
            if k in m.parent:
                depth = int(w.get(k, ChildOf)["depth"])
                assert depth == m.depth(k), (k, depth, m.depth(k))
        self.dead = [k for k in self.dead if k not in m.ents]
        for k in self.dead[-10:]:
            assert not w.is_alive(k)
        check_invariants(w)


SETTINGS = settings(
    max_examples=max(20, EXAMPLES // 2),
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def test_deferred_ops_match_dict_model() -> None:
    DeferredMachine.steps = 0
    run_state_machine_as_test(DeferredMachine, settings=SETTINGS)
    assert DeferredMachine.steps >= 5 * SETTINGS.max_examples, DeferredMachine.steps
