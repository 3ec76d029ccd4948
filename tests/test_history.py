"""History: a bounded ring buffer of snapshots for rewind, with byte accounting."""

from __future__ import annotations

import numpy as np
import pytest

from ecs_engine import History, World, component
from ecs_engine.memcopy import PACK_ALIGN, root_of
from tests.world_state import check_invariants, world_state


@component
class Pos:
    x: np.float64 = 0.0


@component
class Static:
    v: np.int64 = 0


def make_world(n: int = 100) -> World:
    world = World(seed=3)
    world.spawn_batch(Pos(x=np.arange(n, dtype=np.float64)), count=n)
    world.spawn_batch(Static(v=7), count=n)
    return world


def advance(world: World) -> None:
    """One frame: move every Pos, draw from the rng, count ticks."""
    with world.query(Pos) as q:
        q[Pos]["x"] += 1
    world.rng.random()
    world.tick += 1


def unique_bytes(history: History) -> int:
    """Bytes of every buffer the history's snapshots keep alive, each counted once."""
    buffers = {id(b): b for snap in history._snaps for b in map(root_of, snap.arrays())}
    return sum(b.nbytes for b in buffers.values())


def test_rewind_steps_back_one_recorded_frame_at_a_time() -> None:
    world = make_world()
    history = History(capacity=10)
    states = []
    for _ in range(5):
        history.record(world)
        states.append(world_state(world))
        advance(world)
    for expected in reversed(states):
        snap = history.rewind(world)
        assert snap is not None and world_state(world) == expected
        check_invariants(world)
    # The oldest state is on screen and kept: rewinding further does nothing.
    assert history.rewind(world) is None and len(history) == 1
    assert world_state(world) == states[0]


def test_rewind_skips_a_snapshot_equal_to_the_live_state() -> None:
    world = make_world()
    history = History()
    history.record(world)
    first = world_state(world)
    advance(world)
    history.record(world)  # identical to the live state: rewinding it would do nothing
    snap = history.rewind(world)
    assert snap is not None and world_state(world) == first and len(history) == 1


def test_rewind_with_array_resources_compares_them_safely() -> None:
    world = make_world()
    world.resources["grid"] = np.zeros((4, 4))
    history = History()
    history.record(world)
    world.resources["grid"] = np.ones((4, 4))
    history.record(world)
    assert history.rewind(world) is not None  # the live state equals the newest: skipped
    assert np.array_equal(world.resources["grid"], np.zeros((4, 4)))
    assert len(history) == 1  # the restored (oldest) snapshot stays as the newest


def test_rewind_notices_a_group_created_since_the_snapshot() -> None:
    world = World()
    world.spawn_batch(Pos(), Static(), count=3)
    history = History()
    history.record(world)
    with world.query(Pos, Static) as q:  # aligned already: creates a group, moves nothing
        assert len(q) == 3
    assert len(world._groups) == 1
    assert history.rewind(world) is not None
    assert world._groups == []


def test_capacity_evicts_the_oldest() -> None:
    world = make_world()
    history = History(capacity=3)
    ticks: list[int] = []
    for _ in range(6):
        history.record(world)
        ticks.append(world.tick)
        advance(world)
    assert len(history) == 3
    assert [s.tick for s in history._snaps] == ticks[-3:]
    assert history.latest is not None and history.latest.tick == ticks[-1]


def test_max_bytes_evicts_the_oldest_but_keeps_one() -> None:
    world = make_world(1000)
    history = History(capacity=100, max_bytes=96_000)
    for _ in range(20):
        history.record(world)
        advance(world)
        assert history.nbytes <= 96_000
    # one full copy: 2000 slots (5 bytes each), two stores of 1000 rows (8 + 8 bytes) and
    # their slot -> row index (4 bytes a slot), packed in one buffer (the 2000 alive flags
    # padded to 2048 bytes: copies start on 64-byte lines; each buffer has PACK_ALIGN bytes
    # of room to start on one); every later frame adds only a new Pos column of 8000
    # bytes. The first buffer stays held after its snapshot is evicted, since the later
    # ones share its other parts: its old Pos column is counted too (memory really held),
    # so only 4 snapshots fit.
    full = 2000 * 5 + 2 * 1000 * 16 + 2 * 2000 * 4 + 48 + PACK_ALIGN
    assert len(history) == 4 and history.nbytes == full + 4 * (8000 + PACK_ALIGN)
    tiny = History(max_bytes=1)
    tiny.record(world)
    advance(world)
    tiny.record(world)
    assert len(tiny) == 1 and tiny.nbytes > 1


def test_nbytes_counts_shared_arrays_once() -> None:
    world = make_world(500)
    history = History(capacity=50)
    history.record(world)
    full = history.nbytes
    assert history.latest is not None
    assert full == unique_bytes(history) >= history.latest.nbytes  # + alignment padding
    for _ in range(5):
        advance(world)
        history.record(world)
        assert history.nbytes == unique_bytes(history)
    # each frame added only a new Pos data column (500 float64, padded to 64 bytes)
    assert history.nbytes == full + 5 * (4032 + PACK_ALIGN)
    while history.rewind(world) is not None:
        assert history.nbytes == unique_bytes(history)
    assert len(history) == 1 and history.nbytes == full  # back to the first snapshot
    history.clear()
    assert history.nbytes == 0 and len(history) == 0


