"""``--prefabs module:function``: a game's own prefab registry for the command-line tools."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from ecs_engine import PrefabRegistry

__all__ = ["PrefabSource", "load_prefabs"]

PrefabSource = tuple[PrefabRegistry, Mapping[str, str | None] | None]


def load_prefabs(spec: str | None) -> PrefabSource:
    """The registry (and editor-name mapping) that ``spec`` names.

    ``None``: the stock prefabs with the stock editor names. ``"package.module:function"``:
    ``function()`` returns a :class:`PrefabRegistry`, or a ``(registry, names)`` pair where
    ``names`` maps editor names to prefab names (see ``load_level``). ``ValueError`` with a
    readable message when the spec cannot be used.
    """
    if spec is None:
        from ecs_engine.components import stock_prefabs
        from ecs_engine.levels.editor_names import stock_editor_names

        return stock_prefabs(), stock_editor_names()
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--prefabs takes module:function (e.g. mygame.prefabs:make), "
                         f"got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"--prefabs {spec}: cannot import {module_name!r}: {exc}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ValueError(f"--prefabs {spec}: {module_name} has no function {attr!r}")
    made = factory()
    registry, names = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
    if not isinstance(registry, PrefabRegistry):
        raise ValueError(f"--prefabs {spec}: {attr}() must return a PrefabRegistry or a "
                         f"(PrefabRegistry, names) pair, got {type(made).__name__}")
    if names is not None and not isinstance(names, Mapping):
        raise ValueError(f"--prefabs {spec}: the names of {attr}() must be a mapping, got "
                         f"{type(names).__name__}")
    return registry, names
