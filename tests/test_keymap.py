"""KeyMap: positions of keys, dense slot table or sorted fallback, same answers."""

from __future__ import annotations

import numpy as np
import pytest

from ecs_engine.entity import KEY_DTYPE, make_key
from ecs_engine.keymap import KeyMap


def keys_of(slots: list[int], gen: int = 1) -> np.ndarray:
    return np.array([make_key(s, gen) for s in slots], KEY_DTYPE)


@pytest.mark.parametrize("slots", [
    [5, 3, 9, 4],  # dense
    [100_000, 100_003, 100_001],  # dense, far from slot 0
    [1, 3_000_000_000, 70_000],  # spread out: sorted fallback
    [],
])
def test_positions_match_a_dict(slots: list[int]) -> None:
    keys = keys_of(slots)
    where = KeyMap(keys)
    wanted = np.concatenate([keys[::-1], keys_of([2, 7, 4_000_000_000]),
                             keys_of(slots[:1], gen=2), np.zeros(1, KEY_DTYPE)])
    truth = {int(k): i for i, k in enumerate(keys)}
    assert where.positions(wanted).tolist() == [truth.get(int(k), -1) for k in wanted]
    assert len(where.duplicates()) == 0


def test_duplicates_and_shared_slots_use_the_sorted_fallback() -> None:
    keys = np.concatenate([keys_of([4, 5, 4]), keys_of([5], gen=3)])
    where = KeyMap(keys)
    assert where.duplicates().tolist() == [make_key(4, 1)]
    assert where.positions(keys_of([5], gen=3)).tolist() == [3]
    assert where.positions(keys_of([5], gen=1)).tolist() == [1]
