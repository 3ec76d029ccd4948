"""Parent links: the ``ChildOf`` column is the only record of the hierarchy.

Children are never stored a second time: a per-world :class:`HierarchyIndex` sorts the
``ChildOf`` rows by (parent, attach order) and answers "children of these keys" with two
``searchsorted`` calls. It is rebuilt only when the ``ChildOf`` store's version moved, so
it can never disagree with the column (the two-sided bookkeeping behind most hierarchy
bugs in other engines). Depths are computed by pointer jumping (O(n log depth), no
per-entity Python loop), which also detects cycles.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from ecs_engine.component import component, field
from ecs_engine.entity import KEY_DTYPE, NULL, Entity, key_slots, key_str
from ecs_engine.keymap import KeyMap
from ecs_engine.prefab import PrefabOf
from ecs_engine.storage import ComponentStore

if TYPE_CHECKING:
    from ecs_engine.world import World


@component(name="ChildOf")
class ChildOf:
    """This entity is a child of ``parent``. Written by ``world.set_parent`` (and by
    ``spawn``/``add`` of a ``ChildOf``, which go through it); queries see it read-only."""

    parent: Entity = NULL
    depth: np.uint32 = field(editable=False)  # ancestors above this entity (1 under a root)
    order: np.uint64 = field(editable=False)  # attach sequence: children are listed in it


# Engine-defined components: every world resolves them by name when loading.
BUILTIN_COMPONENTS: dict[str, type] = {"ChildOf": ChildOf, "PrefabOf": PrefabOf}


def gather_ranges(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``concatenate([values[a:b] for a, b in zip(lo, hi)])`` without the Python loop."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return values[:0].copy()
    starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    return values[starts + np.arange(total)]


def jump_depths(parent_pos: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depth of every node of a forest given as parent positions (-1: the parent is
    outside, and the node's depth is ``base``). Pointer jumping: O(n log depth).

    Returns (depths, on_cycle): ``on_cycle`` marks nodes whose ancestor chain never
    leaves the array (a cycle, or below one); their depth is meaningless."""
    depth = np.where(parent_pos < 0, base, 1).astype(np.int64)
    jump = parent_pos.astype(np.int64, copy=True)
    for _ in range(max(1, len(jump)).bit_length() + 1):
        active = np.flatnonzero(jump >= 0)
        if len(active) == 0:
            return depth, np.zeros(len(jump), np.bool_)
        up = jump[active]
        depth[active] += depth[up]  # right side is read in full before the write
        jump[active] = jump[up]
    return depth, jump >= 0


def depth_levels(depths: np.ndarray) -> Iterator[np.ndarray]:
    """Indices into ``depths`` grouped by depth, shallowest first: process one level
    at a time and every parent is done before its children (transform propagation)."""
    if len(depths) == 0:
        return
    order = np.argsort(depths, kind="stable")
    sorted_depths = depths[order]
    cuts = np.flatnonzero(np.diff(sorted_depths)) + 1
    yield from np.split(order, cuts)


class HierarchyIndex:
    """``ChildOf`` rows sorted by (parent, order), rebuilt when the store's version moves.

    Holds only derived data (never saved or snapshotted); one per world."""

    def __init__(self) -> None:
        self._version = -1
        self.parents = np.zeros(0, KEY_DTYPE)  # sorted
        self.children = np.zeros(0, KEY_DTYPE)  # aligned with ``parents``
        self.next_order = 1

    def fresh(self, store: ComponentStore) -> bool:
        return self._version == store.data_version

    def refresh(self, store: ComponentStore) -> HierarchyIndex:
        if self._version != store.data_version:
            live = store.data[: store.n]
            parents = live["parent"]
            perm = np.lexsort((live["order"], parents))
            self.parents = parents[perm]
            self.children = store.entities[: store.n][perm]
            self.next_order = int(live["order"].max()) + 1 if store.n else 1
            self._version = store.data_version
        return self

    def children_of(self, keys: np.ndarray) -> np.ndarray:
        """Children of every key, key by key, each in attach order."""
        lo = np.searchsorted(self.parents, keys, "left")
        hi = np.searchsorted(self.parents, keys, "right")
        return gather_ranges(self.children, lo, hi)

    def descendants(self, keys: np.ndarray) -> np.ndarray:
        """Breadth-first descendants of ``keys`` (not the keys themselves)."""
        levels = []
        frontier = keys
        for _ in range(len(self.children) + 1):  # bounded even for a corrupted column
            frontier = self.children_of(frontier)
            if len(frontier) == 0:
                break
            levels.append(frontier)
        return np.concatenate(levels) if levels else np.zeros(0, KEY_DTYPE)


def child_of_store(world: World) -> ComponentStore | None:
    """The ``ChildOf`` store when any entity has a parent, else None (the cheap check)."""
    store = world._stores.get(ChildOf)
    return store if store is not None and store.n else None


def index(world: World) -> HierarchyIndex | None:
    store = child_of_store(world)
    return world._hierarchy.refresh(store) if store is not None else None


def unique_in_order(keys: np.ndarray) -> np.ndarray:
    """Live ``keys`` without repeats, first occurrences kept in order. Live keys are one
    per slot, so the first position of each slot tells (no sort: linear in the keys)."""
    if len(keys) < 2:
        return keys
    slots = key_slots(keys)
    positions = np.arange(len(keys))
    first = np.full(int(slots.max()) + 1, len(keys), np.int64)
    np.minimum.at(first, slots, positions)
    keep = first[slots] == positions
    return keys if keep.all() else keys[keep]


