"""Batch level validation on a process pool and on Ray: levels per minute, Ray's overhead.

The same batch of shipped-size levels (copies of the 120x40 ``demo`` level, each simulated
for ``ticks`` ticks) is validated by ``ecs_engine.levels.validate.validate_batch`` on a local
process pool of 2 workers and on a local Ray instance with 2 CPUs, in alternating rounds.
The pool is created per call, as the CLI does; Ray is started once (a cluster outlives its
jobs) and warmed up by the first round. Both must return the same rows (``ms`` aside).
"""

from __future__ import annotations

from typing import Any

from benchmarks.runner import Op, Record, Timing, record, timed_records
from benchmarks.scenarios import Job, Plan

NAME = "scaleout"
TITLE = "Batch level validation: process pool and Ray"
WORKERS = 2


def plan(cfg: Any) -> Plan:
    yield Job(NAME, "engine", cfg.scaleout_levels, {"ticks": cfg.scaleout_ticks})


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    import ray

    from ecs_engine.levels import shipped_level
    from ecs_engine.levels.validate import (
        ValidateConfig,
        config_dict,
        pack_level,
        validate_batch,
    )
    from ecs_engine.scaleout import run_batches

    package = pack_level(shipped_level("demo"))
    packages = [package] * n
    config = config_dict(ValidateConfig(ticks=params["ticks"]))
    ray.init(num_cpus=WORKERS, include_dashboard=False, logging_level="ERROR")
    try:
        results: dict[str, list[dict[str, Any]]] = {}

        def run(backend: str) -> Any:
            def call() -> Any:
                rows = run_batches(validate_batch, packages, shared=config,  # type: ignore[arg-type]
                                   backend=backend, workers=WORKERS)  # type: ignore[arg-type]
                results[backend] = [{k: v for k, v in r.items() if k != "ms"} for r in rows]
                return rows
            return call

        ops = {"pool": Op(run("pool")), "ray": Op(run("ray"))}
        rounds = Timing(warmup=1, min_repeat=3, max_repeat=3, target_s=0.0)
        out = timed_records(NAME, n, ops, rounds,
                            {"pool": ("validate", "", "pool"), "ray": ("validate", "", "ray")})
    finally:
        ray.shutdown()
    same = results["pool"] == results["ray"] and all(r["ok"] for r in results["pool"])
    out.append(record(NAME, "check", "engine", n, status="ok" if same else "mismatch",
                      note="" if same else "pool and ray rows differ or a level failed"))
    return out


JOBS = {"engine": engine}
