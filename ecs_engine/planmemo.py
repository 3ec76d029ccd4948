"""The last few resolved rows of one query plan, keyed by the layouts they were read at.

A plan's rows are a function of the layouts of its stores (which key sits in which row,
and the group prefix), the excluded stores' layouts and the groups that own the stores.
Rows resolved at a layout are right again whenever the world comes back to it: a
rollback restores a frame a few ticks old, whose layouts its plans resolved then, and
re-simulates ticks whose spawns and despawns mostly replay the same keys into the same
rows (the slot table was restored too). Keeping the last few (like
``systems.versioned``) turns those re-resolves into a dict lookup.

Small stores are keyed by their keys' bytes (exact: equal bytes are the same layout
however the world got there); big ones by layout version (a restore brings a version
back together with its rows; a copy of their keys would cost memory). Groups are named
by their types and place in the world, with the groups nested in them (a restore makes
new ``Group`` objects for the same groups), never by identity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from ecs_engine.storage import ComponentStore
    from ecs_engine.world import World

KEEP = 8  # layouts remembered per plan: a rollback's reach (8 frames) meets a few
MAX_GATHERED_ROWS = 4096  # bigger gathered results are not kept (their memory; and a
# resolve of that size costs little next to the work on its rows)
CONTENT_MAX_ROWS = 1024  # stores up to this size are keyed by their keys' bytes


class Resolved(NamedTuple):
    """One resolve's outcome: what ``QueryPlan`` sets from it (a named tuple: built on
    every resolve, at a fifth of a frozen dataclass's cost)."""

    rows: dict[type, slice | np.ndarray]
    entities: np.ndarray
    aligned: bool
    nested_gather: bool
    unstepped_gather: bool
    prefix: Any  # QueryPlan._prefix: what alone sizes an aligned plan's rows (or None)
    keys: np.ndarray  # the first store's key array (aligned entities are a view of it)
    within: Any = None  # QueryPlan._within: the group whose prefix serves it (or None)


def layout_key(world: World, stores: tuple[ComponentStore, ...],
               excluded: tuple[ComponentStore | None, ...]) -> tuple[Any, ...]:
    """What a plan's rows over ``stores``, without the entities of ``excluded`` (None: a
    type with no store), depend on besides the first store's key array."""
    # (Loops, not generators: computed on every re-resolve, where a generator's setup
    # is a fair share of the cost.)
    present = tuple(e for e in excluded if e is not None) if excluded else ()
    small = True
    for s in stores + present:
        if s.n > CONTENT_MAX_ROWS:
            small = False
            break
    layouts: list[tuple[Any, int]] = []
    gone: tuple[Any, ...]
    if small:
        for s in stores:
            layouts.append((key_bytes(s), s.group_size))
        gone = tuple(key_bytes(e) if e is not None else None
                     for e in excluded) if excluded else ()
    else:
        for s in stores:
            layouts.append((s.layout_version, s.group_size))
        gone = tuple(e.layout_version if e is not None else 0
                     for e in excluded) if excluded else ()
    return small, tuple(layouts), gone, group_key(world, stores + present)


def key_bytes(store: ComponentStore) -> bytes:
    """``store``'s keys as bytes, made once per layout version (a version names one key
    array): every plan over the store re-resolving after a spawn gets the same bytes
    object, and Python keeps a bytes object's hash, so the store's keys are copied and
    hashed once per layout, not once per plan (Position sits in most of a tick's
    queries)."""
    version, found = store.key_bytes
    if version != store.layout_version:
        found = store.entities[: store.n].tobytes()
        store.key_bytes = (store.layout_version, found)
    return found


def group_key(world: World, stores: tuple[ComponentStore, ...]) -> tuple[Any, ...]:
    """Which group owns each store, as (its types, its place among the world's groups,
    and the types and sizes of the groups nested in it: whether a plan nests a group of
    its own, or follows one, depends on them, though they may own none of its stores)."""
    out: list[Any] = []
    for store in stores:
        owner = store.owner
        if owner is None:
            out.append(None)
        else:
            try:  # (list.index compares by identity here: groups define no __eq__)
                place = world._groups.index(owner)
            except ValueError:
                place = -1
            inner = owner.inner
            if inner is None:
                out.append((owner.types, place))
            else:
                out.append((owner.types, place,
                            tuple((g.types, g.size) for g in inner.chain())))
    return tuple(out)


class PlanMemo:
    """Up to ``KEEP`` resolved outcomes of one plan, least recently used dropped first."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, ...], Resolved] = {}

    def get(self, key: tuple[Any, ...], keys: np.ndarray) -> Resolved | None:
        """The outcome resolved at ``key`` if the first store still has the key array
        ``keys`` (None otherwise)."""
        entries = self._entries
        found = entries.pop(key, None)
        if found is None:
            return None
        entries[key] = found  # most recently used last
        return found if found.keys is keys else None

    def put(self, key: tuple[Any, ...], resolved: Resolved) -> None:
        if not resolved.aligned and len(resolved.entities) > MAX_GATHERED_ROWS:
            return
        entries = self._entries
        entries.pop(key, None)
        if len(entries) >= KEEP:
            del entries[next(iter(entries))]
        entries[key] = resolved

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
