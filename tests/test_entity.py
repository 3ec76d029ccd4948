"""Entity keys and the slot map: packing, LIFO reuse, generations, stale-key detection."""

import re
from typing import Any, cast

import numpy as np
import pytest

from ecs_engine import NULL, Entity, World, component, key_generation, key_slot, make_key
from ecs_engine.entity import as_keys, key_str
from ecs_engine.slotmap import SlotMap, SlotTable


@component
class Health:
    hp: np.int32 = 100


# -- key packing ---------------------------------------------------------------------------


def test_make_key_packs_slot_low_and_generation_high() -> None:
    key = make_key(5, 3)
    assert key == (3 << 32) | 5
    assert key_slot(key) == 5
    assert key_generation(key) == 3
    big = make_key(0xFFFF_FFFF, 0xFFFF_FFFF)
    assert big == 0xFFFF_FFFF_FFFF_FFFF
    assert key_slot(big) == 0xFFFF_FFFF and key_generation(big) == 0xFFFF_FFFF


def test_key_helpers_accept_numpy_integers() -> None:
    key = np.uint64(make_key(7, 2))
    assert key_slot(key) == 7
    assert key_generation(key) == 2
    assert key_str(key) == "Entity(slot=7, gen=2)"


def test_null_is_zero_and_never_alive() -> None:
    assert NULL == 0
    assert key_slot(NULL) == 0 and key_generation(NULL) == 0
    world = World()
    first = world.spawn()
    assert key_slot(first) == 0  # NULL's slot is in use ...
    assert not world.is_alive(NULL)  # ... but generation 0 is never handed out
    with pytest.raises(KeyError, match="NULL is never alive"):
        world.get(NULL, Health)
    with pytest.raises(KeyError, match="NULL is never alive"):
        world.despawn(NULL)


def test_spawned_keys_start_at_generation_one_with_consecutive_slots() -> None:
    world = World()
    keys = [world.spawn() for _ in range(4)]
    assert [key_slot(k) for k in keys] == [0, 1, 2, 3]
    assert all(key_generation(k) == 1 for k in keys)
    assert all(isinstance(k, int) for k in keys)
    batch = world.spawn_batch(count=3)
    assert batch.dtype == np.uint64
    assert [key_slot(k) for k in batch] == [4, 5, 6]


# -- as_keys -------------------------------------------------------------------------------


def test_as_keys_converts_sequences_and_scalars() -> None:
    assert as_keys([1, 2]).dtype == np.uint64
    assert as_keys(5).tolist() == [5]
    assert as_keys([]).shape == (0,)
    arr = np.array([4, 5], np.uint64)
    assert as_keys(arr) is arr  # no copy when already uint64


@pytest.mark.parametrize(
    ("bad", "exc", "msg"),
    [
        ([[1, 2], [3, 4]], ValueError, "1-D"),
        ([1.5, 2.0], TypeError, "integers"),
        (["a"], TypeError, "integers"),
        ([-1, 2], ValueError, "negative"),
    ],
)
def test_as_keys_rejects_bad_input(bad: object, exc: type[Exception], msg: str) -> None:
    with pytest.raises(exc, match=msg):
        as_keys(bad)


# -- slot map ------------------------------------------------------------------------------


def test_slotmap_reuses_slots_lifo_and_bumps_generation() -> None:
    sm = SlotMap(capacity=2)
    keys = sm.allocate(4)  # grows past the initial capacity
    assert sm.capacity >= 4
    assert [key_slot(k) for k in keys] == [0, 1, 2, 3]
    sm.release(np.array([1, 3, 2]))  # pushed in this order: 2 is on top
    assert sm.n_alive == 1
    for k in keys[1:]:
        assert not sm.is_alive(int(k))
    again = sm.allocate(2)
    assert [key_slot(k) for k in again] == [2, 3]  # LIFO: last freed first
    assert all(key_generation(k) == 2 for k in again)
    single = sm.allocate(1)
    assert key_slot(single[0]) == 1 and key_generation(single[0]) == 2
    fresh = sm.allocate(1)
    assert key_slot(fresh[0]) == 4 and key_generation(fresh[0]) == 1


def test_slotmap_batch_allocation_equals_single_pops() -> None:
    a, b = SlotMap(), SlotMap()
    for sm in (a, b):
        sm.allocate(6)
        sm.release(np.array([0, 4, 2, 5]))
    batch = a.allocate(5).tolist()
    singles = [int(b.allocate(1)[0]) for _ in range(5)]
    assert batch == singles


def test_slotmap_generation_wrap_skips_zero() -> None:
    sm = SlotMap()
    (key,) = sm.allocate(1)
    sm.release(np.array([0]))
    sm.generations[0] = 0xFFFF_FFFF  # pretend the slot was reused 2**32 - 2 times
    (key,) = sm.allocate(1)
    assert key_generation(key) == 0xFFFF_FFFF
    assert sm.is_alive(int(key))
    sm.release(np.array([0]))
    assert not sm.is_alive(int(key))
    (key,) = sm.allocate(1)
    assert key_generation(key) == 1  # wrapped, but never to 0 (NULL's generation)
    assert key != NULL


def test_slotmap_alive_mask_matches_is_alive() -> None:
    sm = SlotMap()
    keys = sm.allocate(5)
    sm.release(np.array([1, 3]))
    probe = np.concatenate(
        [
            keys,
            np.array([0, make_key(1, 2), make_key(99, 1), make_key(2, 7)], np.uint64),
        ]
    )
    mask = sm.alive_mask(probe)
    assert mask.tolist() == [sm.is_alive(int(k)) for k in probe]
    assert mask.tolist() == [True, False, True, False, True, False, False, False, False]


