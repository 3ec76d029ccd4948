"""Tiled maps (``.tmx``, ``.tmj``, ``.json``) as :class:`EditorLevel` s, read with
pytiled-parser (the library arcade itself loads Tiled maps with).

Tile layers: a cell's name is its tile's class (Tiled's "class", older "type"), else the
layer's class, else, when the game knows it, the layer's name (arcade's own maps name layers
``Platforms``, ``Coins``); a layer with the boolean property ``collision`` set takes the name
``collision`` for its untyped tiles. Layers none of that applies to are pictures: not loaded,
listed in the summary. Objects: the name is the object's class, else its tile's class, else
the layer's class or name; custom properties (the tile's, then the object's own, templates
merged by pytiled-parser) set prefab parameters by label, and an ``int``/``object`` property
that sets an ``Entity`` field is an object id, resolved to that object's key. Text objects are
labels and are not loaded.

Coordinates: a world unit is one map tile (``tilewidth`` x ``tileheight`` px), y up from the
bottom of the map. Layer and group offsets shift their layers. Flip bits of tile ids are
ignored for collision (a flipped tile covers the same cell). Rectangle and ellipse objects
take their drawn size; polygons and polylines their bounding box; tile objects their size
when scaled in the editor; points none. Rotation turns the object about its Tiled origin; a
turned shape takes the bounding box of the turned shape (colliders are axis-aligned).
Infinite maps are read from their chunks; the world starts at the chunks' top-left. Maps that
are not orthogonal are refused.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ecs_engine.levels.colors import RGBA
from ecs_engine.levels.editor_names import Names
from ecs_engine.levels.editor_plan import EditorLevel, FieldValue, Instance, TileGrid
from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.images import DEFAULT_MAX_PIXELS
from ecs_engine.levels.jsonnode import MAX_EDITOR_BYTES, load_json
from ecs_engine.levels.safe_read import read_regular
from ecs_engine.levels.tiled_refs import check_references

__all__ = ["MAX_CELLS", "TILED_SUFFIXES", "read_tiled"]

TILED_SUFFIXES = (".tmx", ".tmj", ".json")
MAX_CELLS = 2**26
_GID_MASK = 0x0FFFFFFF  # the top four bits are flip/rotation flags


def _check_syntax(file: Path) -> Any:
    """JSON or XML syntax errors with their position, before pytiled-parser sees the file;
    then every file the map refers to (:mod:`.tiled_refs`). Returns the parsed document."""
    doc: Any
    if file.suffix.lower() == ".tmx":
        raw = read_regular(file, MAX_EDITOR_BYTES, "editor file")
        try:
            doc = ET.fromstring(raw)
        except ET.ParseError as exc:
            line, col = exc.position
            raise LevelError(file, f"invalid XML: {exc}", where=f"line {line}:{col + 1}") \
                from exc
        except (LookupError, ValueError) as exc:  # e.g. <?xml encoding="U0F-8"?>
            raise LevelError(file, f"invalid XML declaration: {exc}") from exc
    else:
        doc = load_json(file)
        if not isinstance(doc, dict) or doc.get("type") not in (None, "map"):
            kind = doc.get("type") if isinstance(doc, dict) else type(doc).__name__
            raise LevelError(file, f"not a Tiled map (type {kind!r}); a tileset or other "
                                   f"file cannot be loaded as a level")
    check_references(file, doc)
    return doc


_LAYER_TAGS = ("layer", "objectgroup", "imagelayer", "group")


def _tmx_quirks(file: Path, doc: Any) -> bool:
    """Whether a layer of the raw XML names only one of ``offsetx``/``offsety``: Tiled
    writes only the non-zero one, and pytiled-parser's TMX reader then ignores
    ``offsety`` alone and fails on ``offsetx`` alone; ``_parse`` completes them.
    (Class-type properties, which that reader drops, are refused by ``tiled_refs``.)"""
    return any((layer.get("offsetx") is None) != (layer.get("offsety") is None)
               for tag in _LAYER_TAGS for layer in doc.iter(tag))


def _completed_tmx(file: Path, doc: Any, folder: Path) -> Path:
    """A copy of the map in ``folder`` with both offsets on every layer that has one,
    and the files it refers to (tilesets, templates, images) named by absolute path, so
    the copy reads as the original (those references were checked on the original)."""
    for tag in _LAYER_TAGS:
        for layer in doc.iter(tag):
            if (layer.get("offsetx") is None) != (layer.get("offsety") is None):
                layer.set("offsetx", layer.get("offsetx") or "0")
                layer.set("offsety", layer.get("offsety") or "0")
    base = file.resolve().parent
    for element in doc.iter():
        for attr in ("source", "template"):
            value = element.get(attr)
            if value is not None and element.tag in ("tileset", "image", "object"):
                element.set(attr, str(base / value))
    copy = folder / file.name
    copy.write_bytes(ET.tostring(doc, encoding="utf-8"))
    return copy


def _parse(file: Path) -> Any:
    import tempfile

    import pytiled_parser

    doc = _check_syntax(file)
    completed = file.suffix.lower() == ".tmx" and _tmx_quirks(file, doc)
    try:
        if completed:
            with tempfile.TemporaryDirectory(prefix="ecs-tmx-") as folder:
                return pytiled_parser.parse_map(_completed_tmx(file, doc, Path(folder)))
        return pytiled_parser.parse_map(file)
    except RecursionError as exc:
        raise LevelError(file, "pytiled-parser cannot read the map: nested too deeply") from exc
    except Exception as exc:  # a third-party parser of untrusted files: anything can surface
        raise LevelError(file, f"pytiled-parser cannot read the map: "
                               f"{type(exc).__name__}: {exc}") from exc


def _num(value: Any, what: str, file: Path, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise LevelError(file, f"{what} must be a finite number, got {value!r}", where=where)
    return float(value)


def _size(value: Any, what: str, file: Path, where: str) -> int:
    n = _num(value, what, file, where)
    if n != int(n) or not 1 <= n <= 2**16:
        raise LevelError(file, f"{what} must be a whole number in [1, 65536], got {value!r}",
                         where=where)
    return int(n)


def _whole_numbers(file: Path, data: Any, where: str) -> None:
    """``LevelError`` unless ``data`` (rows of tile ids) holds JSON integers only: numpy
    would take ``true`` for 1 and cut ``1.9`` to 1. The type scan runs in C (map, set);
    the loop only finds the first culprit for the error."""
    rows = data if isinstance(data, list) else [data]
    for r, row in enumerate(rows):
        values = row if isinstance(row, list) else [row]
        if not set(map(type, values)) <= {int}:
            c = next(i for i, v in enumerate(values) if type(v) is not int)
            place = f"{where}[{r}][{c}]" if isinstance(row, list) else f"{where}[{r}]"
            raise LevelError(file, f"tile ids are whole numbers, got {values[c]!r}",
                             where=place)


@dataclass(frozen=True)
class _TileInfo:
    """What a global tile id stands for: its class, properties and image size (px)."""

    klass: str | None
    properties: dict[str, Any]
    size: tuple[float, float]


class _Reader:
    def __init__(self, file: Path, tmap: Any, names: Names,
                 max_cells: int = DEFAULT_MAX_PIXELS) -> None:
        self.file = file
        self.map = tmap
        self.names = names
        if tmap.orientation != "orthogonal":
            raise LevelError(file, f"{tmap.orientation!r} maps are not supported; the engine's "
                                   f"levels are orthogonal grids", where="orientation")
        self.tw = _size(tmap.tile_size.width, "tilewidth", file, "tilewidth")
        self.th = _size(tmap.tile_size.height, "tileheight", file, "tileheight")
        self.tiles = self._tilesets()
        self.grids: list[TileGrid] = []
        self.instances: list[Instance] = []
        if tmap.infinite:
            self.x0, self.y0, cols, rows = self._chunk_bounds()
        else:
            cols = _size(tmap.map_size.width, "width", file, "width")
            rows = _size(tmap.map_size.height, "height", file, "height")
            self.x0, self.y0 = 0, 0
        if cols * rows > MAX_CELLS:
            raise LevelError(file, f"{cols} x {rows} tiles is more than {MAX_CELLS}")
        # Every tile layer becomes a grid over the whole map (an infinite map: over the
        # bounds of all its chunks), so a few far-apart chunks in a tiny file could ask for
        # gigabytes: the layers together get one budget, checked before any grid exists.
        layers = sum(type(layer).__name__ == "TileLayer"
                     for layer, _, _, _ in self._walk(tmap.layers))
        if layers * cols * rows > max_cells:
            raise LevelError(file, f"{layers} tile layer(s) of {cols} x {rows} tiles hold "
                                   f"{layers * cols * rows} cells together; the limit is "
                                   f"{max_cells} cells for all layers of a level (max_pixels=)"
                                   + ("; the map is infinite and its chunks lie far apart"
                                      if tmap.infinite else ""))
        self.cols, self.rows = cols, rows

    def _tilesets(self) -> dict[int, _TileInfo]:
        out: dict[int, _TileInfo] = {}
        for firstgid, ts in (self.map.tilesets or {}).items():
            where = f"tilesets(firstgid {firstgid}: {getattr(ts, 'name', '?')})"
            if not isinstance(firstgid, int) or firstgid < 1:
                raise LevelError(self.file, f"firstgid must be a positive whole number, got "
                                            f"{firstgid!r}", where=where)
            size = (_num(ts.tile_width, "tilewidth", self.file, where),
                    _num(ts.tile_height, "tileheight", self.file, where))
            for local, tile in (ts.tiles or {}).items():
                klass = tile.class_ if isinstance(tile.class_, str) and tile.class_ else None
                tsize = (tile.width, tile.height) if tile.width and tile.height else size
                out[firstgid + int(local)] = _TileInfo(klass, dict(tile.properties or {}),
                                                       (float(tsize[0]), float(tsize[1])))
            out.setdefault(-firstgid, _TileInfo(None, {}, size))  # the set's default size
        return out

    def tile(self, gid: int) -> _TileInfo:
        info = self.tiles.get(gid)
        if info is not None:
            return info
        starts = sorted(-k for k in self.tiles if k < 0 and -k <= gid)
        return self.tiles[-starts[-1]] if starts else _TileInfo(None, {}, (self.tw, self.th))

    def _walk(self, layers: Any, prefix: str = "", ox: float = 0.0, oy: float = 0.0
              ) -> Iterator[tuple[Any, str, float, float]]:
        for i, layer in enumerate(layers or []):
            name = layer.name if isinstance(layer.name, str) else str(layer.name)
            where = f"{prefix}layers[{i}]({name})"
            off = layer.offset
            lx = ox + _num(off.x, "offsetx", self.file, where)
            ly = oy + _num(off.y, "offsety", self.file, where)
            sub = getattr(layer, "layers", None)
            if sub is not None or type(layer).__name__ == "LayerGroup":
                yield from self._walk(sub, f"{where}.", lx, ly)
            else:
                yield layer, where, lx, ly

    def _chunk_bounds(self) -> tuple[int, int, int, int]:
        xs: list[int] = []
        ys: list[int] = []
        for layer, where, _, _ in self._walk(self.map.layers):
            for j, chunk in enumerate(getattr(layer, "chunks", None) or []):
                at = f"{where}.chunks[{j}]"
                x = _num(chunk.coordinates.x, "chunk x", self.file, at)
                y = _num(chunk.coordinates.y, "chunk y", self.file, at)
                w = _size(chunk.size.width, "chunk width", self.file, at)
                h = _size(chunk.size.height, "chunk height", self.file, at)
                xs += [int(x), int(x) + w]
                ys += [int(y), int(y) + h]
        if not xs:
            return 0, 0, 1, 1
        return min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)

    # ------------------------------------------------------------------------------- layers

    def read(self) -> None:
        for layer, where, ox, oy in self._walk(self.map.layers):
            kind = type(layer).__name__
            if kind == "TileLayer":
                self.tile_layer(layer, where, ox, oy)
            elif kind == "ObjectLayer":
                for j, obj in enumerate(layer.tiled_objects or []):
                    inst = self.object(layer, obj, f"{where}.objects[{j}]", ox, oy)
                    if inst is not None:
                        self.instances.append(inst)

    def _cells(self, layer: Any, where: str) -> np.ndarray:
        """The layer's tile ids as a (rows, cols) array over the map (or chunk) bounds."""
        out = np.zeros((self.rows, self.cols), np.uint32)  # Tiled's ids are 32-bit
        parts: list[tuple[Any, int, int]] = []
        if self.map.infinite:
            for chunk in layer.chunks or []:
                parts.append((chunk.data, int(chunk.coordinates.x) - self.x0,
                              int(chunk.coordinates.y) - self.y0))
        elif layer.data is not None:
            parts.append((layer.data, 0, 0))
        for data, c0, r0 in parts:
            _whole_numbers(self.file, data, f"{where}.data")
            try:
                arr = np.asarray(data, dtype=np.int64)
            except (TypeError, ValueError, OverflowError) as exc:
                raise LevelError(self.file, f"tile data must be rows of tile ids: {exc}",
                                 where=f"{where}.data") from exc
            if arr.size == 0:
                continue
            if arr.min() < 0 or arr.max() >= 2**32:
                raise LevelError(self.file, "tile ids are 32-bit unsigned numbers",
                                 where=f"{where}.data")
            if arr.ndim != 2 or r0 + arr.shape[0] > self.rows or c0 + arr.shape[1] > self.cols:
                raise LevelError(self.file, f"tile data of shape {arr.shape} does not fit the "
                                            f"map's {self.cols} x {self.rows} tiles",
                                 where=f"{where}.data")
            out[r0:r0 + arr.shape[0], c0:c0 + arr.shape[1]] = arr
        out &= _GID_MASK
        return out

    def tile_layer(self, layer: Any, where: str, ox: float, oy: float) -> None:
        gids = self._cells(layer, where)
        used = np.unique(gids)
        used = used[used != 0]
        if used.size == 0:
            return
        layer_class = layer.class_ if isinstance(layer.class_, str) and layer.class_ else None
        props = layer.properties or {}
        collision = props.get("collision") is True
        fallback = layer_class
        if fallback is None and self.names.known(str(layer.name)):
            fallback = str(layer.name)
        if fallback is None and collision:
            fallback = "collision"
        kinds: list[str] = []
        kind_where: list[str] = []
        mapped = np.zeros(used.size, np.int32)
        for i, gid in enumerate(used.tolist()):
            name = self.tile(gid).klass or fallback
            if name is None:
                continue  # an untyped tile on a picture layer
            if name not in kinds:
                kinds.append(name)
                kind_where.append(f"{where}(tile id {gid}: {name})")
            mapped[i] = kinds.index(name) + 1
        if not kinds:
            self.names.skip(f"tile layer {layer.name!r} (a picture: no tile classes, no "
                            f"known layer name, no collision property)")
            return
        idx = np.searchsorted(np.concatenate([[0], used]), gids)
        grid = np.concatenate([[0], mapped])[idx].astype(np.int32)
        colors: tuple[RGBA, ...] = tuple((128, 128, 128, 255) for _ in kinds)
        left = ox / self.tw
        bottom = -oy / self.th
        self.grids.append(TileGrid(str(layer.name), where, grid, tuple(kinds),
                                   tuple(kind_where), colors, "tile class", (1.0, 1.0),
                                   (left, bottom)))

    # ------------------------------------------------------------------------------ objects

    def world(self, x_px: float, y_px: float) -> tuple[float, float]:
        return x_px / self.tw - self.x0, (self.rows + self.y0) - y_px / self.th

    def object(self, layer: Any, obj: Any, where: str, ox: float, oy: float
               ) -> Instance | None:
        kind = type(obj).__name__
        ident = obj.id
        if isinstance(ident, bool) or not isinstance(ident, int):
            raise LevelError(self.file, f"object id must be a whole number, got {ident!r}",
                             where=where)
        where = f"{where}(id {ident})"
        if kind == "Text":
            self.names.skip("text object (a label)")
            return None
        x = _num(obj.coordinates.x, "x", self.file, where) + ox
        y = _num(obj.coordinates.y, "y", self.file, where) + oy
        w = _num(obj.size.width, "width", self.file, where)
        h = _num(obj.size.height, "height", self.file, where)
        angle = math.radians(_num(obj.rotation, "rotation", self.file, where))
        cos, sin = math.cos(angle), math.sin(angle)

        def turn(dx: float, dy: float) -> tuple[float, float]:
            return x + dx * cos - dy * sin, y + dx * sin + dy * cos

        info: _TileInfo | None = None
        size: tuple[float, float] | None = None
        if kind == "Tile":
            gid = obj.gid
            if isinstance(gid, bool) or not isinstance(gid, int) or gid < 0:
                raise LevelError(self.file, f"gid must be a tile id, got {gid!r}", where=where)
            info = self.tile(gid & _GID_MASK)
            cx, cy = turn(w / 2, -h / 2)  # a tile object's origin is its bottom-left
            if (w, h) != info.size and w > 0 and h > 0:
                size = _turned_box(w, h, cos, sin, ellipse=False)
        elif kind in ("Polygon", "Polyline"):
            pts = [turn(_num(p.x, "point x", self.file, where),
                        _num(p.y, "point y", self.file, where)) for p in obj.points or []]
            if not pts:
                raise LevelError(self.file, f"{kind.lower()} without points", where=where)
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            cx, cy = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2
            size = (max(xs) - min(xs), max(ys) - min(ys))
        elif kind == "Point":
            cx, cy = x, y
        else:  # Rectangle, Ellipse: the origin is the top-left corner
            cx, cy = turn(w / 2, h / 2)
            size = _turned_box(w, h, cos, sin, kind == "Ellipse") if w > 0 and h > 0 else None
        klass = obj.class_ if isinstance(obj.class_, str) and obj.class_ else None
        layer_class = layer.class_ if isinstance(layer.class_, str) and layer.class_ else None
        name = klass or (info.klass if info else None) or layer_class or str(layer.name)
        props = dict(info.properties) if info else {}
        props.update(obj.properties or {})
        for label in props:
            if not isinstance(label, str) or not label:
                raise LevelError(self.file, f"a property name must be a non-empty string, got "
                                            f"{label!r}", where=f"{where}.properties")
        fields = tuple(_field(label, value, f"{where}.properties.{label}")
                       for label, value in props.items())
        wx, wy = self.world(cx, cy)
        wsize = (size[0] / self.tw, size[1] / self.th) if size else None
        return Instance(name, "object", where, ident, wx, wy, wsize, fields, str(layer.name))


