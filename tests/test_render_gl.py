"""Pixel-level tests of systems.render_gl on a headless arcade window (EGL + Mesa llvmpipe)."""

from __future__ import annotations

import os

# Must precede the first arcade import anywhere in this process: arcade and pyglet choose the
# headless EGL backend (and the audio driver) at import time.
os.environ["ARCADE_HEADLESS"] = "1"
os.environ.setdefault("ARCADE_SOUND_BACKENDS", "silent")

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from ecs_engine.systems.render_gl import (
    NO_DISPLAY_MESSAGE,
    QuadBatch,
    TextureLayer,
    read_pixels,
    save_screenshot,
    world_camera,
    world_projection,
)
from tests.gl import window_or_skip

WIDTH, HEIGHT = 320, 240
CLEAR = (10, 20, 30, 255)
PPU = 10.0  # pixels per world unit used by most tests
REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def window() -> Iterator[Any]:
    """One headless window for the module; skip only if no GL context can be made at all.

    Set ``ECS_REQUIRE_GL=1`` (CI does) to fail instead of skipping, so a missing system
    package cannot turn these tests silently into skips.
    """
    win = window_or_skip(WIDTH, HEIGHT, "test_render_gl")
    yield win
    win.close()


@pytest.fixture
def ctx(window: Any) -> Any:
    """The window's context with a cleared screen and the default world camera active."""
    window.ctx.screen.use()
    world_camera(PPU, (0.0, 0.0), window=window).use()
    window.ctx.screen.clear(color=CLEAR)
    return window.ctx


def pixel_of(
    wx: float, wy: float, center: tuple[float, float] = (0.0, 0.0), ppu: float = PPU
) -> tuple[int, int]:
    """(row, col) in a top-row-first image of the pixel containing world point (wx, wy)."""
    col = int(np.floor((wx - center[0]) * ppu + WIDTH / 2))
    row_from_bottom = int(np.floor((wy - center[1]) * ppu + HEIGHT / 2))
    return HEIGHT - 1 - row_from_bottom, col


def non_clear_mask(img: np.ndarray) -> np.ndarray:
    """Boolean (H, W) mask of pixels that differ from the clear colour."""
    return np.any(img != np.array(CLEAR, dtype=np.uint8), axis=2)


def count_renders(monkeypatch: pytest.MonkeyPatch, batch: QuadBatch) -> list[int]:
    """Patch the batch's Geometry class so every render call records its instance count."""
    calls: list[int] = []
    geometry_cls = type(batch._geometry)
    original: Callable[..., None] = geometry_cls.render

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(int(kwargs.get("instances", 1)))
        original(self, *args, **kwargs)

    monkeypatch.setattr(geometry_cls, "render", counting)
    return calls


def test_context_is_headless_gl33(window: Any) -> None:
    import arcade

    assert arcade.headless
    assert window.ctx.gl_version >= (3, 3)
    assert tuple(window.ctx.screen.size) == (WIDTH, HEIGHT)


def test_quads_have_their_colour_at_expected_pixels(ctx: Any) -> None:
    # Centres and sizes chosen so quad edges fall on pixel boundaries at 10 px/unit.
    x = np.array([0.0, -8.0, 6.0])
    y = np.array([0.0, 5.0, -4.0])
    w = np.array([2.0, 1.0, 3.0])
    h = np.array([2.0, 3.0, 1.0])
    rgba = np.array([[255, 0, 0, 255], [0, 255, 0, 255], [0, 0, 255, 255]], dtype=np.uint8)
    batch = QuadBatch(ctx)
    batch.update(x, y, w, h, rgba)
    batch.draw()
    img = read_pixels(ctx)

    assert img.shape == (HEIGHT, WIDTH, 4)
    assert img.dtype == np.uint8
    eps = 0.05  # stay just inside the edges: the pixel containing a point near a corner
    for i in range(3):
        corners = [
            (x[i] - w[i] / 2 + eps, y[i] - h[i] / 2 + eps),
            (x[i] + w[i] / 2 - eps, y[i] + h[i] / 2 - eps),
            (x[i] - w[i] / 2 + eps, y[i] + h[i] / 2 - eps),
            (x[i], y[i]),
        ]
        for wx, wy in corners:
            assert tuple(img[pixel_of(wx, wy)]) == tuple(rgba[i]), (i, wx, wy)
        # Just outside each quad is still clear colour.
        assert tuple(img[pixel_of(x[i] + w[i] / 2 + eps, y[i])]) == CLEAR
        assert tuple(img[pixel_of(x[i], y[i] + h[i] / 2 + eps)]) == CLEAR
    assert tuple(img[pixel_of(12.0, 9.0)]) == CLEAR
    # Exact coverage: each quad covers w*h*PPU^2 pixels, nothing else is touched.
    assert int(non_clear_mask(img).sum()) == int(round(float(np.sum(w * h)) * PPU * PPU))


