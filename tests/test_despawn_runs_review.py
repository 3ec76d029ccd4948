"""Batch despawns out of owning groups kept as runs (``ComponentStore.remove_runs``,
``storage.removal_plan``), adversarially: worlds with chains of nested groups (and a
second, independent group, possibly over the hierarchy's ``ChildOf``) lose random subsets
of entities through the numpy path (``despawn_batch`` past ``SMALL_DESPAWN``, deferred
despawns inside query blocks, subtrees taken along by parents), in any key order, and
must keep matching a plain dict model, their groups aligned and complete, their saved
states restorable (also across more than one chunk of rows) and their re-simulations
deterministic."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import ecs_engine.world as world_module
from ecs_engine import NULL, ChildOf, Rollback, Snapshot, SyncTest, World, component
from ecs_engine.storage import CHUNK_ROWS, removal_plan
from tests.test_nested_groups import A, B, C, D, E
from tests.world_state import check_invariants, world_state


@component(name="RunsF")
class F:
    v: np.int16 = 0


@component(name="RunsG")
class G:
    v: np.int32 = 0
    w: np.uint8 = 0  # 5-byte rows: moved as numpy voids


TYPES: tuple[type, ...] = (A, B, C, D, E, F, G)
CHAIN = ((A, B), (A, B, C), (A, B, C, D), (A, B, C, D, E))
SECOND: tuple[tuple[type, ...], ...] = ((), (F, G), (ChildOf, F))
SHAPES: tuple[tuple[type, ...], ...] = (
    (A,), (B,), (C,), (D,), (E,), (F,), (G,), (A, B), (A, B, C), (A, B, C, D),
    (A, B, C, D, E), (B, C), (A, C), (C, D), (B, D), (A, E), (F, G), (A, F), (C, G))
WRITES = ((A, B), (B, C), (A, B, C), (C, D), (A, B, C, D), (F, G), (A, F), (D, E))

# spawn mixes: members of every level of the chain, of one of its types only, of none
MIXES: tuple[tuple[type, ...], ...] = (
    (A, B), (A, B, C), (A, B, C, D), (A, B, C, D, E), (A,), (B,), (A, C), (B, C, D), (C, D),
    (E,), (F, G), (F,), (A, B, F, G))

Model = dict[int, dict[type, int]]


@pytest.fixture(autouse=True)
def numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``despawn_batch`` takes the numpy path (``_destroy``), however small."""
    monkeypatch.setattr(world_module, "SMALL_DESPAWN", 0)


def subtree(parents: dict[int, int], roots: list[int]) -> set[int]:
    """``roots`` and every entity below them in the modelled hierarchy."""
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    out: set[int] = set()
    todo = list(roots)
    while todo:
        key = todo.pop()
        if key not in out:
            out.add(key)
            todo.extend(children.get(key, ()))
    return out


def check_queries(world: World, model: Model) -> None:
    """Every shape's query returns exactly the modelled entities with their values."""
    for shape in SHAPES:
        expected = sorted(k for k, c in model.items() if all(t in c for t in shape))
        with world.query(*shape, readonly=shape) as q:
            keys = q.entities.tolist()
            assert sorted(keys) == expected, [t.__name__ for t in shape]
            for t in shape:
                assert q[t]["v"].tolist() == [model[k][t] for k in keys], t.__name__


