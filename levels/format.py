"""The ``.lvl`` file: parse and validate versions 1 (``ecs-level``) and 0 (the thesis' layout).

Both versions become one :class:`LevelFile`. This module checks the JSON (keys, types, colours,
safe relative paths) but neither opens images nor resolves prefab names: that is the loader's
job, so ``read_level_file`` is cheap and needs no prefab registry.
"""

from __future__ import annotations

import json
import json.scanner
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, Literal, NoReturn

from ecs_engine.levels.colors import RGBA, parse_hex, to_hex
from ecs_engine.levels.errors import LevelError

__all__ = [
    "FORMAT_NAME", "KINDS", "LEVEL_FILE_NAME", "MAX_LVL_BYTES", "ColorRule", "LayerSpec",
    "LevelFile", "join_path", "read_level_file",
]

FORMAT_NAME = "ecs-level"
LEVEL_FILE_NAME = "level.lvl"
LayerKind = Literal["geometry", "sprites", "visuals"]
KINDS: tuple[LayerKind, ...] = ("geometry", "sprites", "visuals")
MAX_LVL_BYTES = 4 * 2**20
"""A ``.lvl`` is a few kB; anything this big is not a level file."""

# The loader sets these per entity; a colour map may not.
RESERVED_TILE_PARAMS = frozenset({"x", "y", "w", "h"})
RESERVED_SPRITE_PARAMS = frozenset({"x", "y"})

_V1_KEYS = ("format", "version", "name", "background", "layers", "tile_colors",
            "sprite_colors", "meta")
_LAYER_KEYS = ("file", "name", "offset", "z")
_RULE_KEYS = ("prefab", "params")
_Z_RANGE = (-128, 127)  # Layer.z is an int8
_SERIALIZER = re.compile(r"serializer$", re.IGNORECASE)


@dataclass(frozen=True)
class LayerSpec:
    """One layer image. ``offset`` (world units) shifts the whole layer; ``z`` is the draw
    order (None: keep each prefab's own ``z``)."""

    kind: LayerKind
    file: str
    name: str
    offset: tuple[float, float]
    z: int | None
    where: str


@dataclass(frozen=True)
class ColorRule:
    """A colour mapped to a prefab (by name or alias, as written) with parameters by label."""

    rgba: RGBA
    prefab: str
    params: Mapping[str, Any]
    where: str

    @property
    def hex(self) -> str:
        return to_hex(self.rgba)


@dataclass(frozen=True)
class LevelFile:
    """A parsed, validated ``.lvl`` (either version). Paths in layers are relative to
    ``folder`` and use ``/``."""

    path: Path
    folder: Path
    version: int
    name: str
    background: RGBA | None
    layers: tuple[LayerSpec, ...]
    tile_colors: tuple[ColorRule, ...]
    sprite_colors: tuple[ColorRule, ...]
    meta: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def layers_of(self, kind: LayerKind) -> tuple[LayerSpec, ...]:
        """The layers of one kind, in file order."""
        return tuple(layer for layer in self.layers if layer.kind == kind)


def level_file_path(path: str | os.PathLike[str]) -> Path:
    """The ``.lvl`` of a level given as its folder or as the file itself."""
    p = Path(path)
    if p.is_dir():
        p = p / LEVEL_FILE_NAME
    if not p.is_file():
        raise LevelError(p, "no such level file (a level is a folder holding "
                            f"{LEVEL_FILE_NAME})")
    return p


def read_level_file(path: str | os.PathLike[str]) -> LevelFile:
    """Parse and validate a ``.lvl`` (``path`` is the file or its level folder)."""
    lvl = level_file_path(path)
    doc = _load_json(lvl)
    p = _Parser(lvl)
    if not isinstance(doc, dict):
        p.fail("", f"the top level must be a JSON object, got {_kind(doc)}")
    if "format" in doc:
        return p.v1(doc)
    version = doc.get("version")
    if version == 0 and not isinstance(version, bool):
        return p.v0(doc)
    if "version" not in doc:
        p.fail("", f'missing "format": "{FORMAT_NAME}" and "version" (or the thesis\' '
                   f'"version": 0 layout)')
    p.fail("version", f"unsupported version {version!r}; this loader reads "
                      f'"format": "{FORMAT_NAME}" version 1 and the thesis\' version 0')


