"""LDtk projects (``.ldtk``, JSON format 1.x) as :class:`EditorLevel` s.

One level is read at a time: by identifier or index over every world's levels (multi-world
projects too), from the project or from its external ``.ldtkl`` file. IntGrid layers become
grids of named cells (a value's identifier, never its number; a value without one takes the
layer's identifier); entity layers become instances with typed fields. Auto-layers and tile
layers are pictures and are not read.

Coordinates: a world unit is one cell of the project's default grid (``defaultGridSize`` px);
LDtk's y points down from the level's top, the engine's up from its bottom. An entity's
``px`` is its pivot, so its centre is ``px + (0.5 - pivot) * size``; layer offsets
(``__pxTotalOffsetX/Y``) shift everything on the layer. A ``Point`` field ``(cx, cy)`` is the
centre of that cell of its entity's layer.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ecs_engine.levels.colors import RGBA, parse_hex
from ecs_engine.levels.editor_plan import EditorLevel, FieldValue, Instance, TileGrid
from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.images import DEFAULT_MAX_PIXELS
from ecs_engine.levels.jsonnode import Node, load_json

__all__ = ["MAX_CELLS", "ldtk_levels", "read_ldtk"]

MAX_CELLS = 2**26
"""Cells of one IntGrid layer: far above any real level, far below running out of memory."""

_BASE_KINDS = {"Int": "int", "Float": "float", "Bool": "bool", "String": "string",
               "Multilines": "string", "FilePath": "string", "Color": "color",
               "Point": "point", "EntityRef": "ref"}


def _levels(root: Node) -> list[Node]:
    """Every level of the project: top-level ones, then each world's (multi-world files)."""
    out = [lv for lv in root.req("levels").items()]
    for world in root.get("worlds").items():
        name = world.get("identifier").value
        out.extend(lv for lv in world.named(name if isinstance(name, str) else "?")
                   .req("levels").items())
    return out


def ldtk_levels(path: str | Path) -> list[str]:
    """The identifiers of a project's levels, in the order ``level=`` indexes them."""
    file = Path(path)
    root = Node(file, load_json(file))
    return [lv.req("identifier").text() for lv in _levels(root)]


def _pick(root: Node, level: str | int | None) -> Node:
    levels = _levels(root)
    if not levels:
        root.fail("the project has no levels", "levels")
    names = [lv.req("identifier").text() for lv in levels]
    if level is None:
        return levels[0]
    if isinstance(level, bool) or not isinstance(level, (int, str)):
        raise TypeError(f"level must be an identifier (str) or an index (int), got {level!r}")
    if isinstance(level, int):
        if not -len(levels) <= level < len(levels):
            raise LevelError(root.file, f"level index {level} is out of range: the project "
                                        f"has {len(levels)} levels {names}")
        return levels[level]
    exact = [lv for lv, n in zip(levels, names, strict=True) if n == level]
    folded = [lv for lv, n in zip(levels, names, strict=True) if n.casefold() == level.casefold()]
    hits = exact or folded
    if len(hits) != 1:
        raise LevelError(root.file, f"no level named {level!r}; levels are {names}"
                         if not hits else f"{len(hits)} levels are named {level!r}")
    return hits[0]


def _external(root: Node, lv: Node) -> Node:
    """A level's own node, read from its ``.ldtkl`` when the project keeps levels apart."""
    if not lv.get("layerInstances").is_null:
        return lv
    rel = lv.get("externalRelPath")
    if rel.is_null:
        lv.fail("the level has neither layerInstances nor externalRelPath")
    text = rel.text()
    folder = root.file.parent.resolve()
    target = (folder / text).resolve()
    if Path(text).is_absolute() or not target.is_relative_to(folder):
        rel.fail(f"external level {text!r} must be a path inside the project's folder")
    doc = Node(target, load_json(target))
    identifier = doc.req("identifier").text()
    if identifier != lv.req("identifier").text():
        doc.fail(f"this file holds level {identifier!r}, but the project lists it as "
                 f"{lv.req('identifier').text()!r}", "identifier")
    return doc.named(identifier)


def _color(node: Node) -> RGBA:
    rgba = parse_hex(node.text()) if isinstance(node.value, str) else None
    if rgba is None:
        node.fail(f"expected a colour \"#rrggbb\", got {node.value!r}")
    return rgba


class _Defs:
    """The project's definitions that instances refer to."""

    def __init__(self, root: Node) -> None:
        defs = root.req("defs")
        self.layers: dict[int, tuple[str, dict[int, tuple[str | None, RGBA]]]] = {}
        for ld in defs.req("layers").items():
            ident = ld.req("identifier").text()
            values: dict[int, tuple[str | None, RGBA]] = {}
            for v in ld.named(ident).get("intGridValues").items():
                number = v.req("value").integer(1, 2**31 - 1)
                values[number] = (v.get("identifier").opt_text(), _color(v.req("color")))
            self.layers[ld.req("uid").integer()] = (ident, values)
        self.entities: dict[str, tuple[float, float, bool]] = {}
        for ed in defs.req("entities").items():
            ident = ed.req("identifier").text()
            resizable = any(ed.get(k).value is True for k in ("resizableX", "resizableY"))
            self.entities[ident] = (ed.req("width").number(), ed.req("height").number(),
                                    resizable)
        self.enums: dict[str, list[str]] = {}
        for key in ("enums", "externalEnums"):
            for en in defs.get(key).items():
                ident = en.req("identifier").text()
                self.enums[ident] = [v.req("id").text() for v in en.named(ident)
                                     .req("values").items()]


