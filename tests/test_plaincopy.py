"""copy_resources gives what copy.deepcopy gives, sharing included."""

import copy
from typing import Any

import numpy as np

from ecs_engine.plaincopy import copy_resources


def test_plain_values_are_copied_deeply() -> None:
    res: dict[Any, Any] = {"input": {"left": True, "jump": False}, "events": [["coin", 1.5, 2.0]],
           "camera": {"x": 1.0, "y": -2.5}, "level": "Demo", "won_at": None, 3: [1, 2]}
    out = copy_resources(res)
    assert out == copy.deepcopy(res)
    assert list(out) == list(res)
    assert out["events"] is not res["events"] and out["events"][0] is not res["events"][0]
    out["camera"]["x"] = 9.0
    assert res["camera"]["x"] == 1.0


def test_shared_containers_keep_their_sharing() -> None:
    shared = [1, 2]
    res: dict[Any, Any] = {"a": shared, "b": shared}
    out = copy_resources(res)
    assert out["a"] is out["b"] and out["a"] is not shared


def test_other_values_fall_back_to_deepcopy() -> None:
    arr = np.arange(3)
    res: dict[Any, Any] = {"t": (1, [2]), "arr": arr, "scalar": np.float32(1.5)}
    out = copy_resources(res)
    assert out["t"] == (1, [2]) and out["t"][1] is not res["t"][1]
    assert np.array_equal(out["arr"], arr) and out["arr"] is not arr
    assert type(out["scalar"]) is np.float32
