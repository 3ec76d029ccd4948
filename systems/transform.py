"""Transform propagation: children placed relative to their parents, parents first."""

from __future__ import annotations

import numpy as np

from ecs_engine import ChildOf, World, depth_levels
from ecs_engine.components import LocalOffset, Position
from ecs_engine.entity import key_slots


def follow_parents(world: World, dt: float) -> None:
    """Set the Position of every entity with a ``LocalOffset`` and a parent to the
    parent's Position plus the offset.

    Runs one vectorised step per hierarchy depth, shallowest first, so a chain of
    attachments (a lamp on a sign on a platform) follows its root in the same tick.
    Entities whose parent has no Position keep theirs. ``dt`` is unused."""
    with world.query(LocalOffset, ChildOf, readonly=(LocalOffset, ChildOf)) as q:
        if len(q) == 0:
            return
        children = q.entities.copy()
        parents = q[ChildOf]["parent"].copy()
        depths = q[ChildOf]["depth"].copy()
        offset = q[LocalOffset].copy()
    store = world.store(Position)
    data = store.data
    written = []
    for level in depth_levels(depths):
        child_rows = store.rows_of(key_slots(children[level]))
        parent_rows = store.rows_of(key_slots(parents[level]))
        ok = (child_rows >= 0) & (parent_rows >= 0)
        if not ok.any():
            continue
        rows, src = child_rows[ok], parent_rows[ok]
        data["x"][rows] = data["x"][src] + offset["x"][level][ok]
        data["y"][rows] = data["y"][src] + offset["y"][level][ok]
        written.append(rows)
    if written:
        store.touch(np.concatenate(written))