# --------------------------------------------------------------------------------------------
# JSON


def _load_json(lvl: Path) -> Any:
    try:
        size = lvl.stat().st_size
        if size > MAX_LVL_BYTES:
            raise LevelError(lvl, f"file is {size} bytes; a .lvl may be at most "
                                  f"{MAX_LVL_BYTES} bytes")
        raw = lvl.read_bytes()
    except OSError as exc:
        raise LevelError(lvl, f"cannot read: {exc.strerror or exc}") from exc
    try:
        # utf-8-sig: Windows editors like to start files with a byte-order mark.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise LevelError(lvl, "not UTF-8 text", where=f"line {line}:{col}") from exc
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant,
                         parse_int=_bounded_int)
        if _depth(doc) > MAX_NESTING:
            raise RecursionError
        bad = _unencodable(doc)
        if bad is not None:
            raise LevelError(lvl, f"invalid JSON: the string {bad!r} holds a lone surrogate "
                                  f"escape (\\ud800-\\udfff), which is not text")
        return doc
    except json.JSONDecodeError as exc:
        raise LevelError(lvl, f"invalid JSON: {exc.msg}",
                         where=f"line {exc.lineno}:{exc.colno}") from exc
    except (ValueError, RecursionError) as exc:
        # From a hook, or nesting deeper than the parser's stack: parse again with the
        # pure-Python scanner, whose hooks know where they are, to say where.
        where, message = _locate(text, exc)
        raise LevelError(lvl, f"invalid JSON: {message}", where=where) from None


_JSON_OBJECT: Any = vars(json.decoder)["JSONObject"]  # the pure-Python parsers' pieces
_JSON_ARRAY: Any = vars(json.decoder)["JSONArray"]
_PY_SCANNER: Any = vars(json.scanner)["py_make_scanner"]
MAX_INT_DIGITS = 30
"""Longest integer literal a level may use (far beyond any coordinate or parameter)."""
MAX_NESTING = 64
"""Deepest nesting of arrays and objects a level may use (real levels need 4)."""


def _depth(doc: Any) -> int:
    """Nesting depth of arrays and objects (iterative: no recursion limit)."""
    deepest = 0
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_NESTING:
                items = value.values() if isinstance(value, dict) else value
                stack.extend((v, depth + 1) for v in items)
    return deepest


def _unencodable(doc: Any) -> str | None:
    """The first string (key or value) that is not valid Unicode text, if any."""
    stack = [doc]
    while stack:
        value = stack.pop()
        items: Any = ()
        if isinstance(value, dict):
            items = [*value.keys(), *value.values()]
        elif isinstance(value, list):
            items = value
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return value
        stack.extend(items)
    return None


def _bounded_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"the number {literal[:12]}... has {len(literal.lstrip('-'))} "
                         f"digits; at most {MAX_INT_DIGITS} are allowed")
    return int(literal)


class _Located(ValueError):
    def __init__(self, pos: int, message: str) -> None:
        super().__init__(message)
        self.pos = pos


