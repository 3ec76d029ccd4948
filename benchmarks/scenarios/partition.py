"""Level partition: vectorised greedy, exact (minimum) and the line-by-line thesis port.

Levels are coarse random blobs of three tile values upscaled with ``np.kron`` (8x8 blocks:
features of a fixed size in world units, so a larger level is more level, not a zoomed one),
square from 64x64 to 4096x4096, plus one 520x210 map (5x5 blocks) for the exact method. The
``detail`` job repeats greedy against the thesis port at one size for several block sizes,
since the speed-up depends on how many runs a row has.
The thesis port and the exact method run only up to the size whose one call is estimated
(from the previous size, scaled by area) to stay under their budgets.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from benchmarks.runner import Op, Record, Timing, progress, record, timed_records
from benchmarks.scenarios import Job, Plan, median_of
from ecs_engine.levels import partition

NAME = "partition"
TITLE = "Level partition"
METHODS = ("greedy", "exact", "thesis")
SLOW_S = 5.0
EXPONENT = {"greedy": 1.0, "exact": 1.3, "thesis": 1.0}  # assumed growth with area


def make_level(rows: int, cols: int, block: int, seed: int = 7) -> np.ndarray:
    """Random blobs: a coarse grid of tiles (0 = empty, 1-3) upscaled ``block`` times."""
    rng = np.random.default_rng(seed)
    shape = (-(-rows // block), -(-cols // block))
    filled = rng.random(shape) < 0.45
    coarse = np.where(filled, rng.choice(np.array([1, 1, 1, 2, 3], np.uint8), shape), 0)
    grid = np.kron(coarse.astype(np.uint8), np.ones((block, block), np.uint8))
    return np.ascontiguousarray(grid[:rows, :cols])


DETAIL_BLOCKS = (1, 2, 4, 8, 16, 32, 64)


def plan(cfg: Any) -> Plan:
    side = cfg.level_sides[-1] if cfg.quick else min(1024, cfg.level_sides[-1])
    yield Job(NAME, "detail", side * side, {"side": side, "blocks": list(DETAIL_BLOCKS)})
    rows, cols = cfg.map_shape
    yield Job(NAME, "level", rows * cols, {"rows": rows, "cols": cols, "block": 5,
                                          "methods": list(METHODS), "op": "map"})
    budgets = {"greedy": float("inf"), "exact": cfg.exact_budget_s,
               "thesis": cfg.thesis_budget_s}
    last: dict[str, tuple[int, float]] = {}
    stopped: dict[str, float] = {}
    for side in cfg.level_sides:
        cells = side * side
        methods, skipped = [], []
        for m in METHODS:
            prev = last.get(m)
            est = prev[1] * (cells / prev[0]) ** EXPONENT[m] if prev else 0.0
            if m in stopped or est > budgets[m]:
                stopped.setdefault(m, est)
                skipped.append(record(NAME, "level", m, cells, status="skipped", side=side,
                                      note=f"skipped: one call would take ~{est:.0f} s "
                                           f"(> {budgets[m]:.0f} s)",
                                      estimate_s=round(est, 1)))
            else:
                methods.append(m)
        if skipped:
            yield skipped
        results = yield Job(NAME, "level", cells, {"rows": side, "cols": side, "block": 8,
                                                   "methods": methods, "op": "level"})
        for m in methods:
            t = median_of(results, "level", m)
            if t is not None:
                last[m] = (cells, t)


def level(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    from tests.thesis_partition import thesis_greedy

    grid = make_level(params["rows"], params["cols"], params["block"])
    fns = {"greedy": lambda: partition(grid, method="greedy"),
           "exact": lambda: partition(grid, method="exact"),
           "thesis": lambda: thesis_greedy(grid)}
    out: list[Record] = []
    op = params["op"]
    for m in params["methods"]:
        t0 = time.perf_counter()
        rects = fns[m]()
        first = time.perf_counter() - t0
        if first > SLOW_S:  # one call is the sample: repeating would not change much
            recs = [record(NAME, op, m, n, [first], note="timed once")]
        else:
            recs = timed_records(NAME, n, {m: Op(fns[m])}, timing, {m: (op, "", m)})
        for r in recs:
            r.update(side=params["cols"], rows=params["rows"], rects=len(rects))
        out += recs
        progress(f"  partition {params['rows']}x{params['cols']} {m}: {first:.3g} s, "
                 f"{len(rects)} rectangles")
    return out


def detail(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    """Greedy against the thesis port on one level size at several block sizes: the ratio
    depends on how detailed the level is (more, shorter runs per row)."""
    from tests.thesis_partition import thesis_greedy

    side = params["side"]
    out: list[Record] = []
    for block in params["blocks"]:
        grid = make_level(side, side, block)
        rects = len(partition(grid, method="greedy"))
        ops = {"greedy": Op(lambda grid=grid: partition(grid, method="greedy")),
               "thesis": Op(lambda grid=grid: thesis_greedy(grid))}
        names = {m: ("detail", f"block {block}", m) for m in ops}
        recs = timed_records(NAME, n, ops, timing, names)
        for r in recs:
            r.update(side=side, rows=side, block=block, rects=rects)
        out += recs
        progress(f"  partition detail {side}x{side} block {block}: {rects} rectangles")
    return out


JOBS = {"level": level, "detail": detail}
