"""The stock sheets' art: arcade's built-in ``:resources:`` images (Kenney's CC0 platformer
art that ships in the arcade wheel) plus a few pictures drawn here with numpy (a heart, the
pickup sparkle and the hit burst, which arcade's art does not have).

:func:`stock_atlas` packs them for the sheet indices of ``components.render.SHEETS``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from ecs_engine.components.render import SHEETS
from ecs_engine.systems.sprite_atlas import SheetArt, SpriteAtlas

__all__ = ["STOCK_ART", "burst_frames", "heart_image", "sparkle_frames", "stock_atlas",
           "stock_art"]

_IMG = ":resources:images/"
_HERO = _IMG + "animated_characters/male_adventurer/maleAdventurer_"


def _coverage(inside: NDArray[np.bool_]) -> NDArray[np.uint8]:
    """Alpha 0/255 of a boolean mask."""
    return np.where(inside, 255, 0).astype(np.uint8)


def heart_image(size: int = 64, rgb: tuple[int, int, int] = (230, 40, 70),
                outline: tuple[int, int, int] = (90, 10, 25)) -> NDArray[np.uint8]:
    """A ``size`` x ``size`` RGBA heart (the implicit curve (x²+y²-1)³ = x²y³) with a dark
    outline and a highlight."""
    t = (np.arange(size) + 0.5) / size
    x = (t[None, :] - 0.5) * 2.7
    y = (0.5 - t[:, None]) * 2.7 + 0.12  # the curve spans y in [-1, 1.25]
    f = (x * x + y * y - 1) ** 3 - x * x * y ** 3
    inner_x, inner_y = x * 1.16, (y + 0.05) * 1.16
    inner = (inner_x ** 2 + inner_y ** 2 - 1) ** 3 - inner_x ** 2 * inner_y ** 3
    img = np.zeros((size, size, 4), np.uint8)
    img[f <= 0, :3] = outline
    img[inner <= 0, :3] = rgb
    shine = ((x + 0.45) ** 2 + (y - 0.35) ** 2) < 0.06
    img[shine & (inner <= 0), :3] = (255, 190, 200)
    img[..., 3] = _coverage(f <= 0)
    return img


def _star(size: int, radius: float, points: int, inner: float,
          rgb: tuple[int, int, int], alpha: int) -> NDArray[np.uint8]:
    t = (np.arange(size) + 0.5) / size - 0.5
    x, y = t[None, :] * 2, t[:, None] * 2
    r = np.hypot(x, y)
    angle = np.arctan2(y, x)
    edge = radius * (inner + (1 - inner) * np.abs(np.cos(angle * points / 2)) ** 3)
    img = np.zeros((size, size, 4), np.uint8)
    img[..., :3] = rgb
    img[..., 3] = np.where(r <= edge, alpha, 0).astype(np.uint8)
    core = r <= edge * 0.45
    img[core, :3] = 255
    return img


def sparkle_frames(size: int = 48) -> tuple[NDArray[np.uint8], ...]:
    """Four frames of a yellow star that grows and fades (a pickup)."""
    return tuple(_star(size, 0.35 + 0.2 * i, 8, 0.35, (255, 220, 60), 255 - 50 * i)
                 for i in range(4))


def burst_frames(size: int = 48) -> tuple[NDArray[np.uint8], ...]:
    """Four frames of a white-orange burst that grows and fades (a hit)."""
    return tuple(_star(size, 0.4 + 0.18 * i, 6, 0.55, (255, 140, 40), 255 - 55 * i)
                 for i in range(4))


def stock_art() -> dict[str, SheetArt]:
    """The art of every stock sheet (a new dict each call)."""
    sparkle, burst = sparkle_frames(), burst_frames()
    return {
        "ground": SheetArt(_IMG + "tiles/grassCenter.png", tiled=True, crop=False),
        "grass": SheetArt(_IMG + "tiles/grassMid.png", tiled=True, crop=False),
        "brick": SheetArt(_IMG + "tiles/brickBrown.png", tiled=True, crop=False),
        "stone": SheetArt(_IMG + "tiles/stoneCenter.png", tiled=True, crop=False),
        "player": SheetArt(_HERO + "idle.png", _HERO + "jump.png", _HERO + "fall.png",
                           tuple(f"{_HERO}walk{i}.png" for i in range(8)), height=1.75,
                           bottom=True),
        "enemy": SheetArt(_IMG + "enemies/slimeBlue.png",
                          walk=(_IMG + "enemies/slimeBlue.png",
                                _IMG + "enemies/slimeBlue_move.png"), height=0.8, bottom=True),
        "coin": SheetArt(_IMG + "items/coinGold.png", height=0.75),
        "heart": SheetArt(heart_image(), height=0.75),
        "ammo": SheetArt(_IMG + "items/gemBlue.png", height=0.7),
        "turret": SheetArt(_IMG + "tiles/boxCrate_double.png", crop=False),
        "projectile": SheetArt(_IMG + "space_shooter/laserRed01.png", height=0.22, rotate=1),
        "flag": SheetArt(_IMG + "items/flagGreen1.png",
                         walk=(_IMG + "items/flagGreen1.png", _IMG + "items/flagGreen2.png"),
                         height=2.0, bottom=True),
        "sparkle": SheetArt(sparkle[0], walk=sparkle, crop=False),
        "burst": SheetArt(burst[0], walk=burst, crop=False),
    }


STOCK_ART = tuple(stock_art())  # the sheet names that have stock art


@lru_cache(maxsize=4)
def stock_atlas(pixels_per_unit: int = 40) -> SpriteAtlas:
    """The stock art packed for ``SHEETS`` (built once per process and size: the atlas is
    read-only, so every renderer shares it)."""
    return SpriteAtlas.build(stock_art(), SHEETS, pixels_per_unit=pixels_per_unit)
