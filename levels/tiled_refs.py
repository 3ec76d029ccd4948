"""The files a Tiled map refers to (external tilesets, object templates), checked before
pytiled-parser opens any of them.

pytiled-parser follows every ``source`` / ``template`` path as written: an absolute path, a
``../`` that climbs out of the game, a FIFO (reading blocks forever) or ``/dev/zero``. So the
references are found first, transitively (a template names a tileset; a tileset's tile
collision shapes may use templates), and every one must:

- be relative (Tiled writes relative paths; an absolute one names a file of this machine);
- resolve, symlinks followed, inside the map's *project root*: the nearest folder at or above
  the map that holds a ``*.tiled-project`` file (Tiled's own project root, so the usual
  ``maps/`` beside ``tilesets/`` layout works), else the map's own folder, as for LDtk's
  external ``.ldtkl`` levels and a level folder's layer images;
- be a regular file, all of them together at most :data:`MAX_EDITOR_BYTES` bytes.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.jsonnode import MAX_EDITOR_BYTES
from ecs_engine.levels.safe_read import read_regular

__all__ = ["check_references", "project_root"]


def project_root(map_file: Path) -> Path:
    """The nearest folder at or above ``map_file`` holding a ``*.tiled-project`` file, else
    the map's own folder (resolved)."""
    folder = map_file.resolve().parent
    for candidate in (folder, *folder.parents):
        try:
            if any(candidate.glob("*.tiled-project")):
                return candidate
        except OSError:  # an unreadable folder above the map: no project there
            continue
    return folder


def check_references(map_file: Path, doc: Any) -> None:
    """Check every file the map (``doc``: its parsed JSON or XML root) refers to,
    transitively; see module doc. A :class:`LevelError` names the referring file and where
    in it the path is written."""
    root = project_root(map_file)
    total = 0
    seen = {map_file.resolve()}
    todo = [(map_file, doc)]
    while todo:
        referrer, node = todo.pop()
        if isinstance(node, ET.Element):
            _refuse_class_properties(referrer, node)
        for text, where in _references(node):
            target = _resolve(referrer, text, where, root)
            if target in seen:
                continue
            seen.add(target)
            try:
                data = read_regular(target, MAX_EDITOR_BYTES - total, "file")
            except LevelError as exc:
                raise LevelError(referrer, f"{text!r} ({target}): {exc.detail} (the files a "
                                           f"map refers to may hold {MAX_EDITOR_BYTES} bytes "
                                           f"together)" if "bytes" in exc.detail else
                                 f"{text!r} ({target}): {exc.detail}", where=where) from None
            total += len(data)
            todo.append((target, _parse(referrer.parent / text, data)))


def _refuse_class_properties(file: Path, doc: ET.Element) -> None:
    """``LevelError`` for a class-type property where the loader reads properties (tiles,
    and objects other than a tile's collision shapes) in an XML file: pytiled-parser's
    TMX/TSX/TX reader drops them, so the parameters they set would vanish silently (its
    JSON reader keeps them)."""
    shapes = {id(o) for tile in doc.iter("tile") for o in tile.iter("object")}
    owners = [("tile", t) for t in doc.iter("tile")]
    owners += [("object", o) for o in doc.iter("object") if id(o) not in shapes]
    for kind, owner in owners:
        for props in owner.findall("properties"):
            for prop in props.findall("property"):
                if prop.get("type") == "class":
                    raise LevelError(file, f"property {prop.get('name')!r} is of class type, "
                                           f"which pytiled-parser's XML reader drops; save "
                                           f"the file as JSON (.tmj/.tsj/.tj), or use plain "
                                           f"properties",
                                     where=f"{kind}(id {owner.get('id')})")


def _resolve(referrer: Path, text: str, where: str, root: Path) -> Path:
    if not text:
        raise LevelError(referrer, "an empty file path", where=where)
    if PurePosixPath(text).is_absolute() or PureWindowsPath(text).anchor:
        raise LevelError(referrer, f"{text!r} is an absolute path; a map's tilesets and "
                                   f"templates must be given relative to it", where=where)
    try:
        target = (referrer.parent / text).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before 3.13)
        raise LevelError(referrer, f"cannot resolve {text!r}: {exc}", where=where) from None
    if not target.is_relative_to(root):
        raise LevelError(referrer, f"{text!r} resolves to {target}, outside the map's project "
                                   f"root {root} (the folder holding a *.tiled-project file, "
                                   f"else the map's folder)", where=where)
    return target


def _parse(shown: Path, data: bytes) -> Any:
    """A Tiled file as pytiled-parser tells the formats apart: XML when it starts with ``<``."""
    text = data.decode("utf-8-sig", errors="replace").lstrip()
    try:
        if text.startswith("<"):
            return ET.fromstring(text)
        return json.loads(text)
    except (ET.ParseError, ValueError, RecursionError) as exc:
        raise LevelError(shown, f"not a valid Tiled file: {exc}") from exc


def _references(doc: Any) -> Iterator[tuple[str, str]]:
    """``(path, where)`` of every tileset ``source`` and object ``template`` in a parsed
    Tiled file (map, tileset or template; JSON or XML)."""
    if isinstance(doc, ET.Element):
        for i, ts in enumerate(doc.iter("tileset")):
            if "source" in ts.attrib:
                yield ts.attrib["source"], f"tilesets[{i}](firstgid {ts.get('firstgid')}).source"
        for obj in doc.iter("object"):
            if "template" in obj.attrib:
                yield obj.attrib["template"], f"object(id {obj.get('id')}).template"
        return
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))
        elif isinstance(node, dict):
            for key, value in node.items():
                at = f"{path}.{key}" if path else str(key)
                if key == "template" and isinstance(value, str):
                    yield value, at
                elif key in ("tilesets", "tileset"):
                    for i, ts in enumerate(value if isinstance(value, list) else [value]):
                        sub = f"{at}[{i}]" if isinstance(value, list) else at
                        if isinstance(ts, dict) and isinstance(ts.get("source"), str):
                            yield ts["source"], f"{sub}.source"
                        stack.append((ts, sub))
                else:
                    stack.append((value, at))
