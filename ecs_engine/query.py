"""Queries: aligned column views over the entities that have a set of components."""

from __future__ import annotations

import operator
import sys
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ecs_engine.component import schema_of, type_schema
from ecs_engine.entity import key_slots
from ecs_engine.group import Group, innermost_level
from ecs_engine.hierarchy import ChildOf
from ecs_engine.memcopy import clone
from ecs_engine.planmemo import PlanMemo, Resolved, layout_key
from ecs_engine.storage import ComponentStore

if TYPE_CHECKING:
    from ecs_engine.world import World


def _readonly(fresh: np.ndarray) -> np.ndarray:
    """``fresh`` (an index's result: no one else holds it) made read-only, in place."""
    fresh.setflags(write=False)  # (half the cost of a view plus `flags.writeable = False`)
    return fresh


# Rows depend on a store's layout and group prefix; whether a gathered plan nests a
# group (or follows one) on the groups too, and a restore makes new ones for its groups
# (a restore to before a nested group existed keeps every other store's layout).
_OWNED_LAYOUT = operator.attrgetter("layout_version", "group_size", "owner")
_ROWS = operator.attrgetter("n")
NO_KEYS = np.zeros(0, np.uint64)  # the keys of a query whose block has not opened (shared)
NO_KEYS.flags.writeable = False
_BYTES_COMPARE_MAX = 32768  # up to here one bytes compare finds unwritten columns fastest
_count = np.count_nonzero  # on a mask: ~0.4 us, where .all()/.any() cost ~2 us
_RUN = 1  # the step of a gathered query's run slices (see _as_run)


