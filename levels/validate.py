"""Batch validation of user-made levels: parse, partition, spawn, simulate, check, thumbnail.

A game with user-made levels validates every upload before it is listed. Each level is
packed into bytes (:func:`pack_level`), so the same pure batch function
(:func:`validate_batch`) runs in this process, on a local process pool or on a Ray cluster
whose machines share no files with the caller (:func:`ecs_engine.scaleout.run_batches`). A bad
level is a row with its error, never a crash of the run.

The simulation uses the game's own prefabs and systems, named as ``module:function`` strings
(resolved in the worker), so this module stays below ``ecs_engine.systems`` in the layering.
"""

from __future__ import annotations

import importlib
import io
import math
import os
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from ecs_engine import NULL, PrefabRegistry, World, schema_of
from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.loader import load_level

__all__ = [
    "DEFAULT_PREFABS", "DEFAULT_SYSTEMS", "LevelPackage", "ValidateConfig", "pack_level",
    "resolve", "thumbnail", "unpack_level", "validate_batch", "world_invariants",
]

DEFAULT_PREFABS = "ecs_engine.components:stock_prefabs"
DEFAULT_SYSTEMS = "ecs_engine.systems:add_platformer_systems"
MAX_PACKAGE_BYTES = 256 * 2**20
"""Largest level package (all of a level's files together), in bytes."""
_SINGLE_FILE_SUFFIXES = {".ldtk", ".tmx", ".tmj", ".json"}
_SIDECAR_SUFFIXES = {".ldtkl", ".tsx", ".tx", ".tj", ".tsj"}


@dataclass(frozen=True)
class LevelPackage:
    """One level as bytes: ``files`` maps paths relative to a root to their contents;
    ``entry`` is the file or folder to load; ``source`` is what the user named."""

    source: str
    entry: str
    files: Mapping[str, bytes]


@dataclass(frozen=True)
class ValidateConfig:
    """What every level goes through. ``ticks`` at 60 Hz; ``thumbnail`` is the longest side
    of the PNG in pixels (0: none); ``prefabs`` / ``systems`` are ``module:function``."""

    ticks: int = 120
    method: str = "greedy"
    thumbnail: int = 0
    prefabs: str = DEFAULT_PREFABS
    systems: str = DEFAULT_SYSTEMS
    seed: int = 0


def _read_tree(root: Path, files: dict[str, bytes], prefix: str = "") -> None:
    for entry in sorted(root.iterdir()):
        rel = f"{prefix}{entry.name}"
        if entry.is_symlink():
            continue  # a level folder is data; links could point anywhere on the machine
        if entry.is_dir():
            _read_tree(entry, files, rel + "/")
        elif entry.is_file():
            files[rel] = entry.read_bytes()


def pack_level(path: str | os.PathLike[str]) -> LevelPackage:
    """Read a level into a :class:`LevelPackage`: a level folder (or its ``.lvl``) with every
    file under it, or an editor file with its sidecars (LDtk's ``<name>/`` folder of external
    levels, Tiled tilesets and templates beside it). ``LevelError`` if it cannot be read."""
    source = os.fspath(path)
    p = Path(source)
    files: dict[str, bytes] = {}
    try:
        if p.is_dir() or p.suffix == ".lvl":
            folder = p if p.is_dir() else p.parent
            _read_tree(folder, files)
            entry = "." if p.is_dir() else p.name
        elif p.suffix.lower() in _SINGLE_FILE_SUFFIXES and p.is_file():
            files[p.name] = p.read_bytes()
            for sibling in sorted(p.parent.iterdir()):
                if sibling.suffix.lower() in _SIDECAR_SUFFIXES and sibling.is_file():
                    files[sibling.name] = sibling.read_bytes()
            externals = p.parent / p.stem
            if externals.is_dir():
                _read_tree(externals, files, p.stem + "/")
            entry = p.name
        else:
            raise LevelError(source, "not a level folder, .lvl, .ldtk or Tiled map")
    except OSError as exc:
        raise LevelError(source, f"cannot read: {exc.strerror or exc}") from None
    total = sum(len(b) for b in files.values())
    if total > MAX_PACKAGE_BYTES:
        raise LevelError(source, f"{total} bytes of level files, more than the "
                                 f"{MAX_PACKAGE_BYTES} allowed")
    return LevelPackage(source, entry, files)


