"""Scenario families. Each module has ``NAME``, ``TITLE``, ``JOBS`` and ``plan``.

``plan(cfg)`` is a generator that yields :class:`Job`\\ s (run in fresh processes) or lists of
ready records (e.g. a size skipped because it would take too long); the suite sends each
job's records back in, so a plan can decide later sizes from earlier timings.
``JOBS[name](n, params, timing)`` runs inside the worker and returns records.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any

from benchmarks.runner import Record, Timing, record

JobFn = Callable[[int, dict[str, Any], Timing], list[Record]]
Plan = Generator["Job | list[Record]", "list[Record] | None", None]

ORDER = ("tick", "spawn", "snapshot", "restore", "savefile", "churn", "history", "hierarchy",
         "partition", "frame", "scaleout", "sim", "small", "percall", "unserved", "demotick")
"""Scenario names in run order (``--only`` takes these)."""


@dataclass(frozen=True)
class Job:
    """One worker run: ``JOBS[name](n, params, timing)`` of a scenario module."""

    scenario: str
    name: str
    n: int
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.scenario}/{self.name} n={self.n:,}"

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def module(name: str) -> ModuleType:
    """The scenario module called ``name`` (``KeyError`` for unknown names)."""
    if name not in ORDER:
        raise KeyError(f"unknown scenario {name!r}; scenarios are {', '.join(ORDER)}")
    return importlib.import_module(f"benchmarks.scenarios.{name}")


def wall_of(records: list[Record] | None) -> float:
    """Worker wall time of a job (stored on each of its records), 0 if unknown."""
    return max((r.get("wall_s", 0.0) for r in records or []), default=0.0)


def median_of(records: list[Record] | None, op: str, contender: str) -> float | None:
    for r in records or []:
        if r["op"] == op and r["contender"] == contender and "median_s" in r:
            return float(r["median_s"])
    return None


PROBE_N = 10_000


def estimate(records: list[Record] | None, n: int, timing: Timing) -> float:
    """Seconds a job like the one that produced ``records`` would take at size ``n``.

    Setup (wall time outside the timed groups) and every timed call scale with the size;
    the number of rounds is recomputed for the larger calls, as the runner will.
    """
    recs = [r for r in records or [] if r.get("status") == "ok"]
    if not recs:
        return 0.0
    ratio = n / recs[0]["n"]
    groups: dict[int, list[Record]] = {}
    for r in recs:
        if "group" in r:
            groups.setdefault(r["group"], []).append(r)
    timed_prev = sum(g[0]["group_s"] for g in groups.values())
    est = max(0.0, wall_of(recs) - timed_prev) * ratio
    for g in groups.values():
        round_new = sum(r.get("median_s", 0.0) for r in g) * ratio
        rounds_new = timing.warmup + timing.repeats_for(round_new)
        est += g[0]["group_s"] * ratio * rounds_new / max(1, g[0]["rounds"])
    return est


def sized_jobs(scenario: str, names: tuple[str, ...], cfg: Any,
               params: dict[str, Any] | None = None,
               never_skip: tuple[str, ...] = ("engine",),
               required: tuple[tuple[str, int], ...] = ()) -> Plan:
    """Each contender at each of ``cfg.sizes``, ascending. A baseline size whose job would
    take longer than ``cfg.budget_s`` (see :func:`estimate`) is skipped, and says so;
    ``required`` (contender, size) pairs always run (a target needs
    them). A baseline whose first size is large runs at ``PROBE_N`` first, to have
    something to estimate from."""
    for name in names:
        prev: list[Record] | None = None
        for n in cfg.sizes:
            must = name in never_skip or (name, n) in required
            if not must and prev is None and n > PROBE_N:
                # nothing to estimate from: time a small size first (kept as a result)
                prev = yield Job(scenario, name, PROBE_N, dict(params or {}))
            if not must and prev and estimate(prev, n, cfg.timing) > cfg.budget_s:
                yield [_skipped(scenario, name, n, estimate(prev, n, cfg.timing), cfg.budget_s)]
                continue  # larger sizes are estimated from the same run: skipped too
            prev = yield Job(scenario, name, n, dict(params or {}))


def _skipped(scenario: str, name: str, n: int, est: float, budget: float) -> Record:
    return record(scenario, "all", name, n, status="skipped",
                  note=f"skipped: would take ~{est:.0f} s (> {budget:.0f} s)",
                  estimate_s=round(est, 1))
