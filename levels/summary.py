"""What a level load produced: counts, sizes, visual layers for the renderer, timings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from ecs_engine.levels.colors import RGBA, to_hex

__all__ = ["LevelSummary", "VisualLayer", "WorldRect"]


class WorldRect(NamedTuple):
    """An axis-aligned box in world units (y up): bottom-left corner and size."""

    left: float
    bottom: float
    width: float
    height: float


class VisualLayer(NamedTuple):
    """A picture to draw: RGBA pixels (row 0 = top), where it goes in the world, draw order."""

    image: NDArray[np.uint8]
    rect: WorldRect
    z: int


def _empty_keys() -> NDArray[np.uint64]:
    return np.empty(0, dtype=np.uint64)


@dataclass(frozen=True)
class LevelSummary:
    """The result of :func:`levels.load_level`.

    ``size`` is the geometry size in cells (= world units), ``k`` the scale of sprite and
    visual images (image pixels per world unit), ``player_start`` the centre of the first
    entity whose prefab has a ``Player`` component (world units), ``seconds`` the wall time of
    the whole load (decoding, partition and spawning). ``keys`` are the spawned entities.
    """

    name: str
    path: Path
    version: int
    method: str
    size: tuple[int, int]
    k: int
    rect_counts: Mapping[str, int]
    entity_counts: Mapping[str, int]
    visuals: tuple[VisualLayer, ...]
    background: RGBA | None
    player_start: tuple[float, float] | None
    seconds: float
    keys: NDArray[np.uint64] = field(default_factory=_empty_keys)
    source: str = ""
    """The editor and format an editor level came from (``"LDtk 1.5.3"``); "" for ``.lvl``."""
    skipped: Mapping[str, int] = field(default_factory=dict)
    """What a ``strict=False`` load left out (and picture-only editor layers), with counts."""

    @property
    def rect_total(self) -> int:
        """Collider rectangles spawned from geometry (one entity each)."""
        return sum(self.rect_counts.values())

    @property
    def entity_total(self) -> int:
        return sum(self.entity_counts.values())

    def describe(self) -> str:
        """A few human-readable lines (what ``python -m ecs_engine.levels inspect`` prints)."""
        w, h = self.size
        start = ("none" if self.player_start is None
                 else f"({self.player_start[0]:g}, {self.player_start[1]:g})")
        made = self.source or f"format version {self.version}"
        lines = [
            f"level        {self.name!r} ({self.path}, {made})",
            f"geometry     {w} x {h} cells (world units); sprites/visuals at k = {self.k}",
            f"partition    {self.method}: {self.rect_total} rectangles",
        ]
        lines += [f"  {name:<12}{n:>8} rects" for name, n in sorted(self.rect_counts.items())]
        lines.append(f"entities     {self.entity_total}")
        lines += [f"  {name:<12}{n:>8}" for name, n in sorted(self.entity_counts.items())]
        lines.append(f"player start {start}")
        for v in self.visuals:
            r = v.rect
            lines.append(f"visual       {v.image.shape[1]}x{v.image.shape[0]} px at "
                         f"({r.left:g}, {r.bottom:g}) size {r.width:g}x{r.height:g}, z={v.z}")
        bg = "none" if self.background is None else to_hex(self.background)
        lines.append(f"background   {bg}")
        for what, n in sorted(self.skipped.items()):
            lines.append(f"skipped      {what} x{n}")
        lines.append(f"loaded in    {self.seconds * 1000:.1f} ms")
        return "\n".join(lines)
