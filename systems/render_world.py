"""Draw a World with arcade, straight from its columns.

:class:`WorldRenderer` turns every entity with ``Position``, ``Collider``, ``Layer`` and
either ``Color`` (a flat box) or ``Sprite`` (a picture from the renderer's
:class:`~systems.sprite_atlas.SpriteAtlas`) into one instanced
:class:`~systems.render_gl.QuadBatch` per frame: read-only queries hand over the columns,
the atlas turns ``Sprite.sheet``/``frame``/``flip`` into texel rectangles by fancy indexing,
a stable argsort on ``Layer.z`` orders everything, and the batch is filled with a handful
of bulk copies (no per-entity Python loop). Level tiles (one entity per partitioned
rectangle, the tile picture repeated across it), pickups, enemies, projectiles, effects and
the player therefore all draw in one instanced call with one texture. A level's visual
layers are drawn first, as :class:`~systems.render_gl.TextureLayer` backgrounds.

Nothing per entity is cached between frames: everything is derived from the columns each
frame, so ``world.restore``/``world.load`` (which may reorder rows and reuse slots) can never
leave stale GPU state behind.

Units: world units (1 unit = one geometry pixel of a level, y up); ``pixels_per_unit`` is
the zoom; the view centre is ``world.resources["camera"] = {"x", "y"}`` in world units.

Like ``render_gl``, this module imports arcade only lazily (via ``render_gl``), so importing
it does not fix arcade's headless mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ecs_engine import World
from ecs_engine.components import Collider, Color, Layer, Position, Sprite
from ecs_engine.systems.render_gl import QuadBatch, TextureLayer, world_projection
from ecs_engine.systems.sprite_atlas import SpriteAtlas

if TYPE_CHECKING:
    from arcade.context import ArcadeContext
    from pyglet.math import Mat4

__all__ = ["BLINK_RGBA", "Viewport", "VisualSource", "WorldRenderer", "camera_center"]

RGBA = tuple[int, int, int, int]
WHITE = np.array([255, 255, 255, 255], np.uint8)
BLINK_RGBA = np.array([255, 255, 255, 70], np.uint8)  # a sprite's tint while it blinks


class VisualSource(Protocol):
    """A picture over a world rectangle, e.g. ``levels.VisualLayer`` (duck-typed so that
    ``systems`` need not import ``levels``)."""

    @property
    def image(self) -> np.ndarray: ...  # (H, W, 4) uint8 RGBA, row 0 = top

    @property
    def rect(self) -> Sequence[float]: ...  # left, bottom, width, height in world units

    @property
    def z(self) -> int: ...


def camera_center(world: World) -> tuple[float, float]:
    """The camera resource's centre in world units ((0, 0) when there is none)."""
    cam = world.resources.get("camera") or {}
    return float(cam.get("x", 0.0)), float(cam.get("y", 0.0))


