"""The benchmark suite: ``python -m benchmarks`` (see ``benchmarks/__main__.py``).

Python API: ``run(SuiteConfig.quick_run(out_dir=...), only=["tick"])`` runs scenarios,
writes the JSON, Markdown and charts, and returns the records, target outcomes and paths.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from benchmarks.config import SuiteConfig
from benchmarks.runner import Record
from benchmarks.targets import Outcome, evaluate

__all__ = ["SuiteConfig", "evaluate", "run"]


def run(cfg: SuiteConfig, only: Iterable[str] | None = None, argv: Sequence[str] = ()
        ) -> tuple[list[Record], list[Outcome], dict[str, Path]]:
    """Run the suite (or the ``only`` scenarios) and write its results."""
    from benchmarks.report import write_all
    from benchmarks.suite import machine_info, run_suite

    result = run_suite(cfg, only)
    outcomes = evaluate(result.records)
    paths = write_all(result, cfg, machine_info(), outcomes, argv)
    return result.records, outcomes, paths
