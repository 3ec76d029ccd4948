"""Plain line-by-line port of the thesis' greedy scanline rectangle merge.

The reference for ``levels.partition(method="greedy")`` and the baseline the benchmarks compare
it with: pure Python loops over rows and cells, as the thesis describes the algorithm.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ecs_engine.levels.partition import RECT_DTYPE

__all__ = ["thesis_greedy"]


def thesis_greedy(grid: NDArray[np.integer], background: int = 0) -> NDArray[np.void]:
    """Greedy scanline merge, one cell at a time.

    Returns a :data:`levels.partition.RECT_DTYPE` array (cells), sorted by ``(y, x)``.
    """
    rects: list[list[int]] = []  # [value, x, y, w, h]
    # Rectangles whose bottom row is the previous row, keyed by (left, right, value).
    open_above: dict[tuple[int, int, int], int] = {}
    for y, row_array in enumerate(grid):
        row = row_array.tolist()
        open_here: dict[tuple[int, int, int], int] = {}
        x = 0
        while x < len(row):
            value = row[x]
            if value == background:
                x += 1
                continue
            start = x
            while x < len(row) and row[x] == value:
                x += 1
            key = (start, x - 1, value)
            index = open_above.get(key)
            if index is None:
                index = len(rects)
                rects.append([value, start, y, x - start, 1])
            else:
                rects[index][4] += 1
            open_here[key] = index
        open_above = open_here
    rects.sort(key=lambda r: (r[2], r[1]))
    out = np.empty(len(rects), dtype=RECT_DTYPE)
    for i, (value, x0, y0, w, h) in enumerate(rects):
        out[i] = (value, x0, y0, w, h)
    return out