class DespawnRuns(RuleBasedStateMachine):
    """Random spawns, parents and despawns (immediate, deferred; repeated keys or dead
    ones refused) against a model; snapshots restored in memory and through bytes must
    give back the saved state and hash."""

    dead = Bundle("dead")

    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.model: Model = {}
        self.parents: dict[int, int] = {}
        self.saved: list[tuple[Snapshot, Model, dict[int, int], str, dict[str, Any]]] = []

    @initialize(levels=st.sampled_from([0, 2, 3, 4, 4]), second=st.sampled_from(SECOND),
                auto=st.booleans(), counts=st.lists(st.integers(0, 12), min_size=len(MIXES),
                                                    max_size=len(MIXES)))
    def setup(self, levels: int, second: tuple[type, ...], auto: bool,
              counts: list[int]) -> None:
        self.world = World(seed=7, auto_group=auto)
        self.world.register(*TYPES, ChildOf)
        for level in CHAIN[:levels]:
            self.world.group(*level)
        if second:
            self.world.group(*second)
        for i, (mix, count) in enumerate(zip(MIXES, counts, strict=True)):
            self.spawn_batch(set(mix), count, 10 * i)  # a population in every run

    def live(self) -> list[int]:
        return sorted(self.model)

    def forget(self, keys: list[int]) -> list[int]:
        gone = subtree(self.parents, keys)
        for key in gone:
            del self.model[key]
            self.parents.pop(key, None)
        return sorted(gone)

    @rule(mix=st.one_of(st.sampled_from(MIXES).map(set),
                        st.sets(st.sampled_from(TYPES), min_size=1)),
          count=st.sampled_from([0, 1, 3, 25, 40]), value=st.integers(-1000, 1000))
    def spawn_batch(self, mix: set[type], count: int, value: int) -> None:
        order = [t for t in TYPES if t in mix]
        base = np.arange(count) + value
        keys = self.world.spawn_batch(*(t(v=base + 100 * i) for i, t in enumerate(order)),
                                      count=count)
        for j, key in enumerate(keys.tolist()):
            self.model[key] = {t: value + j + 100 * i for i, t in enumerate(order)}

    @precondition(lambda self: len(self.model) >= 2)
    @rule(data=st.data())
    def set_parent(self, data: st.DataObject) -> None:
        live = self.live()
        child = data.draw(st.sampled_from(live))
        below = subtree(self.parents, [child])
        parent = data.draw(st.sampled_from([k for k in live if k not in below] + [NULL]))
        self.world.set_parent(child, parent)
        if parent == NULL:
            self.parents.pop(child, None)
        else:
            self.parents[child] = parent

    @precondition(lambda self: self.model)
    @rule(data=st.data(), order=st.sampled_from(["sorted", "reversed", "shuffled", "drawn"]),
          deferred=st.booleans())
    def despawn_batch(self, data: st.DataObject, order: str, deferred: bool) -> None:
        live = self.live()
        if order == "drawn":  # a few keys in the order drawn
            picked = data.draw(st.lists(st.sampled_from(live), unique=True,
                                        max_size=min(len(live), 30)))
        else:  # a fraction of every run, by a seeded coin per entity
            fraction = data.draw(st.sampled_from([0.1, 0.3, 0.7]))
            rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
            picked = [k for k in live if rng.random() < fraction]
            if order == "shuffled":
                picked = rng.permutation(picked).tolist()
            elif order == "reversed":
                picked.reverse()
        arr = np.array(picked, np.uint64)
        world = self.world
        if deferred:  # the numpy path at the block's end, whatever the batch's size
            with world.query(A, readonly=(A,)):
                world.despawn_batch(arr)
                if picked:  # already being despawned (its subtree too)
                    with pytest.raises(KeyError):
                        world.despawn_batch(arr[-1:])
                assert len(world) == len(self.model)
        else:
            world.despawn_batch(arr)
        for key in self.forget(picked):
            assert not world.is_alive(key)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def despawn_one(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(self.live()))
        self.world.despawn(key)  # row by row, or the numpy path for a parent
        self.forget([key])

    @precondition(lambda self: self.model)
    @rule(target=dead, data=st.data())
    def despawn_all_of_a_type(self, data: st.DataObject) -> int:
        """Every entity with one type (a whole run, or a whole group, at once)."""
        ctype = data.draw(st.sampled_from(TYPES))
        having = [k for k in self.live() if ctype in self.model[k]]
        self.world.despawn_batch(np.array(having[::-1], np.uint64))
        gone = self.forget(having)
        return gone[0] if gone else int(NULL)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), dead=dead)
    def bad_batches_change_nothing(self, data: st.DataObject, dead: int) -> None:
        live = self.live()
        picked = data.draw(st.lists(st.sampled_from(live), unique=True, min_size=1,
                                    max_size=min(len(live), 30)))
        copy = data.draw(st.sampled_from(picked))
        bad = data.draw(st.permutations([*picked, copy]))
        before, digest = world_state(self.world), self.world.state_hash()
        with pytest.raises(ValueError, match="more than once"):  # (the repo's contract)
            self.world.despawn_batch(np.array(bad, np.uint64))
        if not self.world.is_alive(dead):  # (a restore may have brought it back)
            with pytest.raises(KeyError):
                self.world.despawn_batch(np.array([*picked, dead], np.uint64))
        with self.world.query(A, readonly=(A,)), pytest.raises(ValueError):
            self.world.despawn_batch(np.array(bad, np.uint64))
        assert world_state(self.world) == before and self.world.state_hash() == digest

    @rule(shape=st.sampled_from(WRITES))
    def write(self, shape: tuple[type, ...]) -> None:
        """A writing query adds one to its first type (and may create or nest a group)."""
        with self.world.query(*shape, readonly=shape[1:]) as q:
            q[shape[0]]["v"] += 1
        for comps in self.model.values():
            if all(t in comps for t in shape):
                comps[shape[0]] += 1

    @rule()
    def snapshot(self) -> None:
        snap = self.world.snapshot()
        self.saved.append((snap, {k: dict(c) for k, c in self.model.items()},
                           dict(self.parents), self.world.state_hash(),
                           world_state(self.world)))
        self.saved = self.saved[-3:]

    @precondition(lambda self: self.saved)
    @rule(data=st.data(), through_bytes=st.booleans())
    def restore(self, data: st.DataObject, through_bytes: bool) -> None:
        snap, model, parents, digest, state = data.draw(st.sampled_from(self.saved))
        if through_bytes:
            snap = Snapshot.from_bytes(snap.to_bytes())
        self.world.restore(snap)
        assert self.world.state_hash() == digest
        assert world_state(self.world) == state
        self.model = {k: dict(c) for k, c in model.items()}
        self.parents = dict(parents)

    @invariant()
    def matches_the_model(self) -> None:
        world = self.world
        check_invariants(world)
        assert len(world) == len(self.model)
        check_queries(world, self.model)
        for key in self.model:
            assert int(world.parent(key)) == self.parents.get(key, NULL)