def test_ten_thousand_quads_in_one_draw_call(ctx: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # 125 x 80 grid of 0.2-unit quads, 2 px each at 10 px/unit, tiling the whole screen.
    cols, rows = 125, 80
    n = cols * rows
    assert n == 10_000
    idx = np.arange(n)
    gx, gy = idx % cols, idx // cols
    x = -WIDTH / 2 / PPU + (gx + 0.5) * 0.25
    y = -HEIGHT / 2 / PPU + (gy + 0.5) * 0.25
    rgba = np.stack(
        [idx % 251, (idx // 251) % 256, (idx * 7) % 256, np.full(n, 255)], axis=1
    ).astype(np.uint8)
    batch = QuadBatch(ctx, capacity=16)
    calls = count_renders(monkeypatch, batch)
    batch.update(x, y, 0.2, 0.2, rgba)
    batch.draw()
    img = read_pixels(ctx)

    assert calls == [n]
    assert len(batch) == n
    r = HEIGHT - 1 - ((y + HEIGHT / 2 / PPU) * PPU).astype(int)
    c = ((x + WIDTH / 2 / PPU) * PPU).astype(int)
    np.testing.assert_array_equal(img[r, c], rgba)
    # 0.05-unit gaps between neighbours stay clear: quads are exactly 2x2 px.
    assert int(non_clear_mask(img).sum()) == n * 4


def test_buffer_growth_leaves_no_stale_quads(ctx: Any) -> None:
    rng = np.random.default_rng(7)
    batch = QuadBatch(ctx, capacity=64)
    red = np.array([255, 0, 0, 255], dtype=np.uint8)

    def frame(n: int) -> np.ndarray:
        ctx.screen.clear(color=CLEAR)
        # Integer centres + 1-unit size: each quad covers exactly 10x10 px, no overlap
        # because the grid cells are distinct.
        cells = rng.choice(32 * 24, size=n, replace=n > 32 * 24)
        x = (cells % 32) - 15.5
        y = (cells // 32) - 11.5
        batch.update(x, y, 0.8, 0.8, red)
        batch.draw()
        return read_pixels(ctx)

    frame(10)
    assert batch.capacity == 64
    img = frame(10_000)
    assert batch.capacity >= 10_000
    assert non_clear_mask(img).mean() > 0.5
    img = frame(5)
    assert len(batch) == 5
    assert int(non_clear_mask(img).sum()) == 5 * 8 * 8

    batch.update(np.zeros(0), np.zeros(0), 1.0, 1.0, red)
    ctx.screen.clear(color=CLEAR)
    batch.draw()
    assert not non_clear_mask(read_pixels(ctx)).any()


def test_camera_offset_moves_quads_by_expected_pixels(window: Any, ctx: Any) -> None:
    batch = QuadBatch(ctx)
    batch.update([1.0], [2.0], [2.0], [1.0], [0, 255, 255, 255])
    batch.draw()
    before = non_clear_mask(read_pixels(ctx))

    center = (3.0, -1.5)  # camera moves right 3 units, down 1.5 units
    world_camera(PPU, center, window=window).use()
    ctx.screen.clear(color=CLEAR)
    batch.draw()
    after = non_clear_mask(read_pixels(ctx))

    dx_px = int(-center[0] * PPU)  # the world slides left by 30 px
    drow = int(center[1] * PPU)  # ... and up the screen, i.e. to smaller rows, by 15 px
    assert before.sum() == after.sum() == 2 * 1 * PPU * PPU
    np.testing.assert_array_equal(np.roll(before, (drow, dx_px), axis=(0, 1)), after)
    assert after[pixel_of(1.0, 2.0, center=center)]

    # An explicit projection gives the same picture as the camera.
    ctx.screen.clear(color=CLEAR)
    batch.draw(projection=world_projection(WIDTH, HEIGHT, PPU, center))
    np.testing.assert_array_equal(non_clear_mask(read_pixels(ctx)), after)


def test_zoom_scales_pixels_per_unit(window: Any, ctx: Any) -> None:
    batch = QuadBatch(ctx)
    batch.update([0.0], [0.0], [1.0], [1.0], [255, 255, 0, 255])
    world_camera(32.0, window=window).use()
    batch.draw()
    assert int(non_clear_mask(read_pixels(ctx)).sum()) == 32 * 32


def test_update_accepts_readonly_strided_columns_and_broadcasts(ctx: Any) -> None:
    # An ECS-style structured column: strided, read-only, float64 -> converted in bulk.
    table = np.zeros(3, dtype=[("x", "f8"), ("y", "f8"), ("hp", "i4")])
    table["x"] = [-4.0, 0.0, 4.0]
    table["y"] = [1.0, 1.0, 1.0]
    table.flags.writeable = False
    batch = QuadBatch(ctx)
    batch.update(table["x"], table["y"], 1.0, 2.0, (200, 100, 50, 255))
    batch.draw()
    img = read_pixels(ctx)
    for wx in (-4.0, 0.0, 4.0):
        assert tuple(img[pixel_of(wx, 1.5)]) == (200, 100, 50, 255)
    assert int(non_clear_mask(img).sum()) == 3 * 10 * 20


def test_alpha_blends_over_background(ctx: Any) -> None:
    batch = QuadBatch(ctx)
    batch.update([0.0], [0.0], [2.0], [2.0], [255, 255, 255, 128])
    batch.draw()
    r, g, b, _ = (int(v) for v in read_pixels(ctx)[pixel_of(0.0, 0.0)])
    a = 128 / 255
    for got, bg in ((r, CLEAR[0]), (g, CLEAR[1]), (b, CLEAR[2])):
        assert abs(got - (255 * a + bg * (1 - a))) <= 1.5


def test_texture_layer_orientation_and_placement(ctx: Any) -> None:
    # 4 wide x 2 high: top row red, green, blue, white; bottom row yellow, cyan, magenta, grey.
    top = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)]
    bottom = [(255, 255, 0), (0, 255, 255), (255, 0, 255), (128, 128, 128)]
    arr = np.zeros((2, 4, 4), dtype=np.uint8)
    arr[0, :, :3] = top
    arr[1, :, :3] = bottom
    arr[:, :, 3] = 255
    left, bottom_y, width, height = -3.0, -1.0, 8.0, 4.0  # 2x2 world units per texel
    layer = TextureLayer(Image.fromarray(arr), left, bottom_y, width, height, ctx)
    assert layer.size_px == (4, 2)
    layer.draw()
    img = read_pixels(ctx)

    for row in range(2):
        for col in range(4):
            wx = left + (col + 0.5) * 2.0
            wy = bottom_y + height - (row + 0.5) * 2.0  # image row 0 is the rect's top
            assert tuple(img[pixel_of(wx, wy)]) == (*arr[row, col, :3], 255), (row, col)
    assert tuple(img[pixel_of(left - 0.05, 0.0)]) == CLEAR
    assert tuple(img[pixel_of(0.0, bottom_y + height + 0.05)]) == CLEAR
    assert int(non_clear_mask(img).sum()) == int(width * height * PPU * PPU)

    # Same-size numpy RGB image reuses the texture; the new content shows.
    layer.set_image(np.full((2, 4, 3), 77, dtype=np.uint8))
    ctx.screen.clear(color=CLEAR)
    layer.draw()
    assert tuple(read_pixels(ctx)[pixel_of(0.0, 0.0)]) == (77, 77, 77, 255)
    layer.release()


def _quadrant_atlas() -> np.ndarray:
    """A 6x4 atlas: a 2x2 picture at texels (1, 1)..(3, 3) with red top-left, green
    top-right, blue bottom-left, yellow bottom-right; white at (4, 0)..(6, 2); the rest a
    loud magenta that must never be sampled."""
    atlas = np.zeros((4, 6, 4), np.uint8)
    atlas[...] = (255, 0, 255, 255)
    atlas[1, 1], atlas[1, 2] = (255, 0, 0, 255), (0, 255, 0, 255)
    atlas[2, 1], atlas[2, 2] = (0, 0, 255, 255), (255, 255, 0, 255)
    atlas[0:2, 4:6] = 255
    return atlas


def test_textured_quads_sample_their_texel_rect_repeat_and_mirror(ctx: Any) -> None:
    batch = QuadBatch(ctx)
    batch.set_texture(_quadrant_atlas(), white=(4, 0, 2, 2), smooth=False)
    # Quad 0: the picture once over 4x4 units; quad 1: repeated 3x1 over 6x2 units;
    # quad 2: mirrored; quad 3: no uv, a flat colour (the white texels times its colour).
    x = np.array([-10.0, 2.0, -10.0, 8.0])
    y = np.array([5.0, 5.0, -5.0, -5.0])
    w = np.array([4.0, 6.0, 4.0, 2.0])
    h = np.array([4.0, 2.0, 4.0, 2.0])
    pic = (1.0, 1.0, 2.0, 2.0)
    uv = np.array([pic, pic, pic, batch.white_uv], np.float32)
    repeat = np.array([[1, 1], [3, 1], [-1, 1], [1, 1]], np.float32)
    rgba = np.array([[255] * 4, [255] * 4, [255] * 4, [10, 200, 30, 255]], np.uint8)
    batch.update(x, y, w, h, rgba, uv=uv, repeat=repeat)
    batch.draw()
    img = read_pixels(ctx)
    red, green, blue, yellow = (255, 0, 0, 255), (0, 255, 0, 255), (0, 0, 255, 255), \
        (255, 255, 0, 255)
    # Quad 0: image top-left (red) at the quad's top-left, bottom-right (yellow) ...
    assert tuple(img[pixel_of(-11.0, 6.0)]) == red
    assert tuple(img[pixel_of(-9.0, 6.0)]) == green
    assert tuple(img[pixel_of(-11.0, 4.0)]) == blue
    assert tuple(img[pixel_of(-9.0, 4.0)]) == yellow
    # Quad 1: three copies across x, one across y (each 2 units wide).
    for copy in range(3):
        left = -1.0 + 2.0 * copy
        assert tuple(img[pixel_of(left + 0.5, 5.5)]) == red, copy
        assert tuple(img[pixel_of(left + 1.5, 4.5)]) == yellow, copy
    # Quad 2: mirrored left-right.
    assert tuple(img[pixel_of(-11.0, -4.0)]) == green
    assert tuple(img[pixel_of(-9.0, -4.0)]) == red
    assert tuple(img[pixel_of(-11.0, -6.0)]) == yellow
    # Quad 3: flat colour.
    assert tuple(img[pixel_of(8.0, -5.0)]) == (10, 200, 30, 255)
    assert not (img[..., :3] == (255, 0, 255)).all(axis=2).any(), "sampled outside a rect"
    batch.release()


def test_smooth_sampling_never_bleeds_from_neighbouring_texels(ctx: Any) -> None:
    batch = QuadBatch(ctx)
    batch.set_texture(_quadrant_atlas(), white=(4, 0, 2, 2), smooth=True)
    # Magnified 50x and repeated: linear filtering would pull in magenta at every edge
    # if the sampler were not kept half a texel inside the rectangle.
    batch.update([0.0], [0.0], [20.0], [20.0], [255, 255, 255, 255], uv=(1, 1, 2, 2),
                 repeat=(2, 2))
    batch.draw()
    img = read_pixels(ctx)
    inside = img[pixel_of(-9.9, 9.9)[0]:pixel_of(-9.9, -9.9)[0] + 1,
                 pixel_of(-9.9, 0)[1]:pixel_of(9.9, 0)[1] + 1].reshape(-1, 4).astype(int)
    magenta_like = (inside[:, 0] > 200) & (inside[:, 1] < 60) & (inside[:, 2] > 200)
    assert not magenta_like.any()
    batch.release()


def test_screenshot_png_round_trip(window: Any, ctx: Any, tmp_path: Path) -> None:
    import arcade

    batch = QuadBatch(ctx)
    batch.update([-5.0, 5.0], [5.0, -5.0], 2.0, 2.0, [[255, 0, 0, 255], [0, 0, 255, 255]])
    batch.draw()
    pixels = read_pixels(window)
    path = save_screenshot(tmp_path / "shot.png", window)
    loaded = np.asarray(Image.open(path).convert("RGBA"))
    np.testing.assert_array_equal(loaded, pixels)
    # Red quad is up-left: it appears in the top half of the image, blue in the bottom.
    assert tuple(loaded[pixel_of(-5.0, 5.0)]) == (255, 0, 0, 255)
    assert pixel_of(-5.0, 5.0)[0] < HEIGHT // 2 < pixel_of(5.0, -5.0)[0]
    # arcade's own reader agrees on orientation.
    np.testing.assert_array_equal(np.asarray(arcade.get_image()), pixels)


def test_make_window_without_display_gives_clear_error() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.pop("ARCADE_HEADLESS", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    code = (
        "from systems.render_gl import make_window\n"
        "try:\n"
        "    make_window(64, 48, 'x')\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert f"ERR {NO_DISPLAY_MESSAGE}" in out.stdout, out.stderr


def test_importing_module_does_not_import_arcade() -> None:
    # Lazy arcade import is what lets make_window(headless=True) switch headless mode on.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    code = "import sys, systems.render_gl; print('arcade' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip() == "False", out.stderr
