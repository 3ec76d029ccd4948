"""Test helpers: a world's complete observable state as plain comparable values."""

from __future__ import annotations

from typing import Any

import numpy as np

from ecs_engine import World
from ecs_engine.entity import key_slots


def canon(value: Any) -> Any:
    """A hashable, ``==``-comparable form of a resource value (arrays by dtype and bytes)."""
    if isinstance(value, np.ndarray | np.generic):
        arr = np.asarray(value)
        return ("ndarray" if isinstance(value, np.ndarray) else "scalar", arr.dtype.str,
                arr.shape, arr.tobytes())
    if isinstance(value, dict):
        return ("dict", tuple((k, canon(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(canon(v) for v in value))
    if isinstance(value, float) and value != value:
        return ("float", "nan")  # NaN != NaN: compare it by kind
    return (type(value).__name__, value)


def world_state(world: World) -> dict[str, Any]:
    """Slot table, every non-empty store (keys, row bytes, group prefix), groups, tick,
    rng state and resources: equal states give equal dicts."""
    slots = world._slots
    hw = slots.high_water
    stores = {}
    for store in world._stores.values():
        if store.n:
            stores[store.schema.name] = (store.schema.dtype.str,
                                         store.entities[: store.n].tobytes(),
                                         store.data[: store.n].tobytes(), store.group_size)
    return {
        "slots": (slots.generations[:hw].tobytes(), slots.alive[:hw].tobytes(),
                  slots.free[: slots.n_free].tobytes(), slots.n_alive),
        "stores": stores,
        "groups": [tuple(s.schema.name for s in g.stores) for g in world._groups],
        "tick": world.tick,
        "rng": repr(world.rng.bit_generator.state),
        "resources": canon(world.resources),
    }


def check_invariants(world: World) -> None:
    """Sparse sets agree with dense rows, and every stored entity is alive."""
    for store in world._stores.values():
        keys = store.entities[: store.n]
        assert world._slots.alive_mask(keys).all(), store.schema.name
        rows = store.sparse[key_slots(keys)]
        assert np.array_equal(rows, np.arange(store.n)), store.schema.name
        assert np.count_nonzero(store.sparse >= 0) == store.n, store.schema.name
    for group in world._groups:
        first = group.stores[0].entities[: group.size]
        for store in group.stores:
            # a nested group's prefix lies inside its outer group's (which own the rest)
            if store in group.own:
                assert store.group_size == group.size
                assert store.owner is group
            else:
                assert group.outer is not None and store in group.outer.stores
                assert store.group_size >= group.size
            assert np.array_equal(store.entities[: group.size], first)
        # complete: every entity with all the group's components is inside the prefix
        common = set(group.stores[0].entities[: group.stores[0].n].tolist())
        for store in group.stores[1:]:
            common &= set(store.entities[: store.n].tolist())
        assert len(common) == group.size, [s.schema.name for s in group.stores]
