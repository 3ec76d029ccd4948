"""Queries over part of an owning group, and queries excluding a grouped type, are served
from the group's prefix: they must return exactly the entities a plain model says, with
aligned columns, whatever mix of components the entities have."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecs_engine import World, component


@component
class A:
    v: np.int64 = 0


@component
class B:
    v: np.int64 = 0


@component
class C:
    v: np.int64 = 0


@component
class D:
    v: np.int64 = 0


TYPES = (A, B, C, D)
EXAMPLES = int(os.environ.get("DETERMINISM_EXAMPLES", "1000"))
subsets = st.lists(st.sampled_from(TYPES), min_size=1, max_size=4, unique=True)


@settings(max_examples=max(30, EXAMPLES // 5), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 15), max_size=40), subsets, st.lists(st.sampled_from(TYPES),
                                                                     max_size=2, unique=True))
def test_prefix_served_queries_match_the_model(masks: list[int], wanted: list[type],
                                               without: list[type]) -> None:
    world = World(auto_group=False)
    world.group(A, B, C)
    have: dict[int, set[type]] = {}
    for i, mask in enumerate(masks):
        types = [t for j, t in enumerate(TYPES) if mask >> j & 1]
        key = int(world.spawn(*(t(v=i) for t in types)))
        have[key] = set(types)
    without = [t for t in without if t not in wanted]
    expected = {k for k, ts in have.items() if set(wanted) <= ts and not ts & set(without)}
    with world.query(*wanted, without=without) as q:
        keys = [int(k) for k in q.entities]
        assert sorted(keys) == sorted(expected)
        for t in wanted:  # every column row belongs to the entity in that row
            values = q[t]["v"].tolist()
            assert values == [world.get(k, t)["v"] for k in keys]
            q[t]["v"] += 100  # writes reach the store
    for k in expected:
        for t in wanted:
            assert world.get(k, t)["v"] >= 100


def test_a_subset_of_a_group_is_aligned_when_no_outsider_matches() -> None:
    world = World(auto_group=False)
    world.group(A, B, C)
    world.spawn_batch(A(), B(), C(), count=5)
    world.spawn_batch(A(), D(), count=3)  # has A but not B: outside the group, no match
    with world.query(A, B) as q:
        assert q.aligned and len(q) == 5
    world.spawn(A(), B())  # an outsider with both: the prefix no longer covers the query
    with world.query(A, B) as q:
        assert not q.aligned and len(q) == 6
    with world.query(A, without=(C,)) as q:
        assert len(q) == 4
