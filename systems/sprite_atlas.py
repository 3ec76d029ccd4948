"""One texture atlas for every sprite sheet, and the column-to-quad layout that uses it.

A :class:`SheetArt` names the pictures of one sheet (idle, jump, fall and a walk cycle, as
files, ``:resources:`` paths of arcade's built-in art, PIL images or arrays) and how they sit
on an entity's collider. :meth:`SpriteAtlas.build` loads, trims and scales every frame once
and packs them into ONE RGBA image with a table of texel rectangles, so a frame is a row
index and the renderer can turn ``Sprite`` columns into per-quad texel rectangles with numpy
fancy indexing (:meth:`SpriteAtlas.place`), never a per-entity Python loop.

No GL and no arcade import here: the atlas is plain numpy; ``render_world`` uploads it.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["ImageSource", "Placement", "SheetArt", "SpriteAtlas", "load_image",
           "resolve_resource"]

ImageSource = Any  # a path (str | PathLike, ``:resources:`` allowed), PIL image or RGBA array
RESOURCES = ":resources:"
FRAMES_BEFORE_WALK = 3  # idle, jump, fall; the walk cycle follows (see components.render)
WHITE_SIZE = 4  # texels of the opaque white block (flat-colour quads)
GAP = 2  # empty texels between packed frames


def resolve_resource(path: str | os.PathLike[str]) -> Path:
    """A ``:resources:...`` path of arcade's built-in art as a file path (other paths as
    they are). Finds arcade's package folder without importing arcade, so arcade's headless
    switch is untouched. ``FileNotFoundError`` naming the path if it does not exist."""
    text = os.fspath(path)
    if text.startswith(RESOURCES):
        spec = importlib.util.find_spec("arcade")
        if spec is None or spec.origin is None:
            raise FileNotFoundError(f"{text}: arcade is not installed (pip install arcade)")
        root = Path(spec.origin).parent / "resources" / "assets"
        out = root / text[len(RESOURCES):].lstrip("/")
    else:
        out = Path(text)
    if not out.is_file():
        raise FileNotFoundError(f"no image file {out} (from {text!r})")
    return out


def load_image(source: ImageSource) -> NDArray[np.uint8]:
    """An ``(H, W, 4)`` uint8 RGBA array (row 0 = top) from a path, PIL image or array."""
    try:
        from PIL import Image
    except ImportError as missing:
        raise ImportError("loading sprite art needs pillow: install the arcade or levels "
                          "extra, pip install 'ecs-engine[arcade]'") from missing

    if isinstance(source, np.ndarray):
        arr = source
    elif isinstance(source, Image.Image):
        arr = np.asarray(source.convert("RGBA"))
    else:
        with Image.open(resolve_resource(source)) as img:
            arr = np.asarray(img.convert("RGBA"))
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 4:
        raise ValueError(f"an image must be (H, W, 4) uint8 RGBA, got {arr.dtype} {arr.shape}")
    return np.ascontiguousarray(arr)


@dataclass(frozen=True)
class SheetArt:
    """The pictures of one sprite sheet and how they sit on the entity's collider.

    ``jump``/``fall`` default to ``idle``; ``walk`` is the cycle (may be empty).
    ``height``: drawn height in world units, the width following the pictures' aspect; None
    stretches the picture over the collider. ``tiled``: repeat the picture once per world
    unit across the collider (level tiles: one entity, many tiles). ``bottom``: stand on the
    collider's bottom edge (characters) instead of centring on it. ``rotate``: quarter turns
    counter-clockwise. ``crop``: trim the transparent border all frames share.
    """

    idle: ImageSource
    jump: ImageSource | None = None
    fall: ImageSource | None = None
    walk: tuple[ImageSource, ...] = ()
    height: float | None = None
    tiled: bool = False
    bottom: bool = False
    rotate: int = 0
    crop: bool = True

    def frames(self) -> list[ImageSource]:
        """The sheet's frames in atlas order: idle, jump, fall, walk..."""
        idle = self.idle
        return [idle, self.jump if self.jump is not None else idle,
                self.fall if self.fall is not None else idle, *self.walk]


@dataclass(frozen=True)
class Placement:
    """Per-quad arrays from :meth:`SpriteAtlas.place`: centres and sizes in world units,
    texel rectangles (left, top, width, height) and repeats (x < 0 mirrors)."""

    x: NDArray[np.float32]
    y: NDArray[np.float32]
    w: NDArray[np.float32]
    h: NDArray[np.float32]
    uv: NDArray[np.float32]
    repeat: NDArray[np.float32]