def _line_col(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line}:{pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


def _locate(text: str, exc: BaseException) -> tuple[str | None, str]:
    """Where in ``text`` the first duplicate key, too long integer or too deep nesting is
    (parsed again with the pure-Python scanner, whose hooks know the position)."""
    depth = [0]
    decoder = json.JSONDecoder(parse_constant=_no_constant)

    def parse_object(s_and_end: tuple[str, int], strict: bool, scan_once: Any, hook: Any,
                     pairs_hook: Any, memo: Any = None) -> tuple[Any, int]:
        s, end = s_and_end
        if depth[0] >= MAX_NESTING:
            raise _Located(end - 1, f"nested deeper than {MAX_NESTING} levels")
        seen: list[str] = []

        def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
            out = dict(items)
            if len(out) != len(items):
                seen.extend(key for key, _ in items)
            return out

        depth[0] += 1
        try:
            value, stop = _JSON_OBJECT((s, end), strict, scan_once, None, pairs,
                                                  memo)
        finally:
            depth[0] -= 1
        if seen:
            key, pos = _duplicate_key(s, end, stop)
            raise _Located(pos, f"duplicate key {key!r} in one object (the object starts "
                                f"at {_line_col(s, end - 1)})")
        return value, stop

    def parse_array(s_and_end: tuple[str, int], scan_once: Any) -> tuple[Any, int]:
        s, end = s_and_end
        if depth[0] >= MAX_NESTING:
            raise _Located(end - 1, f"nested deeper than {MAX_NESTING} levels")
        depth[0] += 1
        try:
            return _JSON_ARRAY((s, end), scan_once)
        finally:
            depth[0] -= 1

    def parse_int(literal: str) -> int:
        return _bounded_int(literal)

    # The pure-Python scanner reads these hooks from the decoder (typeshed omits them).
    vars(decoder).update(parse_object=parse_object, parse_array=parse_array,
                         parse_int=parse_int, memo={})
    vars(decoder)["scan_once"] = _PY_SCANNER(decoder)
    try:
        decoder.decode(text)
    except _Located as located:
        return _line_col(text, located.pos), str(located)
    except ValueError as again:
        pos = _int_position(text)
        return (_line_col(text, pos) if pos is not None else None), str(again)
    except RecursionError:
        return None, f"nested deeper than {MAX_NESTING} levels"
    return None, str(exc) or type(exc).__name__


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _duplicate_key(s: str, start: int, stop: int) -> tuple[str, int]:
    """The first key of the object ``s[start - 1 : stop]`` that repeats one before it,
    and its position (keys of nested objects do not count)."""
    seen: set[str] = set()
    pos, depth = start, 0
    while pos < stop:
        ch = s[pos]
        if ch == '"':
            match = _STRING.match(s, pos)
            end = match.end() if match else stop
            if depth == 0 and s[end:stop].lstrip().startswith(":"):
                key = json.loads(s[pos:end])
                if key in seen:
                    return key, pos
                seen.add(key)
            pos = end
            continue
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        pos += 1
    return "?", start - 1


def _int_position(text: str) -> int | None:
    """Where the first integer literal longer than ``MAX_INT_DIGITS`` digits is."""
    pattern = r'"(?:[^"\\]|\\.)*"|-?\d{' + str(MAX_INT_DIGITS + 1) + ",}"
    for match in re.finditer(pattern, text):
        if not match.group().startswith('"'):
            return match.start()
    return None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r} in one object")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a level may use")


def _kind(value: Any) -> str:
    """A JSON type name for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def join_path(where: str, key: str | int) -> str:
    """``where`` extended by a key or index, as the ``.lvl``'s error paths write them."""
    if isinstance(key, int):
        return f"{where}[{key}]"
    if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", key):
        return f"{where}.{key}" if where else key
    return f"{where}[{json.dumps(key)}]"


# --------------------------------------------------------------------------------------------
# validation


