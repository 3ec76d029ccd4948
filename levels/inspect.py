"""A picture of a planned level for its author: geometry scaled up, every collider rectangle
outlined, sprites as markers, visual layers dimmed behind."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from ecs_engine.levels.loader import GeometryPlan, LevelPlan

__all__ = ["DEFAULT_SCALE", "MAX_SIDE", "Frame", "picture", "picture_frame", "picture_scale"]

DEFAULT_SCALE = 8
"""Output pixels per world unit for ordinary levels."""
MAX_SIDE = 4096
"""The longest side of the picture, in pixels: huge levels get a smaller scale."""

_OUTLINE = np.array([16, 16, 16, 255], np.uint8)
_NO_BACKGROUND = (48, 48, 56, 255)


@dataclass(frozen=True)
class Frame:
    """The part of the world a picture shows: world box, pixels per world unit, and the
    layers (by file) that fall partly or wholly outside it."""

    left: float
    bottom: float
    right: float
    top: float
    scale: int
    clipped: tuple[str, ...]

    @property
    def size(self) -> tuple[int, int]:
        return (math.ceil((self.right - self.left) * self.scale),
                math.ceil((self.top - self.bottom) * self.scale))


def _boxes(plan: LevelPlan) -> list[tuple[str, float, float, float, float]]:
    """World box ``(file, left, bottom, right, top)`` of every geometry layer."""
    w, h = plan.size
    boxes = [("level", 0.0, 0.0, float(w), float(h))] if not plan.geometry else []
    for g in plan.geometry:
        gl, gb = g.spec.offset
        boxes.append((g.spec.file, gl, gb, gl + g.grid.shape[1] * g.cell[0],
                      gb + g.grid.shape[0] * g.cell[1]))
    return boxes


def picture_frame(plan: LevelPlan, scale: int = DEFAULT_SCALE,
                  max_side: int = MAX_SIDE) -> Frame:
    """What ``picture`` draws: every geometry layer at ``scale`` px per world unit (less
    if needed to fit ``max_side``); when the layers lie too far apart even at 1 px per
    unit, the ``max_side``-pixel square from the first layer's corner, naming the layers
    it clips."""
    boxes = _boxes(plan)
    left = min(b[1] for b in boxes)
    bottom = min(b[2] for b in boxes)
    right = max(b[3] for b in boxes)
    top = max(b[4] for b in boxes)
    longest = max(right - left, top - bottom, 1)
    if longest <= max_side:
        s = max(1, min(scale, int(max_side // longest)))
        return Frame(left, bottom, right, top, s, ())
    w, h = plan.size
    s = max(1, min(scale, int(max_side // max(w, h, 1))))
    span = max_side / s
    left, bottom = boxes[0][1], boxes[0][2]
    right, top = min(right, left + span), min(top, bottom + span)
    clipped = tuple(f for f, x0, y0, x1, y1 in boxes
                    if x0 < left or y0 < bottom or x1 > right or y1 > top)
    return Frame(left, bottom, right, top, s, clipped)


def picture_scale(plan: LevelPlan, scale: int = DEFAULT_SCALE, max_side: int = MAX_SIDE) -> int:
    """Pixels per world unit: ``scale``, reduced so the longest side fits ``max_side``."""
    return picture_frame(plan, scale, max_side).scale


def _composite(canvas: Image.Image, layer: NDArray[np.uint8] | Image.Image,
               x0: int, y0: int) -> None:
    """Alpha-composite ``layer`` with its top left at ``(x0, y0)``, cropped to the canvas."""
    img = layer if isinstance(layer, Image.Image) else Image.fromarray(layer)
    box = (max(0, -x0), max(0, -y0), min(img.width, canvas.width - x0),
           min(img.height, canvas.height - y0))
    if box[2] <= box[0] or box[3] <= box[1]:
        return
    canvas.alpha_composite(img.crop(box), dest=(max(0, x0), max(0, y0)))


def picture(plan: LevelPlan, scale: int = DEFAULT_SCALE, max_side: int = MAX_SIDE) -> Image.Image:
    """The level as an RGBA image, y up, framed by :func:`picture_frame`: never more
    than ``max_side`` pixels a side."""
    frame = picture_frame(plan, scale, max_side)
    s, left, top = frame.scale, frame.left, frame.top
    width, height = frame.size
    bg = plan.level.background or _NO_BACKGROUND
    canvas = Image.new("RGBA", (width, height), tuple(bg))

    def to_px(x: float, y: float) -> tuple[int, int]:
        return round((x - left) * s), round((top - y) * s)

    def visible(x: float, y: float, w: float, h: float) -> bool:
        return (x < frame.right and x + w > frame.left and y < frame.top
                and y + h > frame.bottom)

    for v in sorted(plan.visuals, key=lambda v: v.z):
        r = v.rect
        if not visible(r.left, r.bottom, r.width, r.height):
            continue
        x0, y0 = to_px(r.left, r.bottom + r.height)
        size = (max(1, round(r.width * s)), max(1, round(r.height * s)))
        img = Image.fromarray(v.image).resize(size, Image.Resampling.NEAREST)
        # Dim the backdrop so outlines stay the loudest thing in the picture.
        arr = np.array(img)
        arr[..., :3] = arr[..., :3] // 2 + 64
        _composite(canvas, arr, x0, y0)
    w, h = plan.size
    for g in plan.geometry:
        gw, gh = g.grid.shape[1] * g.cell[0], g.grid.shape[0] * g.cell[1]
        if not visible(g.spec.offset[0], g.spec.offset[1], gw, gh):
            continue
        x0, y0 = to_px(g.spec.offset[0], g.spec.offset[1] + gh)
        size = (max(1, round(gw * s)), max(1, round(gh * s)))
        _composite(canvas, _geometry_layer(g, s, size), x0, y0)
    arr = np.array(canvas)
    for sp in plan.sprites:
        _markers(arr, (sp.x - left) * s, (top - sp.y) * s, sp.rgba, max(3, s * 3 // 4))
    return Image.fromarray(arr)


def _geometry_layer(g: GeometryPlan, s: int, size: tuple[int, int]) -> NDArray[np.uint8]:
    """One geometry layer drawn straight at its size in the picture (``size``, at ``s`` px
    per world unit): author colours, rectangle edges dark.

    Every output pixel shows the cell under its centre, so the work and memory follow the
    picture, never the grid: an editor layer of many fine cells (LDtk's 1 px grid) is not
    drawn at ``s`` px per cell first. With whole world-unit cells this is ``s`` x ``s``
    pixels per cell, as before."""
    h, w = g.grid.shape
    out_w, out_h = size
    # the cell under each output column / row centre
    xs = np.minimum(((np.arange(out_w) + 0.5) * (w / out_w)).astype(np.int64), w - 1)
    ys = np.minimum(((np.arange(out_h) + 0.5) * (h / out_h)).astype(np.int64), h - 1)
    colors = np.zeros((len(g.rules) + 1, 4), np.uint8)
    for i, rule in enumerate(g.rules, start=1):
        colors[i] = rule.rgba
        colors[i, 3] = 255
    img = colors[g.grid[np.ix_(ys, xs)]]
    label = _rect_labels(g, xs, ys)
    pad = np.pad(label, 1)
    # A pixel is on an outline where a neighbouring pixel shows another rectangle.
    edge = (label > 0) & ((pad[:-2, 1:-1] != label) | (pad[2:, 1:-1] != label)
                          | (pad[1:-1, :-2] != label) | (pad[1:-1, 2:] != label))
    img[edge] = _OUTLINE
    return img


def _rect_labels(g: GeometryPlan, xs: NDArray[np.int64], ys: NDArray[np.int64]
                 ) -> NDArray[np.int32]:
    """Rectangle id + 1 per output pixel (0 = empty), the pixels' cells being ``xs`` (per
    column) and ``ys`` (per row), both ascending: each rectangle's cell span becomes a pixel
    span, and disjoint rectangles make a 2-D prefix sum of their corners exact."""
    r = g.rects
    ids = np.arange(1, r.size + 1, dtype=np.int64)
    x, y = r["x"].astype(np.int64), r["y"].astype(np.int64)
    px0, px1 = np.searchsorted(xs, x), np.searchsorted(xs, x + r["w"])
    py0, py1 = np.searchsorted(ys, y), np.searchsorted(ys, y + r["h"])
    diff = np.zeros((ys.size + 1, xs.size + 1), np.int64)
    np.add.at(diff, (py0, px0), ids)
    np.add.at(diff, (py0, px1), -ids)
    np.add.at(diff, (py1, px0), -ids)
    np.add.at(diff, (py1, px1), ids)
    return diff.cumsum(0).cumsum(1)[:-1, :-1].astype(np.int32)


def _markers(arr: NDArray[np.uint8], px: NDArray[np.float64], py: NDArray[np.float64],
             rgba: NDArray[np.uint8], size: int) -> None:
    """Square markers of ``size`` px centred on ``(px, py)`` with a dark rim, clipped."""
    if px.size == 0:
        return
    h, w = arr.shape[:2]
    half = size // 2
    d = np.arange(-half - 1, size - half + 1)
    dy, dx = np.meshgrid(d, d, indexing="ij")
    rim = (dy == d[0]) | (dy == d[-1]) | (dx == d[0]) | (dx == d[-1])
    for mask, color in ((rim, None), (~rim, rgba)):
        ys = np.floor(py)[:, None].astype(np.int64) + dy[mask][None, :]
        xs = np.floor(px)[:, None].astype(np.int64) + dx[mask][None, :]
        inside = (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
        if color is None:
            arr[ys[inside], xs[inside]] = _OUTLINE
        else:
            full = np.broadcast_to(color[:, None, :], (*ys.shape, 4))
            arr[ys[inside], xs[inside]] = full[inside]
