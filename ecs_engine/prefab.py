"""Prefabs: named templates of components whose fields level authors set by label.

A prefab may declare child prefabs (Dman's save scopes: a chest with 8 slots): instantiating
it builds the whole subtree, linked with ``ChildOf``, one ``spawn_batch`` per child kind
for every instance at once. The subtree is ordinary entities, so saves and blueprints keep
it, and a collection can grow or shrink without any change to the save format.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import xxhash

from ecs_engine.component import (
    ComponentBase,
    FieldSpec,
    as_component,
    component,
    component_values,
    detached,
    schema_of,
)
from ecs_engine.entity import Entity

if TYPE_CHECKING:
    from ecs_engine.world import World


class PrefabError(ValueError):
    """A prefab name, parameter or value that does not fit the registry."""


def prefab_id(name: str) -> int:
    """The stable 64-bit id of a prefab name (xxh3 of its UTF-8 bytes, never 0): what an
    entity stores to remember its prefab, independent of registration order."""
    return xxhash.xxh3_64_intdigest(name.encode("utf-8")) or 1


@component(name="PrefabOf")
class PrefabOf:
    """Which prefab an entity was made from (``prefab_id`` of its name). Saves, snapshots
    and blueprints carry it like any component; loading re-derives prefab-owned fields
    (``field(prefab=True)``) from the prefab it names."""

    id: np.uint64 = 0


@dataclass(frozen=True)
class Param:
    """A level-author parameter: the label and the component field it sets."""

    label: str
    ctype: type
    spec: FieldSpec


@dataclass(frozen=True)
class ChildPrefab:
    """``count`` children made from the prefab ``prefab`` (name or alias), with ``params``
    applied to each."""

    prefab: str
    count: int = 1
    params: Mapping[str, Any] = field(default_factory=dict)


ChildLike = str | tuple[str, int] | tuple[str, int, Mapping[str, Any]] | ChildPrefab


def _child_spec(owner: str, child: ChildLike) -> ChildPrefab:
    if isinstance(child, ChildPrefab):
        spec = child
    elif isinstance(child, str):
        spec = ChildPrefab(child)
    elif isinstance(child, tuple) and len(child) in (2, 3) and isinstance(child[0], str):
        spec = ChildPrefab(child[0], child[1], dict(child[2]) if len(child) == 3 else {})
    else:
        raise PrefabError(f"prefab {owner!r}: a child is a prefab name, (name, count), "
                          f"(name, count, params) or a ChildPrefab, not {child!r}")
    if isinstance(spec.count, bool) or not isinstance(spec.count, int) or spec.count < 0:
        raise PrefabError(f"prefab {owner!r}: child {spec.prefab!r} count must be an int "
                          f">= 0, got {spec.count!r}")
    return spec


def _check_lengths(prefab: Prefab, params: Mapping[str, Any], comps: list[ComponentBase],
                   count: int | None) -> None:
    """``PrefabError`` naming the parameters when the arrays given to ``instantiate_batch``
    disagree in length with each other or with ``count`` (spawn_batch would say it in its
    own terms, without the prefab or a parameter)."""
    lengths = {type(c): c._batch for c in comps if c._batch is not None}
    if len(set(lengths.values()) | ({count} if count is not None else set())) <= 1:
        return
    table = prefab.params()
    given = {label: lengths[table[label].ctype] for label in params
             if table[label].ctype in lengths and lengths[table[label].ctype] != count}
    listed = ", ".join(f"{label!r} has {n} values" for label, n in given.items())
    what = f"count={count} but {listed}" if count is not None else f"array lengths differ: {listed}"
    raise PrefabError(f"prefab {prefab.name!r}: instantiate_batch {what}; give one value "
                      f"per entity, or one value for all")


@dataclass(frozen=True)
class Prefab:
    """A named set of components with default values, and the child prefabs every
    instance gets (in this order, attached with ``ChildOf``)."""

    name: str
    components: tuple[ComponentBase, ...]
    aliases: tuple[str, ...] = ()
    children: tuple[ChildPrefab, ...] = ()

    def params(self) -> dict[str, Param]:
        """Editable parameters by label; ``Component.field`` always works too."""
        by_label: dict[str, list[Param]] = {}
        out: dict[str, Param] = {}
        for comp in self.components:
            ctype = type(comp)
            schema = schema_of(ctype)
            for spec in schema.fields:
                if not spec.editable:
                    continue
                param = Param(spec.label, ctype, spec)
                by_label.setdefault(spec.label, []).append(param)
                out[f"{schema.name}.{spec.name}"] = param
        for label, params in by_label.items():
            if len(params) == 1:
                out[label] = params[0]
        return out

    def hidden_params(self) -> set[str]:
        """Labels of non-editable fields (saved, but not settable from levels)."""
        return {spec.label for comp in self.components
                for spec in schema_of(type(comp)).fields if not spec.editable}

    def build(self, params: Mapping[str, Any]) -> list[ComponentBase]:
        """Component instances with ``params`` applied (scalars or batches), plus the
        ``PrefabOf`` that lets saves re-derive prefab-owned fields."""
        table = self.params()
        overrides: dict[type, dict[str, Any]] = {}
        given: dict[tuple[type, str], str] = {}  # field -> the label that set it
        for label, value in params.items():
            param = table.get(label)
            if param is None:
                shared = [k for k, p in table.items() if "." in k and p.spec.label == label]
                if len(shared) > 1:
                    raise PrefabError(f"prefab {self.name!r}: {label!r} is ambiguous: "
                                      f"{' and '.join(shared)} are both labelled {label!r}; "
                                      f"name one as 'Component.field' (e.g. {shared[0]!r})")
                why = ("is not editable" if label in self.hidden_params()
                       else "is not a parameter")
                raise PrefabError(f"prefab {self.name!r}: {label!r} {why}; parameters are "
                                  f"{sorted(k for k in table if '.' not in k)}")
            first = given.setdefault((param.ctype, param.spec.name), label)
            if first != label:  # ("tile" and "Tile.kind"): which wins would be silent
                raise PrefabError(f"prefab {self.name!r}: parameters {first!r} and {label!r} "
                                  f"set the same field "
                                  f"{schema_of(param.ctype).name}.{param.spec.name}; give it once")
            try:
                schema_of(param.ctype).convert(param.spec.name, value)
            except ValueError as exc:
                raise PrefabError(f"prefab {self.name!r}: parameter {label!r}: {exc}") from exc
            overrides.setdefault(param.ctype, {})[param.spec.name] = value
        comps: list[ComponentBase] = []
        for comp in self.components:
            ctype, values, _ = component_values(comp)
            merged: dict[str, Any] = dict(values)
            merged.update(overrides.get(ctype, {}))
            try:
                comps.append(ctype(**merged))
            except (TypeError, ValueError) as exc:
                raise PrefabError(f"prefab {self.name!r}: {exc}") from exc
        comps.append(as_component(PrefabOf(id=prefab_id(self.name))))
        return comps


class PrefabRegistry:
    """Prefabs by stable name; look-ups are case-insensitive and accept aliases."""

    def __init__(self) -> None:
        self._prefabs: dict[str, Prefab] = {}
        self._lookup: dict[str, str] = {}
        self._by_id: dict[int, str] = {}

    def register(self, name: str, *components: object, aliases: Iterable[str] = (),
                 children: Iterable[ChildLike] = ()) -> Prefab:
        """Add a prefab; its components give the defaults. ``children``: child prefabs
        every instance gets, e.g. ``[("slot", 8)]`` or ``["lid", ("slot", 8, {"size":
        2})]``; names may refer to prefabs registered later."""
        seen: set[type] = set()
        # Copies: the registry keeps them for good, and a caller changing an array it passed
        # in must not change the prefab (nor every save re-derived from it).
        comps = tuple(detached(as_component(c)) for c in components)
        for comp in comps:
            ctype, _, count = component_values(comp)
            if count is not None:
                raise PrefabError(f"prefab {name!r}: {schema_of(ctype).name} must be one "
                                  f"value, not a batch")
            if ctype in seen:
                raise PrefabError(f"prefab {name!r}: {schema_of(ctype).name} given twice")
            if ctype is PrefabOf:
                raise PrefabError(f"prefab {name!r}: PrefabOf is added by the registry")
            seen.add(ctype)
            if schema_of(ctype).name == "ChildOf":
                raise PrefabError(f"prefab {name!r}: ChildOf is set by instantiating (give "
                                  f"child prefabs with children=)")
        specs = tuple(_child_spec(name, c) for c in children)
        prefab = Prefab(name, comps, tuple(aliases), specs)
        pid = prefab_id(name)
        if pid in self._by_id and self._by_id[pid] != name:  # 2**-64: say so, never mix up
            raise PrefabError(f"prefab names {name!r} and {self._by_id[pid]!r} share an id")
        for key in (name, *prefab.aliases):
            folded = key.casefold()
            if folded in self._lookup:
                raise PrefabError(f"prefab name or alias {key!r} is already registered "
                                  f"(by {self._lookup[folded]!r})")
        self._prefabs[name] = prefab
        self._by_id[pid] = name
        for key in (name, *prefab.aliases):
            self._lookup[key.casefold()] = name
        return prefab

    def by_id(self, pid: int) -> Prefab | None:
        """The prefab whose :func:`prefab_id` is ``pid``, or None."""
        name = self._by_id.get(int(pid))
        return self._prefabs[name] if name is not None else None

    def alias(self, name: str, *aliases: str) -> Prefab:
        """Give the prefab ``name`` (or one of its aliases) more names, e.g. the names a level
        editor or an older game uses; returns the updated prefab."""
        prefab = self[name]
        for key in aliases:
            if not isinstance(key, str) or not key.strip():
                raise PrefabError(f"prefab {prefab.name!r}: an alias must be a non-empty "
                                  f"string, got {key!r}")
            owner = self._lookup.get(key.casefold())
            if owner is not None and owner != prefab.name:
                raise PrefabError(f"prefab name or alias {key!r} is already registered "
                                  f"(by {owner!r})")
        new = tuple(dict.fromkeys(a for a in aliases
                                  if a.casefold() not in self._lookup))
        updated = replace(prefab, aliases=prefab.aliases + new)
        self._prefabs[prefab.name] = updated
        for key in new:
            self._lookup[key.casefold()] = prefab.name
        return updated

    def unknown(self, name: str) -> str:
        """The message for a name that is no prefab: every prefab with its aliases, and the
        closest known name when one is near."""
        known = {key.casefold(): key for p in self._prefabs.values()
                 for key in (p.name, *p.aliases)}
        close = difflib.get_close_matches(name.casefold(), list(known), n=1, cutoff=0.6)
        hint = ""
        if close:
            key = known[close[0]]
            owner = self._lookup[close[0]]
            hint = (f" (did you mean {key!r}?)" if key == owner
                    else f" (did you mean {key!r}, an alias of {owner!r}?)")
        listing = ", ".join(
            p.name + (f" (aliases: {', '.join(p.aliases)})" if p.aliases else "")
            for p in sorted(self._prefabs.values(), key=lambda p: p.name))
        return f"unknown prefab {name!r}{hint}; known prefabs are {listing}"

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.casefold() in self._lookup

    def __getitem__(self, name: str) -> Prefab:
        found = self._lookup.get(name.casefold())
        if found is None:
            raise PrefabError(self.unknown(name))
        return self._prefabs[found]

    def resolve(self, name: str) -> Prefab | None:
        """The prefab for a name or alias, or None."""
        found = self._lookup.get(name.casefold())
        return self._prefabs[found] if found is not None else None

    @property
    def names(self) -> list[str]:
        return sorted(self._prefabs)

    def instantiate(self, world: World, name: str, **params: Any) -> Entity:
        """Spawn one entity from a prefab (with its child prefabs' subtree); ``params``
        by label (``x=3, speed=2``) apply to the root."""
        prefab = self[name]
        comps = prefab.build(params)
        for comp in comps:
            if comp._batch not in (None, 1):
                raise PrefabError(f"prefab {name!r}: instantiate takes single values; use "
                                  f"instantiate_batch for arrays")
        steps = self.child_steps(prefab)  # checked before anything is spawned
        key = world.spawn(*comps)
        self.spawn_children(world, steps, np.array([key], np.uint64))
        self._remember(world)
        return key

    def instantiate_batch(self, world: World, name: str, count: int | None = None,
                          **params: Any) -> np.ndarray:
        """Spawn many entities from a prefab (each with its child prefabs' subtree);
        array params give one value per entity."""
        prefab = self[name]
        comps = prefab.build(params)
        _check_lengths(prefab, params, comps, count)
        steps = self.child_steps(prefab)
        keys = world.spawn_batch(*comps, count=count)
        self.spawn_children(world, steps, keys)
        self._remember(world)
        return keys

    def remember(self, world: World) -> None:
        """Make this the registry ``world`` saves prefab-owned fields against (if it has
        none yet); instantiating and loading a level do this."""
        self._remember(world)

    def _remember(self, world: World) -> None:
        # A world saves prefab-owned fields against the registry that made its entities.
        if getattr(world, "prefabs", None) is None:
            world.prefabs = self

    def child_steps(self, prefab: Prefab) -> list[tuple[int, int, list[ComponentBase]]]:
        """The subtree below ``prefab`` as spawn steps (index of the parent step, -1 for
        the instances themselves; children per parent; their components), depth first:
        checked before anything is spawned, then given to :meth:`spawn_children` (level
        loaders use the pair for the prefabs they place).
        ``PrefabError`` for an unknown child prefab, bad params or a prefab that
        contains itself."""
        steps: list[tuple[int, int, list[ComponentBase]]] = []

        def walk(parent: Prefab, at: int, path: tuple[str, ...]) -> None:
            for spec in parent.children:
                child = self[spec.prefab]
                if child.name in path:
                    chain = " -> ".join((*path, child.name))
                    raise PrefabError(f"prefab {path[0]!r}: child prefabs contain themselves "
                                      f"({chain})")
                comps = child.build(spec.params)
                if any(c._batch is not None for c in comps):
                    raise PrefabError(f"prefab {parent.name!r}: params of child "
                                      f"{spec.prefab!r} must be single values")
                steps.append((at, spec.count, comps))
                walk(child, len(steps) - 1, (*path, child.name))

        walk(prefab, -1, (prefab.name,))
        return steps

    @staticmethod
    def spawn_children(world: World, steps: list[tuple[int, int, list[ComponentBase]]],
                        roots: np.ndarray) -> None:
        """One ``spawn_batch`` per step for every instance at once."""
        from ecs_engine.hierarchy import ChildOf  # hierarchy imports this module (PrefabOf)

        made: list[np.ndarray] = []
        for at, count, comps in steps:
            parents = np.repeat(roots if at < 0 else made[at], count)
            made.append(world.spawn_batch(*comps, ChildOf(parent=parents), count=len(parents))
                        if len(parents) else np.zeros(0, np.uint64))