class _Parser:
    """Checks one document; every failure names the file and the key path."""

    def __init__(self, lvl: Path) -> None:
        self.lvl = lvl
        self.folder = lvl.parent

    def fail(self, where: str, message: str) -> NoReturn:
        raise LevelError(self.lvl, message, where=where or None)

    # -- typed accessors ------------------------------------------------------------------
    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(where, f"expected an object, got {_kind(value)}")
        return value

    def arr(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            self.fail(where, f"expected an array, got {_kind(value)}")
        return value

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(where, f"expected a non-empty string, got {_kind(value)}")
        return value

    def integer(self, value: Any, where: str, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(where, f"expected a whole number, got {_kind(value)}")
        if not lo <= value <= hi:
            self.fail(where, f"{value} is out of range [{lo}, {hi}]")
        return value

    def number(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(where, f"expected a number, got {_kind(value)}")
        if not math.isfinite(value) or abs(value) > 1e7:
            self.fail(where, f"{value!r} is not a usable coordinate (finite, |v| <= 1e7)")
        return float(value)

    def required(self, doc: dict[str, Any], key: str, where: str) -> Any:
        if key not in doc:
            self.fail(where, f"missing required key {key!r}")
        return doc[key]

    def only(self, doc: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
        for key in doc:
            if key not in allowed:
                self.fail(join_path(where, key), f"unknown key {key!r}; allowed keys are "
                                             f"{list(allowed)}")

    def color(self, value: Any, where: str) -> RGBA:
        rgba = parse_hex(value) if isinstance(value, str) else None
        if rgba is None:
            self.fail(where, f'expected a colour "#rrggbb" or "#rrggbbaa", got {_kind(value)}')
        return rgba

    def file(self, value: Any, where: str) -> str:
        """A layer path: relative, ``/``-separated, inside the level folder, ``.png``."""
        text = self.text(value, where)
        if "\\" in text:
            self.fail(where, f"{text!r}: use '/' to separate folders")
        pure = PurePosixPath(text)
        if pure.is_absolute() or re.match(r"[A-Za-z]:", text):
            self.fail(where, f"{text!r}: layer paths must be relative to the level folder")
        if ".." in pure.parts:
            self.fail(where, f"{text!r}: layer paths may not leave the level folder ('..')")
        if pure.suffix.lower() != ".png":
            self.fail(where, f"{text!r}: layers are PNG images ending in .png")
        return pure.as_posix()

    def param(self, value: Any, where: str, depth: int = 0) -> Any:
        """A parameter value: number, boolean, ``#rrggbb[aa]`` colour or array of those."""
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float):
            if isinstance(value, float) and not math.isfinite(value):
                self.fail(where, f"{value!r} is not a finite number")
            return value
        if isinstance(value, str):
            rgba = parse_hex(value)
            if rgba is None:
                self.fail(where, f"expected a number, true/false, an array or a colour "
                                 f'"#rrggbb[aa]", got {_kind(value)}')
            return list(rgba)
        if isinstance(value, list) and depth < 2:
            return [self.param(v, join_path(where, i), depth + 1) for i, v in enumerate(value)]
        self.fail(where, f"expected a number, true/false, an array or a colour "
                         f'"#rrggbb[aa]", got {_kind(value)}')

    def params(self, doc: dict[str, Any], where: str,
               reserved: frozenset[str]) -> Mapping[str, Any]:
        out: dict[str, Any] = {}
        for label, value in doc.items():
            at = join_path(where, label)
            if label in reserved:
                self.fail(at, f"{label!r} is set by the loader for every entity "
                              f"({', '.join(sorted(reserved))} are reserved)")
            out[label] = self.param(value, at)
        return MappingProxyType(out)

    def unique_colors(self, rules: list[ColorRule], background: RGBA | None) -> None:
        seen: dict[RGBA, str] = {}
        for rule in rules:
            if rule.rgba[3] == 0:
                self.fail(rule.where, f"{rule.hex} is fully transparent; transparent pixels "
                                      f"are always empty and cannot be mapped")
            if background is not None and rule.rgba == background:
                self.fail(rule.where, f"{rule.hex} is the background colour, which marks "
                                      f"empty pixels")
            if rule.rgba in seen:
                self.fail(rule.where, f"colour {rule.hex} is mapped twice (also at "
                                      f"{seen[rule.rgba]})")
            seen[rule.rgba] = rule.where

    def unique_files(self, layers: list[LayerSpec]) -> None:
        seen: dict[str, str] = {}
        for layer in layers:
            key = layer.file.casefold()
            if key in seen:
                self.fail(layer.where, f"{layer.file!r} is listed twice (also at "
                                       f"{seen[key]})")
            seen[key] = layer.where

    # -- version 1 ------------------------------------------------------------------------
    def v1(self, doc: dict[str, Any]) -> LevelFile:
        if doc["format"] != FORMAT_NAME:
            self.fail("format", f"expected {FORMAT_NAME!r}, got {_kind(doc['format'])}")
        version = self.required(doc, "version", "")
        if isinstance(version, bool) or version != 1:
            self.fail("version", f'unsupported version {_kind(version)} for "format": '
                                 f'"{FORMAT_NAME}"; this loader reads version 1')
        self.only(doc, _V1_KEYS, "")
        name = self.text(self.required(doc, "name", ""), "name")
        background = self.color(self.required(doc, "background", ""), "background")
        layers_doc = self.obj(self.required(doc, "layers", ""), "layers")
        self.only(layers_doc, KINDS, "layers")
        layers: list[LayerSpec] = []
        for kind in KINDS:
            where = join_path("layers", kind)
            if kind == "geometry":
                entries = self.arr(self.required(layers_doc, kind, "layers"), where)
                if not entries:
                    self.fail(where, "a level needs at least one geometry layer")
            else:
                entries = self.arr(layers_doc.get(kind, []), where)
            for i, entry in enumerate(entries):
                layers.append(self.layer_v1(kind, entry, join_path(where, i)))
        self.unique_files(layers)
        tiles = self.rules_v1(self.required(doc, "tile_colors", ""), "tile_colors",
                              RESERVED_TILE_PARAMS)
        sprites = self.rules_v1(doc.get("sprite_colors", {}), "sprite_colors",
                                RESERVED_SPRITE_PARAMS)
        self.unique_colors(tiles, background)
        self.unique_colors(sprites, background)
        meta = self.obj(doc.get("meta", {}), "meta")
        return LevelFile(self.lvl, self.folder, 1, name, background, tuple(layers),
                         tuple(tiles), tuple(sprites), MappingProxyType(dict(meta)))

    def layer_v1(self, kind: LayerKind, entry: Any, where: str) -> LayerSpec:
        doc = self.obj(entry, where)
        self.only(doc, _LAYER_KEYS, where)
        file = self.file(self.required(doc, "file", where), join_path(where, "file"))
        name = (self.text(doc["name"], join_path(where, "name")) if "name" in doc
                else PurePosixPath(file).stem)
        offset = (0.0, 0.0)
        if "offset" in doc:
            at = join_path(where, "offset")
            pair = self.arr(doc["offset"], at)
            if len(pair) != 2:
                self.fail(at, f"expected [x, y] in world units, got {len(pair)} values")
            offset = (self.number(pair[0], join_path(at, 0)),
                      self.number(pair[1], join_path(at, 1)))
        z = self.integer(doc["z"], join_path(where, "z"), *_Z_RANGE) if "z" in doc else None
        if z is None and kind == "visuals":
            z = -1  # behind every entity unless the author says otherwise
        return LayerSpec(kind, file, name, offset, z, where)

    def rules_v1(self, value: Any, where: str, reserved: frozenset[str]) -> list[ColorRule]:
        doc = self.obj(value, where)
        rules: list[ColorRule] = []
        for key, entry in doc.items():
            at = join_path(where, key)
            rgba = parse_hex(key)
            if rgba is None:
                self.fail(at, f'keys are colours "#rrggbb" or "#rrggbbaa", got {key!r}')
            if isinstance(entry, str):
                prefab = self.text(entry, at)
                params: Mapping[str, Any] = MappingProxyType({})
            else:
                rule = self.obj(entry, at)
                self.only(rule, _RULE_KEYS, at)
                prefab = self.text(self.required(rule, "prefab", at), join_path(at, "prefab"))
                params = self.params(self.obj(rule.get("params", {}), join_path(at, "params")),
                                     join_path(at, "params"), reserved)
            rules.append(ColorRule(rgba, prefab, params, at))
        return rules

    # -- version 0 (thesis) ---------------------------------------------------------------
    def v0(self, doc: dict[str, Any]) -> LevelFile:
        names_doc = self.arr(self.required(doc, "layer_names", ""), "layer_names")
        if not names_doc:
            self.fail("layer_names", "expected at least one layer")
        names: list[str] = []
        for i, value in enumerate(names_doc):
            at = join_path("layer_names", i)
            name = self.text(value, at)
            if re.search(r"[/\\]|^\.\.?$", name):
                self.fail(at, f"{name!r}: a layer name is a file name, without folders")
            if name in names:
                self.fail(at, f"layer {name!r} is listed twice")
            names.append(name)
        params_doc = self.arr(doc.get("layer_params", [{}] * len(names)), "layer_params")
        if len(params_doc) != len(names):
            self.fail("layer_params", f"has {len(params_doc)} entries for {len(names)} "
                                      f"layer_names")
        layers: list[LayerSpec] = []
        n = len(names)
        for i, (name, lp) in enumerate(zip(names, params_doc, strict=True)):
            at = join_path("layer_params", i)
            offset = self.position_v0(self.obj(lp, at), at)
            found = False
            for kind in KINDS:
                rel = f"{kind}/{name}.png"
                # lexists: a symlink pointing out of the folder must still reach the loader's
                # containment check rather than vanish silently.
                if os.path.lexists(self.folder / rel):
                    found = True
                    # Visuals stack behind every entity, first layer at the back.
                    z = i - n if kind == "visuals" else None
                    layers.append(LayerSpec(kind, rel, name, offset, z,
                                            join_path("layer_names", i)))
            if not found:
                self.fail(join_path("layer_names", i),
                          f"layer {name!r} has no image: expected one of "
                          f"{', '.join(f'{k}/{name}.png' for k in KINDS)}")
        layers.sort(key=lambda layer: KINDS.index(layer.kind))
        if not any(layer.kind == "geometry" for layer in layers):
            self.fail("layer_names", "a level needs at least one geometry layer "
                                     "(geometry/<layer name>.png)")
        tiles = self.rules_v0(doc, "obj_colors", "obj_prefabs", RESERVED_TILE_PARAMS)
        sprites = self.rules_v0(doc, "spr_colors", "spr_prefabs", RESERVED_SPRITE_PARAMS)
        self.unique_colors(tiles, None)
        self.unique_colors(sprites, None)
        return LevelFile(self.lvl, self.folder, 0, self.folder.resolve().name, None,
                         tuple(layers), tuple(tiles), tuple(sprites))

    def position_v0(self, lp: dict[str, Any], where: str) -> tuple[float, float]:
        if "position" not in lp:
            return (0.0, 0.0)
        at = join_path(where, "position")
        pos = self.obj(lp["position"], at)
        return (self.number(self.required(pos, "x", at), join_path(at, "x")),
                self.number(self.required(pos, "y", at), join_path(at, "y")))

    def color_v0(self, value: Any, where: str) -> RGBA:
        """``{"r", "g", "b", "a"}``: whole numbers 0-255, or (if any is a fraction) 0-1."""
        doc = self.obj(value, where)
        chans: list[float | None] = []
        for ch in "rgba":
            if ch not in doc and ch == "a":
                chans.append(None)
                continue
            v = self.required(doc, ch, where)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                self.fail(join_path(where, ch), f"expected a number, got {_kind(v)}")
            chans.append(v)
        given = [v for v in chans if v is not None]
        # Unity writes Color as floats in 0..1; integral values (0, 1, 255.0) are ambiguous
        # alone, so any fractional channel decides for the whole colour.
        unit = any(isinstance(v, float) and not float(v).is_integer() for v in given)
        scale = 255.0 if unit else 1.0
        out = []
        for ch, v in zip("rgba", chans, strict=True):
            if v is None:
                out.append(255)
                continue
            lo_hi = (0.0, 1.0) if unit else (0.0, 255.0)
            if not lo_hi[0] <= v <= lo_hi[1]:
                self.fail(join_path(where, ch), f"{v!r} is out of range "
                                            f"[{lo_hi[0]:g}, {lo_hi[1]:g}]")
            out.append(int(round(v * scale)))
        return (out[0], out[1], out[2], out[3])

    def rules_v0(self, doc: dict[str, Any], colors_key: str, prefabs_key: str,
                 reserved: frozenset[str]) -> list[ColorRule]:
        colors = self.arr(doc.get(colors_key, []), colors_key)
        prefabs = self.arr(doc.get(prefabs_key, []), prefabs_key)
        if len(colors) != len(prefabs):
            self.fail(prefabs_key, f"has {len(prefabs)} entries but {colors_key} has "
                                   f"{len(colors)}; they pair up by index")
        rules: list[ColorRule] = []
        for i, (color, entry) in enumerate(zip(colors, prefabs, strict=True)):
            rgba = self.color_v0(color, join_path(colors_key, i))
            at = join_path(prefabs_key, i)
            body = self.obj(entry, at)
            type_name = self.text(self.required(body, "$type", at), join_path(at, "$type"))
            prefab = _SERIALIZER.sub("", type_name) or type_name
            params = {k: v for k, v in body.items() if k != "$type"}
            rules.append(ColorRule(rgba, prefab, self.params(params, at, reserved), at))
        return rules
