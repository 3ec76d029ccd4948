"""Work arrays that vectorised systems reuse from tick to tick.

A system over 100k rows that builds its temporaries with fresh numpy expressions allocates
tens of megabytes per tick; the allocator hands big blocks back to the kernel and every
new one is page-faulted in again (measured: about 40% of collision time at 100k bodies).
A :class:`Scratch` keeps one buffer per name and hands out views of it, so ``out=`` writes
land in memory that is already mapped.

Contents are garbage between uses: every caller writes each element it later reads, in
the same call, so no result ever depends on what a previous tick (or another world) left
behind, and nothing here is state (never snapshotted, never hashed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ecs_engine import World

__all__ = ["Scratch", "world_scratch"]

_MAX_VIEWS = 256  # views kept per Scratch


class Scratch:
    """Named reusable buffers. ``get(name, n, dtype)`` is a length-``n`` view of a buffer
    whose capacity is the next power of two (at least 64), reallocated only when a call
    needs more or another dtype."""

    __slots__ = ("_arrays", "_views")

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}
        # (name, n, dtype as passed) -> the view last handed out: a system asks for the
        # same lengths tick after tick, and a dict lookup costs less than checking the
        # buffer's size and dtype and slicing it again
        self._views: dict[tuple[str, int, Any], np.ndarray] = {}

    def get(self, name: str, n: int, dtype: Any = np.float64) -> np.ndarray:
        key = (name, n, dtype)
        view = self._views.get(key)
        if view is not None:
            return view
        arr = self._arrays.get(name)
        if arr is None or arr.shape[0] < n or arr.dtype != dtype:
            arr = np.empty(max(64, 1 << max(0, n - 1).bit_length()), dtype)
            self._arrays[name] = arr
            # views of the old buffer (of this name) must not be handed out again
            self._views = {k: v for k, v in self._views.items() if k[0] != name}
        if len(self._views) >= _MAX_VIEWS:
            self._views.clear()  # (lengths change all the time: keep it bounded)
        view = self._views[key] = arr[:n]
        return view

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._arrays.values())


def world_scratch(world: World, key: str) -> Scratch:
    """The :class:`Scratch` kept in ``world.caches[key]`` (created on first use)."""
    found = world.caches.get(key)
    if isinstance(found, Scratch):
        return found
    fresh = Scratch()
    world.caches[key] = fresh
    return fresh
