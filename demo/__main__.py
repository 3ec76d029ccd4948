"""``python -m ecs_engine.demo [LEVEL]``: the arcade platformer, in a window or headless.

Nothing here imports arcade before the headless decision is made (arcade reads its headless
switch at its first import), so ``--help`` and the no-display message work anywhere.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

HOW_TO_HEADLESS = """\
demo: no display found ({reason}).
Run it headless instead, e.g.:
    {command} --headless --frames 300 --screenshot shot.png
or set ARCADE_HEADLESS=1 in the environment (then the run is headless too)."""

DEFAULT_HEADLESS_FRAMES = 300


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected WIDTHxHEIGHT, e.g. 480x270, got {text!r}") from None
    if not (16 <= w <= 8192 and 16 <= h <= 8192):
        raise argparse.ArgumentTypeError(f"size {w}x{h} out of range (16..8192 per side)")
    return w, h


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ecs_engine.demo",
        description="A platformer on the columnar ECS engine: run, jump, shoot, collect coins "
                    "and reach the flag; quicksave, quickload, save files and rewind.",
        epilog="Subcommand: 'farm' runs many seeded headless games (farm --help). "
               "Keys: A/D or arrows run, W/Up/Space jump, J/X shoot, hold R rewind, Enter "
               "restart, F5 quicksave, F9 quickload, 1-4 pick the slot, Ctrl+S / Ctrl+L save "
               "/ load the slot's file, F1 toggles the key help, F3 the engine HUD, Esc "
               "quits.",
    )
    p.add_argument("level", nargs="?", default="demo",
                   help="a shipped level name, a level folder, an LDtk project (.ldtk) or a "
                        "Tiled map (.tmx, .tmj, .json) (default: demo)")
    p.add_argument("--editor-level", default=None, metavar="ID",
                   help="LDtk: the level to play, by identifier or index (default: the first)")
    p.add_argument("--lenient", action="store_true",
                   help="skip editor names no prefab knows instead of refusing the level")
    p.add_argument("--prefabs", default=None, metavar="MODULE:FUNCTION",
                   help="a function returning the game's PrefabRegistry, or (registry, names) "
                        "(default: the stock prefabs and editor names)")
    p.add_argument("--size", type=_size, default=(1280, 720), metavar="WxH",
                   help="window size in pixels (default 1280x720)")
    p.add_argument("--zoom", type=float, default=None, metavar="PPU",
                   help="pixels per world unit (default: window height / 30)")
    p.add_argument("--seed", type=int, default=0, help="seed of the world's rng (default 0)")
    p.add_argument("--stress", type=_non_negative, default=0, metavar="N",
                   help="add N bouncing bodies spread over the level")
    p.add_argument("--save-dir", type=Path, default=Path("saves"), metavar="DIR",
                   help="folder of the save files slot1.sav .. slot4.sav (default ./saves)")
    p.add_argument("--method", choices=("greedy", "exact"), default="greedy",
                   help="geometry partition method (default greedy)")
    p.add_argument("--history", type=float, default=10.0, metavar="SECONDS",
                   help="seconds of rewind history (default 10)")
    p.add_argument("--no-hud", action="store_true",
                   help="hide the player HUD and key help (only the level is drawn)")
    p.add_argument("--engine-hud", action="store_true",
                   help="start with the engine HUD (F3: fps, entities, snapshot times) on")
    p.add_argument("--synctest", action="store_true",
                   help="check determinism: every tick rewind 2 ticks, re-simulate and "
                        "compare state hashes; stop with the tick, component and field on a "
                        "mismatch (exit code 1)")
    g = p.add_argument_group("headless (no window; one tick per frame, dt = 1/60 s)")
    g.add_argument("--headless", action="store_true",
                   help="run without a window (also implied by ARCADE_HEADLESS=1)")
    g.add_argument("--frames", type=_non_negative, default=None, metavar="N",
                   help=f"frames to run (default {DEFAULT_HEADLESS_FRAMES})")
    g.add_argument("--inputs", type=Path, default=None, metavar="FILE",
                   help="JSON input script: [{\"frame\": n, \"press\": [...], "
                        "\"release\": [...]}, ...], or a shipped one: win, tour, "
                        "tutorial_win")
    g.add_argument("--screenshot", default=None, metavar="PATH",
                   help="PNG to write (may contain {frame}); once at the end unless "
                        "--screenshot-every")
    g.add_argument("--screenshot-every", type=_positive, default=None, metavar="K",
                   help="write a screenshot every K frames")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns the process exit code (2 for usage/setup errors)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["farm"]:  # the simulation farm needs no window and no arcade
        from ecs_engine.demo.farm import main as farm_main

        return farm_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    headless = args.headless or bool(os.environ.get("ARCADE_HEADLESS"))
    if headless and not args.headless:
        print("demo: ARCADE_HEADLESS is set, running headless (see --help)", file=sys.stderr)
    headless_only = [name for name, value in (("--frames", args.frames),
                                              ("--inputs", args.inputs),
                                              ("--screenshot", args.screenshot),
                                              ("--screenshot-every", args.screenshot_every))
                     if value is not None]
    if headless_only and not headless:
        parser.error(f"{', '.join(headless_only)} only apply with --headless")

    if importlib.util.find_spec("arcade") is None:  # (before any work: the demo draws)
        print("demo: the demo needs arcade: install the arcade extra, "
              "pip install 'ecs-engine[arcade]'", file=sys.stderr)
        return 2
    from ecs_engine.demo.game import Game
    from ecs_engine.demo.headless import ScriptError, load_script
    from ecs_engine.levels import LevelError
    from ecs_engine.levels.prefab_source import load_prefabs

    try:
        prefabs, names = load_prefabs(args.prefabs)
    except ValueError as exc:
        parser.error(str(exc))
    editor_level: str | int | None = args.editor_level
    if isinstance(editor_level, str) and editor_level.lstrip("-").isdigit():
        editor_level = int(editor_level)
    from ecs_engine.systems.render_gl import NO_DISPLAY_MESSAGE, make_window

    script = []
    if args.inputs is not None:
        try:
            script = load_script(args.inputs)
        except ScriptError as exc:
            print(f"demo: bad input script: {exc}", file=sys.stderr)
            return 2

    window = None
    if not headless:
        # The window first: without a display, say how to run headless before any work.
        try:
            window = make_window(args.size[0], args.size[1], "ecs demo", headless=False)
        except RuntimeError as exc:
            if NO_DISPLAY_MESSAGE not in str(exc):
                raise
            # ./dev sets ECS_DEMO_COMMAND so the hint names the command the user actually typed.
            command = os.environ.get("ECS_DEMO_COMMAND", "python -m ecs_engine.demo")
            print(HOW_TO_HEADLESS.format(reason=exc, command=command), file=sys.stderr)
            return 2

    try:
        game = Game(args.level, seed=args.seed, stress=args.stress, save_dir=args.save_dir,
                    history_seconds=args.history, method=args.method, synctest=args.synctest,
                    prefabs=prefabs, names=names, editor_level=editor_level,
                    strict=not args.lenient)
    except (KeyError, LevelError) as exc:
        why = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"demo: cannot load level {args.level!r}: {why}", file=sys.stderr)
        if window is not None:
            window.close()
        return 2

    from ecs_engine import DesyncError

    try:
        if window is not None:
            from ecs_engine.demo.window import run_window

            run_window(game, window, pixels_per_unit=args.zoom, hud=not args.no_hud,
                       engine_hud=args.engine_hud)
            return 0

        from ecs_engine.demo.headless import run_headless

        frames = DEFAULT_HEADLESS_FRAMES if args.frames is None else args.frames
        result = run_headless(game, frames, script=script, size=args.size,
                              pixels_per_unit=args.zoom, screenshot=args.screenshot,
                              every=args.screenshot_every, hud=not args.no_hud,
                              engine_hud=args.engine_hud)
    except DesyncError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 1

    print(game.summary.describe().splitlines()[0])
    print(result.describe())
    if game.sync is not None:
        print(f"sync test     {game.sync.checked} ticks re-simulated and matched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