class _Reader:
    def __init__(self, file: Path, unit: int, height_px: float, defs: _Defs) -> None:
        self.file = file
        self.unit = unit
        self.height_px = height_px
        self.defs = defs

    def world(self, x_px: float, y_px: float) -> tuple[float, float]:
        """A point in level pixels (y down) in world units (y up)."""
        return x_px / self.unit, (self.height_px - y_px) / self.unit

    def intgrid(self, layer: Node, ident: str, grid_px: int, offset: tuple[float, float],
                ) -> TileGrid:
        cw = layer.req("__cWid").integer(0, MAX_CELLS)
        ch = layer.req("__cHei").integer(0, MAX_CELLS)
        if cw * ch > MAX_CELLS:
            layer.fail(f"{cw} x {ch} cells is more than {MAX_CELLS}")
        csv = layer.req("intGridCsv")
        raw = csv.value
        if not isinstance(raw, list):
            csv.fail("expected an array of whole numbers")
        # Only JSON integers: numpy would read true/false among them as 1/0. The type scan
        # runs in C (map, set); the Python loop only finds the first culprit for the error.
        if not set(map(type, raw)) <= {int}:
            bad = next(i for i, v in enumerate(raw) if type(v) is not int)
            csv.fail(f"expected whole numbers, got {raw[bad]!r}", bad)
        try:
            values = np.asarray(raw, dtype=np.int64) if raw else np.zeros(0, np.int64)
        except OverflowError:
            bad = next(i for i, v in enumerate(raw) if not -2**63 <= v < 2**63)
            csv.fail(f"expected whole numbers, got {raw[bad]!r}", bad)
        if values.size != cw * ch:
            csv.fail(f"has {values.size} cells, but the layer is {cw} x {ch} = {cw * ch}")
        _, defined = self.defs.layers.get(layer.req("layerDefUid").integer(), (ident, {}))
        used = np.unique(values)
        kinds: list[str] = []
        kind_where: list[str] = []
        colors: list[RGBA] = []
        mapped = np.zeros(used.size, np.int32)
        for i, v in enumerate(used.tolist()):
            if v == 0:
                continue
            if v not in defined:
                at = int(np.argmax(values == v))
                csv.fail(f"IntGrid value {v} at cell (x={at % cw}, y={at // cw}) is not "
                         f"defined in layer {ident!r} (defined: {sorted(defined)})", at)
            name, color = defined[v]
            name = name or ident
            if name not in kinds:
                kinds.append(name)
                kind_where.append(f"{layer.path}.intGridCsv(value {v}: {name})")
                colors.append(color)
            mapped[i] = kinds.index(name) + 1
        grid = mapped[np.searchsorted(used, values)].reshape(ch, cw)
        cell = grid_px / self.unit
        left, top = offset
        bottom = self.height_px - top - ch * grid_px
        return TileGrid(ident, layer.path, grid, tuple(kinds), tuple(kind_where),
                        tuple(colors), "IntGrid value", (cell, cell),
                        (left / self.unit, bottom / self.unit))

    def entity(self, e: Node, layer: str, grid_px: int, offset: tuple[float, float]
               ) -> Instance:
        ident = e.req("__identifier").text()
        e = e.named(ident)
        px, py = e.req("px").pair()
        pivx, pivy = e.req("__pivot").pair()
        w = e.req("width").number()
        h = e.req("height").number()
        if w < 0 or h < 0:
            e.fail(f"negative size {w:g} x {h:g}")
        cx = px + offset[0] + (0.5 - pivx) * w
        cy = py + offset[1] + (0.5 - pivy) * h
        x, y = self.world(cx, cy)
        dw, dh, resizable = self.defs.entities.get(ident, (w, h, False))
        size = (w / self.unit, h / self.unit) if resizable or (w, h) != (dw, dh) else None
        fields = tuple(self.field(f, grid_px, offset)
                       for f in e.get("fieldInstances").items())
        smart = e.get("__smartColor")
        rgba = _color(smart) if isinstance(smart.value, str) else None
        return Instance(ident, "entity", e.path, e.req("iid").text(), x, y, size, fields,
                        layer, rgba)

    def field(self, f: Node, grid_px: int, offset: tuple[float, float]) -> FieldValue:
        label = f.req("__identifier").text()
        f = f.named(label)
        type_name = f.req("__type").text()
        base, is_array = type_name, False
        if type_name.startswith("Array<") and type_name.endswith(">"):
            base, is_array = type_name[6:-1], True
        value = f.req("__value")
        if base.startswith(("LocalEnum.", "ExternEnum.")):
            kind = "enum"
        else:
            kind = _BASE_KINDS.get(base, "other")
        if value.is_null:
            return FieldValue(label, kind, None, is_array, value.path, type_name)  # type: ignore[arg-type]
        enum_values: tuple[str, ...] = ()
        if kind == "enum":
            enum = base.split(".", 1)[1]
            if enum not in self.defs.enums:
                f.fail(f"enum {enum!r} is not defined in the project", "__type")
            enum_values = tuple(self.defs.enums[enum])
        items = list(value.items()) if is_array else [value]
        out = [None if v.is_null else self.value(v, kind, base, grid_px, offset)
               for v in items]
        return FieldValue(label, kind, out if is_array else out[0], is_array,  # type: ignore[arg-type]
                          value.path, type_name, enum_values=enum_values)

    def value(self, v: Node, kind: str, base: str, grid_px: int,
              offset: tuple[float, float]) -> Any:
        if kind == "int":
            return v.integer()
        if kind == "float":
            return v.number()
        if kind == "bool":
            return v.boolean()
        if kind == "color":
            return _color(v)
        if kind == "point":
            cx = v.req("cx").integer()
            cy = v.req("cy").integer()
            return self.world((cx + 0.5) * grid_px + offset[0], (cy + 0.5) * grid_px + offset[1])
        if kind == "ref":
            return v.req("entityIid").text()
        if kind == "enum":
            return v.text()  # its number is looked up only if a parameter needs it
        return v.value if isinstance(v.value, str) else repr(v.value)