def with_descendants(world: World, keys: np.ndarray) -> np.ndarray:
    """``keys`` followed by their descendants not already among them (for despawn).

    Keys that died meanwhile (a deferred despawn whose subtree an earlier one already
    removed) are dropped. Cheap when nothing has children: one scan of the parent
    column instead of a rebuild of the index."""
    store = child_of_store(world)
    if store is None:
        return keys
    keys = keys[world._slots.alive_mask(keys)]
    idx = world._hierarchy
    if not idx.fresh(store):
        parents = store.data["parent"][: store.n]
        has_children = np.isin(keys, parents) if len(keys) < 64 else np.isin(parents, keys)
        if not has_children.any():
            return keys
        idx.refresh(store)
    below = idx.descendants(keys)
    if len(below) == 0:
        return keys
    if len(keys) == 1:  # one root's descendants: each once, never the root (no cycles)
        return np.concatenate([keys, below])
    return unique_in_order(np.concatenate([keys, below]))


def parent_of(world: World, keys: np.ndarray) -> np.ndarray:
    """Parent of every key (NULL for roots)."""
    store = world._stores.get(ChildOf)
    if store is None:
        return np.zeros(len(keys), KEY_DTYPE)
    rows = store.rows_of(key_slots(keys))
    out = np.zeros(len(keys), KEY_DTYPE)
    has = rows >= 0
    out[has] = store.data["parent"][rows[has]]
    return out


def depth_of(world: World, keys: np.ndarray) -> np.ndarray:
    """Depth of every key (0 for roots)."""
    store = world._stores.get(ChildOf)
    out = np.zeros(len(keys), np.int64)
    if store is None:
        return out
    rows = store.rows_of(key_slots(keys))
    has = rows >= 0
    out[has] = store.data["depth"][rows[has]]
    return out


def apply_parents(world: World, children: np.ndarray, parents: np.ndarray) -> None:
    """Make ``children[i]`` a child of ``parents[i]`` (NULL: a root). Keys are alive and
    ``children`` distinct (checked by the caller). ``ValueError`` naming the keys for a
    cycle, with nothing changed. A child whose parent does not change keeps its place
    among its siblings; one that moves goes last under its new parent."""
    store = world._store(ChildOf)
    current = parent_of(world, children)
    changed = current != parents
    if not changed.all():
        children, parents = children[changed], parents[changed]
    if len(children) == 0:
        return
    own = np.flatnonzero(children == parents)
    if len(own):
        raise ValueError(f"set_parent: {key_str(int(children[own[0]]))} cannot be its own "
                         f"parent")
    idx = world._hierarchy.refresh(store) if store.n else None
    # Only the moved entities and their (old) descendants can get a new ancestor chain.
    below = idx.descendants(children) if idx is not None else np.zeros(0, KEY_DTYPE)
    affected = unique_in_order(np.concatenate([children, below])) if len(below) else children
    new_parent = parent_of(world, affected)
    where = KeyMap(affected)
    moved = where.positions(children)
    new_parent[moved] = parents
    parent_pos = where.positions(new_parent)
    outside = (parent_pos < 0) & (new_parent != NULL)
    base = np.zeros(len(affected), np.int64)
    base[outside] = depth_of(world, new_parent[outside]) + 1
    depths, on_cycle = jump_depths(parent_pos, base)
    if on_cycle.any():
        moved_on_cycle = on_cycle[moved]
        i = int(np.flatnonzero(moved_on_cycle)[0])
        raise ValueError(f"set_parent: making {key_str(int(children[i]))} a child of "
                         f"{key_str(int(parents[i]))} would create a cycle (the parent is "
                         f"its descendant)")
    # Apply: nothing below can fail.
    next_order = (idx.next_order if idx is not None else 1)
    detach = parents == NULL
    if detach.any():
        gone = children[detach]
        gone = gone[store.rows_of(key_slots(gone)) >= 0]
        world._detach(store, gone)
    attach = ~detach
    kids = children[attach]
    rows = store.rows_of(key_slots(kids))
    new = rows < 0
    if new.any():
        added = store.append(kids[new])
        rows[new] = np.arange(added.start, added.stop)
    data = store.data
    data["parent"][rows] = parents[attach]
    data["order"][rows] = next_order + np.arange(len(kids), dtype=np.uint64)
    keep = affected[new_parent != NULL]
    keep_rows = store.rows_of(key_slots(keep))
    data["depth"][keep_rows] = depths[new_parent != NULL]
    store.touch(np.concatenate([rows, keep_rows]))
    if new.any() and store.owner is not None:
        store.owner.enter(kids[new])


def check_loaded(entities: np.ndarray, rows: np.ndarray, alive: np.ndarray) -> str | None:
    """What is wrong with a loaded ``ChildOf`` column (None if nothing): parents must be
    alive (``alive``: sorted live keys), the links acyclic, the depths consistent."""
    parents = rows["parent"]
    if len(parents) == 0:
        return None
    at = np.minimum(np.searchsorted(alive, parents), max(0, len(alive) - 1))
    ok = (alive[at] == parents) if len(alive) else np.zeros(len(parents), np.bool_)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        return (f"{key_str(int(entities[i]))} has parent {key_str(int(parents[i]))}, which is "
                f"not alive")
    parent_pos = KeyMap(entities).positions(parents)
    # A parent without a ChildOf row is a root, so its children have depth 1.
    depths, on_cycle = jump_depths(parent_pos, np.ones(len(parents), np.int64))
    if on_cycle.any():
        i = int(np.flatnonzero(on_cycle)[0])
        return f"the parent links form a cycle (through {key_str(int(entities[i]))})"
    wrong = depths != rows["depth"]
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        return (f"{key_str(int(entities[i]))} has depth {int(rows['depth'][i])}, its "
                f"ancestors say {int(depths[i])}")
    return None
