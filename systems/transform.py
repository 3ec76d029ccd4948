"""Transform propagation: children placed relative to their parents, parents first."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ecs_engine import ChildOf, World, depth_levels
from ecs_engine.components import LocalOffset, Position
from ecs_engine.entity import key_slots
from ecs_engine.systems.versioned import derived

CACHE_KEY = "systems.transform.links"  # world.caches: the rows follow_parents works on


@dataclass(frozen=True)
class _Links:
    """Which Position rows follow which, level by level, shallowest first: (child rows,
    parent rows, the children's LocalOffset rows) per level. They change only when an
    entity moves rows or a parent link changes, so a tick reuses them (cached by the
    versions they were read at) instead of re-deriving them from keys."""

    levels: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]
    written: np.ndarray  # every child row written, for one version bump


def _links(world: World) -> _Links:
    positions, offsets, links = world.store(Position), world.store(LocalOffset), \
        world.store(ChildOf)
    # Parent links change only through world.set_parent, which moves ChildOf's version.
    key = (positions.layout_version, offsets.layout_version, links.layout_version,
           links.data_version)
    return derived(world, CACHE_KEY, key, lambda: _find_links(world))


def _find_links(world: World) -> _Links:
    positions, offsets = world.store(Position), world.store(LocalOffset)
    with world.query(LocalOffset, ChildOf, readonly=(LocalOffset, ChildOf)) as q:
        children = q.entities.copy()
        parents = q[ChildOf]["parent"].copy()
        depths = q[ChildOf]["depth"].copy()
    offset_rows = offsets.rows_of(key_slots(children))
    levels = []
    for level in depth_levels(depths):
        child_rows = positions.rows_of(key_slots(children[level]))
        parent_rows = positions.rows_of(key_slots(parents[level]))
        ok = (child_rows >= 0) & (parent_rows >= 0)
        if ok.any():
            levels.append((child_rows[ok], parent_rows[ok], offset_rows[level][ok]))
    written = np.concatenate([rows for rows, _, _ in levels]) if levels else np.zeros(0,
                                                                                     np.int64)
    return _Links(tuple(levels), written)


def follow_parents(world: World, dt: float) -> None:
    """Set the Position of every entity with a ``LocalOffset`` and a parent to the
    parent's Position plus the offset.

    Runs one vectorised step per hierarchy depth, shallowest first, so a chain of
    attachments (a lamp on a sign on a platform) follows its root in the same tick.
    Entities whose parent has no Position keep theirs. ``dt`` is unused."""
    links = _links(world)
    if not links.levels:
        return
    store = world.store(Position)
    x, y = store.columns["x"], store.columns["y"]
    offsets = world.store(LocalOffset).data
    for rows, src, offset_rows in links.levels:
        offset = offsets[offset_rows]  # read every tick: offsets may change any time
        x[rows] = x[src] + offset["x"]
        y[rows] = y[src] + offset["y"]
    store.touch(links.written)
