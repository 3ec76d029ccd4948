"""The heads-up display: the player HUD, the engine HUD (F3), the key help (F1), messages
and the win / game-over screens.

:func:`hud_lines`, :func:`end_lines` and :func:`help_lines` build the strings (plain Python,
testable without GL); :class:`Hud` lays them out with ``arcade.Text`` objects created once
(one pyglet batch) and a few textured icons (hearts, a coin, a laser). Import this module
only after the arcade window exists (arcade's headless switch is read at arcade's first
import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import arcade
import numpy as np
import pyglet
from PIL import Image

from ecs_engine.demo.game import SLOTS, Game, Timing
from ecs_engine.systems.stock_art import heart_image

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["HELP", "Hud", "end_lines", "format_bytes", "help_lines", "hud_lines"]

HELP = (
    "A/D or Left/Right run   W/Up/Space jump   J/X shoot   hold R rewind   Enter restart",
    "F5 quicksave   F9 quickload   1-4 slot   Ctrl+S / Ctrl+L save / load file",
    "F1 this help   F3 engine HUD   Esc quit",
)
TEXT_RGBA = (255, 255, 255, 255)
MESSAGE_RGBA = (255, 230, 120, 255)
WARN_RGBA = (255, 90, 90, 255)
PANEL_RGBA = (0, 0, 0, 150)
SHADE_RGBA = (0, 0, 0, 150)  # over the frozen level on an end screen
WIN_RGBA = (120, 255, 140, 255)


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
    """The engine HUD's lines for this frame: rates, counts, timings, slots, history."""
    world = game.world
    slots = " ".join(
        (f"[{i}]" if i == game.slot else f" {i} ") + ("*" if i in game.slots else " ")
        for i in range(1, SLOTS + 1)
    )
    state = "  REWINDING" if game.rewinding else ""
    return [
        f"{fps:5.1f} fps   {len(world)} entities   {quads} quads   tick {world.tick}",
        f"sim {game.mean_tick_ms:.2f} ms/tick",
        f"snapshot {_timing(game.last_snapshot)}",
        f"last save {_timing(game.last_save)}",
        f"restore  {_timing(game.last_restore)}",
        f"slot {slots}  history {len(game.history)} ({format_bytes(game.history.nbytes)})"
        f"{state}",
    ]


def end_lines(game: Game) -> tuple[str, str, str] | None:
    """Title, result and keys of the end screen, or None while playing."""
    outcome = game.outcome
    if outcome is None:
        return None
    status = game.player_status()
    coins = f"coins {status.coins if status else 0} / {game.total_coins}"
    load = f"F9: load slot {game.slot}   " if game.slot in game.slots else ""
    keys = f"Enter: play again   {load}hold R: rewind"
    if outcome == "won":
        return "You win!", f"time {game.won_seconds or 0.0:.1f} s   {coins}", keys
    return "Game over", coins, keys


def help_lines() -> Sequence[str]:
    """The key bindings shown at the bottom of the screen."""
    return HELP


def _texture(name: str, image: np.ndarray) -> arcade.Texture:
    return arcade.Texture(Image.fromarray(image), hash=f"ecs-demo-hud-{name}")


def fit_line(text: str, chars: int) -> str:
    """``text`` in at most ``chars`` characters: a long one keeps its start (what
    happened) and its end (the detail), with an ellipsis between."""
    if len(text) <= chars:
        return text
    head = (chars - 1) * 2 // 3
    return text[:head] + "…" + text[len(text) - (chars - 1 - head):]


