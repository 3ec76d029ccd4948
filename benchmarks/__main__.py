"""``python -m benchmarks``: run the suite, write results, optionally check the targets.

    python -m benchmarks                 everything, full sizes (1k to 1M)
    python -m benchmarks --quick         small sizes, under a minute
    python -m benchmarks --only tick     one scenario (comma-separate or repeat for more)
    python -m benchmarks --check         exit 1 when a target ratio falls short
    python -m benchmarks --check --from benchmarks/results/<run>.json   re-check a saved run
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.config import SuiteConfig
from benchmarks.scenarios import ORDER
from benchmarks.targets import evaluate, exit_code, format_table


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks",
                                description="Benchmark suite: this engine against esper, "
                                            "tcod-ecs, dict stores and memcpy.")
    p.add_argument("--quick", action="store_true", help="small sizes (under a minute)")
    p.add_argument("--only", action="append", metavar="NAME",
                   help=f"run only these scenarios: {', '.join(ORDER)}")
    p.add_argument("--check", action="store_true",
                   help="compare ratios with the targets; exit 1 if one falls short")
    p.add_argument("--from", dest="from_json", type=Path, metavar="JSON",
                   help="with --check: check a saved run instead of running")
    p.add_argument("--out", type=Path, help="results folder (default benchmarks/results)")
    p.add_argument("--sizes", type=lambda s: tuple(int(x) for x in s.split(",")),
                   help="entity counts, comma-separated (default 1000,...,1000000)")
    p.add_argument("--no-charts", action="store_true", help="skip the PNG charts")
    p.add_argument("--in-process", action="store_true",
                   help="run jobs in this process (faster start, less isolation)")
    return p.parse_args(argv)


def config_from(args: argparse.Namespace) -> SuiteConfig:
    changes: dict[str, object] = {}
    if args.out is not None:
        changes["out_dir"] = args.out
    if args.sizes:
        changes["sizes"] = args.sizes
    if args.no_charts:
        changes["charts"] = False
    if args.in_process:
        changes["isolate"] = False
    return SuiteConfig.quick_run(**changes) if args.quick else SuiteConfig.full(**changes)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json is not None:
        outcomes = evaluate(json.loads(args.from_json.read_text())["records"])
        print(format_table(outcomes))
        return exit_code(outcomes) if args.check else 0
    from benchmarks import run

    cfg = config_from(args)
    try:
        _, outcomes, paths = run(cfg, only=args.only,
                                 argv=list(argv) if argv is not None else sys.argv[1:])
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    print(format_table(outcomes))
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
    return exit_code(outcomes) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