class QueryPlan:
    """The checked arguments of one ``world.query(...)`` call shape and its last resolved
    rows, reused while the layout of every store involved is unchanged.

    ``World.query`` keeps one plan per argument tuple, so a system that runs every tick
    validates its query once and re-resolves rows only after a structural change.
    """

    __slots__ = ("types", "without", "readonly", "may_create", "stores", "store_of", "rows",
                 "entities", "aligned", "nested_gather", "unstepped_gather", "_prefix",
                 "_prefix_lead", "_prefix_keys", "_prefix_size", "_within",
                 "_layouts", "_signature", "_memo", "idle", "_clock", "_stamp", "settled")

    def __init__(self, world: World, types: Iterable[type], without: Iterable[type] = (),
                 readonly: Iterable[type] = ()) -> None:
        types_t = tuple(types)
        readonly_t = tuple(readonly)
        without_t = tuple(without)
        if ChildOf in types_t and ChildOf not in readonly_t:
            readonly_t += (ChildOf,)  # parent links change through world.set_parent only
        for t in readonly_t:
            if t not in types_t:
                types_t += (t,)
        if not types_t:
            raise ValueError("query needs at least one component type")
        for t in types_t + without_t:
            type_schema(t)
        if len(set(types_t)) != len(types_t):
            raise ValueError("query lists a component type twice")
        overlap = set(types_t) & set(without_t)
        if overlap:
            names = ", ".join(schema_of(t).name for t in overlap)
            raise ValueError(f"query both requires and excludes {names}")
        self.types = types_t
        self.without = without_t
        self.readonly = frozenset(readonly_t)
        self.may_create = len(self.readonly) < len(types_t)  # only writing queries group
        self.idle: Query | None = None  # the last Query handed out (World.query reuses it)
        # The world's structural-change count when the rows were last checked (resolve):
        # while it stands, nothing the rows depend on moved.
        self._clock = world._layout_clock
        self.forget()

    def forget(self) -> None:
        """Drop the resolved rows and the stores: the next resolve starts over, as a new
        plan's first (also for stores a failed ``World._all_or_nothing`` took out of the
        world, which a caller's kept query would otherwise read for good)."""
        self.stores: tuple[ComponentStore, ...] = ()
        self.store_of: dict[type, ComponentStore] = {}
        self.rows: dict[type, slice | np.ndarray] = {}
        self.entities: np.ndarray = NO_KEYS
        self.aligned = True
        self.nested_gather = False  # gathered only because of when it ran (see _resolve)
        self.unstepped_gather = False  # ... outermost but outside a step: retried in one
        # What alone decides the rows of an aligned plan (see _resize): its one store, or
        # the group owning exactly its types. None: a full resolve.
        self._prefix: ComponentStore | Group | None = None
        # the store that carries the prefix's size: the one store (its n), or one the
        # group owns itself (its group_size)
        self._prefix_lead: ComponentStore | None = None
        self._prefix_keys: np.ndarray = NO_KEYS  # its first store's keys and the size
        self._prefix_size = -1  # its rows had when last resolved (see resolve)
        # The group whose prefix serves a plan over some of its types (see _within_level):
        # rows resolve again as that prefix while a store of the plan has only members.
        self._within: Group | None = None
        self._layouts: tuple[tuple[Any, ...], ...] = ()
        self._signature: tuple[Any, ...] | None = None
        self._memo = PlanMemo()
        self._stamp = -1
        # A gathered plan whose rows no call could resolve better while the clock stands
        # (see _is_settled): its block takes them as they are, like an aligned plan's.
        self.settled = False

    def _excluded(self, world: World) -> tuple[int, ...]:
        stores = world._stores
        return tuple(ex.layout_version if (ex := stores.get(t)) is not None else 0
                     for t in self.without)

    def resolve(self, world: World) -> None:
        """Bring ``rows``/``entities``/``aligned`` up to date (cheap when nothing moved).

        The rows depend on the layout version of every store involved (a restore brings
        a version back together with its layout), the first store's group (prefix size)
        and key array (aligned entities are a view of it), and the excluded stores. The
        last few layouts' rows are kept (see ``planmemo``): a restore to one of them
        resolves nothing. (``Query.__enter__`` first checks whether a prefix plan's rows
        still hold, the common case, without calling this.)"""
        sig = self._signature
        key: tuple[Any, ...] | None = None
        before: tuple[Any, ...] | None = None
        if sig is not None:
            first = self.stores[0]
            # The rows hold if no store of the world moved rows since the last check (the
            # clock), or if none of this plan's did (its layouts) ...
            if ((self._stamp == self._clock.stamp
                 or (first.layout_version == sig[4] and first.entities is sig[2]
                     and first.group_size == sig[0] and first.owner is sig[1]
                     and (len(self.stores) == 1
                          or tuple(map(_OWNED_LAYOUT, self.stores)) == self._layouts)
                     and (not self.without or self._excluded(world) == sig[3])))
                    and (self._prefix is not None  # (the common cases, without a call)
                         or self._within is not None
                         or self._reusable(world, self.aligned, self.nested_gather,
                                           self.unstepped_gather, self.rows,
                                           len(self.entities)))):
                self._stamp = self._clock.stamp
                self.settled = self._is_settled(world)
                return  # ... and a gathered query re-resolves while it could get a group or views
            if self._resize(first):
                self._remember(world, first)
                return
            key = self._memo_key(world)
            found = self._memo.get(key, first.entities)
            if found is not None and (
                    found.prefix is not None or found.within is not None
                    or self._reusable(world, found.aligned, found.nested_gather,
                                      found.unstepped_gather, found.rows,
                                      len(found.entities))):
                self.rows, self.entities = found.rows, found.entities
                self.aligned, self.nested_gather = found.aligned, found.nested_gather
                self.unstepped_gather, self._prefix = found.unstepped_gather, found.prefix
                self._within = found.within
                self._remember(world, first)
                return
            before = tuple(map(_OWNED_LAYOUT, self.stores))
        else:
            self.stores = tuple(world._store(t) for t in self.types)
            self.store_of = dict(zip(self.types, self.stores, strict=True))
        self._resolve(world)
        if key is None or tuple(map(_OWNED_LAYOUT, self.stores)) != before:
            key = self._memo_key(world)  # (the resolve made a group or moved rows)
        first = self.stores[0]
        self._remember(world, first)
        self._memo.put(key, Resolved(self.rows, self.entities, self.aligned,
                                     self.nested_gather, self.unstepped_gather, self._prefix,
                                     first.entities, self._within))

    def _is_settled(self, world: World) -> bool:
        """Whether gathered rows serve every call until the layout clock moves: nothing
        but a structural change (which moves the clock: a group made, nested or given
        up, rows moved, ``auto_group`` switched) could let a call resolve them better.
        Judged as ``_reusable`` judges an outermost call, and only from one: not while
        the rows were gathered only because of when they ran (nested, or outside a
        step), nor from inside another block (which could not make a group)."""
        if self.aligned:
            return False  # (aligned plans take the clock's fast path anyway)
        if len(self.types) == 1:
            return True
        if self.nested_gather or world._open_queries > 1:
            return False
        return self._reusable(world, False, False, False, self.rows, len(self.entities))

    def _reusable(self, world: World, aligned: bool, nested_gather: bool,
                  unstepped_gather: bool, rows: dict[type, slice | np.ndarray],
                  matches: int) -> bool:
        """Whether rows resolved with these flags (``rows``, ``matches`` of them; not
        served by a group's prefix) still serve: a gathered query resolves again while
        it could get a group, a nested group or views (one gathered outside a step only
        inside a step: nothing but a step could serve it better), and so does one whose
        views follow a group's order once a nested group would serve it: a resolve nests
        one first, so the rows stand for what a resolve gives only while it would not."""
        if aligned:
            return self._nest_level(world, rows, matches) is None
        if world._open_queries > 1 or len(self.types) == 1:
            return True  # (one type gathered by its excluded types: no group is made
            # for one type, so resolving again gives the same rows)
        if nested_gather and (not unstepped_gather or world.stepping):
            return False
        if not self.may_create or not world.auto_group:
            return True
        for store in self.stores:  # (a loop: a gathered query asks on every call)
            if store.owner is not None:
                # No group can be made over an owned store, but a nested group can: the
                # same rows are then not what a resolve gives (the groups changed since
                # they were resolved, e.g. a restore took away the nested group that kept
                # the query from nesting its own).
                return self._nest_level(world, rows, matches) is None
        return False

    def _memo_key(self, world: World) -> tuple[Any, ...]:
        """What the rows depend on besides the first store's key array (see planmemo)."""
        stores = world._stores
        return layout_key(world, self.stores, tuple(stores.get(t) for t in self.without)
                          if self.without else ())

    def _remember(self, world: World, first: ComponentStore) -> None:
        """Note the current layouts for the fast check (the rows are theirs)."""
        prefix = self._prefix
        if prefix is not None:  # the rows are [0, this size) of the first store
            self._prefix_keys = first.entities
            if prefix is first:
                self._prefix_lead = first
                self._prefix_size = first.n
            else:
                lead = self._prefix_lead = prefix.stores[0]  # type: ignore[union-attr]
                self._prefix_size = lead.group_size
        self._layouts = tuple(map(_OWNED_LAYOUT, self.stores))
        self._stamp = self._clock.stamp
        self.settled = self._is_settled(world)
        self._signature = (first.group_size, first.owner, first.entities,
                           self._excluded(world) if self.without else (),
                           first.layout_version)

    def _resize(self, first: ComponentStore) -> bool:
        """Re-resolve an aligned plan whose rows are a prefix of known size: all of its
        one store, or the prefix of the group owning exactly its types (after a spawn
        or despawn only the size moved), or the prefix of a group with more types while
        one store of the plan holds only that group's members. False: a full resolve is
        needed."""
        prefix = self._prefix
        if prefix is None:
            within = self._within
            if within is None:
                return False
            lead = within.stores[0]
            if lead.owner is not within:  # (disbanded or replaced)
                return False
            size = lead.group_size
            for store in self.stores:
                if store.n == size:  # no entity outside the prefix has this type
                    break
            else:
                return False
        elif prefix is first:
            size = first.n
        else:
            lead = prefix.stores[0]  # type: ignore[union-attr]
            if lead.owner is not prefix:  # (a disbanded or replaced group owns nothing)
                return False
            size = lead.group_size
        self._set_aligned(slice(0, size), first)
        return True

    def _resolve(self, world: World) -> None:
        self.nested_gather = self.unstepped_gather = False
        self._prefix = self._within = None
        stores = self.store_of
        if self.without:
            excluded = [s for t in self.without
                        if (s := world._stores.get(t)) is not None and s.n]
        else:
            excluded = []
        first = self.stores[0]
        if len(self.types) == 1 and not excluded:
            self._set_aligned(slice(0, first.n), first)
            if not self.without:  # (an excluded store that gains rows changes the rows)
                self._prefix = first
            return
        if min(map(_ROWS, self.stores)) == 0:  # nothing can match: no gather at all
            self._set_aligned(slice(0, 0), first)
            return
        owner = first.owner
        if all(s.owner is owner for s in self.stores):
            # (Stores of one group, or of none: a group may own exactly these types, be
            # made for them, or serve them from its prefix. Mixed owners rule all three
            # out: a group owning these types owns every one of their stores.)
            group = world._group_for(self.types, may_create=self.may_create,
                                     stores=self.stores)
            if group is not None and not excluded:
                self._set_aligned(slice(0, group.size), first)
                if not self.without:
                    self._prefix = group
                return
            if not excluded and isinstance(owner, Group) and self._within_level(owner):
                return
        elif not excluded:
            level = innermost_level(self.stores)  # stores of one chain of nested groups
            if level is not None:
                if set(self.types) == set(level.types):
                    self._set_aligned(slice(0, level.size), first)
                    if not self.without:
                        self._prefix = level
                    return
                if self._within_level(level):
                    return

        def skipped(store: ComponentStore) -> int:
            """Leading rows no match can be in: the prefix of the outermost group over
            this store whose members all have a type the query excludes."""
            level = store.owner
            while level is not None:
                if any(e in level.stores for e in excluded):
                    return level.size
                level = level.inner
            return 0

        if excluded:
            driver = min(self.stores, key=lambda s: s.n - skipped(s))
            start = skipped(driver)
        else:  # nothing skipped: the smallest store drives
            driver, start = min(self.stores, key=_ROWS), 0
        keys = driver.entities[start : driver.n]
        slots = key_slots(keys)
        mask: np.ndarray | None = None
        looked_up: dict[type, np.ndarray] = {}
        for t, store in stores.items():
            if store is driver:
                continue  # its rows are [start, n): no lookup
            r = store.rows_of(slots)  # (intp: int32 indices are cast on every gather)
            looked_up[t] = r
            mask = r >= 0 if mask is None else mask & (r >= 0)
        for store in excluded:
            mask = (store.sparse[slots] < 0 if mask is None
                    else mask & (store.sparse[slots] < 0))  # (compared only: int32)
        assert mask is not None  # (another type, or an excluded store: see above)
        driver_type = self.types[self.stores.index(driver)]
        every = _count(mask) == len(mask)  # every driver row matches (common): no selection
        rows: dict[type, slice | np.ndarray]
        if every:  # the driver's column is then a view of its rows, not a gathered copy
            rows = dict(looked_up)
            rows[driver_type] = slice(start, driver.n)
        else:
            rows = {t: r[mask] for t, r in looked_up.items()}
            rows[driver_type] = mask.nonzero()[0] + start
        self.rows = rows
        if not excluded:
            if self._nest(world, rows, len(mask) if every else int(_count(mask))):
                return
            # Gathered only because another query is open or no step runs: retried
            # (when outermost, or if it ran outermost outside a step, inside one).
            self.nested_gather = world._open_queries > 1 or not world.stepping
            self.unstepped_gather = world._open_queries == 1 and not world.stepping
            if not self.nested_gather and self._align_in_group(world):
                return
        for t, gathered in rows.items():  # rows in one run: a view, not a gathered copy
            if not isinstance(gathered, slice):
                rows[t] = _as_run(gathered)
        entities = keys.copy() if every else keys[mask]  # (not a live view)
        entities.flags.writeable = False
        self.entities = entities
        self.aligned = False

    def _nest(self, world: World, rows: dict[type, slice | np.ndarray], matches: int) -> bool:
        """Serve a writing query over some stores of a chain of groups and some stores no
        group owns, whose matches (``rows``, ``matches`` of them) are all members of the
        chain's innermost group, by a group nested in that one over its types and the
        free ones (EnTT's nested groups): its prefix is then exactly the matches, now
        and after any structural change. Made where a group would be (``auto_group``,
        outermost query), as a group would: once, kept in snapshots and saves, so it
        replays exactly. A single match is a view anyway: nothing is made for it (the
        one nested group a group holds stays free for a query that needs it). True if
        served."""
        level = self._nest_level(world, rows, matches)
        if level is None:
            return False
        free = [t for t, s in self.store_of.items() if s.owner is None]
        types = [*free, *level.types]
        group = Group(types, [world._store(t) for t in types], outer=level)
        world._groups.append(group)
        first = self.stores[0]
        self._set_aligned(slice(0, group.size), first)
        if not self.without:
            if len(types) == len(self.types):
                self._prefix = group
            else:
                self._within = group
        return True

    def _nest_level(self, world: World, rows: dict[type, slice | np.ndarray],
                    matches: int) -> Group | None:
        """The group ``_nest`` would nest a group in for gathered ``rows`` (``matches``
        of them), or None when it would not nest one."""
        if not self.may_create or not world.auto_group or world._open_queries > 1:
            return None
        if matches < 2:
            return None
        level = innermost_level(self.stores, free=True)
        if level is None:
            return None
        lead_type: type | None = None  # a type whose store the chain owns
        free = False
        for t, s in self.store_of.items():
            if s.owner is None:
                free = True
            elif lead_type is None:
                lead_type = t
        if not free or lead_type is None:
            return None  # nothing for a nested group to own
        lead_rows = rows[lead_type]
        top = lead_rows.stop - 1 if isinstance(lead_rows, slice) else int(lead_rows.max())
        if top >= level.size:
            return None  # a match outside the group: a nested group would not serve it
        return level

    def _within_level(self, level: Group) -> bool:
        """Serve a query over some of one group's types (``level``: the group, or the
        innermost of a nested chain over the stores) by the group's prefix, when no
        entity outside the prefix has all the queried types (checked on the rows past the
        prefix of the smallest store, usually few). True if served."""
        first = self.stores[0]
        size = level.size
        driver = min(self.stores, key=lambda s: s.n)
        if driver.n > size:
            slots = key_slots(driver.entities[size : driver.n])
            outside = np.ones(len(slots), np.bool_)
            for store in self.stores:
                if store is not driver:
                    outside &= store.rows_of(slots) >= 0
            if outside.any():
                return False
        self._set_aligned(slice(0, size), first)  # the prefix holds the same keys in all
        if not self.without:
            self._within = level
        return True

    def _align_in_group(self, world: World) -> bool:
        """Serve a writing query that mixes stores of the world's first group with stores
        no group owns (``(Velocity, Gravity)`` beside the collision group) by views, when
        its matches are one contiguous run of the group's prefix: each free store keeps
        its entities that are in the group first, in group order, so the matches are one
        run there too. Later ticks get views until rows move again, and then only the
        rows out of place move.

        Row order is state (the state hash covers it), so it may change only where it
        replays identically: the target order depends only on the group, never on which
        query asks (queries never fight over a store); only the first group is followed
        (so two groups never fight over a free store); only writing queries inside
        ``world.step`` reorder (a renderer's, a test's or an ``on_restore`` callback's
        query between ticks leaves the state alone, and so does a read-only render
        system that skips re-simulated ticks); and only the outermost query does (rows
        must not move under an open block's views). True if served."""
        groups = world._groups
        if not self.may_create or not groups or not world.stepping:
            return False
        group = groups[0]
        if any(s.owner is not None and s.owner is not group for s in self.stores):
            return False
        free = [s for s in self.stores if s.owner is None]
        if not free or len(free) == len(self.stores):
            return False
        lead_type = next(t for t, s in self.store_of.items() if s.owner is group)
        lead = self.store_of[lead_type]  # rows in its prefix are the group's rows
        group_rows = self.rows[lead_type]  # the matches' rows there (gathered)
        if isinstance(group_rows, slice):  # (the lead drove the gather: all its rows)
            first, last = group_rows.start, group_rows.stop - 1
            k = last - first + 1
        else:
            k = len(group_rows)
            if k:
                first, last = int(group_rows.min()), int(group_rows.max())
        if k == 0:
            self._set_aligned(slice(0, 0), lead)
            return True
        if last >= group.size or last - first + 1 != k:
            return False  # a match outside the group, or not one run of it: gather
        rows: dict[type, slice | np.ndarray] = {}
        for ctype, store in self.store_of.items():
            if store.owner is group:
                rows[ctype] = slice(first, last + 1)
            else:
                start = _follow_group_order(store, lead, group.size, first)
                rows[ctype] = slice(start, start + k)
        self.rows = rows
        # Keys from the first store's own run: the plan's cache checks that store's arrays.
        head = self.types[0]
        self.entities = _readonly(self.store_of[head].entities[rows[head]])
        self.aligned = True
        return True

    def _set_aligned(self, rows: slice, store: ComponentStore) -> None:
        self.rows = dict.fromkeys(self.types, rows)
        self.entities = _readonly(store.entities[rows])
        self.aligned = True


