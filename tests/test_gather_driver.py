"""A gathered query looks its matches up from its smallest store (the driver); when every
driver row matches, the driver's own column is a view of its rows instead of a gathered
copy. Reads, writes (with and without a selection), ``without=`` skips and keys must be
what a plain model says either way."""

from __future__ import annotations

import numpy as np
import pytest

from ecs_engine import World, component


@component
class P:
    v: np.int64 = 0


@component
class V:
    v: np.int64 = 0


@component
class G:
    v: np.int64 = 0


@component
class X:
    v: np.int64 = 0


def build(world: World, n: int, every: int, excluded: int) -> dict[int, set[type]]:
    """Entities with P and V (a group); every ``every``-th also G, every ``excluded``-th
    also X; some have G alone (so G's rows need not all match (V, G)), some P (and G)
    but no V."""
    world.group(P, V)
    have: dict[int, set[type]] = {}
    for i in range(n):
        types = [P, V] + ([G] if i % every == 0 else []) + ([X] if i % excluded == 0 else [])
        if i % 7 == 3:
            types = [G]
        elif i % 11 == 5:
            types = [P, G]  # outside the group: (P,) without V skips the group's prefix
        elif i % 13 == 6:
            types = [P]
        key = int(world.spawn(*(t(v=i) for t in types)))
        have[key] = set(types)
    return have


@pytest.mark.parametrize(("every", "excluded"), [(2, 5), (1, 3), (3, 1000)])
@pytest.mark.parametrize("readonly", [False, True])
def test_gathered_queries_read_and_write_what_the_model_says(
        every: int, excluded: int, readonly: bool) -> None:
    world = World(auto_group=False)
    have = build(world, 60, every, excluded)
    model = {(k, t): world.get(k, t)["v"] for k, ts in have.items() for t in ts}
    for wanted, without in (((V, G), ()), ((G, V), ()), ((V, G), (X,)), ((P,), (X,)),
                            ((G,), (V,)), ((P,), (V,)), ((P, G), (V,))):
        expected = sorted(k for k, ts in have.items()
                          if set(wanted) <= ts and not set(without) & ts)
        ro = wanted if readonly else ()
        with world.query(*wanted, without=without, readonly=ro) as q:
            keys = q.entities.tolist()
            assert sorted(keys) == expected
            for t in wanted:
                assert q[t]["v"].tolist() == [model[k, t] for k in keys]
                if not readonly:
                    q[t]["v"] += 1000
                    q[t]["v"][::2] += 1  # a selection of rows
                    for i, k in enumerate(keys):
                        model[k, t] += 1000 + (i % 2 == 0)
        assert all(world.get(k, t)["v"] == v for (k, t), v in model.items())


def test_values_follow_the_keys_through_gathers() -> None:
    """Every column value equals its key's spawn index, read through gathered queries
    after each kind of write: a view-driver write must land on the right keys."""
    world = World(auto_group=False)
    have = build(world, 50, 2, 4)
    index = {k: world.get(k, next(iter(ts)))["v"] for k, ts in have.items()}
    for wanted in ((V, G), (G, V), (G, P, V)):
        with world.query(*wanted) as q:
            for t in wanted:
                q[t]["v"] *= 3
        with world.query(*wanted, readonly=wanted) as q:
            for t in wanted:
                assert q[t]["v"].tolist() == [3 * index[k] for k in q.entities.tolist()]
        with world.query(*wanted) as q:
            for t in wanted:
                q[t]["v"] //= 3
