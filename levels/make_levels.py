"""Generate every shipped level under ``levels/data/`` (deterministic: fixed seeds).

Run ``python -m ecs_engine.levels.make_levels [--out DIR]``. Each level folder is rebuilt
from scratch.
Images use a few flat colours and are written as palette PNGs, so they stay small.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from ecs_engine.levels.colors import RGBA, parse_hex
from ecs_engine.levels.shipped import data_dir

__all__ = ["LEVELS", "LevelSource", "build", "main", "write_level"]

# Flat colours authors paint with; they match the stock prefabs' own colours.
GROUND = "#8b5a2b"
GRASS = "#3ca03c"
BRICK = "#aa4632"
STONE = "#6e6e78"
PLAYER = "#2878ff"
ENEMY = "#dc2828"
COIN = "#ffd200"
HEART = "#ff69b4"
TURRET = "#787882"
FLAG = "#28c85a"
AMMO = "#3c8cff"
SKY = "#87ceeb"

RGBAImage = NDArray[np.uint8]


@dataclass(frozen=True)
class LevelSource:
    """A level in memory: the ``.lvl`` document and its images by relative path."""

    name: str
    lvl: dict[str, Any]
    images: dict[str, RGBAImage]


def rgba(color: str) -> RGBA:
    parsed = parse_hex(color)
    if parsed is None:
        raise ValueError(color)
    return parsed


def blank(width: int, height: int) -> RGBAImage:
    """A fully transparent ``(height, width, 4)`` image."""
    return np.zeros((height, width, 4), np.uint8)


def paint(img: RGBAImage, color: str, rows: slice | int, cols: slice | int) -> None:
    img[rows, cols] = rgba(color)


def put_sprite(img: RGBAImage, k: int, wx: float, wy: float, color: str) -> None:
    """Mark the sprite pixel whose centre is nearest above ``(wx, wy)`` (world units)."""
    height = img.shape[0]
    col = int(np.floor(wx * k))
    row = height - 1 - int(np.floor(wy * k))
    img[row, col] = rgba(color)


def sky(width: int, height: int, top: str, bottom: str, bands: int) -> RGBAImage:
    """A vertical gradient in ``bands`` flat steps (flat steps compress well)."""
    t = np.floor(np.arange(height) / height * bands) / max(bands - 1, 1)
    a = np.array(rgba(top), np.float64)
    b = np.array(rgba(bottom), np.float64)
    rows = np.round(a + (b - a) * t[:, None]).astype(np.uint8)
    return np.broadcast_to(rows[:, None, :], (height, width, 4)).copy()


def hills(img: RGBAImage, color: str, base: float, amp: float, freq: float, phase: float) -> None:
    """Paint a sine-shaped hill silhouette; ``base``/``amp`` as fractions of the height."""
    height, width = img.shape[:2]
    x = np.arange(width)
    top = height * (1 - base - amp * np.sin(x * freq + phase))
    mask = np.arange(height)[:, None] >= top[None, :]
    img[mask] = rgba(color)


def ellipse(img: RGBAImage, color: str, cx: float, cy: float, rx: float, ry: float) -> None:
    yy, xx = np.mgrid[: img.shape[0], : img.shape[1]]
    img[((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1] = rgba(color)


def v1_document(name: str, geometry: list[dict[str, Any]], sprites: list[dict[str, Any]],
                visuals: list[dict[str, Any]], tiles: dict[str, Any],
                sprite_colors: dict[str, Any], **meta: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": "ecs-level", "version": 1, "name": name, "background": SKY,
        "layers": {"geometry": geometry, "sprites": sprites, "visuals": visuals},
        "tile_colors": tiles, "sprite_colors": sprite_colors,
    }
    if meta:
        doc["meta"] = meta
    return doc


STOCK_TILES = {GROUND: "ground", GRASS: "grass", BRICK: "brick", STONE: "stone"}


# --------------------------------------------------------------------------------------------
# tutorial: 30 x 12, the smallest complete level


def tutorial() -> LevelSource:
    w, h, k = 30, 12, 2
    geo = blank(w, h)
    paint(geo, GROUND, slice(10, 12), slice(None))
    paint(geo, GRASS, 9, slice(None))
    paint(geo, STONE, slice(0, 9), 0)
    paint(geo, STONE, slice(0, 9), w - 1)
    paint(geo, BRICK, 6, slice(12, 18))
    spr = blank(w * k, h * k)
    put_sprite(spr, k, 3.5, 4.1, PLAYER)
    put_sprite(spr, k, 15.0, 7.2, COIN)
    put_sprite(spr, k, 27.0, 3.76, FLAG)  # the goal, planted in the grass
    vis = sky(w * k, h * k, "#5fa8e8", "#c8e8ff", 6)
    ellipse(vis, "#fff5b0", 50, 5, 3, 3)
    doc = v1_document(
        "Tutorial",
        [{"file": "geometry/layer1.png"}],
        [{"file": "sprites/layer1.png"}],
        [{"file": "visuals/layer1.png", "z": -1}],
        {GROUND: "ground", GRASS: "grass", BRICK: "brick", STONE: "stone"},
        {PLAYER: "player", COIN: "coin", FLAG: "flag"},
        description="Walk right, jump onto the platform, take the coin, reach the flag.")
    return LevelSource("tutorial", doc, {"geometry/layer1.png": geo, "sprites/layer1.png": spr,
                                         "visuals/layer1.png": vis})


# --------------------------------------------------------------------------------------------
# demo: 120 x 40 platformer, visuals and sprites at k = 4


def demo() -> LevelSource:
    w, h, k = 120, 40, 4
    geo = blank(w, h)
    # Ground surface height (rows from the top) per column; -1 marks a pit.
    surface = np.full(w, 34)
    surface[40:53] = 31  # a raised hill
    surface[53:58] = 33
    surface[84:95] = 29  # a plateau before the last pit
    for a, b in ((28, 32), (62, 67), (96, 100)):
        surface[a:b] = -1
    for col in range(w):
        top = surface[col]
        if top >= 0:
            paint(geo, GRASS, top, col)
            paint(geo, GROUND, slice(top + 1, h), col)
    # Boundary walls and an obstacle wall.
    paint(geo, STONE, slice(0, 34), 0)
    paint(geo, STONE, slice(0, 34), w - 1)  # down to the ground: no way out past the flag
    paint(geo, STONE, slice(29, 34), slice(74, 76))  # 5 tall: a running jump clears it
    paint(geo, STONE, slice(10, 13), slice(20, 50))  # a ceiling ledge
    # Floating brick platforms: (row, first col, last col + 1).
    platforms = [(28, 8, 15), (24, 18, 24), (27, 27, 33), (22, 34, 40), (25, 58, 70),
                 (19, 62, 68), (23, 78, 84), (17, 86, 92), (24, 95, 101), (20, 104, 112)]
    for row, a, b in platforms:
        paint(geo, BRICK, row, slice(a, b))

    def top_of(row: int) -> float:
        """World y of the top edge of a geometry row."""
        return float(h - row)

    spr = blank(w * k, h * k)
    put_sprite(spr, k, 4.5, top_of(34) + 0.9, PLAYER)
    enemies = [(16.0, 34), (36.0, 34), (45.0, 31), (71.0, 34), (88.0, 29), (61.0, 25),
               (20.5, 24), (110.0, 34)]
    for x, row in enemies:
        put_sprite(spr, k, x, top_of(row) + 0.6, ENEMY)
    coins: list[tuple[float, float]] = []
    for a, b in ((28, 32), (62, 67), (96, 100)):  # an arc over every pit
        for i, x in enumerate(np.linspace(a - 1, b + 0.5, 5)):
            coins.append((float(x), top_of(34) + 2.0 + (2 - abs(i - 2)) * 1.0))
    for row, a, b in platforms[::2]:
        coins.append(((a + b) / 2, top_of(row) + 1.2))
    coins += [(x + 0.5, top_of(31) + 1.2) for x in range(42, 51, 2)]
    for x, y in coins:
        put_sprite(spr, k, x, y, COIN)
    put_sprite(spr, k, 89.0, top_of(17) + 1.2, HEART)
    for x, row in ((21.0, 24), (56.0, 33), (80.5, 23)):  # ammo on the way (10 shots each)
        put_sprite(spr, k, x, top_of(row) + 1.0, AMMO)
    put_sprite(spr, k, 110.5, top_of(20) + 0.6, TURRET)
    put_sprite(spr, k, 116.0, top_of(34) + 0.88, FLAG)  # the goal, planted in the grass

    vis = sky(w * k, h * k, "#3a78c8", "#bfe3ff", 12)
    for cx, cy in ((60, 20), (200, 35), (330, 15), (430, 40)):
        ellipse(vis, "#ffffff", cx, cy, 22, 7)
        ellipse(vis, "#ffffff", cx + 12, cy - 5, 12, 7)
    hills(vis, "#8fc98f", 0.30, 0.10, 0.021, 0.4)
    hills(vis, "#5fa35f", 0.18, 0.07, 0.037, 1.9)
    doc = v1_document(
        "Demo",
        [{"file": "geometry/layer1.png"}],
        [{"file": "sprites/layer1.png"}],
        [{"file": "visuals/layer1.png", "z": -1}],
        {GROUND: "ground", GRASS: "grass", BRICK: {"prefab": "brick"}, STONE: "stone"},
        {PLAYER: "player", ENEMY: {"prefab": "enemy", "params": {"speed": 3.0}},
         COIN: "coin", HEART: "heart", TURRET: {"prefab": "turret", "params": {"dir": -1}},
         FLAG: "flag", AMMO: "ammo"},
        description="The demo platformer: pits, platforms, walls, enemies, coins; reach the "
                    "flag at the far right.")
    return LevelSource("demo", doc, {"geometry/layer1.png": geo, "sprites/layer1.png": spr,
                                     "visuals/layer1.png": vis})


# --------------------------------------------------------------------------------------------
# thesis_example: the thesis' own version-0 layout (two layers, $type prefabs)


def thesis_example() -> LevelSource:
    w, h = 40, 15
    geo1 = blank(w, h)
    paint(geo1, GROUND, slice(12, 15), slice(0, 17))
    paint(geo1, GROUND, slice(12, 15), slice(21, 40))
    paint(geo1, BRICK, 8, slice(6, 11))
    paint(geo1, BRICK, slice(5, 12), slice(30, 32))
    spr1 = blank(w, h)
    put_sprite(spr1, 1, 2.5, 3.5, PLAYER)
    put_sprite(spr1, 1, 25.5, 3.5, ENEMY)
    geo2 = blank(w, h)  # continues the level to the right (offset x = 40)
    paint(geo2, GROUND, slice(12, 15), slice(0, 40))
    paint(geo2, BRICK, slice(9, 12), slice(15, 18))
    spr2 = blank(w, h)
    put_sprite(spr2, 1, 8.5, 3.5, ENEMY)

    def color(c: str) -> dict[str, int]:
        r, g, b, a = rgba(c)
        return {"r": r, "g": g, "b": b, "a": a}

    doc = {
        "version": 0,
        "layer_names": ["layer1", "layer2"],
        "layer_params": [{"position": {"x": 0, "y": 0}}, {"position": {"x": 40, "y": 0}}],
        "obj_colors": [color(GROUND), color(BRICK)],
        "obj_prefabs": [{"$type": "Ground1Serializer"}, {"$type": "BrickSerializer"}],
        "spr_colors": [color(PLAYER), color(ENEMY)],
        "spr_prefabs": [{"$type": "PlayerStartSerializer"},
                        {"$type": "EnemySerializer", "speed": 3.0}],
    }
    return LevelSource("thesis_example", doc, {
        "geometry/layer1.png": geo1, "sprites/layer1.png": spr1,
        "geometry/layer2.png": geo2, "sprites/layer2.png": spr2})


# --------------------------------------------------------------------------------------------
# stress: 1024 x 1024 procedural caves


def _neighbours(mask: NDArray[np.bool_]) -> NDArray[np.int32]:
    """Solid cells among the 8 neighbours (outside the map counts as solid)."""
    p = np.pad(mask, 1, constant_values=True).astype(np.int32)
    n = mask.shape
    return sum((p[1 + dy: 1 + dy + n[0], 1 + dx: 1 + dx + n[1]]
                for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx),
               np.zeros(n, np.int32))


def _cellular(solid: NDArray[np.bool_], steps: int) -> NDArray[np.bool_]:
    """The 4-5 cave rule: walls stay with 4+ wall neighbours, air fills in with 5+."""
    for _ in range(steps):
        n = _neighbours(solid)
        solid = np.where(solid, n >= 4, n >= 5)
    return solid


def stress(size: int = 1024, seed: int = 20240601) -> LevelSource:
    rng = np.random.default_rng(seed)
    # Coarse caves first (4x4 cells per sample) so rooms are big enough to play in, then
    # full-resolution noise and smoothing for ragged edges: many rectangles to partition.
    coarse = _cellular(rng.random((size // 4, size // 4)) < 0.48, 5)
    solid = np.repeat(np.repeat(coarse, 4, axis=0), 4, axis=1)
    solid ^= rng.random(solid.shape) < 0.08
    solid = _cellular(solid, 4)
    solid[:, :2] = solid[:, -2:] = True
    solid[:2, :] = solid[-2:, :] = True
    air = ~solid
    # Long brick platforms across open caves, every 24 rows.
    platform = np.zeros_like(solid)
    for row in range(20, size - 20, 24):
        start = rng.integers(0, 12)
        for a in range(start, size - 12, 28):
            b = a + int(rng.integers(5, 14))
            platform[row, a:b] = air[row, a:b] & air[row - 3, a:b]
    air &= ~platform
    geo = blank(size, size)
    geo[solid] = rgba(STONE)
    # Solid cells with air above are walkable surfaces: grass, with ground below them.
    exposed = solid & np.roll(air, 1, axis=0)
    exposed[0] = False
    geo[exposed] = rgba(GRASS)
    under = np.roll(exposed, 1, axis=0) & solid & ~exposed
    geo[under] = rgba(GROUND)
    geo[platform] = rgba(BRICK)

    spr = blank(size, size)
    floor = air & np.roll(solid | platform, -1, axis=0)  # air cell standing on something
    floor[-1] = False
    fy, fx = np.nonzero(floor)
    pick = rng.choice(fy.size, size=min(3000, fy.size), replace=False)
    spr[fy[pick], fx[pick]] = rgba(ENEMY)
    open_air = air & ~floor & (spr[..., 3] == 0)
    ay, ax = np.nonzero(open_air)
    pick = rng.choice(ay.size, size=min(8000, ay.size), replace=False)
    spr[ay[pick[:7900]], ax[pick[:7900]]] = rgba(COIN)
    spr[ay[pick[7900:7960]], ax[pick[7900:7960]]] = rgba(HEART)
    spr[ay[pick[7960:]], ax[pick[7960:]]] = rgba(TURRET)
    # The player: the floor cell nearest the left edge, mid-height.
    free = floor & (spr[..., 3] == 0)
    py, px = np.nonzero(free)
    best = int(np.argmin(px * 4 + np.abs(py - size // 2)))
    spr[py[best], px[best]] = rgba(PLAYER)
    doc = v1_document(
        "Stress caves",
        [{"file": "geometry/layer1.png"}],
        [{"file": "sprites/layer1.png"}],
        [],
        dict(STOCK_TILES),
        {PLAYER: "player", ENEMY: "enemy", COIN: "coin", HEART: "heart", TURRET: "turret"},
        description=f"{size}x{size} procedural caves (seed {seed}) for load benchmarks.")
    return LevelSource("stress", doc, {"geometry/layer1.png": geo, "sprites/layer1.png": spr})


LEVELS: dict[str, Callable[[], LevelSource]] = {
    "demo": demo, "stress": stress, "thesis_example": thesis_example, "tutorial": tutorial,
}


# --------------------------------------------------------------------------------------------
# writing


def save_png(path: Path, img: RGBAImage) -> None:
    """Write an RGBA image as a palette PNG (exact colours, per-entry alpha) when it has
    at most 256 colours, else as RGBA."""
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = img.shape[:2]
    packed = np.ascontiguousarray(img).view("<u4")[..., 0]
    colors, index = np.unique(packed, return_inverse=True)
    if colors.size > 256:
        Image.fromarray(img).save(path, optimize=True)
        return
    pal = colors.view(np.uint8).reshape(-1, 4)
    out = Image.frombytes("P", (w, h), index.astype(np.uint8).tobytes())
    out.putpalette(pal[:, :3].tobytes(), rawmode="RGB")
    out.save(path, optimize=True, transparency=pal[:, 3].tobytes())


def write_level(src: LevelSource, out: Path) -> Path:
    """Write one level folder (replacing an older one of that name); returns the folder."""
    folder = out / src.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    text = json.dumps(src.lvl, indent=2) + "\n"
    (folder / "level.lvl").write_text(text, encoding="utf-8")
    for rel, img in sorted(src.images.items()):
        save_png(folder / rel, img)
    return folder


def build(names: list[str] | None = None, out: Path | None = None) -> list[Path]:
    """Generate the named levels (all by default) into ``out`` (``levels/data``)."""
    target = out or data_dir()
    return [write_level(LEVELS[name](), target) for name in (names or sorted(LEVELS))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ecs_engine.levels.make_levels",
                                     description="(Re)generate the shipped levels.")
    parser.add_argument("names", nargs="*", default=[],
                        help=f"levels to build (default: all of {sorted(LEVELS)})")
    parser.add_argument("--out", type=Path, default=None, help="folder (default levels/data)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(LEVELS))
    if unknown:
        parser.error(f"unknown levels {unknown}; choose from {sorted(LEVELS)}")
    for folder in build(args.names or None, args.out):
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        print(f"{folder}: {size / 1024:.1f} kB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
