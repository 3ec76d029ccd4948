"""The demo's frame budget (reported only, no target): the default level as played, and
with 10k stress bodies.

:func:`build_frame` loads the shipped demo level with ``n`` bouncing stress bodies (the
demo's ``--stress``); ``step()`` runs one full simulation tick of the stock platformer
systems (gravity, collision against the level's colliders, gameplay, animation) and
``render()`` draws one frame exactly as the game window does (textured sprites from the
atlas, the level's visuals, the player HUD and key help) headless at 1280x720, and waits for
the GPU. With ``n = 0`` the view is the game's own zoom; with stress bodies it is zoomed out
so every body is in view (the worst case). This machine renders with llvmpipe (software
OpenGL), so render times are the CPU's. Without an OpenGL context the scenario reports
"skipped" with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.runner import Op, Record, Timing, progress, record, timed_records
from benchmarks.scenarios import Job, Plan

NAME = "frame"
TITLE = "Demo frame (reported only)"
FRAME_MS = 1000 / 60
BODIES = 10_000
WINDOW = (1280, 720)


def plan(cfg: Any) -> Plan:
    yield Job(NAME, "engine", 0)  # the default level as played
    yield Job(NAME, "engine", BODIES)


def build_frame(n: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The hook (see the module docstring). ``ImportError`` while ``systems`` lacks the
    systems this needs; ``NotImplementedError`` until the hook is written."""
    import os

    os.environ.setdefault("ARCADE_HEADLESS", "1")
    os.environ.setdefault("ARCADE_SOUND_BACKENDS", "silent")
    from ecs_engine.demo.game import Game
    from ecs_engine.systems.render_gl import make_window

    game = Game("demo", stress=n, history_seconds=1 / 60, save_dir=os.devnull)
    width, height = WINDOW
    try:
        window = make_window(width, height, "frame benchmark", headless=True)
    except Exception as exc:  # no GL driver on this machine
        raise ImportError(f"no OpenGL context: {exc}") from exc
    from ecs_engine.demo.window import GameView

    level_width, _ = game.summary.size
    view = GameView(game, window, pixels_per_unit=width / level_width if n else None,
                    sound=False)
    world = game.world

    def step() -> None:
        world.step(1 / 60)

    def render() -> None:
        view.draw_frame()
        window.ctx.finish()  # count the GPU's work, not just the submission

    return step, render


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    try:
        step, render = build_frame(n)
    except ImportError as exc:
        note = f"skipped: systems not available ({exc})"
    except NotImplementedError as exc:
        note = f"skipped: {exc}"
    else:
        ops = {"step": Op(step), "render": Op(render)}
        names = {"step": ("frame_step", "", "engine"), "render": ("frame_render", "", "engine")}
        out = timed_records(NAME, n, ops, timing, names)
        for r in out:
            r["frame_fraction"] = round(r["median_s"] * 1000 / FRAME_MS, 4)
        return out
    progress(f"  frame: {note}")
    return [record(NAME, op, "engine", n, status="skipped", note=note)
            for op in ("frame_step", "frame_render")]


JOBS = {"engine": engine}