def _as_run(rows: np.ndarray) -> slice | np.ndarray:
    """``rows`` as a run slice when they are one increasing run of consecutive rows (a
    player's one row, a store's rows in the driver's order), else ``rows``. A column over
    a run is a view: no copy per block (~1-2 us each on a few rows). A run slice has
    step 1 (a view's own slices have none): its writable columns keep the gathered
    columns' change tracking (compared at the block's end, only changed rows touched)."""
    k = len(rows)
    if k == 0:
        return rows
    first = int(rows[0])
    if k > 1 and (int(rows[-1]) - first + 1 != k or _count(rows[1:] <= rows[:-1])):
        return rows  # (distinct rows spanning k rows in increasing order: the run)
    return slice(first, first + k, _RUN)


def _follow_group_order(store: ComponentStore, lead: ComponentStore, size: int,
                        first: int) -> int:
    """Keep ``store`` (owned by no group) in the group's order: its entities that are in
    the group (whose prefix is ``lead[:size]``) in rows ``[0, m)``, in group order; the
    others after them. Moves only rows out of place (a member outside ``[0, m)`` trades
    rows with a non-member inside it). Returns the row where the entity in the group's
    row ``first`` sits."""
    member_of = store.sparse[key_slots(lead.entities[:size])]  # store row per group row
    present = member_of >= 0
    member_rows = member_of[present].astype(np.intp)  # in group order
    m = len(member_rows)
    targets = np.arange(m)
    wrong = member_rows != targets
    if wrong.any():
        src, dst = member_rows[wrong], targets[wrong]
        in_prefix = np.zeros(m, np.bool_)
        in_prefix[member_rows[member_rows < m]] = True
        holes = np.flatnonzero(~in_prefix)  # non-members in [0, m): to the rows vacated
        vacated = np.sort(src[src >= m])  # by members that came in from beyond m
        store.place_rows(np.concatenate([dst, vacated]), np.concatenate([src, holes]))
    return int(np.count_nonzero(present[:first]))