def test_batch_despawns_out_of_runs_match_the_model() -> None:
    run_state_machine_as_test(DespawnRuns, settings=settings(
        max_examples=60, stateful_step_count=25, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]))


# -- targeted: whole runs, empty groups, equal sizes, key order, subtrees ------------------


def chain_world() -> tuple[World, dict[str, np.ndarray]]:
    """The chain (A, B) > (A, B, C) > (A, B, C, D) over interleaved spawns: members of
    every level, entities with one of the outer types only, and some with no group's
    types (keys by kind)."""
    world = World(seed=3, auto_group=False)
    for level in CHAIN[:3]:
        world.group(*level)
    kinds: dict[str, list[int]] = {k: [] for k in ("abcd", "abc", "ab", "a", "b", "cd", "d")}
    for i in range(30):
        for kind in kinds:
            types = [t for t, name in zip((A, B, C, D), "abcd", strict=True) if name in kind]
            kinds[kind].append(int(world.spawn(*(t(v=1000 * j + i) for j, t in
                                                 enumerate(types)))))
    return world, {k: np.array(v, np.uint64) for k, v in kinds.items()}


def world_model(world: World) -> Model:
    return {k: {t: int(world.get(k, t)["v"]) for t in TYPES if world.has(k, t)}
            for k in world.entities().tolist()}


