"""What a suite run measures: sizes, timing, budgets, output folder."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.runner import FULL, QUICK, Timing

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class SuiteConfig:
    """Sizes and limits of one run. :meth:`full` and :meth:`quick_run` are the CLI's presets."""

    sizes: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)
    timing: Timing = FULL
    budget_s: float = 60.0  # skip a baseline size whose job would take longer than this
    churn_n: int = 100_000  # spawn/despawn churn per tick at this size
    churn_fraction: float = 0.01
    history: tuple[int, int, int] = (100_000, 10_000, 600)  # colliders, movers, snapshots
    hierarchy: tuple[int, int] = (100_000, 10_000)  # world size, blueprint/subtree size
    level_sides: tuple[int, ...] = (64, 256, 512, 1024, 2048, 4096)
    map_shape: tuple[int, int] = (210, 520)  # the "real-world-size" map for exact (rows, cols)
    thesis_budget_s: float = 60.0  # the thesis port runs up to sizes that take less than this
    exact_budget_s: float = 30.0
    scaleout_levels: int = 200  # shipped-size levels per validation batch (pool vs Ray)
    scaleout_ticks: int = 120  # ticks each level is simulated for
    quick: bool = False
    isolate: bool = True  # run each job in a fresh process
    out_dir: Path = RESULTS_DIR
    charts: bool = True
    job_timeout_s: float = 1800.0

    @classmethod
    def full(cls, **changes: Any) -> SuiteConfig:
        return replace(cls(), **changes)

    @classmethod
    def quick_run(cls, **changes: Any) -> SuiteConfig:
        """Small sizes: the whole suite in under a minute."""
        base = cls(sizes=(1_000, 10_000), timing=QUICK, budget_s=10.0, churn_n=10_000,
                   history=(10_000, 1_000, 60), hierarchy=(10_000, 1_000),
                   level_sides=(64, 128, 256), map_shape=(210, 520),
                   thesis_budget_s=5.0, exact_budget_s=5.0, scaleout_levels=20,
                   scaleout_ticks=30, quick=True)
        return replace(base, **changes)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["out_dir"] = str(self.out_dir)
        return out


__all__ = ["RESULTS_DIR", "SuiteConfig", "Timing"]
