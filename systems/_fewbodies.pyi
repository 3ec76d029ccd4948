from typing import Any

import numpy as np

def move_bodies(x_axis: tuple[Any, ...], y_axis: tuple[Any, ...],
                rest: tuple[float, float, float, float, bool] | None,
                parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], dt: float,
                skin: float, /) -> tuple[list[int], list[int], list[int], list[int]] | None: ...
def overlap_boxes(tiles: tuple[Any, ...] | None, rest: np.ndarray, left: np.ndarray,
                  bottom: np.ndarray, right: np.ndarray, top: np.ndarray, out: np.ndarray,
                  few_boxes: int, few_pairs: int, /) -> bool | None: ...
