"""systems.versioned: derived data per world, under the versions it came from."""

from __future__ import annotations

from ecs_engine import World
from ecs_engine.systems.versioned import KEEP, derived, recall, remember


def test_built_once_per_versions_and_per_world() -> None:
    w, other = World(), World()
    calls: list[int] = []

    def build(v: int) -> list[int]:
        calls.append(v)
        return [v]

    first = derived(w, "k", (1, 2), lambda: build(1))
    assert derived(w, "k", (1, 2), lambda: build(2)) is first
    assert derived(other, "k", (1, 2), lambda: build(3)) == [3]  # worlds never share
    assert calls == [1, 3]


def test_keeps_the_newest_states_only() -> None:
    w = World()
    for v in range(KEEP + 5):
        remember(w, "k", v, f"state {v}")
    assert recall(w, "k", 0) is None  # the oldest were forgotten
    assert recall(w, "k", KEEP + 4) == f"state {KEEP + 4}"
    assert recall(w, "k", 5) == "state 5"
    assert len(w.caches["k"]) == KEEP
