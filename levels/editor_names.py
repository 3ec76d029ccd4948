"""Editor names to prefabs and parameters: a game's mapping, the registry's aliases, strictness.

Level editors name things their own way: LDtk IntGrid values (``dirt``), entity identifiers
(``PlayerStart``), field identifiers (``isAwaken``); Tiled tile and object classes, layer
names and custom properties. A name resolves, in order, through

1. the game's ``names`` mapping (case-insensitive): editor name -> prefab name, or ``None`` to
   drop that thing on purpose; ``"Entity.field"`` -> parameter label, or ``None``;
2. the prefab registry: names and aliases (case-insensitively, ``PlayerStart`` also finds
   ``player_start``; see :meth:`PrefabRegistry.alias`); for fields, the prefab's parameter
   labels, ignoring case, ``_``, ``-`` and spaces.

What resolves nowhere is unknown: with ``strict=True`` a :class:`LevelError` (naming the
closest prefab), with ``strict=False`` skipped and counted in the summary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from ecs_engine import Param, Prefab, PrefabRegistry
from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.loader import resolve_prefab

__all__ = ["STOCK_EDITOR_NAMES", "Names", "stock_editor_names"]

STOCK_EDITOR_NAMES: Mapping[str, str | None] = MappingProxyType({
    # LDtk's sample projects (Typical_2D_platformer_example, Entities, SeparateLevelFiles)
    "dirt": "ground", "walls": "stone", "PlayerStart": "player", "Mob": "enemy",
    "Item": "coin", "Exit": "flag", "PlayerStart.life": "hp", "Enemy.life": "hp",
    # arcade's own Tiled maps (:resources:tiled_maps/): layers named for what they hold
    "Platforms": "ground", "Dirt": "ground", "Coins": "coin", "Enemies": "enemy",
    "Dynamic Items": "coin",
    # a Tiled layer with the boolean property "collision" and untyped tiles
    "collision": "ground",
})
"""Editor names of the sample projects and maps the demo loads, mapped to the stock prefabs."""


def stock_editor_names() -> dict[str, str | None]:
    """A fresh, editable copy of :data:`STOCK_EDITOR_NAMES`."""
    return dict(STOCK_EDITOR_NAMES)


def _squash(text: str) -> str:
    return re.sub(r"[\s_\-]", "", text).casefold()


class Names:
    """Resolves editor names for one load and remembers what was skipped."""

    def __init__(self, file: Path, prefabs: PrefabRegistry,
                 names: Mapping[str, str | None] | None, strict: bool) -> None:
        self.file = file
        self.prefabs = prefabs
        self.strict = strict
        self.skipped: dict[str, int] = {}
        self.names: dict[str, str | None] = {}
        for key, value in (names or {}).items():
            if not isinstance(key, str) or not (value is None or isinstance(value, str)):
                raise TypeError(f"names maps editor names (str) to prefab names or labels "
                                f"(str) or None, got {key!r}: {value!r}")
            self.names[key.casefold()] = value

    def skip(self, what: str, count: int = 1) -> None:
        self.skipped[what] = self.skipped.get(what, 0) + count

    def known(self, name: str) -> bool:
        """Whether ``name`` is in the game's mapping or finds a prefab (never raises)."""
        return (name.casefold() in self.names
                or resolve_prefab(self.prefabs, name) is not None)

    def prefab(self, name: str, what: str, where: str, count: int = 1) -> Prefab | None:
        """The prefab for editor name ``name`` (``what``: e.g. "entity", "IntGrid value");
        None when the game dropped it or (not strict) nobody knows it."""
        mapped = self.names.get(name.casefold(), name)
        if name.casefold() in self.names and mapped is None:
            return None  # dropped on purpose by the game's mapping
        assert mapped is not None
        found = resolve_prefab(self.prefabs, mapped)
        if found is not None:
            return found
        if mapped != name:  # the game's own mapping names a prefab that does not exist
            raise LevelError(self.file, f"{what} {name!r} is mapped to "
                                        f"{self.prefabs.unknown(mapped)}", where=where)
        if self.strict:
            raise LevelError(self.file, f"{what} {name!r}: {self.prefabs.unknown(name)} "
                                        f"(map it with names={{{name!r}: 'prefab'}} or an "
                                        f"alias, or load with strict=False to skip it)",
                             where=where)
        self.skip(f"{what} {name!r}", count)
        return None

    def param(self, owner: str, prefab: Prefab, label: str, where: str) -> Param | None:
        """The prefab parameter an editor field or property ``label`` of ``owner`` sets."""
        table = prefab.params()
        key = f"{owner}.{label}".casefold()
        if key in self.names:
            target = self.names[key]
            if target is None:
                return None
            if target not in table:
                raise LevelError(self.file, f"field {owner}.{label} is mapped to {target!r}, "
                                            f"which is not a parameter of prefab "
                                            f"{prefab.name!r}; parameters are "
                                            f"{_labels(table)}", where=where)
            return table[target]
        if label in table:
            return table[label]
        hits = {p.label: p for k, p in table.items() if _squash(k) == _squash(label)}
        if len(hits) == 1:
            return next(iter(hits.values()))
        if self.strict:
            raise LevelError(self.file, f"field {label!r} of {owner!r} is not a parameter of "
                                        f"prefab {prefab.name!r}; parameters are "
                                        f"{_labels(table)} (map it with "
                                        f"names={{{owner + '.' + label!r}: 'label' or None}}, "
                                        f"or load with strict=False to skip it)", where=where)
        self.skip(f"field {owner}.{label}")
        return None


def _labels(table: Mapping[str, Param]) -> list[str]:
    return sorted(k for k in table if "." not in k)
