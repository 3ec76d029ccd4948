"""Transform propagation: children placed relative to their parents, parents first."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ecs_engine import ChildOf, World, depth_levels
from ecs_engine.components import LocalOffset, Position
from ecs_engine.entity import key_slots
from ecs_engine.storage import ComponentStore
from ecs_engine.systems.versioned import derived

CACHE_KEY = "systems.transform.links"  # world.caches: the rows follow_parents works on
# world.caches: who follows whom, as slots (the part of the links a Position move keeps)
TREE_KEY = "systems.transform.tree"


@dataclass(frozen=True)
class _Links:
    """Which Position rows follow which, level by level, shallowest first: (child rows,
    parent rows, the children's LocalOffset rows) per level. They change only when an
    entity moves rows or a parent link changes, so a tick reuses them (cached by the
    versions they were read at) instead of re-deriving them from keys."""

    levels: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]
    written: np.ndarray  # every child row written, for one version bump


@dataclass(frozen=True)
class _Tree:
    """Per depth level, shallowest first: (child slots, parent slots, the children's
    LocalOffset rows). It depends on LocalOffset and ChildOf only, so a spawn or despawn
    that moves Position rows (a projectile, an effect: most layout changes in a game)
    re-derives only the Position rows from it, not the query and depth sort behind it."""

    levels: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]


def _links(world: World) -> _Links:
    positions, offsets, links = world.store(Position), world.store(LocalOffset), \
        world.store(ChildOf)
    # Parent links change only through world.set_parent, which moves ChildOf's version.
    tree_key = (offsets.layout_version, links.layout_version, links.data_version)

    def place() -> _Links:
        return _place(positions, derived(world, TREE_KEY, tree_key, lambda: _find_tree(world)))

    return derived(world, CACHE_KEY, (positions.layout_version, *tree_key), place)


def _find_tree(world: World) -> _Tree:
    offsets = world.store(LocalOffset)
    with world.query(LocalOffset, ChildOf, readonly=(LocalOffset, ChildOf)) as q:
        children = q.entities.copy()
        parents = q[ChildOf]["parent"].copy()
        depths = q[ChildOf]["depth"].copy()
    offset_rows = offsets.rows_of(key_slots(children))
    return _Tree(tuple((key_slots(children[level]), key_slots(parents[level]),
                        offset_rows[level]) for level in depth_levels(depths)))


def _place(positions: ComponentStore, tree: _Tree) -> _Links:
    """The tree's Position rows now (links whose child or parent has none are left out)."""
    levels = []
    for child_slots, parent_slots, offset_rows in tree.levels:
        child_rows = positions.rows_of(child_slots)
        parent_rows = positions.rows_of(parent_slots)
        ok = (child_rows >= 0) & (parent_rows >= 0)
        if ok.any():
            levels.append((child_rows[ok], parent_rows[ok], offset_rows[ok]))
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