def _crop_box(images: Sequence[NDArray[np.uint8]]) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) bounds of the texels that are opaque in any frame
    (frames of different sizes are not cropped)."""
    if len({img.shape for img in images}) != 1:
        return 0, images[0].shape[0], 0, images[0].shape[1]
    alpha = np.max([img[..., 3] for img in images], axis=0) > 0
    rows, cols = np.flatnonzero(alpha.any(axis=1)), np.flatnonzero(alpha.any(axis=0))
    if rows.size == 0:
        return 0, alpha.shape[0], 0, alpha.shape[1]
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def _resize(img: NDArray[np.uint8], width: int, height: int) -> NDArray[np.uint8]:
    from PIL import Image

    if img.shape[1] == width and img.shape[0] == height:
        return img
    # Premultiply so transparent texels' colours do not bleed into edges when scaling.
    rgb = img[..., :3].astype(np.float32) * (img[..., 3:4].astype(np.float32) / 255.0)
    pre = np.concatenate([rgb.round().astype(np.uint8), img[..., 3:4]], axis=2)
    out = np.asarray(Image.fromarray(pre).resize((width, height),
                                                        Image.Resampling.LANCZOS))
    alpha = out[..., 3:4].astype(np.float32)
    rgb = np.where(alpha > 0, out[..., :3] * 255.0 / np.maximum(alpha, 1.0), 0)
    return np.concatenate([np.clip(rgb.round(), 0, 255).astype(np.uint8), out[..., 3:4]],
                          axis=2)


class SpriteAtlas:
    """Every sheet's frames packed into one RGBA image, with lookup tables by sheet index.

    ``image``: (H, W, 4) uint8, row 0 = top. ``white``: the texel rectangle of an opaque
    white block (flat-colour quads). ``uv``: (frames, 4) float32 texel rectangles. Per sheet
    index: ``base`` (first frame row, -1 for a sheet without art), ``walk`` (frames in the
    walk cycle), ``draw`` (drawn width, height in world units; NaN: the collider's),
    ``tiled`` and ``bottom``.
    """

    def __init__(self, image: NDArray[np.uint8], white: tuple[float, float, float, float],
                 uv: NDArray[np.float32], base: NDArray[np.int32], walk: NDArray[np.int32],
                 draw: NDArray[np.float32], tiled: NDArray[np.bool_],
                 bottom: NDArray[np.bool_]) -> None:
        self.image = image
        self.white = white
        self.uv = uv
        self.base = base
        self.walk = walk
        self.draw = draw
        self.tiled = tiled
        self.bottom = bottom
        for arr in (image, uv, base, walk, draw, tiled, bottom):
            arr.flags.writeable = False  # shared by every renderer that uses the atlas

    @property
    def sheet_count(self) -> int:
        return len(self.base)

    @classmethod
    def build(cls, art: Mapping[str, SheetArt], names: Sequence[str], *,
              pixels_per_unit: int = 40, max_width: int = 2048) -> SpriteAtlas:
        """Pack the sheets of ``art`` (by name) for the sheet indices ``names`` (the
        ``Sprite.sheet`` values): ``names[i]`` is sheet ``i``; names without art draw as
        plain white quads. Frames are scaled to ``pixels_per_unit`` texels per world unit.
        ``ValueError`` for art of a name not in ``names``."""
        unknown = sorted(set(art) - set(names))
        if unknown:
            raise ValueError(f"art for unknown sheets {unknown}; sheets are {list(names)}")
        n_sheets = len(names)
        base = np.full(n_sheets, -1, np.int32)
        walk = np.zeros(n_sheets, np.int32)
        draw = np.full((n_sheets, 2), np.nan, np.float32)
        tiled = np.zeros(n_sheets, bool)
        bottom = np.zeros(n_sheets, bool)
        frames: list[NDArray[np.uint8]] = []
        for index, name in enumerate(names):
            sheet = art.get(name)
            if sheet is None:
                continue
            images = [np.rot90(load_image(src), sheet.rotate % 4) for src in sheet.frames()]
            if sheet.crop:
                top, bot, left, right = _crop_box(images)
                images = [img[top:bot, left:right] for img in images]
            h_px, w_px = images[0].shape[:2]
            if sheet.tiled:
                units = (1.0, 1.0)
            elif sheet.height is not None:
                units = (sheet.height * w_px / h_px, sheet.height)
                draw[index] = units
            else:
                units = (w_px / h_px, 1.0)  # stretched over the collider: keep the detail
            size = (max(1, round(units[0] * pixels_per_unit)),
                    max(1, round(units[1] * pixels_per_unit)))
            base[index] = len(frames)
            walk[index] = len(images) - FRAMES_BEFORE_WALK
            tiled[index] = sheet.tiled
            bottom[index] = sheet.bottom
            frames += [_resize(np.ascontiguousarray(img), *size) for img in images]
        image, rects = _pack([np.full((WHITE_SIZE, WHITE_SIZE, 4), 255, np.uint8), *frames],
                             max_width)
        white = (float(rects[0, 0]) + 1, float(rects[0, 1]) + 1, 2.0, 2.0)
        return cls(image, white, rects[1:].astype(np.float32), base, walk, draw, tiled,
                   bottom)

    def frame_uv(self, sheet: NDArray[Any], frame: NDArray[Any]) -> NDArray[np.float32]:
        """(N, 4) texel rectangles of ``Sprite`` columns: idle, jump and fall as they are,
        walk frames wrapped to the sheet's cycle (idle when it has none); sheets without art
        get the white block."""
        sheet = np.asarray(sheet, np.int64)
        frame = np.asarray(frame, np.int64)
        known = (sheet >= 0) & (sheet < self.sheet_count)
        s = np.where(known, sheet, 0)
        base = np.where(known, self.base[s], -1)
        cycle = self.walk[s]
        walking = frame >= FRAMES_BEFORE_WALK
        idx = np.where(walking, FRAMES_BEFORE_WALK + (frame - FRAMES_BEFORE_WALK)
                       % np.maximum(cycle, 1), frame)
        idx = np.where(walking & (cycle == 0), 0, idx)
        out = self.uv[np.maximum(base + idx, 0)] if len(self.uv) else np.zeros((len(s), 4),
                                                                                 np.float32)
        missing = base < 0
        if missing.any():
            out[missing] = self.white
        return out

    def place(self, sheet: NDArray[Any], frame: NDArray[Any], flip: NDArray[Any],
              x: NDArray[Any], y: NDArray[Any], w: NDArray[Any], h: NDArray[Any]) -> Placement:
        """Quads for sprites on colliders (``x, y`` centres, ``w, h`` sizes, world units):
        drawn size from the sheet (or the collider), standing on the collider's bottom
        for ``bottom`` sheets, tiles repeated once per world unit, mirrored when ``flip``."""
        sheet = np.asarray(sheet, np.int64)
        s = np.clip(sheet, 0, max(self.sheet_count - 1, 0))
        known = (sheet >= 0) & (sheet < self.sheet_count)
        draw = np.where(known[:, None], self.draw[s], np.nan)
        w = np.asarray(w, np.float32)
        h = np.asarray(h, np.float32)
        dw = np.where(np.isnan(draw[:, 0]), w, draw[:, 0]).astype(np.float32)
        dh = np.where(np.isnan(draw[:, 1]), h, draw[:, 1]).astype(np.float32)
        y = np.asarray(y, np.float32)
        cy = np.where(known & self.bottom[s], y - h / 2 + dh / 2, y).astype(np.float32)
        repeat = np.ones((len(sheet), 2), np.float32)
        tiles = known & self.tiled[s]
        repeat[tiles, 0] = w[tiles]
        repeat[tiles, 1] = h[tiles]
        repeat[np.asarray(flip, bool), 0] *= -1
        return Placement(np.asarray(x, np.float32), cy, dw, dh, self.frame_uv(sheet, frame),
                         repeat)


def _pack(images: Sequence[NDArray[np.uint8]],
          max_width: int) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """Shelf-pack images (tallest first) into one RGBA image; returns it and each image's
    (left, top, width, height) in input order."""
    order = sorted(range(len(images)), key=lambda i: (-images[i].shape[0], i))
    rects = np.zeros((len(images), 4), np.int64)
    x = y = shelf = 0
    width = 0
    for i in order:
        h, w = images[i].shape[:2]
        if w + 2 * GAP > max_width:
            raise ValueError(f"a {w}x{h} frame is wider than the atlas ({max_width})")
        if x + w + 2 * GAP > max_width:
            x, y, shelf = 0, y + shelf + GAP, 0
        rects[i] = (x + GAP, y + GAP, w, h)
        x += w + GAP
        shelf = max(shelf, h)
        width = max(width, x + GAP)
    height = y + shelf + 2 * GAP
    atlas = np.zeros((height, width, 4), np.uint8)
    for img, (left, top, w, h) in zip(images, rects, strict=True):
        atlas[top:top + h, left:left + w] = img
    return atlas, rects