def _check_cell_budget(layers: Node, max_cells: int) -> None:
    """The IntGrid layers of a level together hold at most ``max_cells`` cells (the
    ``max_pixels=`` of a level folder), checked from their sizes before any grid is built."""
    sizes: list[tuple[str, int]] = []
    for layer in layers.items():
        if layer.get("__type").value == "IntGrid":
            cells = (layer.req("__cWid").integer(0, MAX_CELLS)
                     * layer.req("__cHei").integer(0, MAX_CELLS))
            sizes.append((layer.path, cells))
    total = sum(cells for _, cells in sizes)
    if total > max_cells:
        biggest = ", ".join(f"{path} {cells}" for path, cells in
                            sorted(sizes, key=lambda item: -item[1])[:3])
        layers.fail(f"the IntGrid layers hold {total} cells together ({biggest}"
                    f"{', ...' if len(sizes) > 3 else ''}); the limit is {max_cells} cells for "
                    f"all layers of a level (max_pixels=)")


def read_ldtk(path: str | Path, level: str | int | None = None, *,
              max_cells: int = DEFAULT_MAX_PIXELS) -> EditorLevel:
    """Read one level of an LDtk project (see module doc); ``max_cells`` limits the cells
    of its IntGrid layers together."""
    file = Path(path)
    root = Node(file, load_json(file))
    root.obj()
    version = root.req("jsonVersion").text()
    if not version.startswith("1."):
        root.fail(f"LDtk JSON format {version!r} is not supported; this reader reads 1.x "
                  f"(save the project with LDtk 1.0 or newer)", "jsonVersion")
    unit = root.req("defaultGridSize").integer(1, 2**16)
    defs = _Defs(root)
    lv = _pick(root, level)
    ident = lv.req("identifier").text()
    lv = _external(root, lv.named(ident))
    width_px = lv.req("pxWid").integer(1, 2**24)
    height_px = lv.req("pxHei").integer(1, 2**24)
    bg = lv.get("__bgColor")
    background = _color(bg) if not bg.is_null else None
    reader = _Reader(lv.file, unit, height_px, defs)
    grids: list[TileGrid] = []
    instances: list[Instance] = []
    _check_cell_budget(lv.req("layerInstances"), max_cells)
    for layer in lv.req("layerInstances").items():
        name = layer.req("__identifier").text()
        layer = layer.named(name)
        kind = layer.req("__type").text()
        grid_px = layer.req("__gridSize").integer(1, 2**16)
        offset = (layer.req("__pxTotalOffsetX").number(), layer.req("__pxTotalOffsetY").number())
        if kind == "IntGrid":
            grids.append(reader.intgrid(layer, name, grid_px, offset))
        elif kind == "Entities":
            instances.extend(reader.entity(e, name, grid_px, offset)
                             for e in layer.req("entityInstances").items())
        elif kind not in ("Tiles", "AutoLayer"):
            layer.fail(f"unknown layer type {kind!r} (IntGrid, Entities, Tiles, AutoLayer)",
                       "__type")
    # Grids are drawn by their own layers; keep the engine's order: LDtk lists the top first.
    grids.reverse()
    size = (math.ceil(width_px / unit), math.ceil(height_px / unit))
    return EditorLevel(lv.file, ident, f"LDtk {version}", size, background, tuple(grids),
                       tuple(instances))