def test_nbytes_after_eviction_releases_only_unshared_arrays() -> None:
    world = make_world(500)
    history = History(capacity=2)
    for _ in range(4):
        history.record(world)
        advance(world)
        assert history.nbytes == unique_bytes(history)
    static = world.snapshot().store("Static").data
    assert history.latest is not None
    assert any(a is static for a in history.latest.arrays())  # still shared, still counted


def test_clear_and_bad_capacity() -> None:
    world = make_world()
    history = History()
    history.record(world)
    history.clear()
    assert len(history) == 0 and history.nbytes == 0 and history.latest is None
    with pytest.raises(ValueError, match="capacity"):
        History(capacity=0)


def test_long_rewind_after_many_frames_restores_exact_states() -> None:
    world = make_world(50)
    history = History(capacity=30)
    states = []
    for i in range(40):
        history.record(world)
        states.append(world_state(world))
        advance(world)
        if i % 7 == 0:
            world.spawn(Pos(x=-i))
        if i % 11 == 3:
            world.despawn(world.entities()[0])
    for expected in reversed(states[-30:]):
        history.rewind(world)
        assert world_state(world) == expected


class Opaque:
    """A resource without value equality: its deep copy never == the original."""

    def __init__(self, n: int) -> None:
        self.n = n


class NoEq:
    __slots__ = ("n",)  # no __dict__ either: nothing to compare but identity

    def __init__(self, n: int) -> None:
        self.n = n

    def __deepcopy__(self, memo: dict[int, object]) -> NoEq:
        return NoEq(self.n)


def _rewind_all(world: World, history: History) -> list[int]:
    """Rewind until nothing is left; the ticks seen. Fails instead of looping forever."""
    ticks: list[int] = []
    for _ in range(3 * len(history) + 3):
        if history.rewind(world) is None:
            return ticks
        ticks.append(world.tick)
    raise AssertionError(f"rewind is stuck: ticks {ticks}")


@pytest.mark.parametrize("resource", [
    float("nan"), np.float64("nan"), np.array([1.0, np.nan]), {"a": [float("nan")]},
    Opaque(3), NoEq(4), [NoEq(1), float("nan")],
], ids=["nan", "np-nan", "array-nan", "nested-nan", "no-eq", "no-eq-slots", "mixed"])
def test_rewind_never_gets_stuck_on_resources_without_value_equality(resource: object) -> None:
    world = make_world(5)
    world.resources["r"] = resource
    history = History()
    for _ in range(4):
        history.record(world)
        advance(world)
    assert _rewind_all(world, history) == [3, 2, 1, 0]


def test_rewind_never_gets_stuck_when_on_restore_writes_resources_or_stores() -> None:
    world = make_world(5)
    restores = []

    def rebuild(w: World, event: object) -> None:
        restores.append(w.tick)
        w.resources["rebuilt"] = len(restores)  # differs from every snapshot
        w.caches["grid"] = object()

    world.on_restore(rebuild)
    history = History()
    for _ in range(4):
        history.record(world)
        advance(world)
    assert _rewind_all(world, history) == [3, 2, 1, 0]
    assert restores == [3, 2, 1, 0]

    def touch_store(w: World, event: object) -> None:
        with w.query(Static) as q:
            q[Static]["v"] += 0  # a writable view: the store's version moves

    world.on_restore(touch_store)
    for _ in range(3):
        history.record(world)
        advance(world)
    assert _rewind_all(world, history)[:3] == [2, 1, 0]


def test_rewind_restores_first_when_the_world_changed_after_a_rewind() -> None:
    world = make_world(5)
    world.resources["r"] = float("nan")
    history = History()
    for _ in range(3):
        history.record(world)
        advance(world)
    assert history.rewind(world) is not None and world.tick == 2
    advance(world)  # played on from the rewound state
    assert history.rewind(world) is not None and world.tick == 2  # back to it first
    assert history.rewind(world) is not None and world.tick == 1


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"capacity": float("nan")}, "capacity must be a whole number"),
    ({"capacity": 2.5}, "capacity must be a whole number"),
    ({"capacity": True}, "capacity must be a whole number"),
    ({"max_bytes": float("nan")}, "max_bytes must be a whole number"),
    ({"max_bytes": -1}, "max_bytes must be a whole number"),
])
def test_a_capacity_or_budget_that_bounds_nothing_is_refused(kwargs: dict[str, object],
                                                             message: str) -> None:
    """History(capacity=nan) passed the `< 1` check and never evicted anything."""
    with pytest.raises(ValueError, match=message):
        History(**kwargs)  # type: ignore[arg-type]


def test_numpy_integers_are_whole_numbers_for_the_bounds() -> None:
    history = History(capacity=np.int64(5), max_bytes=np.uint32(1 << 20))
    assert (history.capacity, history.max_bytes) == (5, 1 << 20)


def test_rewind_compares_resources_that_contain_themselves() -> None:
    """Saves refuse such a resource, but snapshots and History keep it (deepcopy keeps
    the cycle); comparing the live state with a snapshot must not recurse forever."""
    world = World(seed=2)
    loop: list[object] = [1]
    loop.append(loop)
    world.resources["a"] = loop
    history = History()
    history.record(world)
    world.step(1 / 60)
    history.record(world)
    assert history.rewind(world) is not None
    assert world.tick == 0 and world.resources["a"][1] is world.resources["a"]
