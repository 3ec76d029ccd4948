"""Bulk GPU drawing for arcade 3: instanced textured quads, texture layers, screenshots.

Everything here is fed from numpy arrays and issues one draw call per batch, with no
per-quad Python loop. A :class:`QuadBatch` samples one texture (an atlas): each quad names
its texel rectangle and how often the picture repeats across it, and its colour multiplies
the texture (the default texture is white, so quads without a picture are flat colours).
Coordinates are world units with y up; a camera (or an explicit projection matrix) maps them
to pixels. :func:`world_camera` / :func:`world_projection`
build that mapping from a scale in pixels per world unit and a camera centre in world units.

arcade is imported lazily (inside functions) so that :func:`make_window` can still switch
arcade to headless mode when it is the first thing to touch arcade; nothing else in
``systems`` imports this module.

Headless use: set ``ARCADE_HEADLESS=1`` before arcade is first imported (or call
``make_window(..., headless=True)`` first). Headless needs only EGL + Mesa (llvmpipe), no X
server and no audio device.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import arcade
    from arcade.camera import Camera2D
    from arcade.context import ArcadeContext
    from arcade.gl import Framebuffer
    from PIL import Image as PILImage
    from pyglet.math import Mat4

__all__ = [
    "NO_DISPLAY_MESSAGE",
    "QuadBatch",
    "TextureLayer",
    "make_window",
    "read_pixels",
    "save_screenshot",
    "world_camera",
    "world_projection",
]

NO_DISPLAY_MESSAGE = "no display: run with --headless or set ARCADE_HEADLESS=1"
NO_ARCADE_MESSAGE = "rendering needs arcade: install the arcade extra, pip install " \
                    "'ecs-engine[arcade]'"

ArrayLike = npt.ArrayLike

# Shared by both programs: arcade binds the current camera's projection and view matrices
# to uniform block 0 ("WindowBlock"), so our shaders follow arcade cameras automatically.
_WINDOW_BLOCK = """
uniform WindowBlock {
    mat4 projection;
    mat4 view;
} window;
"""

_QUAD_VS = (
    "#version 330\n"
    + _WINDOW_BLOCK
    + """
in vec2 in_vert;    // unit-quad corner in [-0.5, 0.5]^2 (per vertex)
in vec2 in_pos;     // quad centre, world units (per instance)
in vec2 in_size;    // quad width/height, world units (per instance)
in vec4 in_color;   // rgba, uint8 normalised to [0, 1] by GL (per instance)
in vec4 in_uv;      // texel rectangle: left, top, width, height in texture pixels, row 0 = top
in vec2 in_repeat;  // pictures across the quad (x < 0 mirrors left-right)
out vec4 v_color;
out vec2 v_local;   // 0..1 across the quad, y up
flat out vec4 v_uv;
flat out vec2 v_repeat;

void main() {
    vec2 world = in_pos + in_vert * in_size;
    gl_Position = window.projection * window.view * vec4(world, 0.0, 1.0);
    v_color = in_color;
    v_local = in_vert + 0.5;
    v_uv = in_uv;
    v_repeat = in_repeat;
}
"""
)

_QUAD_FS = """
#version 330
uniform sampler2D tex;
in vec4 v_color;
in vec2 v_local;
flat in vec4 v_uv;
flat in vec2 v_repeat;
out vec4 frag_color;

void main() {
    // Position inside one repetition of the picture; y counted from its top row.
    vec2 t = fract(v_local * v_repeat);
    t.y = 1.0 - t.y;
    // Stay half a texel inside the rectangle: filtering never reads a neighbour's texels.
    vec2 texel = v_uv.xy + clamp(t * v_uv.zw, vec2(0.5), max(v_uv.zw - 0.5, vec2(0.5)));
    vec4 color = texture(tex, texel / vec2(textureSize(tex, 0))) * v_color;
    if (color.a <= 0.0) {
        discard;
    }
    frag_color = color;
}
"""

_TEXTURE_VS = (
    "#version 330\n"
    + _WINDOW_BLOCK
    + """
uniform vec4 rect;  // left, bottom, right, top in world units
in vec2 in_vert;    // unit-quad corner in [0, 1]^2
out vec2 v_uv;

