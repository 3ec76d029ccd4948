"""Command line: ``python -m ecs_engine.levels inspect PATH [--method exact] [--out picture.png]``.

``PATH`` is a level folder, its ``.lvl`` file, or the name of a shipped level. Exit codes:
0 success, 2 bad input (the :class:`LevelError` message goes to stderr).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ecs_engine import World
from ecs_engine.components import stock_prefabs
from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.inspect import DEFAULT_SCALE, MAX_SIDE, picture, picture_scale
from ecs_engine.levels.loader import plan_level
from ecs_engine.levels.shipped import shipped_level, shipped_levels


def _level_path(text: str) -> Path:
    path = Path(text)
    is_level = path.is_file() or (path / "level.lvl").is_file()
    # A bare name like "demo" may also be an unrelated folder in the current directory.
    if not is_level and text in shipped_levels():
        return shipped_level(text)
    return path


def _inspect(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    plan = plan_level(_level_path(args.path), stock_prefabs(), args.method)
    # Spawn into a scratch world too, so "inspect" proves the level really loads.
    keys = plan.spawn(World())
    summary = plan.summary(time.perf_counter() - start, keys)
    print(summary.describe())
    out = args.out or Path(f"{plan.level.folder.resolve().name}-inspect.png")
    img = picture(plan, args.scale, args.max_side)
    img.save(out)
    print(f"picture      {out} ({img.width}x{img.height} px, "
          f"{picture_scale(plan, args.scale, args.max_side)} px per world unit)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ecs_engine.levels",
                                     description="Level tools for the ecs-level format.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="load a level, print its summary, draw its colliders")
    p.add_argument("path", help="level folder, .lvl file, or shipped level name")
    p.add_argument("--method", choices=("greedy", "exact"), default="greedy",
                   help="rectangle partition (default greedy)")
    p.add_argument("--out", type=Path, default=None,
                   help="picture to write (default <level folder>-inspect.png)")
    p.add_argument("--scale", type=int, default=DEFAULT_SCALE,
                   help=f"pixels per world unit (default {DEFAULT_SCALE})")
    p.add_argument("--max-side", type=int, default=MAX_SIDE,
                   help=f"cap on the picture's longest side in pixels (default {MAX_SIDE})")
    sub.add_parser("list", help="list the shipped levels")
    args = parser.parse_args(argv)
    if args.command == "list":
        for name in shipped_levels():
            print(f"{name:<16}{shipped_level(name)}")
        return 0
    if args.scale < 1 or args.max_side < 1:
        parser.error("--scale and --max-side must be at least 1")
    try:
        return _inspect(args)
    except LevelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