def _turned_box(w: float, h: float, cos: float, sin: float, ellipse: bool
                ) -> tuple[float, float]:
    """Width and height of the axis-aligned box around a ``w`` x ``h`` rectangle (or the
    ellipse inside it) turned by the angle of ``cos``, ``sin``: a collider is axis-aligned,
    so a turned shape takes its bounding box, as polygons take their turned points' box."""
    if ellipse:  # the extremes of (w/2 cos t, h/2 sin t) turned, not the box's corners
        return (2 * math.hypot(w / 2 * cos, h / 2 * sin),
                2 * math.hypot(w / 2 * sin, h / 2 * cos))
    return abs(w * cos) + abs(h * sin), abs(w * sin) + abs(h * cos)


def _field(label: str, value: Any, where: str) -> FieldValue:
    """A custom property's value, typed (see :class:`FieldValue`)."""
    if isinstance(value, bool):
        return FieldValue(label, "bool", value, False, where, "bool")
    if isinstance(value, int):
        # "int" and "object" properties both arrive as ints; an Entity field reads an object id
        return FieldValue(label, "int", value, False, where, "int", may_ref=True)
    if isinstance(value, float):
        return FieldValue(label, "float", value, False, where, "float")
    if isinstance(value, str):
        # pytiled-parser reads a .tmx "object" property as its id's text
        return FieldValue(label, "string", value, False, where, "string",
                          may_ref=value.isascii() and value.isdigit())
    if isinstance(value, Path):
        return FieldValue(label, "string", str(value), False, where, "file")
    if isinstance(value, tuple) and len(value) == 4:  # pytiled_parser's Color
        return FieldValue(label, "color", tuple(int(v) for v in value), False, where, "color")
    return FieldValue(label, "other", repr(value), False, where, type(value).__name__)


def read_tiled(path: str | Path, names: Names, level: str | int | None = None, *,
               max_cells: int = DEFAULT_MAX_PIXELS) -> EditorLevel:
    """Read a Tiled map (see module doc); ``level`` must be None: a map is one level.
    ``max_cells`` limits the cells of all tile layers together."""
    file = Path(path)
    if level is not None:
        raise LevelError(file, f"a Tiled map is one level; level= must be None, got {level!r}")
    tmap = _parse(file)
    try:
        reader = _Reader(file, tmap, names, max_cells)
        reader.read()
    except LevelError:
        raise
    except (AttributeError, TypeError, ValueError, KeyError, IndexError, OverflowError) as exc:
        # pytiled-parser does not check types: a value of the wrong type surfaces here
        raise LevelError(file, f"malformed map: {type(exc).__name__}: {exc}") from exc
    bg = tmap.background_color
    background: RGBA | None = None
    if bg is not None:
        background = (int(bg.red), int(bg.green), int(bg.blue), int(bg.alpha))
    return EditorLevel(file, file.stem, f"Tiled {tmap.tiled_version or tmap.version}",
                       (reader.cols, reader.rows), background, tuple(reader.grids),
                       tuple(reader.instances))
