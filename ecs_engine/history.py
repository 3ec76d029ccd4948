"""History: a ring buffer of snapshots for rewind, with a memory bound."""

from __future__ import annotations

import contextlib
import operator
from collections import deque
from typing import TYPE_CHECKING, Any, SupportsIndex

import numpy as np

from ecs_engine.memcopy import root_of
from ecs_engine.snapshot import Snapshot, is_current, state_token

if TYPE_CHECKING:
    from ecs_engine.world import World


def _whole(value: Any, lowest: int, rule: str) -> int:
    """``value`` as an int (Python or numpy, not bool) of at least ``lowest``; a NaN or
    a fraction would pass a ``< lowest`` test and bound nothing."""
    if not isinstance(value, bool):
        with contextlib.suppress(TypeError):  # (no __index__: a float, None, ...)
            whole = operator.index(value)
            if whole >= lowest:
                return whole
    raise ValueError(f"History {rule}, got {value!r}")


class History:
    """The last ``capacity`` snapshots (fewer if they would exceed ``max_bytes``).

    Consecutive snapshots share every part that did not change, so a mostly static world
    costs about one copy of its static stores plus the moving parts per snapshot.
    ``nbytes`` counts the memory actually held: a snapshot's copies live in one buffer,
    which stays whole while any part of it is still shared.
    """

    def __init__(self, capacity: SupportsIndex = 600,
                 max_bytes: SupportsIndex | None = None) -> None:
        self.capacity = _whole(capacity, 1, "capacity must be a whole number >= 1")
        self.max_bytes = None if max_bytes is None else _whole(
            max_bytes, 0, "max_bytes must be a whole number of bytes >= 0 or None")
        self._snaps: deque[Snapshot] = deque()
        self._refs: dict[int, list[int]] = {}  # id(buffer) -> [references, nbytes]
        self.nbytes = 0  # unique bytes held; shared arrays count once
        # The snapshot the last rewind restored and the world's state token right after
        # (callbacks included): value equality cannot always tell that nothing changed
        # since (NaN or objects without == in resources, callbacks that write).
        self._restored: tuple[Snapshot, tuple[object, ...]] | None = None

    def __len__(self) -> int:
        return len(self._snaps)

    @property
    def latest(self) -> Snapshot | None:
        return self._snaps[-1] if self._snaps else None

    def _hold(self, snap: Snapshot) -> None:
        for arr in snap.arrays():
            buf = root_of(arr)
            entry = self._refs.get(id(buf))
            if entry is None:
                self._refs[id(buf)] = [1, buf.nbytes]
                self.nbytes += buf.nbytes
            else:
                entry[0] += 1

    def _drop(self, snap: Snapshot) -> list[np.ndarray]:
        """Forget ``snap``; returns the buffers no snapshot left in the history uses."""
        freed = []
        if self._restored is not None and self._restored[0] is snap:
            self._restored = None
        for arr in snap.arrays():
            buf = root_of(arr)
            entry = self._refs[id(buf)]
            entry[0] -= 1
            if entry[0] == 0:
                del self._refs[id(buf)]
                self.nbytes -= entry[1]
                freed.append(buf)
        return freed

    def record(self, world: World) -> Snapshot:
        """Snapshot the world and keep it; evicts the oldest beyond the bounds.

        A full ring evicts first, and evicted buffers go to the world's pool, so the new
        snapshot can copy into memory the evicted one used (no page faults) when nothing
        else still references it."""
        if world._open_queries:
            raise RuntimeError("cannot snapshot while a query is open")
        while len(self._snaps) >= self.capacity:
            self._evict(world)
        snap = world.snapshot()
        self._snaps.append(snap)
        self._hold(snap)
        while self.max_bytes is not None and self.nbytes > self.max_bytes and len(
            self._snaps
        ) > 1:
            self._evict(world)
        return snap

    def _evict(self, world: World) -> None:
        for buf in self._drop(self._snaps.popleft()):
            world._buffers.offer(buf)

    def rewind(self, world: World) -> Snapshot | None:
        """Step back: forget the snapshots equal to the live state, restore the newest one
        that differs and keep it as the newest (it is what the world shows now, so the
        next rewind goes one further back). Returns it, or None when nothing older is left.

        Every call makes progress: right after a rewind, the restored snapshot counts as
        the live state until the world's entities, components, tick or rng change, even
        when resources do not compare equal to their copies (NaN, objects without ``==``)
        or an ``on_restore`` callback changed them. A ``RestoreCallbackError`` from a
        callback propagates after the rewind is complete.
        """
        while self._snaps:
            snap = self._snaps[-1]
            if not self._is_live(world, snap):
                try:
                    world.restore(snap)
                finally:  # also when a callback raised: the restore itself happened
                    self._restored = (snap, state_token(world))
                return snap
            if len(self._snaps) == 1:
                return None  # the oldest state is the live one: nothing to go back to
            self._drop(self._snaps.pop())
        return None

    def _is_live(self, world: World, snap: Snapshot) -> bool:
        if self._restored is not None and self._restored[0] is snap:
            return state_token(world) == self._restored[1] or is_current(world, snap)
        return is_current(world, snap)

    def clear(self) -> None:
        self._restored = None
        self._snaps.clear()
        self._refs.clear()
        self.nbytes = 0
