"""``alive_mask`` reads the slot table with clipped indices: keys whose slot is past the
table (or past the slots ever used) must still be dead, also when the slot they are
clipped to holds a live entity of the same generation."""

from __future__ import annotations

import numpy as np
import pytest

from ecs_engine import World, component
from ecs_engine.entity import make_key


@component
class Tag:
    v: np.int8 = 0


def test_keys_past_the_table_are_dead_even_beside_a_live_last_slot() -> None:
    world = World()
    capacity = world._slots.capacity
    keys = world.spawn_batch(Tag(), count=capacity)  # every slot in use, generation 1
    assert world._slots.capacity == capacity
    last = int(keys[-1])
    assert world.is_alive(last)
    foreign = [make_key(capacity, 1), make_key(capacity + 5, 1), make_key(2**31, 1),
               make_key(2**32 - 1, 1)]
    mask = world.alive(np.array(foreign + [last], np.uint64))
    assert mask.tolist() == [False] * len(foreign) + [True]
    for key in foreign:
        with pytest.raises(KeyError):
            world.despawn_batch(np.array([key, last], np.uint64))
    assert world.is_alive(last)


def test_unused_slots_below_capacity_are_dead() -> None:
    world = World()
    keys = world.spawn_batch(Tag(), count=3)
    world.despawn(int(keys[2]))
    probe = np.array([make_key(3, 1), make_key(10, 1), make_key(2, 1), make_key(2, 2)],
                     np.uint64)
    assert world.alive(probe).tolist() == [False, False, False, False]
    assert world.spawn(Tag()) == make_key(2, 2)  # the freed slot, one generation on
    assert world.alive(probe).tolist() == [False, False, False, True]
