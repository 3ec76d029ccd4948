"""The levels that ship with the package (``levels/data/<name>/level.lvl``)."""

from __future__ import annotations

from pathlib import Path

from ecs_engine.levels.format import LEVEL_FILE_NAME

__all__ = ["data_dir", "shipped_level", "shipped_levels"]


def data_dir() -> Path:
    """The folder holding the shipped level folders."""
    return Path(__file__).resolve().parent / "data"


def shipped_levels() -> tuple[str, ...]:
    """Names of the shipped levels, sorted."""
    root = data_dir()
    if not root.is_dir():
        return ()
    return tuple(sorted(p.name for p in root.iterdir() if (p / LEVEL_FILE_NAME).is_file()))


def shipped_level(name: str) -> Path:
    """The folder of a shipped level (``KeyError`` naming the shipped ones if unknown)."""
    folder = data_dir() / name
    if "/" in name or "\\" in name or name in ("", ".", "..") or not (
            folder / LEVEL_FILE_NAME).is_file():
        raise KeyError(f"no shipped level {name!r}; shipped levels are {list(shipped_levels())}")
    return folder
