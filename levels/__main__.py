"""Command line for level authors and level hosts.

- ``python -m ecs_engine.levels inspect PATH [--method exact] [--out picture.png]``: load one
  level, print its summary, draw its colliders. Exit codes: 0 success, 2 bad input (the
  :class:`LevelError` message goes to stderr).
- ``python -m ecs_engine.levels validate PATHS... [--workers N | --ray [ADDRESS]] [--out F]``:
  validate many levels (parse, partition, spawn, simulate, check); one JSON line per level,
  a summary on stderr, exit code 1 when any level failed.

``PATH`` is a level folder, its ``.lvl`` file, the name of a shipped level, an LDtk project
(``--level`` picks one of its levels) or a Tiled map.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from ecs_engine import PrefabRegistry, World
from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.inspect import DEFAULT_SCALE, MAX_SIDE, picture, picture_frame
from ecs_engine.levels.loader import LevelPlan, plan_level
from ecs_engine.levels.prefab_source import load_prefabs
from ecs_engine.levels.shipped import shipped_level, shipped_levels


def _level_path(text: str) -> Path:
    path = Path(text)
    is_level = path.is_file() or (path / "level.lvl").is_file()
    # A bare name like "demo" may also be an unrelated folder in the current directory.
    if not is_level and text in shipped_levels():
        return shipped_level(text)
    return path


def _one_level_path(text: str) -> Path:
    """:func:`_level_path`; a bare name that is neither a folder here nor a shipped level
    is a ``LevelError`` listing the shipped ones (a misspelt name is more likely than a
    missing level.lvl)."""
    path = _level_path(text)
    if not path.exists() and path.name == text and not path.suffix:
        close = difflib.get_close_matches(text, shipped_levels(), n=1)
        raise LevelError(path, f"no such level folder and no shipped level {text!r}"
                               f"{f' (did you mean {close[0]!r}?)' if close else ''}; "
                               f"shipped levels are {list(shipped_levels())}")
    return path


def _inspect(args: argparse.Namespace, prefabs: PrefabRegistry,
             names: Mapping[str, str | None] | None) -> int:
    start = time.perf_counter()
    level: str | int | None = args.level
    if isinstance(level, str) and level.lstrip("-").isdigit():
        level = int(level)
    plan = plan_level(_one_level_path(args.path), prefabs, args.method, level=level,
                      strict=not args.lenient, names=names)
    # Spawn into a scratch world too, so "inspect" proves the level really loads.
    keys = plan.spawn(World())
    summary = plan.summary(time.perf_counter() - start, keys)
    _say(summary.describe())
    out = args.out or Path(f"{_picture_stem(plan)}-inspect.png")
    frame = picture_frame(plan, args.scale, args.max_side)
    img = picture(plan, args.scale, args.max_side)
    try:
        img.save(out)
    except OSError as exc:
        raise LevelError(out, f"cannot write the picture: {exc.strerror or exc}") from None
    _say(f"picture      {out} ({img.width}x{img.height} px, {frame.scale} px per world unit)")
    if frame.clipped:
        _say(f"clipped      the layers lie too far apart for {args.max_side} px: the picture "
             f"shows world x {frame.left:g}..{frame.right:g}, y {frame.bottom:g}..{frame.top:g}"
             f"; cut off: {', '.join(frame.clipped)}")
    return 0


def _picture_stem(plan: LevelPlan) -> str:
    """The default picture's name, a plain file name in the current folder: an LDtk level
    identifier (or a folder name) is the author's text and may hold ``/``, ``..`` or
    characters a file system refuses, so everything but letters, digits, ``.``, ``-`` and
    ``_`` becomes ``_``, and leading dots go (no hidden file, no ``..``)."""
    stem = (plan.level.folder.resolve().name if plan.level.path.suffix == ".lvl"
            else f"{plan.level.path.stem}-{plan.level.name}")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).lstrip(".")[:120]
    return safe or "level"


_EDITOR_SUFFIXES = (".ldtk", ".tmx", ".tmj")


def _expand(paths: list[str]) -> list[str]:
    """Each argument is a level; a folder that is not a level stands for the levels in it."""
    out: list[str] = []
    for text in paths:
        path = _level_path(text)
        if path.is_dir() and not (path / "level.lvl").is_file():
            children = sorted(c for c in path.iterdir()
                              if (c / "level.lvl").is_file() or c.suffix in _EDITOR_SUFFIXES)
            out.extend(str(c) for c in children)
            if not children:
                out.append(str(path))  # reported as a bad level, not silently skipped
        else:
            out.append(str(path))
    return out


def _progress(total: int, stream: TextIO) -> tuple[Callable[[int], None], Callable[[], None]]:
    """A tqdm bar on a terminal; nothing when the output is a pipe or a file, or when tqdm
    (which comes with the [cluster] extra) is not installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    if not stream.isatty() or tqdm is None:
        return (lambda done: None), (lambda: None)

    bar = tqdm(total=total, unit="level", file=stream)
    state = {"done": 0}

    def update(done: int) -> None:
        bar.update(done - state["done"])
        state["done"] = done

    return update, bar.close


