"""systems.render_world on a headless arcade window: boxes from columns, z order, one
instanced call, camera/zoom/bounds, visual layers, and no stale state after a restore."""

from __future__ import annotations

import os

# Must precede the first arcade import anywhere in this process (see test_render_gl).
os.environ["ARCADE_HEADLESS"] = "1"
os.environ.setdefault("ARCADE_SOUND_BACKENDS", "silent")

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import pytest

from ecs_engine import Snapshot, World
from ecs_engine.components import Collider, Color, Layer, Position, Velocity
from ecs_engine.systems.render_gl import read_pixels
from ecs_engine.systems.render_world import Viewport, WorldRenderer, camera_center
from tests.gl import window_or_skip

WIDTH, HEIGHT = 320, 240
CLEAR = (10, 20, 30, 255)
PPU = 10.0
RED, GREEN, BLUE = (255, 0, 0, 255), (0, 255, 0, 255), (0, 0, 255, 255)


@pytest.fixture(scope="module")
def window() -> Iterator[Any]:
    """One headless window; skip if no GL context at all (fail with ECS_REQUIRE_GL=1)."""
    win = window_or_skip(WIDTH, HEIGHT, "test_render_world")
    yield win
    win.close()


@pytest.fixture
def ctx(window: Any) -> Any:
    window.ctx.screen.use()
    window.ctx.screen.clear(color=CLEAR)
    return window.ctx


def new_world(camera: tuple[float, float] = (0.0, 0.0)) -> World:
    world = World(seed=0)
    world.resources["camera"] = {"x": camera[0], "y": camera[1]}
    return world


def box(world: World, x: float, y: float, w: float, h: float,
        rgba: tuple[int, int, int, int], z: int = 0) -> int:
    return world.spawn(Position(x=x, y=y), Collider(w=w, h=h), Color(rgba=rgba), Layer(z=z))


def draw(ctx: Any, world: World, renderer: WorldRenderer) -> np.ndarray:
    renderer.draw(world)
    return read_pixels(ctx)


def at(img: np.ndarray, world: World, renderer: WorldRenderer, x: float,
       y: float) -> tuple[int, ...]:
    row, col = renderer.viewport(world, (WIDTH, HEIGHT)).to_pixel(x, y)
    return tuple(int(v) for v in img[int(row), int(col)])


def count_renders(monkeypatch: pytest.MonkeyPatch, renderer: WorldRenderer) -> list[int]:
    """Record the instance count of every Geometry.render call."""
    calls: list[int] = []
    geometry_cls = type(renderer._batch._geometry)
    original: Callable[..., None] = geometry_cls.render

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(int(kwargs.get("instances", 1)))
        original(self, *args, **kwargs)

    monkeypatch.setattr(geometry_cls, "render", counting)
    return calls


def test_boxes_have_their_colour_at_projected_pixels(ctx: Any) -> None:
    world = new_world()
    box(world, 0.0, 0.0, 2.0, 2.0, RED)
    box(world, -8.0, 5.0, 1.0, 3.0, GREEN)
    box(world, 6.0, -4.0, 3.0, 1.0, BLUE)
    renderer = WorldRenderer(ctx, pixels_per_unit=PPU, background=CLEAR)
    img = draw(ctx, world, renderer)
    assert renderer.quad_count == 3
    eps = 0.05
    for (x, y, w, h), rgba in (((0, 0, 2, 2), RED), ((-8, 5, 1, 3), GREEN),
                               ((6, -4, 3, 1), BLUE)):
        for wx, wy in ((x - w / 2 + eps, y - h / 2 + eps), (x + w / 2 - eps, y + h / 2 - eps),
                       (x, y)):
            assert at(img, world, renderer, wx, wy) == rgba
        assert at(img, world, renderer, x + w / 2 + eps, y) == CLEAR
    # Exact coverage: w * h * PPU^2 pixels per box, nothing else touched.
    painted = np.any(img != np.array(CLEAR, np.uint8), axis=2)
    assert int(painted.sum()) == int((4 + 3 + 3) * PPU * PPU)