def _idle_refs() -> int:
    """What ``sys.getrefcount(query)`` reports in ``World.query`` for a plan's last query
    that nothing else references (the plan's slot and the local name; measured, since
    interpreters count the call's own references differently)."""
    probe = QueryPlan.__new__(QueryPlan)
    probe.idle = Query.__new__(Query)
    query = probe.idle
    return sys.getrefcount(query)


class Query:
    """Rows of every entity that has all ``types`` and none of ``without``.

    Use as a context manager. ``q[T]`` is a structured array aligned with
    ``q.entities``, usable inside the block only (read-only after it); writes reach the
    store by the end of the block (immediately when
    the query is served by an owning group, which hands out views, not copies). A
    copied column is written back byte by byte where the block changed it, so writes made
    meanwhile elsewhere survive unless the block changed the same field of the same row. Columns in
    ``readonly`` are read-only arrays (writing raises ``ValueError``).
    Structural changes made inside the block (spawn, despawn, add, remove) are
    deferred until the outermost query closes. ``World.query`` hands out a plan's last
    Query again once nothing else holds it, so a kept ``q`` is never shared.
    """

    __slots__ = ("_world", "_in", "_depth", "_plan", "_cache", "_writable", "_gathered",
                 "entities")

    def __init__(self, world: World, types: Iterable[type] | QueryPlan,
                 without: Iterable[type] = (), readonly: Iterable[type] = ()) -> None:
        # Weak: the world keeps its plans' last queries for reuse (World.query), and a
        # strong reference back would make every world a reference cycle, freed only by
        # the cyclic garbage collector instead of when its last name goes.
        self._world = weakref.ref(world)
        self._in: World | None = None  # the world while a block is open, else None
        self._depth = 0  # blocks of this very object open inside its open block
        self._plan = types if isinstance(types, QueryPlan) else QueryPlan(
            world, types, without, readonly)
        self._cache: dict[type, np.ndarray] = {}
        self._writable: list[np.ndarray] = []  # columns to make read-only at block exit
        # gathered writable columns: (the copy, its original, the store's data version then)
        self._gathered: dict[type, tuple[np.ndarray, np.ndarray | bytes, int]] | None = None
        self.entities: np.ndarray = NO_KEYS

    @property
    def types(self) -> tuple[type, ...]:
        return self._plan.types

    @property
    def without(self) -> tuple[type, ...]:
        return self._plan.without

    @property
    def readonly(self) -> frozenset[type]:
        return self._plan.readonly

    def __enter__(self) -> Query:
        if self._in is not None:  # entered again inside its own block (a recursion)
            self._depth += 1
        world = self._in = self._world()
        if world is None:
            raise RuntimeError("this query's world is gone (a query does not keep its "
                               "world alive: name the world while its queries are used, "
                               "as in `world = load(); with world.query(...) as q:`)")
        world._open_queries += 1
        plan = self._plan
        if plan._stamp == plan._clock.stamp and (plan.aligned or plan.settled):
            self.entities = plan.entities  # no store moved rows since the last check
            return self
        prefix = plan._prefix
        if prefix is not None:  # rows [0, size) of one key array: nothing else to check
            lead = plan._prefix_lead
            if lead is not None and plan.stores[0].entities is plan._prefix_keys and (
                    plan._prefix_size == (lead.n if prefix is lead else lead.group_size
                                          if lead.owner is prefix else -1)):
                # (the columns and keys are views: rows that moved inside it show)
                self.entities = plan.entities
                plan._stamp = plan._clock.stamp  # (checked now: later blocks take the
                return self  # clock's fast path until the next structural change)
        try:
            plan.resolve(world)
            self.entities = plan.entities
        except BaseException:
            if self._depth:
                self._depth -= 1
            else:
                self._in = None
            world._end_query()
            raise
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            if self._writable or self._cache:  # (a block that took no column skips this)
                self._release_columns()
        finally:
            world = self._in
            if self._depth:  # an inner block of this object: the outer one stays open
                self._depth -= 1
            else:
                self._in = None
            if world is not None:  # (None: not entered)
                world._open_queries -= 1
                if not world._open_queries and world._deferred:
                    world._flush()
        if exc is not None and isinstance(exc, ValueError | OverflowError):
            clearer = self._explain(exc)
            if clearer is not None:
                raise clearer from exc

    def _release_columns(self) -> None:
        """At a block's end: write gathered columns back, then make every column the
        block took read-only and forget them (also when a write-back raises)."""
        try:
            if self._gathered:
                rows = self._plan.rows
                store_of = self._plan.store_of
                for ctype, (arr, original, version) in self._gathered.items():
                    self._write_back(store_of[ctype], rows[ctype], arr, original, version)
        finally:
            if self._writable:
                for arr in self._writable:
                    # Dead after the block: a kept column that could still write would
                    # bypass change tracking (views derived inside the block are caught by
                    # the stores' outstanding-view check at the next snapshot or restore).
                    arr.setflags(write=False)
                self._writable = []
            if self._cache:
                self._cache = {}
                self._gathered = None

    def _explain(self, exc: ValueError | OverflowError) -> Exception | None:
        """numpy's error inside the block, restated in the query's terms (or None).

        Translating here, as the error leaves the block, costs nothing on the hot path:
        ``q[T]`` stays a plain numpy array.
        """
        message = str(exc)
        schemas = [schema_of(t) for t in self.types]
        if isinstance(exc, OverflowError):
            # "Python integer 100000 out of bounds for int16": name the query's fields of
            # that type (numpy does not know which column it was writing)
            dtype_name = message.rsplit(" for ", 1)[-1] if " out of bounds for " in message \
                else ""
            fields = [f"{s.name}.{f.name}" for s in schemas for f in s.fields
                      if dtype_name and f.dtype.name == dtype_name]
            if not fields:
                return None
            info = np.iinfo(np.dtype(dtype_name))
            return OverflowError(f"{message}: a value written to a column of this query does "
                                 f"not fit its type; its {dtype_name} fields: "
                                 f"{', '.join(fields)} (range [{info.min}, {info.max}])")
        if message.startswith("no field of name "):
            name = message[len("no field of name "):]
            if any(name in s.field_names for s in schemas):
                return None  # not one of our columns
            listed = "; ".join(f"{s.name} ({', '.join(s.field_names) or 'a tag'})"
                               for s in schemas)
            return ValueError(f"no field {name!r} in this query's components: {listed}")
        if message in ("assignment destination is read-only", "output array is read-only"):
            if not self.readonly:
                return None
            declared = [schema_of(t).name for t in self.types
                        if t in self.readonly and t is not ChildOf]
            why = []
            if declared:
                why.append(f"this query declared readonly=({', '.join(declared)}); those "
                           f"columns cannot be written (leave a type out of readonly= to "
                           f"write it)")
            if ChildOf in self.readonly:  # read-only whatever the query declared
                why.append("ChildOf is read-only in every query (change a parent with "
                           "world.set_parent)")
            return ValueError(f"{message}: {'; '.join(why)}")
        return None

    @staticmethod
    def _write_back(store: ComponentStore, rows: Any, arr: np.ndarray,
                    original: np.ndarray | bytes, version: int) -> None:
        """Scatter only the rows this block changed, so writes made meanwhile through
        ``world.get`` or an inner query survive (and unchanged chunks stay shared)."""
        if arr.nbytes == 0:
            return
        if isinstance(original, bytes):  # a small column
            if arr.tobytes() == original:
                return  # read, not written (one bytes compare beats numpy's)
            if (store.data_version == version and len(store.chunk_versions) == 1
                    and not store.views_outstanding()):
                # Nothing wrote the store since the gather (no tracked write moved its
                # version, and no view, such as an enclosing block's writable column or
                # one kept past its block, lived then or lives now to write it untracked;
                # see __getitem__), so its unchanged rows still hold their
                # original bytes: scattering every row writes the same values as
                # scattering the changed ones, and the one chunk is marked either way
                # (skips a per-row compare costing ~2 us at a few dozen rows).
                store.data[rows] = arr
                store.touch(rows)
                return
            original = np.frombuffer(original, arr.dtype)
        changed = _changed_rows(arr, original)
        if rows.__class__ is slice:  # a run: the block wrote the store's rows directly
            store.touch(changed.nonzero()[0] + rows.start)
            return
        hits = _count(changed)
        if not hits:
            return
        if hits == len(changed):  # every row written (a system's usual update): no selection
            where, new, old = rows, arr, original
        else:
            where = rows[changed]
            # select through a void view: a boolean index of a structured array copies
            # field by field (~5x slower)
            void = np.dtype((np.void, arr.dtype.itemsize))
            new = arr.view(void)[changed].view(arr.dtype)
            old = original.view(void)[changed].view(arr.dtype)
        if store.data_version != version:
            # Something wrote the store during the block (world.get, an inner query, a
            # view): keep its bytes wherever this block left a row's bytes as gathered,
            # so a record's write to another field of a row the block changed survives,
            # as it does when a group serves the query with views.
            now = store.data[where]
            new_b, old_b, now_b = (a.view(np.uint8) for a in (new, old, now))
            new = np.where(new_b != old_b, new_b, now_b).view(arr.dtype)
        store.data[where] = new
        store.touch(where)

    def __len__(self) -> int:
        self._check_open()
        return len(self.entities)

    def _check_open(self) -> None:
        if self._in is None:
            raise RuntimeError("use the query inside a with-block: `with world.query(...) as q:`")

    def __getitem__(self, ctype: type) -> np.ndarray:
        cached = self._cache.get(ctype)
        if cached is not None:
            return cached
        if self._in is None:
            self._check_open()
        plan = self._plan
        rows = plan.rows.get(ctype)
        if rows is None:
            raise KeyError(f"{type_schema(ctype).name} is not part of this query "
                           f"({', '.join(schema_of(t).name for t in plan.types)})")
        store = plan.store_of[ctype]
        if ctype in plan.readonly:
            if rows.__class__ is slice:
                arr = store.frozen[rows]  # a slice of a read-only view is read-only
            else:
                arr = store.data[rows]
                arr.flags.writeable = False
            self._cache[ctype] = arr
            return arr
        arr = store.data[rows]
        self._writable.append(arr)
        if rows.__class__ is slice and rows.step is None:  # (a run's step is _RUN)
            if rows.stop > rows.start:
                store.touch_rows(rows.start, rows.stop)
        else:
            if self._gathered is None:
                self._gathered = {}
            # The original, to find the rows the block changes: small columns as bytes
            # (one call; the exit compares bytes first anyway), others as a memcpy
            # (numpy copies structured arrays field by field).
            # The store's version then: -1 (never the store's) while views of it live,
            # which may write untracked during the block and die before its end.
            version = -1 if store.views_outstanding() else store.data_version
            self._gathered[ctype] = (arr, arr.tobytes() if arr.nbytes <= _BYTES_COMPARE_MAX
                                     else clone(arr), version)
        self._cache[ctype] = arr
        return arr

    def unstructured(self, ctype: type) -> np.ndarray:
        """``q[ctype]`` as a plain ``(len(q), values per row)`` array sharing its memory,
        for a component whose fields all have one dtype (``Position``: ``(n, 2)`` float32,
        x then y).

        One numpy call then covers every field: ``q.unstructured(Position) +=
        q.unstructured(Velocity) * dt`` runs about 4x faster at 100k rows than a line per
        field, which steps through memory with a stride of the whole row. numpy's
        ``structured_to_unstructured`` does the same at a far higher fixed cost. Writes are
        kept exactly like writes to ``q[ctype]`` (read-only types give a read-only view)."""
        if self._in is None:
            self._check_open()
        plan = self._plan
        rows = plan.rows.get(ctype)
        store = plan.store_of.get(ctype)
        if rows is None or store is None or store.flat is None:
            return self._unstructured_column(ctype)  # (and every error)
        if rows.__class__ is not slice or rows.step is not None:  # gathered or a run:
            return self._unstructured_column(ctype)  # its change tracking
        if ctype in plan.readonly:
            return store.frozen_flat[rows]  # type: ignore[index]
        flat = store.flat[rows]
        self._writable.append(flat)  # read-only after the block, like the columns
        if rows.stop > rows.start:
            store.touch_rows(rows.start, rows.stop)
        return flat

    def _unstructured_column(self, ctype: type) -> np.ndarray:
        column = self[ctype]
        schema = schema_of(ctype)
        element = schema.element
        if element is None:
            kinds = ", ".join(f"{f.name}: {f.dtype}" for f in schema.fields) or "no fields"
            raise TypeError(f"{schema.name} has no single field dtype ({kinds}); "
                            f"unstructured() needs one. Use q[{schema.name}][field] per field")
        flat = column.view(element).reshape(len(column), schema.values_per_row)
        if column.flags.writeable:
            self._writable.append(flat)  # read-only after the block, like the column
        return flat

    @property
    def aligned(self) -> bool:
        """True when the columns are views into the stores (no gather/scatter)."""
        self._check_open()
        return self._plan.aligned


IDLE_REFS = _idle_refs()


def _changed_rows(arr: np.ndarray, original: np.ndarray) -> np.ndarray:
    """Boolean mask of rows whose bytes differ (contiguous arrays of one dtype)."""
    size = arr.dtype.itemsize
    if size in (1, 2, 4, 8):
        word = np.dtype(f"u{size}")
        return arr.view(word) != original.view(word)
    row = np.dtype(f"V{size}")
    if len(arr) <= 64:  # a few rows: one memcmp per row has the smallest fixed cost
        return arr.view(row) != original.view(row)
    # Many rows: compare machine words (vectorised), then fold each row's k flags into
    # one test by reading them as one k-byte value.
    word_size = next(w for w in (8, 4, 2, 1) if size % w == 0)
    k = size // word_size
    word = np.dtype(f"u{word_size}")
    differs = arr.view(word) != original.view(word)
    if k in (2, 4, 8):
        return differs.view(np.dtype(f"u{k}")) != 0
    return differs.view(np.dtype(f"V{k}")) != np.zeros((), np.dtype(f"V{k}"))
