"""Fresh-process entry: ``python -m benchmarks.worker '<job json>'``.

Runs one job so one contender's memory (and garbage) never slows another, and prints its
records as one JSON line prefixed with :data:`MARKER` on stdout (progress goes to stderr).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from benchmarks.runner import Record, Timing

MARKER = "BENCH-RESULT "


def run_job(job: dict[str, Any], timing: Timing) -> list[Record]:
    """Run one job in this process; every record gets the job's wall time."""
    from benchmarks.scenarios import module

    fn = module(job["scenario"]).JOBS[job["name"]]
    t0 = time.perf_counter()
    records = fn(job["n"], job.get("params", {}), timing)
    wall = round(time.perf_counter() - t0, 3)
    for r in records:
        r["wall_s"] = wall
    return records


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m benchmarks.worker '<job json>'", file=sys.stderr)
        return 2
    spec = json.loads(argv[0])
    records = run_job(spec["job"], Timing(**spec["timing"]))
    sys.stdout.write(MARKER + json.dumps(records) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