@dataclass(frozen=True)
class Viewport:
    """Where the world lands on screen (pure arithmetic, no GL).

    ``width``/``height`` in pixels; ``center_x``/``center_y`` the world point (world units)
    at the middle of the view; ``pixels_per_unit`` the zoom.
    """

    width: int
    height: int
    center_x: float
    center_y: float
    pixels_per_unit: float

    @classmethod
    def follow(cls, camera: tuple[float, float], size: tuple[int, int],
               pixels_per_unit: float,
               bounds: Sequence[float] | None = None) -> Viewport:
        """The view centred on ``camera`` (world units), kept inside ``bounds`` (left,
        bottom, right, top; centred where the view is larger) and snapped to whole pixels.

        Snapping keeps tile edges on pixel boundaries while the camera eases, so the picture
        does not shimmer and pixel positions are exactly predictable.
        """
        w, h = int(size[0]), int(size[1])
        ppu = float(pixels_per_unit)
        cx, cy = float(camera[0]), float(camera[1])
        if bounds is not None:
            left, bottom, right, top = (float(v) for v in bounds)
            cx = _clamp_axis(cx, left, right, w / (2 * ppu))
            cy = _clamp_axis(cy, bottom, top, h / (2 * ppu))
        return cls(w, h, round(cx * ppu) / ppu, round(cy * ppu) / ppu, ppu)

    def to_pixel(self, x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        """(row, col) of the pixels containing world points (x, y) in a screenshot (row 0 =
        top), as int64 arrays; they may lie outside the image."""
        ppu = self.pixels_per_unit
        col = np.floor((np.asarray(x, np.float64) - self.center_x) * ppu + self.width / 2)
        up = np.floor((np.asarray(y, np.float64) - self.center_y) * ppu + self.height / 2)
        return self.height - 1 - up.astype(np.int64), col.astype(np.int64)

    def to_world(self, row: Any, col: Any) -> tuple[np.ndarray, np.ndarray]:
        """World point (world units) at the centre of pixel (row, col) of a screenshot."""
        ppu = self.pixels_per_unit
        x = (np.asarray(col, np.float64) + 0.5 - self.width / 2) / ppu + self.center_x
        up = self.height - 1 - np.asarray(row, np.float64)
        y = (up + 0.5 - self.height / 2) / ppu + self.center_y
        return x, y

    def visible_rect(self) -> tuple[float, float, float, float]:
        """(left, bottom, right, top) of the visible world, in world units."""
        hw = self.width / (2 * self.pixels_per_unit)
        hh = self.height / (2 * self.pixels_per_unit)
        return (self.center_x - hw, self.center_y - hh, self.center_x + hw,
                self.center_y + hh)

    def projection(self) -> Mat4:
        """The orthographic matrix of this view (for ``QuadBatch.draw(projection=...)``)."""
        return world_projection(self.width, self.height, self.pixels_per_unit,
                                (self.center_x, self.center_y))


class WorldRenderer:
    """Draws a world's boxes (one instanced call) over its visual layers.

    Example::

        renderer = WorldRenderer(window.ctx, pixels_per_unit=24, background=(135, 206, 235, 255),
                                 visuals=summary.visuals, atlas=stock_atlas())
        renderer.draw(world)        # clears, draws visuals, then every box sorted by Layer.z

    Without an ``atlas`` every entity with ``Color`` draws as its flat colour (sprites too);
    with one, ``Sprite`` entities draw their pictures and the rest their colours.
    """

    def __init__(
        self,
        ctx: ArcadeContext | None = None,
        *,
        pixels_per_unit: float = 16.0,
        background: Sequence[int] | None = (0, 0, 0, 255),
        visuals: Iterable[VisualSource] = (),
        bounds: Sequence[float] | None = None,
        capacity: int = 1024,
        atlas: SpriteAtlas | None = None,
    ) -> None:
        """``ctx``: the arcade context (default: the current window's). ``background``: the
        clear colour, RGBA 0-255 (None: do not clear). ``bounds``: (left, bottom, right,
        top) in world units that the view stays inside where it fits (None: follow the
        camera anywhere). ``capacity``: initial quads. ``atlas``: the pictures of ``Sprite``
        entities (None: draw everything as flat ``Color`` boxes)."""
        if ctx is None:
            import arcade

            ctx = arcade.get_window().ctx
        self._ctx = ctx
        self.pixels_per_unit = float(pixels_per_unit)
        self.background: RGBA | None = None
        if background is not None:
            bg = tuple(int(c) for c in background)
            self.background = (bg[0], bg[1], bg[2], bg[3] if len(bg) > 3 else 255)
        self.bounds: tuple[float, float, float, float] | None = None
        if bounds is not None:
            left, bottom, right, top = (float(v) for v in bounds)
            self.bounds = (left, bottom, right, top)
        self._batch = QuadBatch(ctx, capacity)
        self.atlas = atlas
        if atlas is not None:
            self._batch.set_texture(atlas.image, atlas.white)
        self._layers: list[TextureLayer] = []
        self.quad_count = 0  # quads drawn by the last draw() (in view)
        self.set_visuals(visuals)

    # -- configuration -------------------------------------------------------------------
    def set_visuals(self, visuals: Iterable[VisualSource]) -> None:
        """Replace the background layers (drawn in ascending ``z``, behind every box)."""
        for layer in self._layers:
            layer.release()
        ordered = sorted(visuals, key=lambda v: v.z)  # sorted() is stable: file order on ties
        self._layers = []
        for v in ordered:
            left, bottom, width, height = (float(c) for c in v.rect)
            self._layers.append(TextureLayer(v.image, left, bottom, width, height, self._ctx))

    @property
    def layer_count(self) -> int:
        return len(self._layers)

    # -- geometry of the view ------------------------------------------------------------
    def viewport_size(self) -> tuple[int, int]:
        """(width, height) in pixels of the framebuffer being drawn to."""
        _, _, w, h = self._ctx.active_framebuffer.viewport
        return int(w), int(h)

    def viewport(self, world: World, size: tuple[int, int] | None = None) -> Viewport:
        """The view of ``world`` this renderer draws into ``size`` pixels (default: the
        active framebuffer's): its camera, zoom and bounds."""
        return Viewport.follow(camera_center(world), size or self.viewport_size(),
                               self.pixels_per_unit, self.bounds)

    # -- drawing -------------------------------------------------------------------------
    def update(self, world: World,
               visible: Sequence[float] | None = None) -> int:
        """Fill the quad batch from the columns; returns the number of quads.

        ``visible``: (left, bottom, right, top) in world units; quads entirely outside it
        are left out (a software rasteriser pays per triangle, even off screen).
        """
        parts = [self._flat(world)]
        if self.atlas is not None:
            parts.append(self._sprites(world, self.atlas))
        x, y, w, h, rgba, uv, repeat, z = (np.concatenate(c) for c in zip(*parts, strict=True))
        if visible is not None and len(x):
            left, bottom, right, top = visible
            keep = np.flatnonzero((x + w / 2 >= left) & (x - w / 2 <= right)
                                  & (y + h / 2 >= bottom) & (y - h / 2 <= top))
        else:
            keep = np.arange(len(x))
        # Stable: equal z keeps row order (flat boxes, then sprites), which restore
        # reproduces exactly, so a restored world draws pixel-identically to when it was
        # saved.
        order = keep[np.argsort(z[keep], kind="stable")]
        self._batch.update(x[order], y[order], w[order], h[order], rgba[order], uv[order],
                           repeat[order])
        return len(order)

    def _flat(self, world: World) -> tuple[np.ndarray, ...]:
        """Columns of the flat-colour boxes (every ``Color`` box without an atlas)."""
        without = (Sprite,) if self.atlas is not None else ()
        with world.query(Position, Collider, Color, Layer, without=without,
                         readonly=(Position, Collider, Color, Layer)) as q:
            pos, col = q[Position], q[Collider]
            n = len(q)
            uv = np.broadcast_to(np.asarray(self._batch.white_uv, np.float32), (n, 4))
            return (pos["x"], pos["y"], col["w"], col["h"], q[Color]["rgba"], uv,
                    np.ones((n, 2), np.float32), q[Layer]["z"])

    @staticmethod
    def _sprites(world: World, atlas: SpriteAtlas) -> tuple[np.ndarray, ...]:
        """Columns of the sprites, laid out by the atlas."""
        with world.query(Position, Collider, Sprite, Layer,
                         readonly=(Position, Collider, Sprite, Layer)) as q:
            pos, col, spr = q[Position], q[Collider], q[Sprite]
            quads = atlas.place(spr["sheet"], spr["frame"], spr["flip"], pos["x"], pos["y"],
                                col["w"], col["h"])
            rgba = np.where(spr["blink"][:, None], BLINK_RGBA, WHITE)
            return (quads.x, quads.y, quads.w, quads.h, rgba, quads.uv, quads.repeat,
                    q[Layer]["z"])

    def draw(self, world: World, size: tuple[int, int] | None = None, *,
             clear: bool = True) -> None:
        """Clear to the background colour, draw the visual layers, then every box in view
        (one instanced call).

        ``size``: the target's size in pixels (default: the active framebuffer's viewport).
        The camera is applied through an explicit projection, so arcade's own camera (used
        afterwards for a HUD) is left as it was.
        """
        if clear and self.background is not None:
            self._ctx.active_framebuffer.clear(color=self.background)
        view = self.viewport(world, size)
        proj = view.projection()
        for layer in self._layers:
            layer.draw(projection=proj)
        self.quad_count = self.update(world, view.visible_rect())
        self._batch.draw(projection=proj)

    def release(self) -> None:
        """Free the GPU buffers and textures now."""
        for layer in self._layers:
            layer.release()
        self._layers = []
        self._batch.release()


def _clamp_axis(center: float, lo: float, hi: float, half: float) -> float:
    """Keep [center - half, center + half] inside [lo, hi]; centre it when it cannot fit."""
    if hi - lo <= 2 * half:
        return (lo + hi) / 2
    return min(max(center, lo + half), hi - half)