void main() {
    vec2 world = mix(rect.xy, rect.zw, in_vert);
    gl_Position = window.projection * window.view * vec4(world, 0.0, 1.0);
    // The image is uploaded top row first, so texture row v=0 is the image's TOP row:
    // flip v here instead of flipping every image on the CPU.
    v_uv = vec2(in_vert.x, 1.0 - in_vert.y);
}
"""
)

_TEXTURE_FS = """
#version 330
uniform sampler2D tex;
in vec2 v_uv;
out vec4 frag_color;

void main() {
    frag_color = texture(tex, v_uv);
}
"""


def _bytes_view(arr: np.ndarray) -> memoryview:
    """Zero-copy buffer view of a C-contiguous array, typed as arcade's write() expects."""
    return arr.data


def _current_ctx(ctx: ArcadeContext | None) -> ArcadeContext:
    """The given context, or the current arcade window's."""
    if ctx is not None:
        return ctx
    import arcade

    return arcade.get_window().ctx


def _display_available() -> bool:
    """Whether a windowing system looks reachable (only checkable on Linux/BSD)."""
    if sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True  # Windows and macOS always have a window server for a logged-in user.


def make_window(
    width: int,
    height: int,
    title: str,
    *,
    headless: bool | None = None,
    antialiasing: bool = False,
    vsync: bool = False,
    visible: bool = True,
) -> arcade.Window:
    """Create an arcade window of ``width`` x ``height`` pixels, on a display or headless.

    ``headless=None`` follows the ``ARCADE_HEADLESS`` environment variable. Headless mode can
    only be switched on before arcade is first imported (arcade and pyglet read it at import
    time); asking for it later raises ``RuntimeError``. Headless mode also selects the silent
    audio driver unless ``ARCADE_SOUND_BACKENDS`` is already set.

    ``antialiasing`` defaults to off: axis-aligned pixel-art quads stay crisp and pixel reads
    are exact.

    Raises:
        RuntimeError: no display is reachable and headless mode is off, or headless was
            requested after arcade had already been imported without it.
    """
    if importlib.util.find_spec("arcade") is None:
        raise ImportError(NO_ARCADE_MESSAGE)
    want_headless = bool(os.environ.get("ARCADE_HEADLESS")) if headless is None else headless
    arcade_mod = sys.modules.get("arcade")
    if arcade_mod is not None:
        already_headless = bool(getattr(arcade_mod, "headless", False))
        if want_headless and not already_headless:
            raise RuntimeError(
                "headless mode requested, but arcade was already imported without it: "
                "set ARCADE_HEADLESS=1 before anything imports arcade"
            )
        want_headless = already_headless
    elif want_headless:
        # arcade reads these once, at import; the environment is its only switch.
        os.environ["ARCADE_HEADLESS"] = "1"
        os.environ.setdefault("ARCADE_SOUND_BACKENDS", "silent")

    if not want_headless and not _display_available():
        raise RuntimeError(NO_DISPLAY_MESSAGE)

    import arcade

    try:
        return arcade.Window(
            width,
            height,
            title,
            antialiasing=antialiasing,
            vsync=vsync,
            visible=visible,
        )
    except Exception as exc:
        # pyglet raises different NoSuchDisplayException classes per platform module.
        if "NoSuchDisplay" in type(exc).__name__:
            raise RuntimeError(f"{NO_DISPLAY_MESSAGE} ({exc})") from exc
        raise


def world_projection(
    width_px: int,
    height_px: int,
    pixels_per_unit: float,
    center: tuple[float, float] = (0.0, 0.0),
) -> Mat4:
    """Orthographic matrix showing a ``width_px`` x ``height_px`` viewport of the world.

    ``pixels_per_unit`` is the scale (screen pixels per world unit) and ``center`` the world
    point (world units) that lands in the middle of the viewport. Use with an identity view.
    """
    from pyglet.math import Mat4

    half_w = width_px / (2.0 * pixels_per_unit)
    half_h = height_px / (2.0 * pixels_per_unit)
    cx, cy = center
    return Mat4.orthogonal_projection(cx - half_w, cx + half_w, cy - half_h, cy + half_h, -100, 100)


