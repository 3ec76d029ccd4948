"""Owning groups: stores that keep their shared entities first, in the same order.

Like EnTT's owning groups: for a group over (A, B), rows ``[0, size)`` of A's and B's
stores hold the same entities in the same order, so a query over exactly (A, B) gets
contiguous, aligned views with no gather.

A group may hold one *nested* group (EnTT's nested groups): a group over (A, B, C) nested
in (A, B) keeps the members that also have C first inside (A, B)'s prefix, and C's store
in the same order, so queries over (A, B, C), (B, C) or (A, C) get views too while every
entity that has their types is a member. A store still has one owner: A and B belong to
the outer group, C to the nested one. The trade-off is EnTT's: every spawn, add or
remove that changes membership moves rows at each level it crosses (a few row moves per
level; a batch despawn plans every level's moves at once and moves each store's rows
once, ``storage.removal_plan``), and a chain serves only types that grow it (a group
holds at most one nested group, so two queries nesting different types cannot both be
served).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ecs_engine.entity import key_slots
from ecs_engine.storage import ComponentStore, move_plan


class Group:
    """Keeps the joined prefix of several stores aligned.

    ``stores`` lists the group's own stores first, then (for a nested group) every
    store of the group it is nested in; ``stores[0]`` is always one of its own, so
    ``stores[0].group_size`` is its size."""

    def __init__(self, types: Sequence[type], stores: Sequence[ComponentStore],
                 adopt_size: int | None = None, outer: Group | None = None) -> None:
        """Own ``stores`` and sort their shared entities to the front; with
        ``adopt_size`` the stores are already in group order (after a restore). With
        ``outer``, the group is nested in it: ``types`` include every type of ``outer``
        plus at least one more, whose stores no group owns."""
        by_store = dict(zip(stores, types, strict=True))
        inherited = outer.stores if outer is not None else ()
        if outer is not None:
            if outer.inner is not None:
                raise ValueError(f"the group ({_names(outer)}) already holds a nested group "
                                 f"({_names(outer.inner)})")
            missing = [s.schema.name for s in inherited if s not in by_store]
            if missing:
                raise ValueError(f"a nested group needs every type of its outer group "
                                 f"({_names(outer)}); missing {', '.join(missing)}")
        own = [s for s in stores if s not in inherited]
        if not own:
            raise ValueError(f"a nested group needs a type its outer group ({_names(outer)}) "
                             f"does not have")
        for store in own:
            if store.owner is not None:
                raise ValueError(f"{store.schema.name} is already owned by another group")
        self.stores: tuple[ComponentStore, ...] = (*own, *inherited)
        self.types = tuple(by_store[s] for s in self.stores)
        self.own = tuple(own)
        self.outer = outer
        self.inner: Group | None = None
        self.root: Group = outer.root if outer is not None else self
        self.depth: int = outer.depth + 1 if outer is not None else 0
        self.size = 0
        # (the root's: its chain, outermost first; kept as levels are nested or disbanded)
        self.levels: tuple[Group, ...] = (self,)
        for store in own:
            store.owner = self
        if outer is not None:
            outer.inner = self
            self.root.levels += (self,)
        own[0].clock.stamp += 1
        if adopt_size is not None:
            self._set_size(adopt_size)
            return
        self._set_size(0)
        smallest = min(self.stores, key=lambda s: s.n)
        self.enter(smallest.entities[: smallest.n].copy())

    def chain(self) -> tuple[Group, ...]:
        """This group and the groups nested in it, outermost first."""
        return self.root.levels[self.depth :]

    def _set_size(self, size: int) -> None:
        self.size = size
        for store in self.own:
            store.group_size = size
        self.own[0].clock.stamp += 1

    def enter(self, keys: np.ndarray) -> None:
        """Bring in those of ``keys`` (distinct) that now have every component (and the
        groups nested in this one: those that have theirs too)."""
        self._enter(keys)
        if self.inner is not None:
            self.inner.enter(keys)

    def _enter(self, keys: np.ndarray) -> None:
        if len(keys) == 0:
            return
        slots = key_slots(keys)
        rows0 = self.stores[0].rows_of(slots)
        mask = rows0 >= self.size
        for store in self.stores[1:]:
            mask &= store.rows_of(slots) >= 0
        outer = self.outer
        if outer is not None:  # only members of the outer group: rows move inside its prefix
            mask &= outer.stores[0].rows_of(slots) < outer.size
        if not mask.any():
            return
        slots = slots[mask]
        targets = np.arange(self.size, self.size + len(slots))
        for store in self.stores:
            store.move_rows(store.rows_of(slots), targets)
        self._set_size(self.size + len(slots))

    def enter_appended(self, count: int) -> None:
        """``enter`` of fresh entities that were just appended to every store of the
        group, as the last ``count`` rows of each (in the same key order; for a nested
        group, the last ``count`` rows of its outer group's prefix in the outer stores,
        where the outer group's ``enter_appended`` put them): all of them join, with no
        index lookups, and nothing moves where the group already spans its store (the
        common case: the appended rows are the group's next rows)."""
        if count == 0:
            return
        size = self.size
        own = self.own
        outer = self.outer
        for store in self.stores:
            # the fresh rows: the store's last, or (outer stores) the outer prefix's last
            end = store.n if outer is None or store in own else outer.size
            start = end - count
            if start != size:
                store.move_block(start, size, count)
        self._set_size(size + count)

    def grow_one(self) -> None:
        """One entity joined at row ``size`` of every store (``ComponentStore.insert_one``)."""
        self._set_size(self.size + 1)

    def remove_one(self, row: int, slot: int) -> None:
        """Remove the entity in group row ``row`` (its key's ``slot``) from every store
        of the group and of the groups it is nested in: its group's last row fills its
        place and the store's last row fills that one (two moves per store, no swaps;
        one more for each nesting level the entity belongs to)."""
        root = self.root
        if root.inner is None:
            last = root.size - 1
            for store in root.stores:
                store.remove_group_one(row, slot, last)
            root._set_size(last)
            return
        levels = root.levels
        lasts: list[int] = []  # the last row of each level the entity is in, outer first
        for level in levels:
            if row >= level.size:
                break
            lasts.append(level.size - 1)
        inward = lasts[::-1]  # innermost first, as remove_chain takes them
        for depth in range(len(lasts)):
            # this level's own stores are in the levels from it inward
            held = inward[: len(lasts) - depth]
            for store in levels[depth].own:
                store.remove_chain(row, slot, held)
        for depth, last in enumerate(lasts):
            levels[depth]._set_size(last)

    def leave(self, keys: np.ndarray) -> None:
        """Move those of ``keys`` (distinct) that are in the group out of it."""
        if len(keys) == 0:
            return
        rows = self.stores[0].rows_of(key_slots(keys))
        self.leave_rows(rows[rows >= 0])

    def leave_rows(self, rows: np.ndarray) -> None:
        """``leave`` of the entities in ``rows`` (distinct, int64) of any one store of
        the group: prefix rows name the same entities in every store, the others are not
        members (a caller that looked the rows up already saves the lookup). They leave
        the groups nested in this one first."""
        inner = self.inner
        if inner is not None:
            before = inner.size
            inner.leave_rows(rows)
            if inner.size != before:  # those rows now sit at [inner.size, before)
                rows = np.concatenate((rows[rows >= before],
                                       np.arange(inner.size, before, dtype=rows.dtype)))
        rows = rows[rows < self.size]
        if len(rows) == 0:
            return
        rows.sort()
        targets = np.arange(self.size - len(rows), self.size)
        moves = move_plan(rows, targets)  # the same rows in every store: planned once
        if moves is not None:
            for store in self.stores:
                store.place_rows(*moves)
        self._set_size(self.size - len(rows))

    def disband(self) -> None:
        """Give up the stores (and disband the groups nested in this one)."""
        if self.inner is not None:
            self.inner.disband()
        for store in self.own:
            store.owner = None
            store.group_size = 0
        self.own[0].clock.stamp += 1
        if self.outer is not None and self.outer.inner is self:
            self.outer.inner = None
            root = self.root
            root.levels = root.levels[: self.depth]
        self.size = 0


def innermost_level(stores: Sequence[ComponentStore], free: bool = False) -> Group | None:
    """The innermost group of the one chain of nested groups that owns ``stores``
    (None if their owners are not one chain; with ``free``, stores no group owns are
    allowed, and the answer is the chain's innermost group, which may nest more).
    Every store of the chain below it belongs to it too."""
    innermost: Group | None = None
    for store in stores:
        owner = store.owner
        if owner is None:
            if not free:
                return None
            continue
        if innermost is None:
            innermost = owner
        elif owner.root is not innermost.root:
            return None
        elif owner.depth > innermost.depth:
            innermost = owner
    if innermost is not None and free:
        innermost = innermost.chain()[-1]
    return innermost


def join_levels(stores: Sequence[ComponentStore], root: Group) -> list[Group]:
    """The levels of ``root``'s chain (outermost first) that an entity with exactly
    ``stores`` belongs to: each level whose own stores it all has, up to the first it
    lacks."""
    joined: list[Group] = []
    level: Group | None = root
    while level is not None and all(s in stores for s in level.own):
        joined.append(level)
        level = level.inner
    return joined


def insert_positions(store: ComponentStore, joined: list[Group]) -> list[int] | None:
    """Where one entity joining the levels ``joined`` (outermost first) is inserted in
    ``store``: the sizes of the levels that hold ``store``, innermost first (see
    ``ComponentStore.insert_chain``); None when it joins none of them (an append)."""
    owner = store.owner
    if owner is None or owner not in joined:
        return None
    root = owner.root
    return [level.size for level in reversed(joined)
            if level.root is root and level.depth >= owner.depth]


def nested_outer(names: Sequence[str], earlier: Sequence[Sequence[str]]) -> int | None:
    """Which of the ``earlier`` groups (by component names) a group over ``names`` is
    nested in: the largest whose names are a strict subset of ``names`` (None: none)."""
    wanted = set(names)
    best: int | None = None
    for i, other in enumerate(earlier):
        if set(other) < wanted and (best is None or len(other) > len(earlier[best])):
            best = i
    return best


def _names(group: Group | None) -> str:
    return ", ".join(s.schema.name for s in group.stores) if group is not None else ""
