"""systems.sprite_atlas and systems.stock_art without GL: packing, frame lookup from the
Sprite columns (walk cycles wrap, missing art falls back to white), placement on colliders
(tiles repeat, characters stand on their feet, flips mirror) and the stock art."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ecs_engine.components.render import FRAME_FALL, FRAME_IDLE, FRAME_JUMP, FRAME_WALK, SHEETS
from ecs_engine.systems.sprite_atlas import SheetArt, SpriteAtlas, resolve_resource
from ecs_engine.systems.stock_art import heart_image, stock_art, stock_atlas


def solid(rgb: tuple[int, int, int], w: int = 8, h: int = 8) -> np.ndarray:
    img = np.zeros((h, w, 4), np.uint8)
    img[..., :3] = rgb
    img[..., 3] = 255
    return img


def colours(atlas: SpriteAtlas, uv: np.ndarray) -> list[tuple[int, ...]]:
    """The colour at the centre of each texel rectangle."""
    out = []
    for left, top, w, h in uv:
        out.append(tuple(int(c) for c in atlas.image[int(top + h // 2), int(left + w // 2)]))
    return out


@pytest.fixture
def atlas() -> SpriteAtlas:
    walk = (solid((0, 0, 1)), solid((0, 0, 2)), solid((0, 0, 3)))
    art = {
        "hero": SheetArt(solid((1, 0, 0)), solid((2, 0, 0)), solid((3, 0, 0)), walk,
                         height=2.0, bottom=True, crop=False),
        "tile": SheetArt(solid((0, 9, 0)), tiled=True),
    }
    return SpriteAtlas.build(art, ("tile", "nothing", "hero"), pixels_per_unit=8)


def test_frames_follow_the_columns_and_walk_cycles_wrap(atlas: SpriteAtlas) -> None:
    sheet = np.array([2, 2, 2, 2, 2, 2, 2, 0, 0])
    frame = np.array([FRAME_IDLE, FRAME_JUMP, FRAME_FALL, FRAME_WALK, FRAME_WALK + 1,
                      FRAME_WALK + 2, FRAME_WALK + 3, FRAME_IDLE, FRAME_WALK + 5])
    got = colours(atlas, atlas.frame_uv(sheet, frame))
    assert [c[:3] for c in got] == [(1, 0, 0), (2, 0, 0), (3, 0, 0), (0, 0, 1), (0, 0, 2),
                                    (0, 0, 3), (0, 0, 1), (0, 9, 0), (0, 9, 0)]


def test_sheets_without_art_and_unknown_indices_get_the_white_block(atlas: SpriteAtlas) -> None:
    uv = atlas.frame_uv(np.array([1, 7]), np.array([0, 0]))
    assert [tuple(r) for r in uv] == [atlas.white, atlas.white]
    assert colours(atlas, uv) == [(255, 255, 255, 255)] * 2


def test_placement_tiles_repeat_characters_stand_and_flips_mirror(atlas: SpriteAtlas) -> None:
    q = atlas.place(np.array([0, 2, 2]), np.zeros(3), np.array([False, False, True]),
                    x=np.array([5.0, 1.0, 1.0]), y=np.array([2.0, 3.0, 3.0]),
                    w=np.array([6.0, 0.8, 0.8]), h=np.array([2.0, 1.6, 1.6]))
    # A 6x2 rectangle of tiles: one quad the collider's size, the tile six by two times.
    assert (q.w[0], q.h[0]) == (6.0, 2.0)
    assert tuple(q.repeat[0]) == (6.0, 2.0)
    # The hero is drawn 2 units tall (square frames: 2 wide), feet on the collider's bottom.
    assert (q.w[1], q.h[1]) == (2.0, 2.0)
    assert q.y[1] == pytest.approx(3.0 - 0.8 + 1.0)
    assert tuple(q.repeat[1]) == (1.0, 1.0) and tuple(q.repeat[2]) == (-1.0, 1.0)


def test_packing_keeps_frames_apart_and_sizes_follow_pixels_per_unit() -> None:
    art = {f"s{i}": SheetArt(solid((i * 20, 0, 0), 10 + i, 5 + 2 * i), height=1.0, crop=False)
           for i in range(12)}
    atlas = SpriteAtlas.build(art, tuple(art), pixels_per_unit=16, max_width=64)
    rects = atlas.uv[atlas.base]
    assert (rects[:, 3] == 16).all()  # 1 unit tall at 16 px per unit
    for i, (left, top, w, h) in enumerate(rects):
        block = atlas.image[int(top):int(top + h), int(left):int(left + w)]
        assert (block[..., 0] == i * 20).all() and (block[..., 3] == 255).all(), i
    boxes = [(a, b, a + c, b + d) for a, b, c, d in rects]
    for i, p in enumerate(boxes):
        for o in boxes[i + 1:]:
            assert p[2] <= o[0] or o[2] <= p[0] or p[3] <= o[1] or o[3] <= p[1]
    assert atlas.image.shape[1] <= 64


def test_bad_art_is_named() -> None:
    with pytest.raises(ValueError, match="unknown sheets \\['dragon'\\]"):
        SpriteAtlas.build({"dragon": SheetArt(solid((1, 1, 1)))}, ("hero",))
    with pytest.raises(FileNotFoundError, match="nope.png"):
        resolve_resource(":resources:images/nope.png")
    with pytest.raises(ValueError, match="RGBA"):
        SpriteAtlas.build({"hero": SheetArt(np.zeros((4, 4), np.uint8))}, ("hero",))


def test_stock_art_covers_every_sheet_from_arcade_resources_without_importing_arcade() -> None:
    had_arcade = "arcade" in sys.modules
    assert set(stock_art()) == set(SHEETS)
    atlas = stock_atlas()
    assert (atlas.base >= 0).all()
    assert atlas.walk[SHEETS.index("player")] == 8
    # Real pictures: many colours per frame, not flat boxes.
    for sheet in ("player", "grass", "coin", "enemy", "flag"):
        left, top, w, h = atlas.uv[atlas.base[SHEETS.index(sheet)]].astype(int)
        block = atlas.image[top:top + h, left:left + w].reshape(-1, 4)
        assert len(np.unique(block[block[:, 3] > 0], axis=0)) > 20, sheet
    if not had_arcade:
        assert "arcade" not in sys.modules
    assert stock_atlas() is atlas  # built once per process


def test_heart_is_a_heart() -> None:
    img = heart_image(32)
    alpha = img[..., 3] > 0
    assert alpha[8:24, 8:24].mean() > 0.8  # a solid middle
    assert not alpha[0, :].any() and not alpha[-1, :].any()  # margins
    assert alpha[3, 9] and alpha[3, 22] and not alpha[3, 16]  # two lobes, a notch between
