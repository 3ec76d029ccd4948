"""Timing helpers: medians of interleaved repetitions, gc off while timing, progress lines.

Every timed call gets its own untimed ``prepare`` (which changes the world so that sharing
unchanged stores cannot fake a copy). Several operations measured against each other run
interleaved, round robin, so machine noise (the box is shared) hits them alike.

Every op also says what its result should be: right after its last timed call, its
``fingerprint`` (a tuple of ints, floats and strings describing the final state) is taken
and compared with ``expect()`` or, when it has none, with the group's first fingerprint, so
contenders that did the same work must agree. A mismatch marks the group's records
``wrong``; targets never count a ratio unless both sides are verified and in one group.
"""

from __future__ import annotations

import gc
import itertools
import math
import os
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


Fingerprint = tuple[Any, ...]
"""What a contender's final state looks like: ints and strings compare exactly, floats
to a relative 1e-6 (float32 and float64 contenders sum the same values in another order)."""


@dataclass
class Op:
    """A timed call ``run()`` after an untimed ``prepare()``; ``run``'s result is kept
    until the op's next call (like a snapshot that stays alive until the next one).

    ``fingerprint(result)`` describes the final state after the op's last call (taken
    before any other op runs); ``expect()`` is what it should be (default: the same as the
    group's first op that has a fingerprint)."""

    run: Callable[[], Any]
    prepare: Callable[[], Any] | None = None
    fingerprint: Callable[[Any], Fingerprint] | None = None
    expect: Callable[[], Fingerprint] | None = None
    held: Any = field(default=None, repr=False)
    got: Fingerprint | None = field(default=None, repr=False)
    wanted: Fingerprint | None = field(default=None, repr=False)


def same_fingerprint(a: Fingerprint, b: Fingerprint) -> bool:
    """Equal element by element: floats within a relative 1e-6, everything else exactly."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, float) or isinstance(y, float):
            if not math.isclose(float(x), float(y), rel_tol=1e-6, abs_tol=1e-9):
                return False
        elif x != y:
            return False
    return True


def show_fingerprint(fp: Fingerprint | None) -> str:
    if fp is None:
        return "-"
    parts = [f"{x:.9g}" if isinstance(x, float) else (f"{x:016x}" if isinstance(x, int)
             and x >= 1 << 40 else str(x)) for x in fp]
    return "(" + ", ".join(parts) + ")"


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
    for i in range(repeat):
        for name, op in ops.items():
            samples[name].append(_timed(op))
            if i == repeat - 1:  # the final state, before another op can change it
                op.got = op.fingerprint(op.held) if op.fingerprint is not None else None
                op.wanted = op.expect() if op.expect is not None else None
    for op in ops.values():
        op.held = None
    return samples


def verify(ops: Mapping[str, Op]) -> dict[str, str]:
    """Keys of ops whose final state is wrong, with why (empty: every check passed)."""
    checked = [(k, op) for k, op in ops.items() if op.got is not None]
    reference = next(((k, op.got) for k, op in checked if op.expect is None), None)
    wrong = {}
    for key, op in checked:
        if op.expect is not None:
            want, source = op.wanted, "expected"
        elif reference is not None:
            want, source = reference[1], reference[0]
        else:
            continue
        if want is None or not same_fingerprint(op.got, want):  # type: ignore[arg-type]
            wrong[key] = (f"wrong result: final state {show_fingerprint(op.got)}, "
                          f"{source} {show_fingerprint(want)}")
    if wrong and reference is not None and reference[0] not in wrong:
        # contenders disagree: nobody can tell which one is right
        wrong[reference[0]] = "result disagrees with " + ", ".join(sorted(wrong))
    return wrong


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
    group = f"{os.getpid()}.{next(_GROUPS)}"  # unique across worker processes
    t0 = time.perf_counter()
    samples = measure(ops, timing)
    group_s = round(time.perf_counter() - t0, 4)
    wrong = verify(ops)
    out = []
    for key, values in samples.items():
        op_name, variant, contender = names[key]
        size = nbytes.get(key) if nbytes else None
        op = ops[key]
        extra: dict[str, Any] = {"verified": op.got is not None and key not in wrong}
        if op.got is not None:
            extra["fingerprint"] = show_fingerprint(op.got)
        out.append(record(scenario, op_name, contender, n, values, variant=variant,
                          nbytes=size, group=group, group_s=group_s,
                          rounds=len(values) + timing.warmup,
                          status="wrong" if key in wrong else "ok",
                          note=wrong.get(key, ""), **extra))
    return out


_GROUPS = itertools.count(1)