def world_camera(
    pixels_per_unit: float,
    center: tuple[float, float] = (0.0, 0.0),
    window: arcade.Window | None = None,
) -> Camera2D:
    """An ``arcade.camera.Camera2D`` mapping world units to pixels.

    The camera's zoom is the scale (pixels per world unit) and its position the world point
    (world units) at the viewport centre; move it later with ``camera.position = (x, y)``.
    Call ``camera.use()`` before drawing.
    """
    from arcade.camera import Camera2D

    return Camera2D(position=center, zoom=pixels_per_unit, window=window)


class _DrawState:
    """Context manager: blend mode and optional projection for one draw, restored after.

    arcade leaves GL_BLEND off until something enables it (its sprite lists do so per
    draw), so each of our draws sets it explicitly instead of inheriting whatever ran last.
    """

    def __init__(self, ctx: ArcadeContext, projection: Mat4 | None, blend: bool) -> None:
        self._ctx = ctx
        self._projection = projection
        self._blend = blend
        self._saved_matrices: tuple[Mat4, Mat4] | None = None
        self._saved_blend: tuple[bool, Any] = (False, None)

    def __enter__(self) -> None:
        ctx = self._ctx
        self._saved_blend = (ctx.is_enabled(ctx.BLEND), ctx.blend_func)
        if self._blend:
            ctx.enable(ctx.BLEND)
            ctx.blend_func = ctx.BLEND_DEFAULT  # straight (non-premultiplied) alpha
        else:
            ctx.disable(ctx.BLEND)
        if self._projection is not None:
            from pyglet.math import Mat4

            self._saved_matrices = (ctx.projection_matrix, ctx.view_matrix)
            ctx.projection_matrix = self._projection
            ctx.view_matrix = Mat4()

    def __exit__(self, *exc: object) -> None:
        ctx = self._ctx
        was_enabled, func = self._saved_blend
        if was_enabled:
            ctx.enable(ctx.BLEND)
        else:
            ctx.disable(ctx.BLEND)
        ctx.blend_func = func
        if self._saved_matrices is not None:
            ctx.projection_matrix, ctx.view_matrix = self._saved_matrices
            self._saved_matrices = None


