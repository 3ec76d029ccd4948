"""Cached query plans after spawns and despawns: an aligned plan over one store or over an
owning group takes only the new prefix size (no full resolve), and a gathered plan made
outside ``world.step`` is reused until its rows move or a step could serve it better.
Each fast path is checked against a plain model of which keys match."""

from __future__ import annotations

import numpy as np
import pytest

from ecs_engine import World, component
from tests.plan_counting import count_resolves


@component
class P:
    v: np.int64 = 0


@component
class V:
    v: np.int64 = 0


@component
class G:
    v: np.int64 = 0


def check(world: World, types: tuple[type, ...], have: dict[int, set[type]]) -> bool:
    """The query over ``types`` returns exactly the modelled keys, its columns hold each
    key's own values, and writes through it land; returns ``q.aligned``."""
    expected = sorted(k for k, ts in have.items() if set(types) <= ts)
    with world.query(*types) as q:
        keys = [int(k) for k in q.entities]
        assert sorted(keys) == expected
        for t in types:
            assert q[t]["v"].tolist() == [k & 0xFFFF for k in keys]
        aligned = q.aligned
    return aligned


@pytest.mark.parametrize("seed", range(4))
def test_resized_plans_follow_spawns_and_despawns(seed: int) -> None:
    """Movement-like (a group's exact types) and lifetime-like (one store) queries stay
    right through random churn, single and batched, with values tied to the keys."""
    rng = np.random.default_rng(seed)
    world = World()
    have: dict[int, set[type]] = {}

    def spawn(types: list[type], count: int) -> None:
        keys = world.spawn_batch(*(t() for t in types), count=count)
        for key in keys.tolist():
            have[key] = set(types)
            for t in types:
                world.get(key, t)["v"] = key & 0xFFFF

    spawn([P, V, G], 20)
    spawn([P, V], 20)
    spawn([P], 5)
    for _ in range(60):
        assert check(world, (P, V), have)  # the group's exact types: views
        assert check(world, (G,), have)
        live = sorted(have)
        doomed = rng.choice(live, int(rng.integers(0, 6)), replace=False).tolist()
        if len(doomed) == 1 and rng.random() < 0.5:
            world.despawn(doomed[0])
        else:
            world.despawn_batch(np.array(doomed, np.uint64))
        for key in doomed:
            del have[key]
        mixes: list[list[type]] = [[P, V, G], [P, V], [P, G]]
        spawn(mixes[int(rng.integers(3))], int(rng.integers(0, 12)))


def test_resize_skips_the_full_resolve_only_where_it_may(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = World()
    have: dict[int, set[type]] = {}
    for key in world.spawn_batch(P(), V(), count=5).tolist():
        have[key] = {P, V}
        world.get(key, P)["v"] = world.get(key, V)["v"] = key & 0xFFFF
    check(world, (P, V), have)  # creates the group, resolves once
    check(world, (P,), have)
    calls = count_resolves(monkeypatch)
    key = int(world.spawn(P(v=0), V(v=0)))
    world.get(key, P)["v"] = world.get(key, V)["v"] = key & 0xFFFF
    have[key] = {P, V}
    world.despawn(next(iter(have)))
    del have[next(iter(have))]
    assert check(world, (P, V), have) and check(world, (P,), have)
    assert calls[0] == 0  # both took the new size only
    # A plan excluding a type must re-resolve: the excluded store may have gained rows.
    with world.query(P, without=(G,)) as q:
        assert len(q) == len(have)
    world.add(key, G(v=1))
    with world.query(P, without=(G,)) as q:
        assert key not in q.entities.tolist()


def test_a_disbanded_group_is_not_taken_for_the_prefix() -> None:
    """After a restore rebuilds the groups, the plan resolves again (its old group owns
    nothing), and its rows are the restored ones."""
    world = World()
    keys = world.spawn_batch(P(v=np.arange(6)), V(v=np.arange(6)))
    with world.query(P, V) as q:
        assert q.aligned and len(q) == 6
    snap = world.snapshot()
    world.despawn_batch(keys[:3])
    with world.query(P, V) as q:
        assert len(q) == 3
    world.restore(snap)
    with world.query(P, V) as q:
        assert sorted(q.entities.tolist()) == sorted(keys.tolist())
        assert sorted(q[P]["v"].tolist()) == list(range(6))


def test_a_gathered_plan_outside_a_step_is_reused_until_rows_move(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = World()
    have: dict[int, set[type]] = {}
    for i, key in enumerate(world.spawn_batch(P(), V(), count=8).tolist()):
        have[key] = {P, V}
        world.get(key, P)["v"] = world.get(key, V)["v"] = key & 0xFFFF
        if i % 2 == 0:
            world.add(key, G(v=key & 0xFFFF))
            have[key].add(G)
    loose = int(world.spawn(V(), G()))  # a match outside the group: no nested group serves
    world.get(loose, V)["v"] = world.get(loose, G)["v"] = loose & 0xFFFF
    have[loose] = {V, G}
    check(world, (P, V), have)  # the group (P, V): (V, G) gathers beside it
    assert not check(world, (V, G), have)
    calls = count_resolves(monkeypatch)
    for _ in range(3):
        assert not check(world, (V, G), have)
    assert calls[0] == 0  # outside a step nothing could serve it better: reused
    key = int(world.spawn(P(v=0), V(v=0), G(v=0)))
    for t in (P, V, G):
        world.get(key, t)["v"] = key & 0xFFFF
    have[key] = {P, V, G}
    assert not check(world, (V, G), have)  # rows moved: resolved again
    assert calls[0] == 1
    # Inside a step the same plan is retried (and may get views).
    seen: list[bool] = []
    world.add_system(lambda w, dt: seen.append(check(w, (V, G), have)))
    world.step(1.0)
    assert calls[0] == 2 and len(seen) == 1