CASES: dict[str, tuple[str, ...]] = {
    "every entity": ("abcd", "abc", "ab", "a", "b", "cd", "d"),
    "only rows no group holds": ("a", "b", "cd", "d"),
    "the innermost group": ("abcd",),
    "every member of the outer group": ("abcd", "abc", "ab"),
    "the middle run": ("abc",),
    "the outer group's own run and the tail": ("ab", "a"),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("order", ["sorted", "reversed", "given"])
def test_despawning_whole_runs(case: str, order: str) -> None:
    world, kinds = chain_world()
    model = world_model(world)
    doomed = np.concatenate([kinds[k] for k in CASES[case]])
    if order != "given":
        doomed = np.sort(doomed)[:: 1 if order == "sorted" else -1]
    world.despawn_batch(doomed)
    for key in doomed.tolist():
        del model[key]
    check_invariants(world)
    check_queries(world, model)
    sizes = [g.size for g in world._groups]
    assert sizes == [sum(1 for c in model.values() if all(t in c for t in level))
                     for level in CHAIN[:3]]


def test_groups_of_size_zero_and_equal_sizes() -> None:
    """Runs of length zero (a nested group as large as its outer one, empty groups)."""
    world = World(seed=5, auto_group=False)
    for level in CHAIN:
        world.group(*level)
    full = world.spawn_batch(*(t(v=np.arange(40) + 100 * i) for i, t in
                               enumerate(CHAIN[-1])), count=40)
    tail = world.spawn_batch(A(v=np.arange(30)), count=30)
    assert [g.size for g in world._groups] == [40, 40, 40, 40]
    world.despawn_batch(full[::2][::-1])
    check_invariants(world)
    assert [g.size for g in world._groups] == [20, 20, 20, 20]
    world.despawn_batch(full[1::2])  # every group empties; A keeps its tail
    check_invariants(world)
    assert [g.size for g in world._groups] == [0, 0, 0, 0]
    with world.query(A, readonly=(A,)) as q:
        assert sorted(q.entities.tolist()) == sorted(tail.tolist())
        assert sorted(q[A]["v"].tolist()) == list(range(30))
    world.despawn_batch(tail[5:][::-1])  # from a store whose groups are empty
    check_invariants(world)
    assert sorted(world.entities().tolist()) == sorted(tail[:5].tolist())


def test_the_layout_does_not_depend_on_the_order_the_keys_come_in() -> None:
    """The same keys despawned in any order leave every store in the same rows."""
    layouts = []
    for perm in range(4):
        world, kinds = chain_world()
        doomed = np.concatenate([kinds[k][::3] for k in kinds])
        if perm:
            doomed = np.random.default_rng(perm).permutation(doomed)
        world.despawn_batch(doomed)
        check_invariants(world)
        layouts.append((world_state(world)["stores"], [g.size for g in world._groups]))
    assert all(layout == layouts[0] for layout in layouts)


def test_a_subtree_across_the_runs_goes_with_its_root(tmp_path: Any) -> None:
    """A parent whose descendants sit in every run (and in no group): the numpy path,
    whatever the batch's size; saves before and after load back to the same state."""
    world, kinds = chain_world()
    root = int(kinds["d"][0])
    below = [int(kinds[k][i]) for k in kinds for i in (1, 2)]
    for i, key in enumerate(below):
        world.set_parent(key, root if i % 2 == 0 else below[i - 1])
    model = world_model(world)
    path = tmp_path / "before.save"
    world.save(path)
    digest = world.state_hash()
    world.despawn(root)
    for key in [root, *below]:
        del model[key]
    check_invariants(world)
    check_queries(world, model)
    after = world.state_hash()
    world.save(tmp_path / "after.save")
    world.load(path)
    assert world.state_hash() == digest
    world.load(tmp_path / "after.save")
    assert world.state_hash() == after
    check_queries(world, model)


# -- removal_plan against brute force ------------------------------------------------------


def test_removal_plan_keeps_every_run_in_place_exhaustively() -> None:
    """Every way to cut up to 6 rows into up to 4 runs (empty runs too) and every subset
    removed (given in descending order): each run's survivors end up, in run order,
    between the runs' new ends, and a survivor already inside its new range stays."""
    for k in range(1, 5):
        for lengths in itertools.product(range(4), repeat=k):
            bounds = list(itertools.accumulate(lengths))
            n = bounds[-1]
            run_of = [p for p, length in enumerate(lengths) for _ in range(length)]
            for mask in range(1 << n):
                removed = [r for r in range(n) if mask >> r & 1]
                holes, sources, cut = removal_plan(np.array(removed[::-1], np.int64), bounds)
                after = list(range(n - len(removed)))
                for h, s in zip(holes.tolist(), sources.tolist(), strict=True):
                    after[h] = s
                assert sorted(after) == [r for r in range(n) if r not in removed]
                assert [run_of[r] for r in after] == sorted(run_of[r] for r in after)
                ends = [b - c for b, c in zip(bounds, cut, strict=True)]
                starts = [0, *ends[:-1]]
                assert all(not starts[run_of[s]] <= s < ends[run_of[s]]
                           for s in sources.tolist())


# -- more than one chunk of rows -----------------------------------------------------------


def big_world() -> tuple[World, np.ndarray]:
    n = 2 * CHUNK_ROWS
    world = World(seed=11, auto_group=False)
    for level in CHAIN[:3]:
        world.group(*level)
    v = np.arange(n)
    keys = world.spawn_batch(A(v=v), B(v=v + 1), count=n)
    world.add_batch(keys[::2], C(v=7))
    world.add_batch(keys[::6], D(v=9))
    world.spawn_batch(A(v=np.arange(5000)), count=5000)  # A's tail
    return world, keys


def test_snapshots_across_chunks_restore_after_a_large_despawn() -> None:
    world, keys = big_world()
    s0, state0, h0 = world.snapshot(), world_state(world), world.state_hash()
    # one chunk's values change: the next snapshot shares the other chunks with s0
    with world.query(A, B, C, D) as q:
        q[D]["v"][-3:] += 1
    s1, state1, h1 = world.snapshot(), world_state(world), world.state_hash()
    rng = np.random.default_rng(0)
    doomed = rng.choice(world.entities(), 30000, replace=False)
    model = world_model_of(world)
    world.despawn_batch(doomed)
    for key in doomed.tolist():
        del model[key]
    check_invariants(world)
    check_model(world, model)
    s2, state2, h2 = world.snapshot(), world_state(world), world.state_hash()
    world.despawn_batch(rng.permutation(world.entities())[:40])  # across the chunks
    assert world.store(A).n > CHUNK_ROWS
    for snap, state, digest in ((s1, state1, h1), (s2, state2, h2), (s0, state0, h0),
                                (s2, state2, h2)):
        world.restore(snap)
        assert world_state(world) == state and world.state_hash() == digest
        check_invariants(world)
    world.restore(Snapshot.from_bytes(s1.to_bytes()))
    assert world.state_hash() == h1


def world_model_of(world: World) -> Model:
    """The model of the big world, by column (``world.get`` per key is slow)."""
    model: Model = {}
    for t in (A, B, C, D):
        store = world.store(t)
        for key, value in zip(store.entities[: store.n].tolist(),
                              store.data["v"][: store.n].tolist(), strict=True):
            model.setdefault(key, {})[t] = value
    return model


def check_model(world: World, model: Model) -> None:
    for shape in ((A,), (A, B), (A, B, C), (A, B, C, D), (B, D), (C, D)):
        expected = sorted(k for k, c in model.items() if all(t in c for t in shape))
        with world.query(*shape, readonly=shape) as q:
            keys = q.entities.tolist()
            assert sorted(keys) == expected
            for t in shape:
                assert q[t]["v"].tolist() == [model[k][t] for k in keys]


# -- determinism ---------------------------------------------------------------------------


def churn(world: World, dt: float) -> None:
    """Spawns a batch of assorted members and despawns a random batch (sometimes inside
    a query block), drawing only from ``world.rng``; the input adds to the batch."""
    rng = world.rng
    count = int(rng.integers(20, 60))
    mix = [t for t in (A, B, C, D) if rng.random() < 0.8] or [A]
    world.spawn_batch(*(t(v=rng.integers(0, 100, count)) for t in mix), count=count)
    live = world.entities()
    extra = int(world.resources.get("input", 0))
    doomed = rng.choice(live, min(len(live), int(rng.integers(1, 30)) + extra), replace=False)
    if rng.random() < 0.5:
        with world.query(A, B) as q:
            q[A]["v"] += 1
            world.despawn_batch(doomed)
    else:
        world.despawn_batch(doomed)


def churn_world() -> World:
    world = World(seed=21)
    world.group(A, B)
    world.group(A, B, C)
    world.spawn_batch(A(), B(), C(), D(), count=50)
    world.add_system(churn)
    return world


def test_sync_test_re_simulates_despawns_out_of_runs_exactly() -> None:
    sync = SyncTest(churn_world(), rewind=3)
    for _ in range(12):
        sync.step()
    assert sync.checked >= 9
    check_invariants(sync.world)


def test_a_rollback_over_despawns_reaches_the_peers_state() -> None:
    """Mispredicted inputs despawned other batches; the rollback with the right ones
    must land on the state of a peer that had them on time."""
    world, peer = churn_world(), churn_world()
    rollback, on_time = Rollback(world, frames=4), Rollback(peer, frames=4)
    right = [0, 5, 2, 30, 7, 1]
    for tick, value in enumerate(right):
        rollback.advance(value if tick < 3 else 0)
        on_time.advance(value)
    assert world.state_hash() != peer.state_hash()
    rollback.rollback(3, right[3:])
    assert world.state_hash() == peer.state_hash()
    assert world_state(world) == world_state(peer)
    check_invariants(world)


def big_churn(world: World, dt: float) -> None:
    """Despawns a random batch (numpy, across the chunks) and a few keys one by one (which
    mark only their rows' chunks), then respawns as many into the chain."""
    rng = world.rng
    live = world.entities()
    doomed = rng.choice(live, 60, replace=False)
    world.despawn_batch(doomed[:50])
    for key in doomed[50:].tolist():
        world.despawn(key)
    mix = [A, B, C] if rng.random() < 0.5 else [A, B, C, D]
    world.spawn_batch(*(t(v=rng.integers(0, 100, 60)) for t in mix), count=60)


def test_sync_test_over_more_than_one_chunk_of_rows() -> None:
    world, _ = big_world()
    world.add_system(big_churn)
    sync = SyncTest(world, rewind=2)
    for _ in range(5):
        sync.step()
    assert sync.checked >= 3 and world.store(A).n > CHUNK_ROWS
    check_invariants(world)