class QuadBatch:
    """Axis-aligned textured rectangles drawn with ONE instanced draw call.

    Per-instance GPU buffers hold the centre (x, y: float32 world units), the size
    (w, h: float32 world units), the colour (rgba: uint8, normalised by GL), the texel
    rectangle of the picture (left, top, width, height in texture pixels, row 0 = the
    image's top) and the repeat count (pictures across x and y; a negative x mirrors). The
    numpy inputs are copied in bulk into reusable staging arrays and then into the GPU
    buffers, which grow (doubling, re-allocated in place) when a frame has more quads than
    capacity.

    The texture is one image (an atlas) set with :meth:`set_texture`; the default is one
    white texel, so without ``uv`` every quad is its flat colour. Texture times colour is
    alpha-blended by default (``draw(blend=False)`` writes it unblended); fully transparent
    texels are not drawn.

    Example::

        batch = QuadBatch(window.ctx)
        batch.update(xs, ys, 1.0, 1.0, rgba)          # world units, rgba (N, 4) uint8
        world_camera(32.0, center=(10.0, 5.0)).use()  # 32 px per world unit
        batch.draw()
    """

    _MIN_CAPACITY = 64

    def __init__(self, ctx: ArcadeContext | None = None, capacity: int = 1024) -> None:
        """Allocate GPU buffers for ``capacity`` quads in ``ctx`` (default: current window)."""
        from arcade.gl import BufferDescription

        self._ctx = _current_ctx(ctx)
        self._capacity = max(int(capacity), self._MIN_CAPACITY)
        self._count = 0
        self._program = self._ctx.program(vertex_shader=_QUAD_VS, fragment_shader=_QUAD_FS)

        # Triangle strip of a unit square centred on the origin: scaled by in_size per quad.
        corners = np.array([-0.5, -0.5, 0.5, -0.5, -0.5, 0.5, 0.5, 0.5], dtype=np.float32)
        self._corner_buf = self._ctx.buffer(data=_bytes_view(corners))
        self._pos = np.zeros((self._capacity, 2), dtype=np.float32)
        self._size = np.zeros((self._capacity, 2), dtype=np.float32)
        self._color = np.zeros((self._capacity, 4), dtype=np.uint8)
        self._uv = np.zeros((self._capacity, 4), dtype=np.float32)
        self._repeat = np.ones((self._capacity, 2), dtype=np.float32)
        self._pos_buf = self._ctx.buffer(reserve=self._pos.nbytes, usage="stream")
        self._size_buf = self._ctx.buffer(reserve=self._size.nbytes, usage="stream")
        self._color_buf = self._ctx.buffer(reserve=self._color.nbytes, usage="stream")
        self._uv_buf = self._ctx.buffer(reserve=self._uv.nbytes, usage="stream")
        self._repeat_buf = self._ctx.buffer(reserve=self._repeat.nbytes, usage="stream")
        self._geometry = self._ctx.geometry(
            [
                BufferDescription(self._corner_buf, "2f", ["in_vert"]),
                BufferDescription(self._pos_buf, "2f", ["in_pos"], instanced=True),
                BufferDescription(self._size_buf, "2f", ["in_size"], instanced=True),
                BufferDescription(self._color_buf, "4f1", ["in_color"], instanced=True),
                BufferDescription(self._uv_buf, "4f", ["in_uv"], instanced=True),
                BufferDescription(self._repeat_buf, "2f", ["in_repeat"], instanced=True),
            ],
            mode=self._ctx.TRIANGLE_STRIP,
        )
        self._texture: Any = None
        self.white_uv: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)
        self.set_texture(np.full((1, 1, 4), 255, np.uint8))

    def set_texture(self, image: PILImage.Image | np.ndarray,
                    white: Sequence[float] = (0.0, 0.0, 1.0, 1.0), *,
                    smooth: bool = True) -> None:
        """Use ``image`` (an atlas, row 0 = top) as the texture of every quad.

        ``white``: a texel rectangle (left, top, width, height) of opaque white in it, used
        for quads given no ``uv`` (flat colours). ``smooth``: linear filtering (pictures
        drawn smaller or larger than their pixels stay smooth); off: nearest texel.
        """
        rgba = _image_to_rgba(image)
        h, w = rgba.shape[:2]
        limit = int(self._ctx.info.MAX_TEXTURE_SIZE)
        if w > limit or h > limit:
            raise ValueError(f"texture {w}x{h} exceeds the GPU's max texture size {limit}")
        if self._texture is not None:
            self._texture.delete()
        filt = self._ctx.LINEAR if smooth else self._ctx.NEAREST
        self._texture = self._ctx.texture((w, h), components=4, data=rgba.tobytes(),
                                          filter=(filt, filt), wrap_x=self._ctx.CLAMP_TO_EDGE,
                                          wrap_y=self._ctx.CLAMP_TO_EDGE)
        left, top, width, height = (float(v) for v in white)
        self.white_uv = (left, top, width, height)

    @property
    def texture_size(self) -> tuple[int, int]:
        """(width, height) of the current texture in pixels."""
        return int(self._texture.width), int(self._texture.height)

    def __len__(self) -> int:
        """Number of quads the next :meth:`draw` will draw."""
        return self._count

    @property
    def capacity(self) -> int:
        """Quads the GPU buffers hold before they must grow."""
        return self._capacity

    def _grow(self, count: int) -> None:
        """Make room for ``count`` quads; GPU contents are rewritten by the caller."""
        new_cap = max(count, 2 * self._capacity)
        self._pos = np.zeros((new_cap, 2), dtype=np.float32)
        self._size = np.zeros((new_cap, 2), dtype=np.float32)
        self._color = np.zeros((new_cap, 4), dtype=np.uint8)
        self._uv = np.zeros((new_cap, 4), dtype=np.float32)
        self._repeat = np.ones((new_cap, 2), dtype=np.float32)
        # orphan() re-specifies the storage under the same GL name, so the cached VAO
        # stays valid and in-flight draws keep reading the old storage.
        self._pos_buf.orphan(size=self._pos.nbytes)
        self._size_buf.orphan(size=self._size.nbytes)
        self._color_buf.orphan(size=self._color.nbytes)
        self._uv_buf.orphan(size=self._uv.nbytes)
        self._repeat_buf.orphan(size=self._repeat.nbytes)
        self._capacity = new_cap

    def update(
        self,
        x: ArrayLike,
        y: ArrayLike,
        w: ArrayLike,
        h: ArrayLike,
        rgba: ArrayLike,
        uv: ArrayLike | None = None,
        repeat: ArrayLike | None = None,
    ) -> None:
        """Replace the batch's quads.

        Args:
            x, y: quad centres, world units, shape (N,).
            w, h: quad sizes, world units, shape (N,) or scalars (broadcast).
            rgba: colours, uint8 0..255, shape (N, 4) or (4,) (broadcast); they multiply
                the texture.
            uv: texel rectangles (left, top, width, height in texture pixels, row 0 = top),
                shape (N, 4) or (4,); None: the texture's white texels (flat colours).
            repeat: pictures across each quad (x, y), shape (N, 2) or (2,); a negative x
                mirrors left-right; None: one picture.
        """
        xs = np.asarray(x)
        count = int(xs.shape[0]) if xs.ndim else 1
        if count > self._capacity:
            self._grow(count)
        self._count = count
        if count == 0:
            return
        # Broadcasting assignment into the staging arrays does dtype conversion, accepts
        # strided/read-only views (e.g. structured ECS columns) and never allocates.
        self._pos[:count, 0] = xs
        self._pos[:count, 1] = y
        self._size[:count, 0] = w
        self._size[:count, 1] = h
        self._color[:count] = rgba
        self._uv[:count] = self.white_uv if uv is None else uv
        self._repeat[:count] = 1.0 if repeat is None else repeat
        self._pos_buf.write(_bytes_view(self._pos[:count]))
        self._size_buf.write(_bytes_view(self._size[:count]))
        self._color_buf.write(_bytes_view(self._color[:count]))
        self._uv_buf.write(_bytes_view(self._uv[:count]))
        self._repeat_buf.write(_bytes_view(self._repeat[:count]))

    def draw(self, *, projection: Mat4 | None = None, blend: bool = True) -> None:
        """Draw the quads from the last :meth:`update` in one instanced draw call.

        ``projection`` (e.g. from :func:`world_projection`) overrides the current camera for
        this call only; by default the active arcade camera's matrices are used. ``blend``
        alpha-blends (straight alpha) over what is already drawn; off, rgba is written as is.
        """
        if self._count == 0:
            return
        self._texture.use(0)
        self._program["tex"] = 0
        with _DrawState(self._ctx, projection, blend):
            self._geometry.render(self._program, instances=self._count)

    def release(self) -> None:
        """Free the GPU buffers and the texture now instead of waiting for garbage
        collection."""
        for buf in (self._corner_buf, self._pos_buf, self._size_buf, self._color_buf,
                    self._uv_buf, self._repeat_buf):
            buf.delete()
        self._texture.delete()
        self._count = 0