def test_slotmap_keys_alive_in_slot_order() -> None:
    sm = SlotMap()
    keys = sm.allocate(4)
    sm.release(np.array([2, 0]))
    (k0,) = sm.allocate(1)  # reuses slot 0 (top of the stack)
    assert key_slot(k0) == 0
    assert sm.keys_alive().tolist() == [int(k0), int(keys[1]), int(keys[3])]


def test_slotmap_table_is_a_copy_of_the_allocator_state() -> None:
    sm = SlotMap()
    sm.allocate(5)
    sm.release(np.array([3, 1]))
    table = sm.table()
    assert isinstance(table, SlotTable)
    assert table.generations.tolist() == [1, 2, 1, 2, 1]
    assert table.alive.tolist() == [True, False, True, False, True]
    assert table.free.tolist() == [3, 1]
    sm.allocate(3)
    assert table.free.tolist() == [3, 1]  # not a view: later changes do not leak in
    assert table.alive.tolist() == [True, False, True, False, True]


def test_why_dead_explains_each_case() -> None:
    sm = SlotMap()
    keys = sm.allocate(3)
    assert sm.why_dead(0) == "NULL is never alive"
    assert "not a 64-bit entity key" in sm.why_dead(-5)
    assert "not a 64-bit entity key" in sm.why_dead(1 << 64)
    assert "never alive" in sm.why_dead(make_key(50, 1))  # slot never used
    assert "never alive" in sm.why_dead(make_key(1, 0))  # generation 0
    assert "never alive" in sm.why_dead(make_key(1, 9))  # generation from the future
    sm.release(np.array([1]))
    msg = sm.why_dead(int(keys[1]))
    assert "despawned" in msg and "stale" not in msg
    sm.allocate(1)  # slot 1 now holds generation 2
    msg = sm.why_dead(int(keys[1]))
    assert "stale" in msg and "generation 2" in msg


# -- stale keys through the World ----------------------------------------------------------

STALE_OPS = {
    "get": lambda w, k: w.get(k, Health),
    "add": lambda w, k: w.add(k, Health(hp=1)),
    "remove": lambda w, k: w.remove(k, Health),
    "despawn": lambda w, k: w.despawn(k),
    "components_of": lambda w, k: w.components_of(k),
}


@pytest.mark.parametrize("op", sorted(STALE_OPS))
def test_despawned_key_raises_keyerror_naming_key_and_reason(op: str) -> None:
    world = World()
    dead = world.spawn(Health())
    other = world.spawn(Health(hp=5))
    world.despawn(dead)
    assert not world.is_alive(dead)
    with pytest.raises(KeyError, match=re.escape(f"{op}: {key_str(dead)} was despawned")):
        STALE_OPS[op](world, dead)
    assert world.get(other, Health)["hp"] == 5 and len(world) == 1


@pytest.mark.parametrize("op", sorted(STALE_OPS))
def test_stale_key_after_slot_reuse_raises_generation_mismatch(op: str) -> None:
    world = World()
    old = world.spawn(Health(hp=1))
    world.despawn(old)
    new = world.spawn(Health(hp=2))
    assert key_slot(new) == key_slot(old)
    assert key_generation(new) == key_generation(old) + 1
    assert not world.is_alive(old) and world.is_alive(new)
    with pytest.raises(KeyError) as info:
        STALE_OPS[op](world, old)
    msg = str(info.value)
    assert key_str(old) in msg and "stale" in msg and "generation 2" in msg
    assert world.get(new, Health)["hp"] == 2  # the new occupant is untouched


@pytest.mark.parametrize("op", sorted(STALE_OPS))
def test_never_alive_key_raises(op: str) -> None:
    world = World()
    world.spawn(Health())
    for key in (make_key(10, 1), make_key(0, 5)):
        with pytest.raises(KeyError, match="never alive"):
            STALE_OPS[op](world, key)


def test_is_alive_is_false_for_ints_that_are_not_live_keys() -> None:
    world = World()
    e = world.spawn()
    assert world.is_alive(e) and world.is_alive(np.uint64(e)) and world.is_alive(Entity(e))
    assert world.is_alive(np.int64(e)) and world.is_alive(cast(Any, np.array(e)))  # 0-d
    for bad in (NULL, -1, 1 << 64, 1 << 70, e + (1 << 32), np.uint64(e + 1)):
        assert world.is_alive(bad) is False
        assert world.has(bad, Health) is False


KEY_OPS = {
    **STALE_OPS,
    "is_alive": lambda w, k: w.is_alive(k),
    "has": lambda w, k: w.has(k, Health),
}


@pytest.mark.parametrize("op", sorted(KEY_OPS))
def test_every_one_key_operation_rejects_non_keys_alike(op: str) -> None:
    """One validation everywhere: a float or a numeric string of a live key is not that
    key (``int()`` would truncate or parse it), for predicates as for ``get``."""
    world = World()
    e = world.spawn(Health())
    for bad in (float(e), np.float64(e), float(e) + 0.5, str(e), " 4294967296", True, None,
                3.5j, np.array([e]), b"1"):
        with pytest.raises(TypeError, match=f"{op}: .* is not an entity key"):
            KEY_OPS[op](world, bad)
    assert world.is_alive(e) and world.get(e, Health)["hp"] == 100


def test_despawn_batch_names_first_bad_key_and_why() -> None:
    world = World()
    keys = world.spawn_batch(count=3)
    world.despawn(keys[1])
    with pytest.raises(KeyError) as info:
        world.despawn_batch(keys)
    msg = str(info.value)
    assert "1 of 3" in msg and "index 1" in msg and "despawned" in msg
    assert world.is_alive(keys[0]) and world.is_alive(keys[2])