def test_layer_z_decides_overlaps_and_ties_keep_row_order(ctx: Any) -> None:
    world = new_world()
    box(world, 0.0, 0.0, 4.0, 4.0, RED, z=5)  # spawned first but on top
    box(world, 1.0, 1.0, 4.0, 4.0, GREEN, z=1)
    box(world, 6.0, 0.0, 2.0, 2.0, BLUE, z=0)
    box(world, 6.5, 0.0, 2.0, 2.0, GREEN, z=0)  # same z, later row: drawn over the blue
    renderer = WorldRenderer(ctx, pixels_per_unit=PPU, background=CLEAR)
    img = draw(ctx, world, renderer)
    assert at(img, world, renderer, 1.5, 1.5) == RED  # the overlap shows the higher z
    assert at(img, world, renderer, 2.5, 2.5) == GREEN
    assert at(img, world, renderer, 6.8, 0.0) == GREEN
    assert at(img, world, renderer, 5.2, 0.0) == BLUE


def test_ten_thousand_entities_in_one_instanced_call(ctx: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    world = new_world()
    cols, rows = 125, 80
    n = cols * rows
    idx = np.arange(n)
    x = -WIDTH / 2 / PPU + (idx % cols + 0.5) * 0.25
    y = -HEIGHT / 2 / PPU + (idx // cols + 0.5) * 0.25
    rgba = np.stack([idx % 251, (idx // 251) % 256, (idx * 7) % 256, np.full(n, 255)],
                    axis=1).astype(np.uint8)
    z = (idx % 3).astype(np.int8)  # unsorted z: the argsort must not lose any quad
    world.spawn_batch(Position(x=x, y=y), Collider(w=0.2, h=0.2), Color(rgba=rgba),
                      Layer(z=z))
    renderer = WorldRenderer(ctx, pixels_per_unit=PPU, background=CLEAR, capacity=16)
    calls = count_renders(monkeypatch, renderer)
    img = draw(ctx, world, renderer)
    assert calls == [n]
    r, c = renderer.viewport(world, (WIDTH, HEIGHT)).to_pixel(x, y)
    np.testing.assert_array_equal(img[r, c], rgba)


def test_only_entities_with_all_four_components_are_drawn(ctx: Any) -> None:
    world = new_world()
    box(world, 0.0, 0.0, 2.0, 2.0, RED)
    world.spawn(Position(x=5.0, y=0.0), Collider(w=2.0, h=2.0), Color(rgba=GREEN))  # no Layer
    world.spawn(Position(x=-5.0, y=0.0), Collider(w=2.0, h=2.0), Layer(z=0))  # no Color
    renderer = WorldRenderer(ctx, pixels_per_unit=PPU, background=CLEAR)
    img = draw(ctx, world, renderer)
    assert renderer.quad_count == 1
    assert at(img, world, renderer, 5.0, 0.0) == CLEAR
    assert at(img, world, renderer, -5.0, 0.0) == CLEAR


def test_camera_resource_and_zoom_place_the_view(ctx: Any) -> None:
    world = new_world(camera=(20.0, -7.0))
    box(world, 20.0, -7.0, 1.0, 1.0, RED)  # at the camera: the middle of the screen
    box(world, 0.0, 0.0, 1.0, 1.0, GREEN)
    renderer = WorldRenderer(ctx, pixels_per_unit=32.0, background=CLEAR)
    img = draw(ctx, world, renderer)
    painted = np.argwhere(np.all(img == np.array(RED, np.uint8), axis=2))
    assert painted.min(axis=0).tolist() == [HEIGHT // 2 - 16, WIDTH // 2 - 16]
    assert painted.max(axis=0).tolist() == [HEIGHT // 2 + 15, WIDTH // 2 + 15]
    assert not np.all(img == np.array(GREEN, np.uint8), axis=2).any()  # far off screen
    assert renderer.quad_count == 1  # ... so it was not even uploaded
    # Moving the camera resource moves the picture; nothing is cached.
    world.resources["camera"] = {"x": 0.0, "y": 0.0}
    img = draw(ctx, world, renderer)
    assert at(img, world, renderer, 0.0, 0.0) == GREEN
    assert int(np.all(img == np.array(GREEN, np.uint8), axis=2).sum()) == 32 * 32
    assert renderer.quad_count == 1
    # A box straddling the edge is kept: its visible part is drawn.
    box(world, WIDTH / 2 / 32.0, 0.0, 1.0, 1.0, BLUE)
    img = draw(ctx, world, renderer)
    assert renderer.quad_count == 2
    assert tuple(img[HEIGHT // 2, WIDTH - 1]) == BLUE


def test_bounds_keep_the_view_inside_the_level() -> None:
    bounds = (0.0, 0.0, 100.0, 40.0)
    view = Viewport.follow((1.0, 1.0), (WIDTH, HEIGHT), PPU, bounds)
    left, bottom, right, top = view.visible_rect()
    assert (left, bottom) == (0.0, 0.0) and right == WIDTH / PPU and top == HEIGHT / PPU
    view = Viewport.follow((99.0, 39.0), (WIDTH, HEIGHT), PPU, bounds)
    assert view.visible_rect()[2:] == (100.0, 40.0)
    # A level narrower than the view is centred.
    view = Viewport.follow((3.0, 20.0), (WIDTH, HEIGHT), PPU, (0.0, 0.0, 10.0, 40.0))
    assert view.center_x == 5.0
    # Snapped to whole pixels, and pixel <-> world round trips.
    view = Viewport.follow((1.234, 5.678), (WIDTH, HEIGHT), PPU)
    assert (view.center_x, view.center_y) == (1.2, 5.7)
    rows, cols = np.array([0, 17, HEIGHT - 1]), np.array([0, 200, WIDTH - 1])
    x, y = view.to_world(rows, cols)
    r2, c2 = view.to_pixel(x, y)
    np.testing.assert_array_equal(r2, rows)
    np.testing.assert_array_equal(c2, cols)


class Visual(NamedTuple):
    image: np.ndarray
    rect: tuple[float, float, float, float]
    z: int


def test_visual_layers_draw_behind_boxes_and_background_shows_elsewhere(ctx: Any) -> None:
    world = new_world()
    box(world, 0.0, 0.0, 2.0, 2.0, RED, z=-100)  # even a very low z draws over visuals
    far = np.zeros((2, 2, 4), np.uint8)
    far[..., :] = (200, 200, 0, 255)
    near = np.zeros((1, 2, 4), np.uint8)
    near[0, 0] = (0, 200, 200, 255)  # left half opaque, right half transparent
    renderer = WorldRenderer(ctx, pixels_per_unit=PPU, background=CLEAR, visuals=[
        Visual(near, (-4.0, -4.0, 8.0, 8.0), 0),  # listed first but z is higher
        Visual(far, (-4.0, -4.0, 8.0, 8.0), -1),
    ])
    assert renderer.layer_count == 2
    img = draw(ctx, world, renderer)
    assert at(img, world, renderer, 0.5, 0.5) == RED
    assert at(img, world, renderer, -3.0, 3.0) == (0, 200, 200, 255)  # near over far
    assert at(img, world, renderer, 3.0, 3.0) == (200, 200, 0, 255)  # far through near
    assert at(img, world, renderer, 6.0, 6.0) == CLEAR  # outside every layer
    renderer.set_visuals(())
    img = draw(ctx, world, renderer)
    assert at(img, world, renderer, 3.0, 3.0) == CLEAR


def test_drawing_does_not_touch_the_stores(ctx: Any) -> None:
    world = new_world()
    box(world, 0.0, 0.0, 2.0, 2.0, RED)
    renderer = WorldRenderer(ctx, pixels_per_unit=PPU, background=CLEAR)
    before = {t: (world.store(t).data_version, world.store(t).layout_version)
              for t in world.component_types}
    draw(ctx, world, renderer)
    after = {t: (world.store(t).data_version, world.store(t).layout_version)
             for t in world.component_types}
    # Read-only columns: snapshots after a frame still share every store.
    assert before == after


def test_picture_after_restore_equals_picture_at_snapshot(ctx: Any) -> None:
    world = new_world(camera=(2.0, 1.0))
    rng = np.random.default_rng(3)
    n = 200
    keys = world.spawn_batch(
        Position(x=rng.uniform(-10, 14, n), y=rng.uniform(-8, 10, n)),
        Collider(w=rng.uniform(0.3, 2.0, n), h=rng.uniform(0.3, 2.0, n)),
        Color(rgba=rng.integers(0, 256, (n, 4), dtype=np.uint8)),
        Layer(z=rng.integers(-2, 3, n).astype(np.int8)))
    world.add_batch(keys[:50], Velocity(x=1.0, y=0.0))
    renderer = WorldRenderer(ctx, pixels_per_unit=PPU, background=CLEAR)
    snap = world.snapshot()
    saved_img = draw(ctx, world, renderer)

    # Change everything a restore must undo: values, row order, slot reuse, camera.
    world.despawn_batch(keys[::3])
    box(world, 0.0, 0.0, 30.0, 30.0, GREEN, z=1)  # reuses a freed slot
    world.spawn_batch(Position(x=rng.uniform(-10, 10, 40), y=0.0), Collider(), Color(rgba=BLUE),
                      Layer(z=2), count=40)
    with world.query(Position) as q:
        q[Position]["x"] += 1.5
    world.resources["camera"] = {"x": -3.0, "y": 4.0}
    changed = draw(ctx, world, renderer)
    assert not np.array_equal(changed, saved_img)

    world.restore(snap)
    np.testing.assert_array_equal(draw(ctx, world, renderer), saved_img)
    # Through the save format too (a foreign snapshot: new versions, rebuilt stores).
    other = new_world()
    other.register(Position, Collider, Color, Layer, Velocity)
    other.restore(Snapshot.from_bytes(snap.to_bytes()), source="file")
    assert camera_center(other) == (2.0, 1.0)
    np.testing.assert_array_equal(draw(ctx, other, renderer), saved_img)


def _two_tone(top: tuple[int, int, int], bottom: tuple[int, int, int]) -> np.ndarray:
    img = np.zeros((8, 8, 4), np.uint8)
    img[:4, :, :3], img[4:, :, :3] = top, bottom
    img[..., 3] = 255
    return img


def test_sprites_draw_atlas_pictures_tiles_repeat_flips_blink_in_one_call(
        ctx: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from ecs_engine.components import Sprite
    from ecs_engine.systems.sprite_atlas import SheetArt, SpriteAtlas

    half = np.zeros((8, 8, 4), np.uint8)
    half[:, :4, :3], half[:, 4:, :3] = (250, 0, 0), (0, 0, 250)  # left red, right blue
    half[..., 3] = 255
    atlas = SpriteAtlas.build({"tile": SheetArt(_two_tone((0, 200, 0), (120, 60, 0)),
                                                tiled=True, crop=False),
                               "hero": SheetArt(half, crop=False)},
                              ("tile", "hero"), pixels_per_unit=8)
    world = new_world()
    # One 6x1 rectangle entity of tiles, a 2x2 hero, a mirrored hero, a blinking hero, and
    # a flat box without a Sprite.
    world.spawn(Position(x=0.0, y=-5.5), Collider(w=6, h=1), Sprite(sheet=0), Layer(z=0),
                Color(rgba=(1, 2, 3, 255)))
    world.spawn(Position(x=-8.0, y=4.0), Collider(w=2, h=2), Sprite(sheet=1), Layer(z=1))
    world.spawn(Position(x=-3.0, y=4.0), Collider(w=2, h=2), Sprite(sheet=1, flip=True),
                Layer(z=1))
    world.spawn(Position(x=3.0, y=4.0), Collider(w=2, h=2), Sprite(sheet=1, blink=True),
                Layer(z=1))
    box(world, 8.0, 4.0, 2.0, 2.0, GREEN)
    renderer = WorldRenderer(ctx, pixels_per_unit=PPU, background=CLEAR, atlas=atlas)
    calls = count_renders(monkeypatch, renderer)
    img = draw(ctx, world, renderer)
    assert calls == [5]  # every entity, tiles included, in one instanced call
    for i in range(6):  # six tiles, each green over brown
        x = -3.0 + i + 0.5
        top, bottom = at(img, world, renderer, x, -5.25), at(img, world, renderer, x, -5.75)
        assert top[:3] == (0, 200, 0) and bottom[:3] == (120, 60, 0), i
    assert at(img, world, renderer, -8.5, 4.0)[:3] == (250, 0, 0)
    assert at(img, world, renderer, -7.5, 4.0)[:3] == (0, 0, 250)
    assert at(img, world, renderer, -3.5, 4.0)[:3] == (0, 0, 250)  # mirrored
    assert at(img, world, renderer, -2.5, 4.0)[:3] == (250, 0, 0)
    faded = at(img, world, renderer, 2.5, 4.0)
    assert CLEAR[0] < faded[0] < 200  # blinking: faded over the background
    assert at(img, world, renderer, 8.0, 4.0) == GREEN

    # Without an atlas the same world is flat colour boxes (sprites without Color vanish).
    flat = WorldRenderer(ctx, pixels_per_unit=PPU, background=CLEAR)
    img = draw(ctx, world, flat)
    assert at(img, world, flat, -2.0, -5.5) == (1, 2, 3, 255)
    assert at(img, world, flat, -8.0, 4.0) == CLEAR
    renderer.release()
    flat.release()