def _image_to_rgba(image: PILImage.Image | np.ndarray) -> np.ndarray:
    """(H, W, 4) uint8 C-contiguous copy of a PIL image or (H, W[, 1|3|4]) array; row 0 = top."""
    if isinstance(image, np.ndarray):
        arr = image
    else:
        arr = np.asarray(image.convert("RGBA"))
    if arr.dtype != np.uint8:
        raise ValueError(f"image must be uint8, got {arr.dtype}")
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] not in (1, 3, 4):
        raise ValueError(f"image must have shape (H, W), (H, W, 3) or (H, W, 4), got {arr.shape}")
    if arr.shape[2] == 1:
        arr = np.concatenate([np.repeat(arr, 3, axis=2), np.full_like(arr, 255)], axis=2)
    elif arr.shape[2] == 3:
        arr = np.concatenate([arr, np.full_like(arr[:, :, :1], 255)], axis=2)
    return np.ascontiguousarray(arr)


class TextureLayer:
    """An RGBA image stretched over a world rectangle (a level's background/visual layer).

    The image's top row appears at the top (``bottom + height``) of the rectangle. Sampling
    is nearest-neighbour by default so pixel-art level images stay sharp.

    Example::

        layer = TextureLayer(Image.open("level_bg.png"), left=0, bottom=0, width=64, height=32)
        layer.draw()   # under the current camera
    """

    def __init__(
        self,
        image: PILImage.Image | np.ndarray,
        left: float,
        bottom: float,
        width: float,
        height: float,
        ctx: ArcadeContext | None = None,
        *,
        smooth: bool = False,
    ) -> None:
        """Upload ``image`` and place it over the world rectangle (all in world units)."""
        from arcade.gl import BufferDescription

        self._ctx = _current_ctx(ctx)
        self._smooth = smooth
        self._program = self._ctx.program(vertex_shader=_TEXTURE_VS, fragment_shader=_TEXTURE_FS)
        corners = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0], dtype=np.float32)
        self._corner_buf = self._ctx.buffer(data=_bytes_view(corners))
        self._geometry = self._ctx.geometry(
            [BufferDescription(self._corner_buf, "2f", ["in_vert"])],
            mode=self._ctx.TRIANGLE_STRIP,
        )
        self._texture: Any = None
        self.rect: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)
        self.set_rect(left, bottom, width, height)
        self.set_image(image)

    @property
    def size_px(self) -> tuple[int, int]:
        """(width, height) of the uploaded image in pixels."""
        return (int(self._texture.width), int(self._texture.height))

    def set_rect(self, left: float, bottom: float, width: float, height: float) -> None:
        """Move/resize the covered world rectangle (world units)."""
        self.rect = (float(left), float(bottom), float(left + width), float(bottom + height))

    def set_image(self, image: PILImage.Image | np.ndarray) -> None:
        """Replace the image; reuses the GPU texture when the size is unchanged."""
        rgba = _image_to_rgba(image)
        h, w = rgba.shape[:2]
        limit = int(self._ctx.info.MAX_TEXTURE_SIZE)
        if w > limit or h > limit:
            raise ValueError(f"image {w}x{h} exceeds the GPU's max texture size {limit}")
        if self._texture is not None and (self._texture.width, self._texture.height) == (w, h):
            self._texture.write(rgba.tobytes())
            return
        if self._texture is not None:
            self._texture.delete()
        filt = self._ctx.LINEAR if self._smooth else self._ctx.NEAREST
        self._texture = self._ctx.texture(
            (w, h),
            components=4,
            # bytes, not the array: arcade tests `if data:` (ambiguous for numpy) and wraps
            # buffers with ctypes from_buffer (fails on read-only arrays such as PIL views).
            data=rgba.tobytes(),
            filter=(filt, filt),
            # Clamp so edge texels don't bleed in from the opposite side.
            wrap_x=self._ctx.CLAMP_TO_EDGE,
            wrap_y=self._ctx.CLAMP_TO_EDGE,
        )

    def draw(self, *, projection: Mat4 | None = None, blend: bool = True) -> None:
        """Draw the layer in one draw call; arguments as in :meth:`QuadBatch.draw`."""
        self._texture.use(0)
        self._program["tex"] = 0
        self._program["rect"] = self.rect
        with _DrawState(self._ctx, projection, blend):
            self._geometry.render(self._program)

    def release(self) -> None:
        """Free the GPU texture and buffer now."""
        self._texture.delete()
        self._corner_buf.delete()


