"""A writing one-type query with ``without=`` (``query(A, without=(C,))``) is gathered
only because of the excluded store: no group is made for one type and nothing aligns it,
so at an unchanged layout its rows serve again. It used to resolve on every call (the
check meant for queries a group could still serve)."""

import numpy as np
import pytest

from ecs_engine import World, component
from tests.plan_counting import count_resolves


@component
class A:
    v: np.int64 = 0


@component
class C:
    v: np.int64 = 0


def test_an_unchanged_layout_resolves_once(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World()  # auto_group: the case that re-resolved
    world.spawn_batch(A(v=np.arange(10)), count=10)
    both = world.spawn_batch(A(v=100), C(v=1), count=5)
    calls = count_resolves(monkeypatch)
    seen: list[list[int]] = []

    def system(w: World, dt: float) -> None:
        with w.query(A, without=(C,)) as q:
            q[A]["v"] += 1
            seen.append(q[A]["v"].tolist())

    world.add_system(system)
    for _ in range(5):
        world.step(1 / 60)
    with world.query(A, without=(C,)) as q:  # outside a step too
        assert len(q) == 10
    assert calls[0] == 1
    assert seen[-1] == list(range(5, 15))
    world.remove(int(both[0]), C)  # the excluded store changed: resolved again
    world.step(1 / 60)
    assert calls[0] == 2 and sorted(seen[-1]) == [*range(6, 16), 101]