def _validate(args: argparse.Namespace) -> int:
    from ecs_engine.levels.validate import (
        LevelPackage,
        ValidateConfig,
        config_dict,
        pack_level,
        validate_batch,
    )
    from ecs_engine.scaleout import Backend, run_batches

    paths = _expand(args.paths)
    config = ValidateConfig(ticks=args.ticks, method=args.method,
                            thumbnail=args.thumbnail_size if args.thumbnails else 0,
                            prefabs=args.prefabs, systems=args.systems, seed=args.seed)
    start = time.perf_counter()
    packages: list[LevelPackage] = []
    rows_by_index: dict[int, dict[str, Any]] = {}
    for i, path in enumerate(paths):
        try:
            packages.append(pack_level(path))
        except LevelError as exc:  # unreadable: a row of its own, the rest still run
            rows_by_index[i] = {"path": path, "ok": False, "error": str(exc), "entities": 0,
                                "rectangles": 0, "ticks": 0, "state_hash": None, "ms": 0.0}
    backend: Backend = ("ray" if args.ray is not None
                        else "pool" if args.workers > 1 else "inline")
    update, close = _progress(len(packages), sys.stderr)
    try:
        results = run_batches(validate_batch, packages, shared=config_dict(config),
                              backend=backend, workers=args.workers,
                              address=args.ray or None, batch_size=args.batch_size,
                              progress=update)
    finally:
        close()
    it = iter(results)
    rows = [rows_by_index[i] if i in rows_by_index else next(it) for i in range(len(paths))]
    out = open(args.out, "w") if args.out else sys.stdout  # noqa: SIM115 - closed below
    try:
        for index, row in enumerate(rows):
            png = row.pop("thumbnail_png", None)
            if png is not None:
                args.thumbnails.mkdir(parents=True, exist_ok=True)
                target = args.thumbnails / f"{index:05d}-{Path(row['path']).stem or 'level'}.png"
                target.write_bytes(png)
                row["thumbnail"] = str(target)
            if out is sys.stdout:
                _say(json.dumps(row))  # `validate ... | head` stops quietly
            else:
                out.write(json.dumps(row) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    failed = sum(not r["ok"] for r in rows)
    seconds = time.perf_counter() - start
    rate = len(rows) / seconds * 60 if seconds > 0 else 0.0
    print(f"validated {len(rows)} level(s) with {backend} ({args.workers} worker(s)): "
          f"{len(rows) - failed} ok, {failed} failed, {seconds:.1f} s ({rate:.0f} per minute)",
          file=sys.stderr)
    return 1 if failed else 0


def _say(text: str) -> None:
    """Print; once the reader has gone (``inspect ... | head``), print nothing more."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # Point stdout at devnull so neither later prints nor the interpreter's final
        # flush raise again; the command still finishes its work (the picture).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ecs_engine.levels",
                                     description="Level tools for the ecs-level format.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="load a level, print its summary, draw its colliders")
    p.add_argument("path", help="level folder, .lvl file, shipped level name, LDtk project "
                                "(.ldtk) or Tiled map (.tmx, .tmj, .json)")
    p.add_argument("--level", default=None,
                   help="LDtk: the level's identifier or index (default: the first)")
    p.add_argument("--lenient", action="store_true",
                   help="skip editor names no prefab knows (listed) instead of failing")
    p.add_argument("--prefabs", default=None, metavar="MODULE:FUNCTION",
                   help="a function returning the game's PrefabRegistry, or (registry, "
                        "names) (default: the stock prefabs and editor names)")
    p.add_argument("--method", choices=("greedy", "exact"), default="greedy",
                   help="rectangle partition (default greedy)")
    p.add_argument("--out", type=Path, default=None,
                   help="picture to write (default <level folder>-inspect.png)")
    p.add_argument("--scale", type=int, default=DEFAULT_SCALE,
                   help=f"pixels per world unit (default {DEFAULT_SCALE})")
    p.add_argument("--max-side", type=int, default=MAX_SIDE,
                   help=f"cap on the picture's longest side in pixels (default {MAX_SIDE})")
    sub.add_parser("list", help="list the shipped levels")
    v = sub.add_parser("validate", help="validate many levels; one JSON line per level",
                       description="Parse, partition, spawn and simulate each level, check "
                                   "invariants; exit code 1 when any level failed.")
    v.add_argument("paths", nargs="+", help="levels (folders, .lvl, .ldtk, Tiled maps, "
                                            "shipped names) or folders of levels")
    where = v.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=1,
                       help="local worker processes (default 1: in this process)")
    where.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                       help="run on Ray: a local instance, or the cluster at ADDRESS "
                            "(e.g. auto, ray://head:10001)")
    v.add_argument("--ray-cpus", type=int, default=None, help=argparse.SUPPRESS)
    v.add_argument("--out", type=Path, default=None, help="JSON lines file (default stdout)")
    v.add_argument("--ticks", type=int, default=120,
                   help="ticks to simulate at 60 Hz (default 120)")
    v.add_argument("--method", choices=("greedy", "exact"), default="greedy")
    v.add_argument("--thumbnails", type=Path, default=None, metavar="DIR",
                   help="write a PNG thumbnail per level into DIR")
    v.add_argument("--thumbnail-size", type=int, default=256, help=argparse.SUPPRESS)
    v.add_argument("--prefabs", default="ecs_engine.components:stock_prefabs",
                   help="module:function returning the PrefabRegistry")
    v.add_argument("--systems", default="ecs_engine.systems:add_platformer_systems",
                   help="module:function adding the systems to a world")
    v.add_argument("--seed", type=int, default=0, help="world rng seed")
    v.add_argument("--batch-size", type=int, default=None, help="levels per task")
    args = parser.parse_args(argv)
    if args.command == "validate":
        if args.ray is not None:
            args.workers = args.ray_cpus or os.cpu_count() or 1
        if args.workers < 1 or args.ticks < 0:
            parser.error("--workers must be >= 1 and --ticks >= 0")
        try:
            return _validate(args)
        except ImportError as exc:  # --ray without Ray: the message says what to install
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.command == "list":
        for name in shipped_levels():
            _say(f"{name:<16}{shipped_level(name)}")
        return 0
    if args.scale < 1 or args.max_side < 1:
        parser.error("--scale and --max-side must be at least 1")
    try:
        source = load_prefabs(args.prefabs)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        return _inspect(args, *source)
    except LevelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if "unknown prefab" in exc.detail and args.prefabs is None:
            print("(a level of your own game's prefabs: name the function that makes them, "
                  "--prefabs mygame.prefabs:make_prefabs)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
