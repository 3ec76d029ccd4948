"""Run scenarios: drive each plan, run its jobs in fresh processes, collect records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from benchmarks.config import SuiteConfig
from benchmarks.runner import Record, progress, record
from benchmarks.scenarios import ORDER, Job, module
from benchmarks.worker import MARKER, run_job

REPO = Path(__file__).resolve().parent.parent


@dataclass
class SuiteResult:
    """Everything one run produced."""

    records: list[Record] = field(default_factory=list)
    scenarios: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    elapsed_s: float = 0.0


def select(only: Iterable[str] | None) -> list[str]:
    """Scenario names to run, in suite order (``KeyError`` for unknown names)."""
    if not only:
        return list(ORDER)
    wanted = []
    for item in only:
        for name in item.split(","):
            name = name.strip()
            if name:
                module(name)  # validates
                wanted.append(name)
    return [n for n in ORDER if n in wanted]


def run_suite(cfg: SuiteConfig, only: Iterable[str] | None = None) -> SuiteResult:
    """Run the selected scenarios; records from every job, skipped sizes included."""
    result = SuiteResult(scenarios=select(only))
    t0 = time.perf_counter()
    for name in result.scenarios:
        scen = module(name)
        progress(f"== {name}: {scen.TITLE}")
        gen = scen.plan(cfg)
        reply: list[Record] | None = None
        while True:
            try:
                item = gen.send(reply)
            except StopIteration:
                break
            if isinstance(item, Job):
                reply = _run(item, cfg)
            else:  # ready-made records (skipped sizes)
                for r in item:
                    progress(f"   {r['scenario']}/{r['contender']} n={r['n']:,}: {r['note']}")
                reply = list(item)
            result.records += reply
    result.elapsed_s = round(time.perf_counter() - t0, 1)
    progress(f"== done in {result.elapsed_s:.0f} s")
    return result


def _run(job: Job, cfg: SuiteConfig) -> list[Record]:
    progress(f"-> {job.label}")
    t0 = time.perf_counter()
    try:
        if cfg.isolate:
            records = _run_isolated(job, cfg)
        else:
            records = run_job(job.as_json(), cfg.timing)
    except Exception as exc:  # one broken job must not lose the rest of the run
        progress(f"   {job.label} FAILED: {exc}")
        records = [record(job.scenario, "all", job.name, job.n, status="error",
                          note=f"error: {str(exc).strip().splitlines()[-1][:300]}")]
    progress(f"   {job.label}: {time.perf_counter() - t0:.1f} s")
    return records


def _run_isolated(job: Job, cfg: SuiteConfig) -> list[Record]:
    spec = json.dumps({"job": job.as_json(), "timing": asdict(cfg.timing)})
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.worker", spec], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tail: list[str] = []
    out: list[str] = []
    readers = [threading.Thread(target=_relay, args=(proc.stderr, tail), daemon=True),
               threading.Thread(target=_collect, args=(proc.stdout, out), daemon=True)]
    for t in readers:
        t.start()
    try:
        proc.wait(timeout=cfg.job_timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"timed out after {cfg.job_timeout_s:.0f} s") from None
    finally:
        for t in readers:
            t.join(timeout=10)
    for line in reversed(out):
        if line.startswith(MARKER):
            records: list[Record] = json.loads(line[len(MARKER):])
            return records
    last = next((t for t in reversed(tail) if t.strip()), f"exit code {proc.returncode}")
    raise RuntimeError(f"worker failed: {last}")


def _collect(stream: IO[str] | None, lines: list[str]) -> None:
    if stream is not None:
        lines += stream.read().splitlines()


def _relay(stream: IO[str] | None, tail: list[str]) -> None:
    """Pass the worker's stderr through (progress lines) and keep its end for errors."""
    if stream is None:
        return
    for line in stream:
        sys.stderr.write(line)
        tail.append(line.rstrip())
        del tail[:-20]


def machine_info() -> dict[str, Any]:
    """Where the numbers come from."""
    import platform
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for dist in ("numpy", "esper", "tcod-ecs", "msgpack", "xxhash", "scipy"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    try:
        from ecs_engine import __version__

        engine_version: str | None = __version__
    except ImportError:
        engine_version = None
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f
                        if ln.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    from ecs_engine import snapshot

    return {"platform": platform.platform(), "machine": platform.machine(), "cpu": cpu,
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "engine": engine_version, "versions": versions, "load_avg": load,
            "c_key_check": snapshot._index_in_one_pass is not None}
