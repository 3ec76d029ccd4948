"""Scripted runs without a window: exactly one tick per frame, screenshots, a summary.

An input script is JSON: a list of events (or ``{"events": [...]}``)::

    [{"frame": 1, "press": ["right"]},
     {"frame": 90, "press": ["quicksave"]},
     {"frame": 120, "press": ["jump"], "release": ["right"]}]

Frames count from 1; frame ``n`` runs tick ``n``. Within a frame: releases, then presses of
hold actions (``left right jump shoot rewind``) take effect, then the frame's tick (or rewind
step) runs, then trigger actions (``quicksave quickload slot1..slot4 save_file load_file``)
run, then the frame is drawn. So a quicksave at frame ``a`` saves exactly the state the
screenshot of frame ``a`` shows, and a quickload at frame ``b`` makes frame ``b`` show it again.

This module does not import arcade at import time: :func:`run_headless` creates the headless
window first (arcade's headless switch is read at its first import).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ecs_engine.demo.game import ACTIONS, HOLD_ACTIONS, Game

if TYPE_CHECKING:
    import arcade

    from ecs_engine.demo.window import GameView

__all__ = ["Event", "HeadlessResult", "ScriptError", "load_script", "parse_script",
           "run_headless", "screenshot_path"]

DEFAULT_SIZE = (1280, 720)


class ScriptError(ValueError):
    """An input script that cannot be used (the message says where and why)."""


@dataclass(frozen=True)
class Event:
    """Actions pressed and released at the start of a frame (1-based)."""

    frame: int
    press: tuple[str, ...] = ()
    release: tuple[str, ...] = ()


def _names(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ScriptError(f"{where}: expected a list of action names, got {value!r}")
    unknown = [v for v in value if v not in ACTIONS]
    if unknown:
        raise ScriptError(f"{where}: unknown action(s) {unknown}; actions are {list(ACTIONS)}")
    return tuple(value)


def parse_script(data: Any) -> list[Event]:
    """Events from decoded JSON (a list, or a dict with ``events``), sorted by frame."""
    if isinstance(data, Mapping):  # {"events": [...]} with optional "description"
        data = data.get("events")
    if not isinstance(data, list):
        raise ScriptError("an input script is a JSON list of events (or {\"events\": [...]})")
    events = []
    for i, item in enumerate(data):
        where = f"event {i}"
        if not isinstance(item, Mapping):
            raise ScriptError(f"{where}: expected an object, got {item!r}")
        extra = set(item) - {"frame", "press", "release", "comment"}
        if extra:
            raise ScriptError(f"{where}: unknown key(s) {sorted(extra)}")
        frame = item.get("frame")
        if not isinstance(frame, int) or isinstance(frame, bool) or frame < 0:
            raise ScriptError(f"{where}: 'frame' must be an integer >= 0, got {frame!r}")
        events.append(Event(max(frame, 1), _names(item.get("press", []), f"{where} press"),
                            _names(item.get("release", []), f"{where} release")))
    return sorted(events, key=lambda e: e.frame)


def load_script(path: str | os.PathLike[str]) -> list[Event]:
    """Read and check a JSON input script (``ScriptError`` on anything wrong): a file, or
    the name of one that ships with the demo (``win``, ``tour``, ``tutorial_win``)."""
    shipped = Path(__file__).with_name("scripts") / f"{path}.json"
    if not Path(path).exists() and Path(path).name == str(path) and shipped.is_file():
        path = shipped
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"{path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScriptError(f"{path}: not valid JSON: {exc}") from exc
    try:
        return parse_script(data)
    except ScriptError as exc:
        raise ScriptError(f"{path}: {exc}") from exc


def screenshot_path(template: str | os.PathLike[str], frame: int, *, numbered: bool) -> Path:
    """``template`` with ``{frame}`` filled in; ``numbered`` adds ``_<frame>`` before the
    suffix when the template has no ``{frame}`` (several shots must not overwrite)."""
    text = str(template)
    if "{frame" in text:
        return Path(text.format(frame=frame))
    if numbered:
        p = Path(text)
        return p.with_name(f"{p.stem}_{frame:05d}{p.suffix or '.png'}")
    return Path(text)


@dataclass
class HeadlessResult:
    """What a headless run did. Times in milliseconds (medians over the run)."""

    frames: int
    entities: int
    ticks: int
    mean_tick_ms: float
    median_tick_ms: float
    median_render_ms: float
    quads: int
    state_hash: str
    screenshots: list[Path] = field(default_factory=list)
    message: str = ""

    def describe(self) -> str:
        lines = [
            f"frames       {self.frames} (world tick {self.ticks})",
            f"entities     {self.entities} ({self.quads} quads drawn)",
            f"tick         mean {self.mean_tick_ms:.3f} ms, median {self.median_tick_ms:.3f} ms "
            f"({self.median_tick_ms / (1000 / 60) * 100:.1f}% of a 60 Hz frame)",
            f"render       median {self.median_render_ms:.3f} ms",
            f"state hash   {self.state_hash}",
            f"message      {self.message}",
        ]
        lines += [f"screenshot   {p}" for p in self.screenshots]
        return "\n".join(lines)


FrameHook = Callable[[int, Game, "GameView"], None]


def run_headless(
    game: Game,
    frames: int,
    *,
    script: Sequence[Event] = (),
    size: tuple[int, int] = DEFAULT_SIZE,
    pixels_per_unit: float | None = None,
    screenshot: str | os.PathLike[str] | None = None,
    every: int | None = None,
    hud: bool = True,
    engine_hud: bool = False,
    on_frame: FrameHook | None = None,
    window: arcade.Window | None = None,
    render: bool = True,
) -> HeadlessResult:
    """Run ``frames`` frames of ``game`` with scripted input on a headless window.

    ``size``: window pixels. ``screenshot``: PNG path (may hold ``{frame}``), written every
    ``every`` frames, or once after the last frame. ``on_frame(frame, game, view)`` runs
    after each frame is drawn (tests read pixels there). ``window``: reuse a headless window
    of that size instead of creating (and closing) one. ``render=False`` skips drawing
    (simulation timing only; no screenshots).
    """
    if frames < 0:
        raise ValueError(f"frames must be >= 0, got {frames}")
    if every is not None and every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    from ecs_engine.systems.render_gl import make_window, save_screenshot

    own_window = window is None
    if window is None:
        window = make_window(size[0], size[1], "ecs demo (headless)", headless=True)
    try:
        from ecs_engine.demo.window import GameView

        view = GameView(game, window, pixels_per_unit=pixels_per_unit, hud=hud,
                        engine_hud=engine_hud, sound=False)
        by_frame: dict[int, list[Event]] = {}
        for ev in script:
            by_frame.setdefault(ev.frame, []).append(ev)
        shots: list[Path] = []
        render_ms: list[float] = []
        tick_ms: list[float] = []
        for frame in range(1, frames + 1):
            triggers: list[str] = []
            for ev in by_frame.get(frame, ()):
                for action in ev.release:
                    game.release(action)
                for action in ev.press:
                    if action in HOLD_ACTIONS:
                        game.press(action)
                    else:
                        triggers.append(action)
            ticking = not game.rewinding
            game.step_frame()
            if ticking:
                tick_ms.append(game.tick_ms[-1])
            for action in triggers:
                game.press(action)
            if not render:
                view.sounds.play(game.cues)  # silent: only lists what would play
                game.cues.clear()
                continue
            t0 = time.perf_counter()
            view.draw_frame()
            window.ctx.finish()  # count the GPU's work in the frame time
            render_ms.append((time.perf_counter() - t0) * 1000.0)
            if on_frame is not None:
                on_frame(frame, game, view)
            due = frame == frames if every is None else frame % every == 0
            if screenshot is not None and due:
                path = screenshot_path(screenshot, frame, numbered=every is not None)
                path.parent.mkdir(parents=True, exist_ok=True)
                shots.append(save_screenshot(path, window))
        return HeadlessResult(
            frames=frames,
            entities=len(game.world),
            ticks=game.world.tick,
            mean_tick_ms=float(np.mean(tick_ms)) if tick_ms else 0.0,
            median_tick_ms=float(np.median(tick_ms)) if tick_ms else 0.0,
            median_render_ms=float(np.median(render_ms)) if render_ms else 0.0,
            quads=view.renderer.quad_count,
            state_hash=game.state_hash(),
            screenshots=shots,
            message=game.message,
        )
    finally:
        if own_window:
            window.close()
