"""The .lvl format: parsing versions 1 and 0, validation errors, the JSON Schema, colours and
the generator of the shipped levels."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ecs_engine import levels
from ecs_engine.levels import LevelError, read_level_file
from ecs_engine.levels.colors import pack, pack_image, parse_hex, to_hex, unpack
from ecs_engine.levels.format import MAX_LVL_BYTES
from ecs_engine.levels.make_levels import LEVELS, build

SCHEMA_PATH = Path(levels.__file__).parent / "lvl.schema.json"


def lvl(tmp_path: Path, doc: Any, *, raw: str | None = None,
        files: tuple[str, ...] = ()) -> Path:
    folder = tmp_path / "level"
    folder.mkdir(exist_ok=True)
    (folder / "level.lvl").write_text(raw if raw is not None else json.dumps(doc))
    for rel in files:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(b"")
    return folder


def v1(**top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": "ecs-level", "version": 1, "name": "Test", "background": "#102030",
        "layers": {"geometry": [{"file": "geometry/layer1.png"}]},
        "tile_colors": {"#8b5a2b": "ground"},
    }
    doc.update(top)
    return doc


def v0(**top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "version": 0, "layer_names": ["layer1"],
        "layer_params": [{"position": {"x": 1, "y": 2}}],
        "obj_colors": [{"r": 139, "g": 90, "b": 43, "a": 255}],
        "obj_prefabs": [{"$type": "Ground1Serializer"}],
        "spr_colors": [{"r": 220, "g": 40, "b": 40}],
        "spr_prefabs": [{"$type": "EnemySerializer", "speed": 3}],
    }
    doc.update(top)
    return doc


def error(tmp_path: Path, doc: Any, *needles: str, raw: str | None = None,
          files: tuple[str, ...] = ("geometry/layer1.png",)) -> LevelError:
    folder = lvl(tmp_path, doc, raw=raw, files=files)
    with pytest.raises(LevelError) as info:
        read_level_file(folder)
    msg = str(info.value)
    assert "level.lvl" in msg
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    return info.value


# --------------------------------------------------------------------------------------------
# version 1


def test_v1_minimal_defaults(tmp_path: Path) -> None:
    lf = read_level_file(lvl(tmp_path, v1()) / "level.lvl")
    assert lf.version == 1 and lf.name == "Test" and lf.background == (16, 32, 48, 255)
    (geo,) = lf.layers
    assert (geo.kind, geo.file, geo.name, geo.offset, geo.z) == (
        "geometry", "geometry/layer1.png", "layer1", (0.0, 0.0), None)
    assert lf.layers_of("sprites") == () and lf.sprite_colors == ()
    (rule,) = lf.tile_colors
    assert rule.prefab == "ground" and dict(rule.params) == {} and rule.hex == "#8b5a2b"


def test_v1_full(tmp_path: Path) -> None:
    doc = v1(layers={
        "geometry": [{"file": "geometry/a.png", "name": "front", "offset": [1.5, -2], "z": 3}],
        "sprites": [{"file": "sprites/a.png"}],
        "visuals": [{"file": "visuals/sky.png"}, {"file": "visuals/fg.png", "z": 10}]},
        tile_colors={"#8B5A2B": {"prefab": "ground", "params": {"color": "#01020380"}}},
        sprite_colors={"#dc2828ff": {"prefab": "enemy", "params": {"speed": 2.5, "dir": -1}},
                       "#ffd200": "coin"},
        meta={"author": "someone", "anything": [1, 2]})
    lf = read_level_file(lvl(tmp_path, doc))
    assert [(s.kind, s.name, s.offset, s.z) for s in lf.layers] == [
        ("geometry", "front", (1.5, -2.0), 3), ("sprites", "a", (0.0, 0.0), None),
        ("visuals", "sky", (0.0, 0.0), -1), ("visuals", "fg", (0.0, 0.0), 10)]
    assert dict(lf.tile_colors[0].params) == {"color": [1, 2, 3, 128]}
    assert lf.tile_colors[0].rgba == (139, 90, 43, 255)
    assert [r.prefab for r in lf.sprite_colors] == ["enemy", "coin"]
    assert lf.sprite_colors[0].where == 'sprite_colors["#dc2828ff"]'
    assert lf.meta["author"] == "someone"


def test_read_level_file_accepts_folder_or_file_and_bom(tmp_path: Path) -> None:
    folder = lvl(tmp_path, None, raw="\ufeff" + json.dumps(v1()))
    assert read_level_file(folder) == read_level_file(folder / "level.lvl")


@pytest.mark.parametrize(("raw", "where"), [
    ('{"format": "ecs-level",\n "version": 1\n "name": "x"}', "line 3:2"),
    ("", "line 1:1"),
    ('{"a": 1}\n\n  ]', "line 3:3"),
])
def test_json_syntax_errors_give_line_and_column(tmp_path: Path, raw: str, where: str) -> None:
    err = error(tmp_path, None, where, "invalid JSON", raw=raw)
    assert err.where == where


def test_json_oddities(tmp_path: Path) -> None:
    error(tmp_path, None, "duplicate key 'name'",
          raw='{"format": "ecs-level", "name": "a", "name": "b"}')
    error(tmp_path, None, "NaN", raw='{"format": "ecs-level", "version": NaN}')
    error(tmp_path, [1, 2], "top level must be a JSON object")
    folder = lvl(tmp_path, None, raw="")
    (folder / "level.lvl").write_bytes(b'{"name": "\xff"}')
    with pytest.raises(LevelError, match=r"line 1:11.*UTF-8"):
        read_level_file(folder)
    (folder / "level.lvl").write_bytes(b" " * (MAX_LVL_BYTES + 1))
    with pytest.raises(LevelError, match="at most"):
        read_level_file(folder)


@pytest.mark.parametrize("key", ["name", "background", "layers", "tile_colors"])
def test_v1_required_keys(tmp_path: Path, key: str) -> None:
    doc = v1()
    del doc[key]
    error(tmp_path, doc, f"missing required key {key!r}")


def test_v1_version_and_format(tmp_path: Path) -> None:
    error(tmp_path, v1(format="other"), "format", "'ecs-level'")
    error(tmp_path, v1(version=2), "version", "unsupported")
    error(tmp_path, v1(version=True), "version", "unsupported")
    doc = v1()
    del doc["version"]
    error(tmp_path, doc, "missing required key 'version'")
    error(tmp_path, {"name": "x"}, "missing", "format")
    error(tmp_path, {"version": 7}, "unsupported version 7")


@pytest.mark.parametrize(("top", "needles"), [
    ({"name": ""}, ["name", "non-empty string"]),
    ({"name": ["x"]}, ["name", "an array"]),
    ({"background": "blue"}, ["background", "#rrggbb"]),
    ({"background": "#12345g"}, ["background"]),
    ({"tile_colours": {}}, ["unknown key 'tile_colours'", "tile_colors"]),
    ({"layers": []}, ["layers", "expected an object"]),
    ({"layers": {"geometry": []}}, ["layers.geometry", "at least one geometry layer"]),
    ({"layers": {"geometry": [{"file": "geometry/layer1.png"}], "sprite": []}},
     ["unknown key 'sprite'"]),
    ({"layers": {"geometry": [{"path": "geometry/layer1.png"}]}}, ["layers.geometry[0]"]),
    ({"layers": {"geometry": [{"file": "geometry/layer1.png", "offset": [0, "1"]}]}},
     ["layers.geometry[0].offset[1]", "number"]),
    ({"layers": {"geometry": [{"file": "geometry/layer1.png", "offset": [0, 1e300]}]}},
     ["offset[1]"]),
    ({"layers": {"geometry": [{"file": "geometry/layer1.png", "z": 1.5}]}}, ["z", "whole"]),
    ({"layers": {"geometry": [{"file": "geometry/layer1.png", "z": 200}]}}, ["z", "range"]),
    ({"layers": {"geometry": [{"file": "geometry/layer1.png"}],
                 "sprites": [{"file": "geometry/layer1.png"}]}}, ["listed twice"]),
    ({"tile_colors": []}, ["tile_colors", "expected an object"]),
    ({"tile_colors": {"red": "ground"}}, ["tile_colors.red", "colours"]),
    ({"tile_colors": {"#ff000000": "ground"}}, ["transparent"]),
    ({"tile_colors": {"#ff0000": "ground", "#FF0000FF": "brick"}}, ["mapped twice"]),
    ({"tile_colors": {"#102030": "ground"}}, ["background colour"]),
    ({"tile_colors": {"#ff0000": ""}}, ['tile_colors["#ff0000"]']),
    ({"tile_colors": {"#ff0000": {"params": {}}}}, ["missing required key 'prefab'"]),
    ({"tile_colors": {"#ff0000": {"prefab": "x", "extra": 1}}}, ["unknown key 'extra'"]),
    ({"tile_colors": {"#ff0000": {"prefab": "x", "params": {"w": 2}}}},
     ['tile_colors["#ff0000"].params.w', "reserved"]),
    ({"sprite_colors": {"#ff0000": {"prefab": "x", "params": {"x": 2}}}}, ["reserved"]),
    ({"sprite_colors": {"#ff0000": {"prefab": "x", "params": {"speed": "fast"}}}},
     ["params.speed", "'fast'"]),
    ({"sprite_colors": {"#ff0000": {"prefab": "x", "params": {"speed": {"v": 1}}}}},
     ["params.speed", "an object"]),
    ({"sprite_colors": {"#ff0000": {"prefab": "x", "params": {"k": [[[1]]]}}}},
     ["params.k[0][0]"]),
    ({"meta": "x"}, ["meta", "expected an object"]),
])
def test_v1_bad_values(tmp_path: Path, top: dict[str, Any], needles: list[str]) -> None:
    error(tmp_path, v1(**top), *needles)


@pytest.mark.parametrize("file", ["../x.png", "/abs/x.png", "geometry/../../x.png", "C:/x.png",
                                  "geometry\\x.png", "geometry/x.bmp", "", "a/../b.png"])
def test_v1_unsafe_layer_paths(tmp_path: Path, file: str) -> None:
    doc = v1(layers={"geometry": [{"file": file}]})
    error(tmp_path, doc, "layers.geometry[0].file")


# --------------------------------------------------------------------------------------------
# version 0


def test_v0_parses(tmp_path: Path) -> None:
    folder = lvl(tmp_path, v0(), files=("geometry/layer1.png", "sprites/layer1.png"))
    lf = read_level_file(folder)
    assert lf.version == 0 and lf.name == "level" and lf.background is None
    assert [(s.kind, s.file, s.offset) for s in lf.layers] == [
        ("geometry", "geometry/layer1.png", (1.0, 2.0)),
        ("sprites", "sprites/layer1.png", (1.0, 2.0))]
    assert lf.tile_colors[0].prefab == "Ground1" and lf.tile_colors[0].rgba == (139, 90, 43, 255)
    assert lf.sprite_colors[0].prefab == "Enemy" and dict(lf.sprite_colors[0].params) == {
        "speed": 3}
    assert lf.sprite_colors[0].rgba == (220, 40, 40, 255)  # alpha defaults to opaque


def test_v0_visual_layers_stack_behind(tmp_path: Path) -> None:
    doc = v0(layer_names=["a", "b"], layer_params=[{}, {"position": {"x": 0, "y": 0}}])
    folder = lvl(tmp_path, doc, files=("geometry/a.png", "visuals/a.png", "visuals/b.png"))
    lf = read_level_file(folder)
    assert [(s.kind, s.name, s.z) for s in lf.layers] == [
        ("geometry", "a", None), ("visuals", "a", -2), ("visuals", "b", -1)]


@pytest.mark.parametrize(("color", "rgba"), [
    ({"r": 255, "g": 0, "b": 1}, (255, 0, 1, 255)),
    ({"r": 0.5, "g": 0, "b": 1, "a": 1}, (128, 0, 255, 255)),
    ({"r": 1.0, "g": 0.0, "b": 0.0, "a": 0.25}, (255, 0, 0, 64)),
    ({"r": 1, "g": 1, "b": 1, "a": 1}, (1, 1, 1, 1)),  # whole numbers: 0-255
    ({"r": 255.0, "g": 0.0, "b": 0.0, "a": 255.0}, (255, 0, 0, 255)),
])
def test_v0_colours(tmp_path: Path, color: dict[str, float],
                    rgba: tuple[int, int, int, int]) -> None:
    folder = lvl(tmp_path, v0(obj_colors=[color]), files=("geometry/layer1.png",))
    assert read_level_file(folder).tile_colors[0].rgba == rgba


@pytest.mark.parametrize(("top", "needles"), [
    ({"layer_names": []}, ["layer_names", "at least one"]),
    ({"layer_names": "layer1"}, ["layer_names", "expected an array"]),
    ({"layer_names": ["layer1", "layer1"]}, ["listed twice"]),
    ({"layer_names": ["../layer1"]}, ["without folders"]),
    ({"layer_names": ["layer1", "ghost"], "layer_params": [{}, {}]},
     ["layer_names[1]", "'ghost' has no image"]),
    ({"layer_params": [{}, {}]}, ["layer_params", "2 entries for 1"]),
    ({"layer_params": [{"position": {"x": 1}}]}, ["layer_params[0].position", "'y'"]),
    ({"obj_colors": []}, ["obj_prefabs", "they pair up"]),
    ({"obj_colors": [{"r": 300, "g": 0, "b": 0}]}, ["obj_colors[0].r", "range"]),
    ({"obj_colors": [{"r": 0.5, "g": 2, "b": 0}]}, ["obj_colors[0].g", "range"]),
    ({"obj_colors": [{"r": "1", "g": 2, "b": 0}]}, ["obj_colors[0].r", "number"]),
    ({"obj_colors": [{"g": 2, "b": 0}]}, ["obj_colors[0]", "'r'"]),
    ({"obj_prefabs": [{"speed": 1}]}, ["obj_prefabs[0]", "'$type'"]),
    ({"obj_prefabs": [{"$type": "Ground1Serializer", "x": 1}]}, ["reserved"]),
    ({"spr_colors": [{"r": 1, "g": 2, "b": 3}, {"r": 1, "g": 2, "b": 3}],
      "spr_prefabs": [{"$type": "A"}, {"$type": "B"}]}, ["mapped twice"]),
])
def test_v0_bad_values(tmp_path: Path, top: dict[str, Any], needles: list[str]) -> None:
    error(tmp_path, v0(**top), *needles)


def test_v0_needs_a_geometry_layer(tmp_path: Path) -> None:
    error(tmp_path, v0(), "at least one geometry layer", files=("sprites/layer1.png",))


# --------------------------------------------------------------------------------------------
# JSON Schema (checked with a small validator for the keywords the schema uses)


def _validate(schema: Any, doc: Any, root: dict[str, Any], path: str = "") -> list[str]:
    """Errors of ``doc`` against ``schema`` (a JSON Schema 2020-12 subset)."""
    if schema is True:
        return []
    if schema is False:
        return [f"{path}: not allowed"]
    errs: list[str] = []
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        errs += _validate(target, doc, root, path)
    types = {"object": dict, "array": list, "string": str, "boolean": bool}
    if "type" in schema:
        t = schema["type"]
        ok = (isinstance(doc, int | float) and not isinstance(doc, bool) if t == "number"
              else isinstance(doc, int) and not isinstance(doc, bool) if t == "integer"
              else isinstance(doc, types[t]))
        if not ok:
            return errs + [f"{path}: not {t}"]
    if "const" in schema and (doc != schema["const"] or type(doc) is bool):
        errs.append(f"{path}: != const")
    if "enum" in schema and doc not in schema["enum"]:
        errs.append(f"{path}: not in enum")
    if isinstance(doc, str):
        if len(doc) < schema.get("minLength", 0):
            errs.append(f"{path}: too short")
        if "pattern" in schema and not re.search(schema["pattern"], doc):
            errs.append(f"{path}: pattern")
    if isinstance(doc, int | float) and not isinstance(doc, bool):
        if "minimum" in schema and doc < schema["minimum"]:
            errs.append(f"{path}: minimum")
        if "maximum" in schema and doc > schema["maximum"]:
            errs.append(f"{path}: maximum")
    if isinstance(doc, list):
        if len(doc) < schema.get("minItems", 0) or len(doc) > schema.get("maxItems", 10**9):
            errs.append(f"{path}: item count")
        prefix = schema.get("prefixItems", [])
        for i, item in enumerate(doc):
            sub = prefix[i] if i < len(prefix) else schema.get("items", True)
            errs += _validate(sub, item, root, f"{path}[{i}]")
    if isinstance(doc, dict):
        errs += [f"{path}: missing {k}" for k in schema.get("required", []) if k not in doc]
        props = schema.get("properties", {})
        for key, value in doc.items():
            if "propertyNames" in schema:
                errs += _validate(schema["propertyNames"], key, root, f"{path}.{key}(name)")
            if key in props:
                errs += _validate(props[key], value, root, f"{path}.{key}")
            elif "additionalProperties" in schema:
                errs += _validate(schema["additionalProperties"], value, root, f"{path}.{key}")
    for key, combine in (("oneOf", 1), ("anyOf", 0)):
        if key in schema:
            passing = sum(not _validate(s, doc, root, path) for s in schema[key])
            if passing == 0 or (combine == 1 and passing != 1):
                errs.append(f"{path}: {key} matched {passing}")
    if "not" in schema and not _validate(schema["not"], doc, root, path):
        errs.append(f"{path}: matched 'not'")
    return errs


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def test_schema_is_valid_json_with_v1_required_keys() -> None:
    s = schema()
    assert s["$schema"].startswith("https://json-schema.org/")
    assert s["$defs"]["v1"]["required"] == ["format", "version", "name", "background",
                                            "layers", "tile_colors"]
    assert set(s["$defs"]["v1"]["properties"]) == {
        "format", "version", "name", "background", "layers", "tile_colors", "sprite_colors",
        "meta"}


@pytest.mark.parametrize("name", ["demo", "stress", "thesis_example", "tutorial"])
def test_shipped_levels_match_schema(name: str) -> None:
    doc = json.loads((levels.shipped_level(name) / "level.lvl").read_text())
    s = schema()
    assert _validate(s, doc, s) == []
    if doc.get("format") == "ecs-level":
        assert all(key in doc for key in s["$defs"]["v1"]["required"])


@pytest.mark.parametrize("top", [
    {"name": ""}, {"background": "blue"}, {"extra": 1}, {"version": 2},
    {"layers": {"geometry": []}}, {"layers": {"geometry": [{"file": "../x.png"}]}},
    {"layers": {"geometry": [{"file": "g/x.png", "z": 300}]}},
    {"layers": {"geometry": [{"file": "g/x.png", "offset": [1, 2, 3]}]}},
    {"tile_colors": {"red": "ground"}}, {"tile_colors": {"#ff0000": {"prefab": "g", "x": 1}}},
    {"tile_colors": {"#ff0000": {"prefab": "g", "params": {"h": 1}}}},
    {"sprite_colors": {"#ff0000": {"prefab": "g", "params": {"s": "fast"}}}},
])
def test_schema_and_parser_agree_on_bad_documents(tmp_path: Path, top: dict[str, Any]) -> None:
    doc = v1(**top)
    s = schema()
    assert _validate(s, doc, s), f"schema accepts {top}"
    error(tmp_path, doc)


def test_schema_and_parser_agree_on_good_documents(tmp_path: Path) -> None:
    doc = v1(layers={"geometry": [{"file": "geometry/layer1.png", "offset": [1, 2.5], "z": -3}],
                     "visuals": [{"file": "visuals/a.png", "name": "sky"}]},
             sprite_colors={"#dc2828": {"prefab": "enemy",
                                        "params": {"speed": 2, "color": "#ffffff",
                                                   "kinds": [1, 2, 0]}}},
             meta={"x": None})
    s = schema()
    assert _validate(s, doc, s) == []
    read_level_file(lvl(tmp_path, doc))
    v0doc = v0()
    assert _validate(s, v0doc, s) == []


# --------------------------------------------------------------------------------------------
# colours and the level generator


def test_colour_helpers() -> None:
    assert parse_hex("#FF8000") == (255, 128, 0, 255)
    assert parse_hex("#ff800080") == (255, 128, 0, 128)
    for bad in ("ff8000", "#ff80", "#ff8000f", "#gg0000", " #ff8000"):
        assert parse_hex(bad) is None
    assert to_hex((255, 128, 0, 255)) == "#ff8000" and to_hex((1, 2, 3, 4)) == "#01020304"
    assert unpack(pack((1, 2, 3, 4))) == (1, 2, 3, 4)
    image = np.array([[[1, 2, 3, 4], [5, 6, 7, 8]]], np.uint8)
    assert pack_image(image).tolist() == [[pack((1, 2, 3, 4)), pack((5, 6, 7, 8))]]


def test_make_levels_is_deterministic_and_matches_shipped(tmp_path: Path) -> None:
    folders = build(out=tmp_path)
    assert sorted(f.name for f in folders) == sorted(LEVELS) == list(levels.shipped_levels())
    total = 0
    for folder in folders:
        shipped = levels.shipped_level(folder.name)
        made = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
        have = sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file())
        assert made == have, folder.name
        for rel in made:
            assert (folder / rel).read_bytes() == (shipped / rel).read_bytes(), rel
            total += (shipped / rel).stat().st_size
    assert total < 2 * 2**20