def read_pixels(
    source: arcade.Window | ArcadeContext | Framebuffer | None = None,
) -> np.ndarray:
    """Read a framebuffer into an (H, W, 4) uint8 RGBA array, row 0 = TOP (image convention).

    ``source`` is a window or context (reads its screen framebuffer), a framebuffer, or None
    for the current window. Reading forces the GPU to finish, so it also syncs timings.
    """
    fb: Any
    if source is None:
        fb = _current_ctx(None).screen
    elif hasattr(source, "read") and hasattr(source, "viewport"):
        fb = source  # a Framebuffer
    elif hasattr(source, "ctx"):
        fb = source.ctx.screen  # a Window
    else:
        fb = source.screen  # a Context
    width, height = fb.size
    data = fb.read(viewport=(0, 0, width, height), components=4)
    # GL rows start at the bottom of the screen; flip to the image convention.
    return np.frombuffer(data, dtype=np.uint8).reshape(height, width, 4)[::-1].copy()


def save_screenshot(
    path: str | os.PathLike[str],
    source: arcade.Window | ArcadeContext | Framebuffer | None = None,
) -> Path:
    """Save the framebuffer (see :func:`read_pixels`) as a PNG at ``path``; returns the path."""
    from PIL import Image

    out = Path(path)
    Image.fromarray(read_pixels(source)).save(out, format="PNG")
    return out
