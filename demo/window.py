"""The arcade front end: keys to actions, fixed-step updates, drawing via WorldRenderer + HUD.

:class:`GameView` is an ``arcade.View`` shown in a window made by
:func:`systems.render_gl.make_window` (which owns display detection and the headless switch,
so the demo does not duplicate it). The headless runner draws with the same view, so its
screenshots show exactly what the window shows.

Import this module only after the window exists (arcade reads its headless switch at import).
"""

from __future__ import annotations

import time

import arcade
from pyglet import gl

from ecs_engine.demo.audio import SoundBoard
from ecs_engine.demo.game import Game, default_zoom
from ecs_engine.demo.hud import Hud
from ecs_engine.systems.render_world import WorldRenderer
from ecs_engine.systems.stock_art import stock_atlas

__all__ = ["CTRL_KEYS", "KEYMAP", "SKY_RGBA", "GameView", "run_window"]

SKY_RGBA = (135, 206, 235, 255)  # clear colour for levels that name no background

KEYMAP: dict[int, str] = {
    arcade.key.A: "left", arcade.key.LEFT: "left",
    arcade.key.D: "right", arcade.key.RIGHT: "right",
    arcade.key.W: "jump", arcade.key.UP: "jump", arcade.key.SPACE: "jump",
    arcade.key.J: "shoot", arcade.key.X: "shoot",
    arcade.key.R: "rewind",
    arcade.key.F5: "quicksave", arcade.key.F9: "quickload",
    arcade.key.ENTER: "restart", arcade.key.RETURN: "restart",
    arcade.key.KEY_1: "slot1", arcade.key.KEY_2: "slot2",
    arcade.key.KEY_3: "slot3", arcade.key.KEY_4: "slot4",
}
CTRL_KEYS: dict[int, str] = {arcade.key.S: "save_file", arcade.key.L: "load_file"}


class GameView(arcade.View):
    """Plays a :class:`Game` in a window: keys become actions, each update runs the ticks
    real time owes, each draw shows the world and the HUD.

    ``pixels_per_unit``: zoom (default :func:`default_zoom`); ``hud``: show the player HUD
    and the key help (False: only the level, e.g. for screenshots); ``engine_hud``: start
    with the engine HUD (F3) on; ``sound``: play sounds (default: unless headless).
    """

    def __init__(self, game: Game, window: arcade.Window, *,
                 pixels_per_unit: float | None = None, hud: bool = True,
                 engine_hud: bool = False, sound: bool | None = None) -> None:
        super().__init__(window)
        self.game = game
        _, height = window.get_framebuffer_size()
        summary = game.summary
        self.renderer = WorldRenderer(
            window.ctx, pixels_per_unit=pixels_per_unit or default_zoom(height),
            background=summary.background or SKY_RGBA, visuals=summary.visuals,
            bounds=game.bounds, atlas=stock_atlas())
        self.hud = Hud(window.width, window.height)
        self.hud.player = self.hud.help = hud
        self.hud.engine = engine_hud
        self.sounds = SoundBoard(not arcade.headless if sound is None else sound)
        self._held_keys: dict[str, set[int]] = {}  # action -> keys holding it
        self._last_draw: float | None = None
        self.fps = 0.0  # smoothed frames per second of draws

    # -- input -------------------------------------------------------------------------
    def on_key_press(self, symbol: int, modifiers: int) -> None:
        if symbol == arcade.key.ESCAPE:
            self.window.close()
            return
        if symbol == arcade.key.F3:
            self.hud.engine = not self.hud.engine
            return
        if symbol in (arcade.key.F1, arcade.key.H):
            self.hud.help = not self.hud.help
            return
        if modifiers & arcade.key.MOD_CTRL and symbol in CTRL_KEYS:
            self.game.press(CTRL_KEYS[symbol])
            return
        action = KEYMAP.get(symbol)
        if action is None:
            return
        # Two keys can hold one action (A and Left): release only when both are up.
        self._held_keys.setdefault(action, set()).add(symbol)
        self.game.press(action)

    def on_key_release(self, symbol: int, modifiers: int) -> None:
        action = KEYMAP.get(symbol)
        if action is None:
            return
        keys = self._held_keys.get(action, set())
        keys.discard(symbol)
        if not keys:
            self.game.release(action)

    # -- loop --------------------------------------------------------------------------
    def on_update(self, delta_time: float) -> None:
        self.game.advance(delta_time)

    def on_draw(self) -> None:
        self.draw_frame()

    def draw_frame(self) -> None:
        """Play the sounds of the ticks since the last frame, then draw the world (clearing
        to the level background) and the HUD."""
        cues = self.game.cues
        if cues:
            self.sounds.play(cues)
            cues.clear()
        now = time.perf_counter()
        if self._last_draw is not None and now > self._last_draw:
            rate = 1.0 / (now - self._last_draw)
            self.fps = rate if self.fps == 0.0 else 0.9 * self.fps + 0.1 * rate
        self._last_draw = now
        self.window.ctx.screen.use()
        self.renderer.draw(self.game.world)
        self.window.default_camera.use()
        self.hud.update(self.game, self.fps, self.renderer.quad_count)
        self.hud.draw()
        _opaque(self.window.ctx)


def _opaque(ctx: arcade.ArcadeContext) -> None:
    """Set the screen's alpha to 1 everywhere.

    Blending (the HUD panel, text edges, translucent level art) also blends the alpha
    channel, which would make screenshots (and windows on compositors that honour alpha)
    partly transparent. Clearing with only the alpha channel writable fixes that.
    """
    gl.glColorMask(False, False, False, True)
    try:
        ctx.screen.clear(color=(0, 0, 0, 255))
    finally:
        gl.glColorMask(True, True, True, True)


def run_window(game: Game, window: arcade.Window, *, pixels_per_unit: float | None = None,
               hud: bool = True, engine_hud: bool = False) -> None:
    """Show ``game`` in ``window`` and run arcade's event loop until the window closes."""
    view = GameView(game, window, pixels_per_unit=pixels_per_unit, hud=hud,
                    engine_hud=engine_hud)
    window.show_view(view)
    arcade.run()