class Hud:
    """Everything drawn over the level for a window of ``width`` x ``height`` pixels; the
    font and icons scale with the height.

    ``player``: hearts, coins and ammo at the top left, and messages (on by default).
    ``engine``: the engine numbers at the top right (F3, off by default). ``help``: the key
    help at the bottom (F1). The end screen shows whenever the game is won or lost.
    """

    def __init__(self, width: int, height: int) -> None:
        self.font_size = max(7.0, round(height / 60))
        self._line = self.font_size * 1.55  # pixels between baselines
        self._pad = self.font_size * 0.6
        self._icon = round(self.font_size * 2.2)
        self._width, self._height = width, height
        self.player = True
        self.engine = False
        self.help = True
        self._batch = pyglet.graphics.Batch()  # player HUD and message
        self._engine_batch = pyglet.graphics.Batch()
        self._help_batch = pyglet.graphics.Batch()
        self._end_batch = pyglet.graphics.Batch()
        top = height - self._pad
        icon_mid = top - self._icon / 2
        text_y = icon_mid - self.font_size / 2
        self._coins = arcade.Text("", 0, text_y, TEXT_RGBA, self.font_size * 1.2,
                                  batch=self._batch, bold=True)
        self._ammo = arcade.Text("", 0, text_y, TEXT_RGBA, self.font_size * 1.2,
                                 batch=self._batch, bold=True)
        self._message = arcade.Text("", width / 2, top - self._icon - self._line, MESSAGE_RGBA,
                                    self.font_size * 1.1, anchor_x="center", batch=self._batch)
        # characters that fit across ~80% of the window (an average glyph ~0.6 em wide)
        self._message_chars = max(20, int(width * 0.8 / (self.font_size * 1.1 * 0.6)))
        self._status = [
            arcade.Text("", width - self._pad, top - self.font_size - i * self._line,
                        TEXT_RGBA, self.font_size, anchor_x="right", batch=self._engine_batch)
            for i in range(6)
        ]
        help_text = help_lines()
        self._help = [
            arcade.Text(line, self._pad, self._pad + (len(help_text) - 1 - i) * self._line,
                        TEXT_RGBA, self.font_size * 0.9, batch=self._help_batch)
            for i, line in enumerate(help_text)
        ]
        mid = height / 2
        self._end = [
            arcade.Text("", width / 2, mid + self.font_size * 2, TEXT_RGBA, self.font_size * 4,
                        anchor_x="center", bold=True, batch=self._end_batch),
            arcade.Text("", width / 2, mid - self.font_size * 1.5, TEXT_RGBA,
                        self.font_size * 1.6, anchor_x="center", batch=self._end_batch),
            arcade.Text("", width / 2, mid - self.font_size * 4.5, MESSAGE_RGBA,
                        self.font_size * 1.1, anchor_x="center", batch=self._end_batch),
        ]
        heart = heart_image(64)
        empty = heart.copy()
        grey = empty[..., :3].mean(axis=2, keepdims=True).astype(np.uint8)
        empty[..., :3] = grey // 2 + 40
        empty[..., 3] = (empty[..., 3] * 0.7).astype(np.uint8)
        self._heart = _texture("heart", heart)
        self._empty_heart = _texture("empty-heart", empty)
        self._coin = arcade.load_texture(":resources:images/items/coinGold.png")
        self._laser = arcade.load_texture(":resources:images/space_shooter/laserRed01.png")
        self._hearts = (0, 0)  # hp, max_hp drawn
        self._show_end = False
        self._show_message = False

    @property
    def heart_boxes(self) -> list[tuple[float, float, float, float]]:
        """(left, bottom, width, height) in window pixels of each heart drawn last frame
        (y up), full hearts first."""
        hp, max_hp = self._hearts
        size = self._icon
        top = self._height - self._pad
        return [(self._pad + i * (size + self._pad * 0.4), top - size, size, size)
                for i in range(max(hp, 0) if max_hp == 0 else max_hp)]

    def update(self, game: Game, fps: float, quads: int) -> None:
        """Refresh the text (only lines that changed are laid out again)."""
        status = game.player_status()
        if status is not None:
            self._hearts = (status.hp, status.max_hp)
            x = self._pad + status.max_hp * (self._icon + self._pad * 0.4) + self._pad * 2
            self._set(self._coins, f"{status.coins}/{game.total_coins}")
            self._coins.x = x + self._icon
            ammo = f"{status.ammo}" if status.ammo > 0 else "no ammo"
            self._set(self._ammo, ammo)
            self._ammo.color = TEXT_RGBA if status.ammo > 0 else WARN_RGBA
            self._ammo.x = self._coins.x + self._coins.content_width + self._pad * 3 + self._icon
        message = game.visible_message
        self._show_message = bool(message)
        self._set(self._message, fit_line(message, self._message_chars))
        if self.engine:
            for text, line in zip(self._status, hud_lines(game, fps, quads), strict=True):
                self._set(text, line)
        end = end_lines(game)
        self._show_end = end is not None
        if end is not None:
            for text, line in zip(self._end, end, strict=True):
                self._set(text, line)
            self._end[0].color = WIN_RGBA if game.outcome == "won" else WARN_RGBA

    @staticmethod
    def _set(text: arcade.Text, value: str) -> None:
        if text.text != value:
            text.text = value

    def draw(self) -> None:
        """Draw the enabled parts in window pixel coordinates (y up)."""
        if self._show_end:
            arcade.draw_lrbt_rectangle_filled(0, self._width, 0, self._height, SHADE_RGBA)
            self._end_batch.draw()
        if self.player:
            self._draw_player()
        if self.engine:
            width = max(t.content_width for t in self._status) + 2 * self._pad
            bottom = self._status[-1].y - self._pad
            arcade.draw_lrbt_rectangle_filled(self._width - width, self._width, bottom,
                                              self._height, PANEL_RGBA)
            self._engine_batch.draw()
        if self.help:
            width = max(t.content_width for t in self._help) + 2 * self._pad
            top = self._help[0].y + self._line * 0.8
            arcade.draw_lrbt_rectangle_filled(0, width, 0, top, PANEL_RGBA)
            self._help_batch.draw()

    def _draw_player(self) -> None:
        hp, max_hp = self._hearts
        size = self._icon
        top = self._height - self._pad
        # A dark strip behind the icons keeps them readable on any sky.
        right = self._ammo.x + self._ammo.content_width + self._pad
        arcade.draw_lrbt_rectangle_filled(0, right, top - size - self._pad, self._height,
                                          PANEL_RGBA)
        for i, (left, bottom, w, h) in enumerate(self.heart_boxes):
            texture = self._heart if i < hp else self._empty_heart
            arcade.draw_texture_rect(texture, arcade.LBWH(left, bottom, w, h))
        coin_left = self._coins.x - size - self._pad * 0.3
        arcade.draw_texture_rect(self._coin, arcade.LBWH(coin_left, top - size, size, size))
        laser_x = self._ammo.x - size / 2 - self._pad * 0.3
        arcade.draw_texture_rect(self._laser, arcade.XYWH(laser_x, top - size / 2, size * 0.2,
                                                          size * 0.9), angle=90)
        if self._show_message:
            width = self._message.content_width + 2 * self._pad
            y = self._message.y
            arcade.draw_lrbt_rectangle_filled(self._width / 2 - width / 2,
                                              self._width / 2 + width / 2,
                                              y - self._pad, y + self.font_size + self._pad,
                                              PANEL_RGBA)
        self._batch.draw()
