"""Which reader a level path needs, and planning a level from a level editor's file."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from ecs_engine import PrefabRegistry
from ecs_engine.levels.editor_names import Names
from ecs_engine.levels.editor_plan import EditorPlan, plan_editor_level
from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.images import DEFAULT_MAX_PIXELS
from ecs_engine.levels.loader import DEFAULT_MAX_ENTITIES, Method

__all__ = ["EDITOR_SUFFIXES", "is_editor_file", "plan_editor_file"]

EDITOR_SUFFIXES = (".ldtk", ".tmx", ".tmj", ".json")


def is_editor_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names an LDtk project or a Tiled map (by its suffix)."""
    return Path(path).suffix.lower() in EDITOR_SUFFIXES


def plan_editor_file(path: str | os.PathLike[str], prefabs: PrefabRegistry,
                     method: Method = "greedy", *, level: str | int | None = None,
                     strict: bool = True, names: Mapping[str, str | None] | None = None,
                     max_pixels: int = DEFAULT_MAX_PIXELS,
                     max_entities: int = DEFAULT_MAX_ENTITIES) -> EditorPlan:
    """Read and check one level of an LDtk project or a Tiled map without spawning.

    ``max_pixels`` limits the grid cells of all tile (IntGrid) layers together, checked from
    the layers' sizes before any grid is built, as it limits a level folder's pixels;
    ``max_entities`` the entities the level makes, counted before their arrays are built.
    """
    start = time.perf_counter()
    if method not in ("greedy", "exact"):
        raise ValueError(f"method must be 'greedy' or 'exact', got {method!r}")
    file = Path(path)
    if not file.is_file():
        raise LevelError(file, "no such file")
    resolver = Names(file, prefabs, names, strict)
    try:
        if file.suffix.lower() == ".ldtk":
            from ecs_engine.levels.ldtk import read_ldtk

            editor_level = read_ldtk(file, level, max_cells=max_pixels)
        elif file.suffix.lower() in (".tmx", ".tmj", ".json"):
            from ecs_engine.levels.tiled import read_tiled

            editor_level = read_tiled(file, resolver, level, max_cells=max_pixels)
        else:
            raise LevelError(file, f"not a level editor file (expected one of "
                                   f"{EDITOR_SUFFIXES})")
        return plan_editor_level(editor_level, prefabs, method, resolver, start,
                                 max_entities=max_entities)
    except MemoryError as exc:
        # The budgets above keep real levels far from this; a machine short of memory still
        # gets the loader's one error type, and the world is untouched (nothing spawned yet).
        raise LevelError(file, "out of memory while reading the level; lower max_pixels= or "
                               "split the level") from exc
