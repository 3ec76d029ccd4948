"""The heads-up display: a few ``arcade.Text`` lines created once and updated per frame.

:func:`hud_lines` and :func:`help_lines` build the strings (plain Python, testable without
GL); :class:`Hud` lays them out and draws them in one pyglet batch over a translucent panel.
Import this module only after the arcade window exists (arcade's headless switch is read
at arcade's first import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import arcade
import pyglet

from ecs_engine.demo.game import SLOTS, Game, Timing

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["HELP", "Hud", "format_bytes", "help_lines", "hud_lines"]

HELP = (
    "A/D or Left/Right run   W/Up/Space jump   J/X shoot   hold R rewind",
    "F5 quicksave   F9 quickload   1-4 slot   Ctrl+S / Ctrl+L save / load file   "
    "F3 HUD   Esc quit",
)
TEXT_RGBA = (255, 255, 255, 255)
MESSAGE_RGBA = (255, 230, 120, 255)
PANEL_RGBA = (0, 0, 0, 150)


def format_bytes(n: int) -> str:
    """Bytes as B / kB / MB (powers of 1000, like the HUD's other SI units)."""
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1000:.1f} kB"
    return f"{n / 1_000_000:.1f} MB"


def _timing(t: Timing | None) -> str:
    return "-" if t is None else f"{t.us:,.0f} µs {format_bytes(t.nbytes)} ({t.what})"


def hud_lines(game: Game, fps: float, quads: int) -> list[str]:
    """The HUD's status lines for this frame: rates, counts, timings, slot, message."""
    world = game.world
    slots = " ".join(
        (f"[{i}]" if i == game.slot else f" {i} ") + ("*" if i in game.slots else " ")
        for i in range(1, SLOTS + 1)
    )
    state = "  REWINDING" if game.rewinding else ""
    return [
        f"{fps:5.1f} fps   {len(world)} entities   {quads} quads   tick {world.tick}   "
        f"sim {game.mean_tick_ms:.2f} ms/tick",
        f"snapshot {_timing(game.last_snapshot)}   last save {_timing(game.last_save)}",
        f"restore  {_timing(game.last_restore)}",
        f"slot {slots}  history {len(game.history)} ({format_bytes(game.history.nbytes)})"
        f"{state}",
        game.message,
    ]


def help_lines() -> Sequence[str]:
    """The key bindings shown at the bottom of the screen."""
    return HELP


class Hud:
    """Status lines at the top left and the key help at the bottom, for a window of
    ``width`` x ``height`` pixels; the font scales with the height."""

    def __init__(self, width: int, height: int) -> None:
        self.font_size = max(7.0, round(height / 60))
        self._line = self.font_size * 1.55  # pixels between baselines
        self._pad = self.font_size * 0.6
        self._batch = pyglet.graphics.Batch()
        top = height - self._pad - self.font_size
        n_status = 5
        self._status = [
            arcade.Text("", self._pad, top - i * self._line,
                        MESSAGE_RGBA if i == n_status - 1 else TEXT_RGBA,
                        self.font_size, batch=self._batch)
            for i in range(n_status)
        ]
        help_text = help_lines()
        self._help = [
            arcade.Text(line, self._pad, self._pad + (len(help_text) - 1 - i) * self._line,
                        TEXT_RGBA, self.font_size * 0.9, batch=self._batch)
            for i, line in enumerate(help_text)
        ]
        self._height = height
        self.visible = True

    def update(self, game: Game, fps: float, quads: int) -> None:
        """Refresh the status text (only lines that changed are laid out again)."""
        for text, line in zip(self._status, hud_lines(game, fps, quads), strict=True):
            if text.text != line:
                text.text = line

    def draw(self) -> None:
        """Draw the panels and all text (one batch) in window pixel coordinates."""
        if not self.visible:
            return
        status_w = max(t.content_width for t in self._status) + 2 * self._pad
        status_bottom = self._status[-1].y - self._pad
        arcade.draw_lrbt_rectangle_filled(0, status_w, status_bottom, self._height, PANEL_RGBA)
        help_w = max(t.content_width for t in self._help) + 2 * self._pad
        help_top = self._help[0].y + self._line * 0.8
        arcade.draw_lrbt_rectangle_filled(0, help_w, 0, help_top, PANEL_RGBA)
        self._batch.draw()
