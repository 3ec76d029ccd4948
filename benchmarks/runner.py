"""Timing helpers: medians of interleaved repetitions, gc off while timing, progress lines.

Every timed call gets its own untimed ``prepare`` (which changes the world so that sharing
unchanged stores cannot fake a copy). Several operations measured against each other run
interleaved, round robin, so machine noise (the box is shared) hits them alike.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_SAMPLES = 25  # samples stored per record (evenly spaced when there are more)

Record = dict[str, Any]
"""One result row (see :func:`record`); plain JSON types only."""


@dataclass(frozen=True)
class Timing:
    """How long to measure: repetitions grow until ``target_s`` per op, within bounds."""

    warmup: int = 1
    min_repeat: int = 5
    max_repeat: int = 21
    target_s: float = 2.0  # wanted time per group of interleaved ops (after warm-up)

    def repeats_for(self, first_s: float) -> int:
        """Repetitions for a round (one call of each op) whose warm-up took ``first_s``."""
        wanted = int(self.target_s / max(first_s, 1e-7))
        low = min(self.min_repeat, 3) if first_s > 2 else self.min_repeat
        return max(low, min(self.max_repeat, wanted))


FULL = Timing()
QUICK = Timing(warmup=1, min_repeat=3, max_repeat=9, target_s=0.15)


@dataclass
class Op:
    """A timed call ``run()`` after an untimed ``prepare()``; ``run``'s result is kept
    until the op's next call (like a snapshot that stays alive until the next one)."""

    run: Callable[[], Any]
    prepare: Callable[[], Any] | None = None
    held: Any = field(default=None, repr=False)


def progress(message: str) -> None:
    """One progress line on stderr (stdout is reserved for results)."""
    print(message, file=sys.stderr, flush=True)


def _timed(op: Op) -> float:
    if op.prepare is not None:
        op.prepare()
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        result = op.run()
        elapsed = time.perf_counter() - t0
    finally:
        gc.enable()
    op.held = result  # the previous result dies after the new one exists
    return elapsed


def measure(ops: Mapping[str, Op], timing: Timing) -> dict[str, list[float]]:
    """Time every op, interleaved round robin; returns post-warm-up samples in seconds."""
    first: dict[str, float] = {}
    for _ in range(timing.warmup):
        for name, op in ops.items():
            first[name] = _timed(op)
    # one round runs every op once (interleaved), so the round's total sets the count
    repeat = timing.repeats_for(sum(first.values())) if first else timing.min_repeat
    samples: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(repeat):
        for name, op in ops.items():
            samples[name].append(_timed(op))
    for op in ops.values():
        op.held = None
    return samples


def record(scenario: str, op: str, contender: str, n: int, samples: list[float] | None = None,
           *, variant: str = "", nbytes: int | None = None, status: str = "ok",
           note: str = "", **metrics: Any) -> Record:
    """A result row: timing summary (median etc.) plus the samples, rounded small."""
    row: Record = {"scenario": scenario, "op": op, "variant": variant, "contender": contender,
                   "n": int(n), "status": status}
    if samples:
        ordered = sorted(samples)
        row["median_s"] = _round(statistics.median(ordered))
        row["min_s"] = _round(ordered[0])
        row["q1_s"] = _round(ordered[len(ordered) // 4])
        row["q3_s"] = _round(ordered[(3 * len(ordered)) // 4])
        row["reps"] = len(samples)
        step = max(1, -(-len(samples) // MAX_SAMPLES))  # keep result files small
        row["samples_s"] = [_round(s) for s in samples[::step]]
    if nbytes is not None:
        row["bytes"] = int(nbytes)
    if note:
        row["note"] = note
    row.update(metrics)
    return row


def _round(x: float) -> float:
    return float(f"{x:.4g}")


def timed_records(scenario: str, n: int, ops: Mapping[str, Op], timing: Timing,
                  names: Mapping[str, tuple[str, str, str]],
                  nbytes: Mapping[str, int | None] | None = None) -> list[Record]:
    """Measure ``ops`` and turn them into records; ``names[key] = (op, variant, contender)``.

    Each record also gets its group's id, wall time and rounds (warm-up included), which
    the planner uses to estimate how long a larger size would take.
    """
    group = next(_GROUPS)
    t0 = time.perf_counter()
    samples = measure(ops, timing)
    group_s = round(time.perf_counter() - t0, 4)
    out = []
    for key, values in samples.items():
        op_name, variant, contender = names[key]
        size = nbytes.get(key) if nbytes else None
        out.append(record(scenario, op_name, contender, n, values, variant=variant,
                          nbytes=size, group=group, group_s=group_s,
                          rounds=len(values) + timing.warmup))
    return out


_GROUPS = itertools.count(1)