def unpack_level(package: LevelPackage, root: Path) -> Path:
    """Write a package's files under ``root``; returns the path to load. ``LevelError`` if
    a packaged path would leave ``root`` (a package may come from another machine)."""
    base = root.resolve()
    for rel, data in package.files.items():
        target = (root / rel).resolve()
        if base not in target.parents:
            raise LevelError(package.source, f"packaged path {rel!r} leaves the level")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root / package.entry


def as_named_by_user(exc: LevelError, package: LevelPackage, root: Path) -> LevelError:
    """``exc`` from loading ``package`` unpacked under ``root``, naming the level as the
    user gave it (``package.source``) instead of the scratch copy."""
    def fix(text: str) -> str:
        return text.replace(str(root / package.entry), package.source) \
                   .replace(str(root), package.source)

    return LevelError(fix(exc.file), fix(exc.detail), where=exc.where)


def resolve(spec: str) -> Callable[..., Any]:
    """``"package.module:function"`` -> the function (``ValueError`` naming what is wrong)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r}: expected 'module:function'")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{spec!r}: {exc}") from None
    if not callable(target):
        raise ValueError(f"{spec!r} is not callable")
    return target


def world_invariants(world: World) -> list[str]:
    """What must hold in any sane world after a simulation: finite float columns and
    entity references that point at live entities (or NULL). One line per violation."""
    problems: list[str] = []
    for comp_type in world.component_types:
        store = world.store(comp_type)
        rows = store.data[: store.n]
        if rows.size == 0:
            continue
        name = schema_of(comp_type).name
        for spec in schema_of(comp_type).fields:
            column = rows[spec.name]
            if spec.is_entity:
                refs = column.reshape(-1)
                refs = refs[refs != NULL]
                dead = refs[~world.alive(refs)]
                if dead.size:
                    problems.append(f"{name}.{spec.name}: {dead.size} reference(s) to dead "
                                    f"entities, e.g. {int(dead[0]):#x}")
            elif column.dtype.kind == "f" and not np.isfinite(column).all():
                bad = int(np.count_nonzero(~np.isfinite(column)))
                problems.append(f"{name}.{spec.name}: {bad} non-finite value(s)")
    return problems


def thumbnail(world: World, longest_side: int) -> bytes:
    """A PNG of the world's boxes (``Position`` centre + ``Collider`` size), y up: solid
    geometry dark, moving things coloured. For a level browser, not for the game."""
    from ecs_engine.components import Collider, Position, Solid  # prefab data lives there

    boxes: list[np.ndarray] = []
    for kind in ("solid", "body"):
        rules: dict[str, Any] = ({"without": (Solid,)} if kind == "body" else {})
        types = (Position, Collider) if kind == "body" else (Position, Collider, Solid)
        with world.query(*types, readonly=types, **rules) as q:
            pos, size = q[Position], q[Collider]
            boxes.append(np.stack([pos["x"], pos["y"], size["w"], size["h"],
                                   np.full(len(q), kind == "solid")]).astype(np.float64))
    x, y, w, h, solid_flag = np.concatenate(boxes, axis=1)
    solid = solid_flag.astype(bool)
    if x.size == 0:
        return _png(Image.new("RGB", (1, 1), (40, 40, 48)))
    left, right = float((x - w / 2).min()), float((x + w / 2).max())
    bottom, top = float((y - h / 2).min()), float((y + h / 2).max())
    scale = longest_side / max(right - left, top - bottom, 1e-9)
    width = max(1, math.ceil((right - left) * scale))
    height = max(1, math.ceil((top - bottom) * scale))
    img = Image.new("RGB", (width, height), (135, 206, 235))
    draw = ImageDraw.Draw(img)
    x0 = (x - w / 2 - left) * scale
    x1 = (x + w / 2 - left) * scale
    y0 = (top - (y + h / 2)) * scale
    y1 = (top - (y - h / 2)) * scale
    for i in np.argsort(~solid, kind="stable"):  # solids first, bodies on top
        colour = (70, 55, 40) if solid[i] else (220, 60, 60)
        draw.rectangle((float(x0[i]), float(y0[i]), max(float(x0[i]), float(x1[i]) - 1),
                        max(float(y0[i]), float(y1[i]) - 1)), fill=colour)
    return _png(img)


def _png(img: Image.Image) -> bytes:
    out = io.BytesIO()
    img.save(out, format="PNG", optimize=False)
    return out.getvalue()


def _describe(exc: Exception) -> str:
    """An unexpected error as one line: type, message, its notes (``world.step`` names the
    system and tick) and the file and line it was raised at."""
    text = f"{type(exc).__name__}: {exc}"
    notes = getattr(exc, "__notes__", None)
    if notes:
        text += f" ({'; '.join(notes)})"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        text += f" [raised at {Path(frames[-1].filename).name}:{frames[-1].lineno}]"
    return text


def _validate_one(package: LevelPackage, config: ValidateConfig,
                  prefabs: PrefabRegistry, setup: Callable[[World], None]) -> dict[str, Any]:
    start = time.perf_counter()
    row: dict[str, Any] = {"path": package.source, "ok": False, "error": None, "entities": 0,
                           "rectangles": 0, "ticks": 0, "state_hash": None, "ms": 0.0}
    with tempfile.TemporaryDirectory(prefix="ecs-validate-") as tmp:
        root = Path(tmp)
        try:
            entry = unpack_level(package, root)
            world = World(seed=config.seed, auto_group=False)  # as the demo's (see Game)
            summary = load_level(world, entry, prefabs,
                                 method=config.method)  # type: ignore[arg-type]
            row["entities"] = len(world)
            row["rectangles"] = summary.rect_total
            setup(world)
            for _ in range(config.ticks):
                world.step(1 / 60)
                row["ticks"] += 1  # (a system failing at tick t leaves t ticks run)
            problems = world_invariants(world)
            row["state_hash"] = world.state_hash()
            if problems:
                row["error"] = "invariant broken after simulation: " + "; ".join(problems)
            else:
                row["ok"] = True
            if config.thumbnail > 0:
                row["thumbnail_png"] = thumbnail(world, config.thumbnail)
        except LevelError as exc:
            # Errors name the unpacked copy; users know the level by the path they gave.
            row["error"] = str(as_named_by_user(exc, package, root))
        except Exception as exc:  # a bug in a system or the engine: still one row, not a crash
            row["error"] = _describe(exc)
    row["ms"] = round((time.perf_counter() - start) * 1000.0, 3)
    return row


def validate_batch(config: dict[str, Any], batch: list[LevelPackage]) -> list[dict[str, Any]]:
    """The pure batch function: one result row per packaged level (see the module doc).

    Rows: ``path, ok, error, entities, rectangles, ticks, state_hash, ms`` and, when the
    config asks for thumbnails, ``thumbnail_png`` (bytes; the caller writes the files).
    """
    cfg = ValidateConfig(**config)
    prefabs = resolve(cfg.prefabs)()
    setup = resolve(cfg.systems)
    return [_validate_one(package, cfg, prefabs, setup) for package in batch]


def config_dict(config: ValidateConfig) -> dict[str, Any]:
    """The plain-dict form :func:`validate_batch` takes (it crosses process boundaries)."""
    return asdict(config)
