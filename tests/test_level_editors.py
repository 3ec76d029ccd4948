"""LDtk projects and Tiled maps through load_level: the real sample files, every LDtk field
type, references, coordinates, strictness, all-or-nothing, and coverage of every cell."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
import pytiled_parser

from ecs_engine import NULL, Entity, PrefabRegistry, World, component, field
from ecs_engine.components import Collider, Patrol, Pickup, Player, Position, Solid, stock_prefabs
from ecs_engine.levels import LevelError, load_level, plan_level
from ecs_engine.levels.editor_names import stock_editor_names
from ecs_engine.levels.ldtk import ldtk_levels

DATA = Path(__file__).parent / "data" / "ldtk"
ALL = DATA / "Test_file_for_API_showing_all_features.ldtk"
ENTITIES = DATA / "Entities.ldtk"
PLATFORMER = DATA / "Typical_2D_platformer_example.ldtk"
SEPARATE = DATA / "SeparateLevelFiles.ldtk"


def arcade_maps() -> Path:
    spec = importlib.util.find_spec("arcade")
    if spec is None or spec.origin is None:
        pytest.skip("arcade is not installed")
    return Path(spec.origin).parent / "resources" / "assets" / "tiled_maps"


# --------------------------------------------------------------------------------------------
# a registry with a field for every LDtk field type


@component
class Fields:
    integer: np.int32 = 0
    float_: np.float32 = 0.0
    boolean: np.bool_ = False
    enum: np.uint8 = 0
    extern_enum: np.uint8 = 0
    color: field(np.uint8, shape=4)  # type: ignore[valid-type]
    point: field(np.float64, shape=2)  # type: ignore[valid-type]
    array_integer: field(np.int32, shape=4, default=-1)  # type: ignore[valid-type]
    array_enum: field(np.uint8, shape=4)  # type: ignore[valid-type]
    array_points: field(np.float64, shape=(4, 2))  # type: ignore[valid-type]


@component
class Target:
    target: Entity = NULL


@component
class Targets:
    targets: field(Entity, shape=4)  # type: ignore[valid-type]


def registry() -> PrefabRegistry:
    reg = PrefabRegistry()
    reg.register("fields", Position(), Fields(), aliases=("EntityFieldsTest",))
    reg.register("pointer", Position(), Target(), aliases=("EntityRefTest",))
    reg.register("wall", Position(), Collider(), Solid())
    return reg


STRINGS_DROPPED = {f"EntityFieldsTest.{name}": None for name in
                   ("String_singleLine", "String_multiLines", "FilePath", "Array_multilines")}


def raw(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def entity_json(doc: dict[str, Any], ident: str, level: int = 0) -> list[dict[str, Any]]:
    return [e for layer in doc["levels"][level]["layerInstances"]
            for e in layer["entityInstances"] if e["__identifier"] == ident]


# --------------------------------------------------------------------------------------------
# LDtk: field types


def test_every_ldtk_field_type_converts() -> None:
    world = World()
    names = {**STRINGS_DROPPED, "walls": "wall", "first": "wall", "second": "wall",
             "third_used_in_autoLayer": "wall", "IntGrid_8px_grid": "wall",
             "Labels": None, "RectRegion": None, "CircleRegion": None}
    summary = load_level(world, ALL, registry(), names=names)
    assert summary.source == "LDtk 1.5.3" and summary.name == "Everything"
    assert summary.entity_counts["fields"] == 1 and summary.entity_counts["pointer"] == 3
    assert summary.skipped == {}
    with world.query(Position, Fields) as q:
        pos, f = q[Position][0], q[Fields][0]
    # px (152, 312), pivot (0.5, 0.5), 32 x 32, level 568 px high, 16 px per world unit
    assert (pos["x"], pos["y"]) == (152 / 16, (568 - 312) / 16)
    assert f["integer"] == 1 and f["float_"] == pytest.approx(1.5) and not f["boolean"]
    assert f["enum"] == 0 and f["extern_enum"] == 0  # "A" and "Value1": first values
    assert f["color"].tolist() == [0xD1, 0x81, 0xE8, 255]
    assert f["point"].tolist() == [4.5, (568 - 17.5 * 16) / 16]  # cell (4, 17)'s centre
    assert f["array_integer"].tolist() == [1, 2, 3, -1]  # padded with the field's default
    assert f["array_enum"].tolist() == [0, 1, 2, 0]
    pts = [[cx + 0.5, (568 - (cy + 0.5) * 16) / 16]
           for cx, cy in ((14, 19), (14, 17), (18, 17), (18, 19))]
    assert f["array_points"].tolist() == pts


def test_entity_refs_resolve_to_live_keys_at_their_targets() -> None:
    world = World()
    doc = raw(ALL)
    load_level(world, ALL, registry(), strict=False, names=STRINGS_DROPPED)
    by_iid = {e["iid"]: e for e in entity_json(doc, "EntityRefTest")}
    with world.query(Position, Target) as q:
        keys = q.entities.copy()
        pos = {int(k): (float(p["x"]), float(p["y"]))
               for k, p in zip(keys, q[Position], strict=True)}
        targets = {int(k): int(t) for k, t in zip(keys, q[Target]["target"], strict=True)}
    assert len(targets) == 3
    want = {}
    for e in by_iid.values():
        t = by_iid[e["fieldInstances"][0]["__value"]["entityIid"]]
        want[(e["px"][0] / 16, (568 - e["px"][1]) / 16)] = (t["px"][0] / 16,
                                                           (568 - t["px"][1]) / 16)
    for key, target in targets.items():
        assert world.is_alive(target) and target != key
        assert pos[target] == want[pos[key]]  # points at the entity the file names


def test_array_of_refs_and_refs_across_layers() -> None:
    reg = stock_prefabs()
    reg.register("button", Position(), Targets())
    reg.register("trigger", Position(), Targets(), Collider())
    names = {"TriggerArea": "trigger", "Button.delay": None, "TriggerArea.condition": None,
             "TriggerArea.onTrigger": "targets"}
    world = World()
    summary = load_level(world, ENTITIES, reg, strict=False, names=names)
    assert summary.entity_counts["button"] == 1 and summary.entity_counts["trigger"] == 3
    doc = raw(ENTITIES)
    wanted = sum(len(e["fieldInstances"][1]["__value"]) for e in entity_json(doc, "TriggerArea"))
    with world.query(Targets) as q:
        refs = q[Targets]["targets"].ravel()
    live = refs[refs != NULL]
    # Button's two targets are Doors: skipped (no prefab), so they stay NULL and are counted
    assert all(world.is_alive(int(k)) for k in live)
    assert summary.skipped["reference to an entity that was skipped"] >= 2
    assert len(live) + summary.skipped["reference to an entity that was skipped"] == wanted + 2


def test_ldtk_strict_unknown_field_names_the_entity_and_json_path() -> None:
    world = World()
    with pytest.raises(LevelError) as info:
        load_level(world, PLATFORMER, stock_prefabs(),
                   names={**stock_editor_names(), "ladder": None, "Chest": None, "Door": None})
    text = str(info.value)
    assert "Typical_2D_platformer_example.ldtk" in text
    assert "levels[0](Your_typical_2D_platformer).layerInstances[0](Entities)" in text
    assert "entityInstances" in text and "'Player'" in text and "'items'" in text
    assert len(world) == 0


def test_string_field_is_a_clear_error() -> None:
    reg = registry()
    names = {**STRINGS_DROPPED, "EntityFieldsTest.String_singleLine": "integer"}
    world = World()
    with pytest.raises(LevelError, match=r"String field 'String_singleLine' cannot set "
                                         r"parameter 'integer'.*not text"):
        load_level(world, ALL, reg, strict=False, names=names)
    assert len(world) == 0


def test_shape_mismatch_and_overflow_are_clear_errors(tmp_path: Path) -> None:
    doc = raw(ALL)
    e = entity_json(doc, "EntityFieldsTest")[0]
    ints = next(f for f in e["fieldInstances"] if f["__identifier"] == "Array_Integer")
    ints["__value"] = [1, 2, 3, 4, 5]
    path = tmp_path / "p.ldtk"
    path.write_text(json.dumps(doc))
    with pytest.raises(LevelError, match="has 5 values.*holds at most 4") as info:
        load_level(World(), path, registry(), strict=False, names=STRINGS_DROPPED)
    assert "fieldInstances[10](Array_Integer).__value" in str(info.value)
    ints["__value"] = [1, 2, 3]
    number = next(f for f in e["fieldInstances"] if f["__identifier"] == "Integer")
    number["__value"] = 2**40
    path.write_text(json.dumps(doc))
    with pytest.raises(LevelError, match="out of range"):
        load_level(World(), path, registry(), strict=False, names=STRINGS_DROPPED)


def test_unknown_enum_value_fails_only_when_used() -> None:
    # Entities.ldtk's first chest holds "Heavy sword", which its enum spells Heavy_sword: a
    # stale value in LDtk's own sample. Unused (Chest unmapped), it does not matter.
    reg = stock_prefabs()
    load_level(World(), ENTITIES, reg, strict=False)
    reg.register("chest", Position(), Fields())
    with pytest.raises(LevelError, match="'Heavy sword' is not a value of "
                                         "Array<LocalEnum.ItemType>"):
        load_level(World(), ENTITIES, reg, strict=False,
                   names={"Chest.content": "array_enum"})


# --------------------------------------------------------------------------------------------
# LDtk: levels, coordinates, coverage


def test_levels_by_identifier_index_and_external_files() -> None:
    assert ldtk_levels(SEPARATE) == ["World_Level_0", "World_Level_1", "World_Level_2"]
    by_name = plan_level(SEPARATE, stock_prefabs(), level="world_level_1",
                         names={"walls": "stone"})
    by_index = plan_level(SEPARATE, stock_prefabs(), level=1, names={"walls": "stone"})
    assert by_name.level.name == by_index.level.name == "World_Level_1"
    assert by_name.level.path.name == "World_Level_1.ldtkl"
    assert by_name.rect_counts == by_index.rect_counts
    with pytest.raises(LevelError, match=r"no level named 'nope'; levels are \['World_Level_0'"):
        plan_level(SEPARATE, stock_prefabs(), level="nope")
    with pytest.raises(LevelError, match="index 3 is out of range"):
        plan_level(SEPARATE, stock_prefabs(), level=3)


def test_missing_external_level_file_names_it(tmp_path: Path) -> None:
    shutil.copy(SEPARATE, tmp_path / SEPARATE.name)
    with pytest.raises(LevelError, match="World_Level_0.ldtkl: cannot read"):
        plan_level(tmp_path / SEPARATE.name, stock_prefabs())
    doc = raw(SEPARATE)
    doc["levels"][0]["externalRelPath"] = "../../etc/passwd"
    (tmp_path / "evil.ldtk").write_text(json.dumps(doc))
    with pytest.raises(LevelError, match="inside the project's folder"):
        plan_level(tmp_path / "evil.ldtk", stock_prefabs())


def test_multi_world_projects(tmp_path: Path) -> None:
    doc = raw(PLATFORMER)
    doc["worlds"] = [{"identifier": "W1", "levels": doc["levels"][:2]},
                     {"identifier": "W2", "levels": doc["levels"][2:]}]
    doc["levels"] = []
    path = tmp_path / "multi.ldtk"
    path.write_text(json.dumps(doc))
    assert ldtk_levels(path) == ["Your_typical_2D_platformer", "Top", "Bottom",
                                 "World_Level_3"]
    plan = plan_level(path, stock_prefabs(), level="Bottom", strict=False,
                      names=stock_editor_names())
    assert plan.level.name == "Bottom"


def rasterise(world: World, per_unit: float = 1.0, top: float | None = None
              ) -> set[tuple[int, int]]:
    """Cells covered by the solid rectangles: ``(col, row)`` with ``per_unit`` cells per world
    unit and, when ``top`` (world y of the grid's top) is given, rows counted down from it
    (as editors count them); else world-y cells counted up. Fails on any overlap."""
    out: set[tuple[int, int]] = set()
    with world.query(Position, Collider, Solid) as q:
        for p, c in zip(q[Position], q[Collider], strict=True):
            x0 = round((p["x"] - c["w"] / 2) * per_unit)
            if top is None:
                y0 = round((p["y"] - c["h"] / 2) * per_unit)
            else:
                y0 = round((top - (p["y"] + c["h"] / 2)) * per_unit)
            cells = {(x, y) for x in range(x0, x0 + round(c["w"] * per_unit))
                     for y in range(y0, y0 + round(c["h"] * per_unit))}
            assert not (cells & out), "rectangles overlap"
            out |= cells
    return out


@pytest.mark.parametrize("path", [PLATFORMER, ENTITIES, SEPARATE, ALL],
                         ids=lambda p: p.stem)
@pytest.mark.parametrize("method", ["greedy", "exact"])
def test_rectangles_cover_the_intgrid_cells_exactly(path: Path,
                                                    method: Literal["greedy", "exact"]) -> None:
    reg = PrefabRegistry()
    reg.register("wall", Position(), Collider(), Solid())
    for level in ldtk_levels(path):
        doc = raw(path)
        lv = next(lv for lv in doc["levels"] if lv["identifier"] == level)
        if lv["layerInstances"] is None:
            lv = json.loads((path.parent / lv["externalRelPath"]).read_text())
        layers = [li for li in lv["layerInstances"] if li["__type"] == "IntGrid"
                  and any(li["intGridCsv"])]
        for layer in layers:
            others = {li["__identifier"] for li in lv["layerInstances"]
                      if li is not layer and li["__type"] == "IntGrid"}
            defs = {ld["identifier"]: ld for ld in doc["defs"]["layers"]}
            ids = {v["identifier"] or layer["__identifier"]
                   for v in defs[layer["__identifier"]]["intGridValues"]}
            names: dict[str, str | None] = {i: "wall" for i in ids}
            for other in others:
                for v in defs[other]["intGridValues"]:
                    if (v["identifier"] or other) not in ids:
                        names[v["identifier"] or other] = None
            world = World()
            load_level(world, path, reg, method, level=level, strict=False, names=names)
            per_unit = 16 / layer["__gridSize"]  # an 8 px layer: 2 cells per world unit
            csv = np.array(layer["intGridCsv"]).reshape(layer["__cHei"], layer["__cWid"])
            rows, cols = np.nonzero(csv)
            want = {(int(c), int(r)) for r, c in zip(rows, cols, strict=True)}
            got = rasterise(world, per_unit, top=lv["pxHei"] / 16)
            assert got == want, (level, layer["__identifier"])


def test_entity_positions_pivots_and_offsets(tmp_path: Path) -> None:
    doc = raw(ENTITIES)
    world = World()
    load_level(world, ENTITIES, stock_prefabs(), strict=False)
    start = entity_json(doc, "PlayerStart")[0]  # pivot (0.5, 1): px is its feet
    x = start["px"][0] / 16
    y = (464 - (start["px"][1] - 0.5 * start["height"])) / 16
    with world.query(Player, Position) as q:
        assert (q[Position]["x"][0], q[Position]["y"][0]) == (x, y)
    # a layer offset moves its entities; its grid moves with it
    for layer in doc["levels"][0]["layerInstances"]:
        layer["__pxTotalOffsetX"] += 32
        layer["__pxTotalOffsetY"] += 16
    path = tmp_path / "moved.ldtk"
    path.write_text(json.dumps(doc))
    moved = World()
    load_level(moved, path, stock_prefabs(), strict=False)
    with moved.query(Player, Position) as q:
        assert (q[Position]["x"][0], q[Position]["y"][0]) == (x + 2, y - 1)
    with world.query(Solid, Position) as a, moved.query(Solid, Position) as b:
        assert np.array_equal(a[Position]["x"] + 2, b[Position]["x"])
        assert np.array_equal(a[Position]["y"] - 1, b[Position]["y"])


def test_resized_entities_take_their_drawn_size(tmp_path: Path) -> None:
    doc = raw(ENTITIES)
    reg = stock_prefabs()
    world = World()
    load_level(world, ENTITIES, reg, strict=False)
    sizes = sorted((e["width"] / 16, e["height"] / 16) for e in entity_json(doc, "Enemy"))
    with world.query(Patrol, Collider) as q:
        got = sorted(zip(q[Collider]["w"].tolist(), q[Collider]["h"].tolist(), strict=True))
    # Enemy is resizable in its definition: every enemy takes its drawn size
    assert sizes == got == [(1.0, 1.0), (1.0, 1.0), (2.0, 2.0)]
    # Not resizable and drawn at the definition's size: the prefab keeps its own collider
    for ed in doc["defs"]["entities"]:
        ed["resizableX"] = ed["resizableY"] = False
        if ed["identifier"] == "Enemy":
            ed["width"] = ed["height"] = 16
    path = tmp_path / "fixed.ldtk"
    path.write_text(json.dumps(doc))
    fixed = World()
    load_level(fixed, path, reg, strict=False)
    with fixed.query(Patrol, Collider) as q:
        got = sorted(zip(q[Collider]["w"].tolist(), q[Collider]["h"].tolist(), strict=True))
    assert got == [(pytest.approx(0.9), pytest.approx(0.9))] * 2 + [(2.0, 2.0)]


def test_counts_equal_instances_and_strict_false_lists_the_rest() -> None:
    doc = raw(PLATFORMER)
    summary = load_level(World(), PLATFORMER, stock_prefabs(), strict=False,
                         names=stock_editor_names())
    inst: dict[str, int] = {}
    for e in (e for layer in doc["levels"][0]["layerInstances"]
              for e in layer["entityInstances"]):
        inst[e["__identifier"]] = inst.get(e["__identifier"], 0) + 1
    assert summary.entity_counts["player"] == inst["Player"]
    assert summary.entity_counts["enemy"] == inst["Mob"]
    assert summary.skipped["entity 'Chest'"] == inst["Chest"]
    assert summary.skipped["entity 'Door'"] == inst["Door"]
    ladder = sum(1 for v in doc["levels"][0]["layerInstances"][2]["intGridCsv"] if v == 2)
    assert summary.skipped["IntGrid value 'ladder'"] == ladder
    assert "skipped      entity 'Chest' x1" in summary.describe()


def test_failed_editor_load_leaves_the_world_unchanged() -> None:
    world = World()
    load_level(world, SEPARATE, stock_prefabs(), names={"walls": "stone"})
    before = world.state_hash() if hasattr(world, "state_hash") else len(world)
    with pytest.raises(LevelError):
        load_level(world, ENTITIES, stock_prefabs())  # strict: Chest is unknown
    after = world.state_hash() if hasattr(world, "state_hash") else len(world)
    assert before == after


# --------------------------------------------------------------------------------------------
# Tiled


def test_arcade_maps_load_with_the_stock_names() -> None:
    maps = arcade_maps()
    for name in ("map.json", "level_1.json", "level_2.json", "test_map_1.json"):
        world = World()
        summary = load_level(world, maps / name, stock_prefabs(), names=stock_editor_names())
        tmap = pytiled_parser.parse_map(maps / name)
        layers = {layer.name: np.array(getattr(layer, "data", None)) for layer in tmap.layers
                  if getattr(layer, "data", None) is not None}
        rows, cols = np.nonzero(layers["Platforms"])
        want = {(int(c), int(r)) for r, c in zip(rows, cols, strict=True)}
        assert rasterise(world, top=tmap.map_size.height) == want, name
        n_coins = int(np.count_nonzero(layers.get("Coins", 0)))
        assert world.count(Pickup) == n_coins and summary.entity_counts.get("coin", 0) == n_coins
        assert summary.source.startswith("Tiled")


def test_arcade_map_with_objects_strict_and_lenient() -> None:
    path = arcade_maps() / "map_with_ladders.json"
    with pytest.raises(LevelError, match=r"layers\[1\]\(Moving Platforms\)\.objects\[0\]"
                                         r"\(id 2\): object 'Moving Platforms': unknown"):
        load_level(World(), path, stock_prefabs(), names=stock_editor_names())
    names = {**stock_editor_names(), "Moving Platforms": None, "Player Death Zones": None,
             "Enemies.type": None, "Enemies.boundary_left": None,
             "Enemies.boundary_right": None, "Enemies.change_x": None}
    world = World()
    summary = load_level(world, path, stock_prefabs(), names=names)
    assert summary.entity_counts["enemy"] == 3
    doc = raw(path)
    enemies = next(layer for layer in doc["layers"] if layer["name"] == "Enemies")["objects"]
    with world.query(Patrol, Position) as q:
        got = sorted(zip(q[Position]["x"].tolist(), q[Position]["y"].tolist(), strict=True))
    want = sorted((o["x"] / 128, 17 - o["y"] / 128) for o in enemies)
    assert got == [(pytest.approx(x, abs=1e-5), pytest.approx(y, abs=1e-5)) for x, y in want]


TMX = """<?xml version="1.0" encoding="UTF-8"?>
<map version="1.10" tiledversion="1.10.2" orientation="orthogonal" renderorder="right-down"
     width="6" height="4" tilewidth="16" tileheight="16" infinite="0" nextlayerid="4"
     nextobjectid="9">
 <tileset firstgid="1" name="t" tilewidth="16" tileheight="16" tilecount="4" columns="2">
  <image source="t.png" width="32" height="32"/>
  <tile id="0" type="solid"/>
  <tile id="1" type="coin_tile"/>
 </tileset>
 <layer id="1" name="Ground" width="6" height="4">
  <data encoding="csv">
0,0,0,0,0,0,
0,0,0,0,0,2,
1,1,0,0,1,1,
1,1,3221225473,1,1,1
</data>
 </layer>
 <layer id="2" name="Deco" width="6" height="4">
  <data encoding="csv">
3,3,3,3,3,3,
0,0,0,0,0,0,
0,0,0,0,0,0,
0,0,0,0,0,0
</data>
 </layer>
 <objectgroup id="3" name="Things" offsetx="8" offsety="0">
  <object id="5" type="hero" x="8" y="40" width="16" height="16">
   <properties><property name="speed" type="float" value="3.5"/></properties>
  </object>
  <object id="6" type="pointer" x="64" y="16">
   <properties><property name="target" type="object" value="5"/></properties>
   <point/>
  </object>
  <object id="7" template="box.tx" x="40" y="8"/>
 </objectgroup>
</map>
"""

TEMPLATE = """<?xml version="1.0" encoding="UTF-8"?>
<template>
 <object type="box" width="32" height="16">
  <properties><property name="tile" type="int" value="2"/></properties>
 </object>
</template>
"""


def tiled_registry() -> PrefabRegistry:
    reg = stock_prefabs()
    reg.alias("ground", "solid")
    reg.alias("coin", "coin_tile")
    reg.alias("player", "hero")
    reg.register("pointer", Position(), Target())
    reg.register("box", Position(), Collider())
    return reg


def test_tmx_tile_classes_flips_objects_templates_and_refs(tmp_path: Path) -> None:
    (tmp_path / "m.tmx").write_text(TMX)
    (tmp_path / "box.tx").write_text(TEMPLATE)
    reg = tiled_registry()
    reg.register("tilebox", Position(), Collider(), Solid(), aliases=())
    world = World()
    with pytest.raises(LevelError, match="'tile' of 'box' is not a parameter"):
        load_level(world, tmp_path / "m.tmx", reg)
    assert len(world) == 0
    summary = load_level(world, tmp_path / "m.tmx", reg, names={"box.tile": None})
    # the flipped tile (gid 1 with flip bits) is ground like the others
    assert summary.rect_counts == {"ground": 3}  # greedy: two 2x1 runs above a 6x1 run
    assert summary.entity_counts == {"ground": 3, "coin": 1, "player": 1, "pointer": 1,
                                     "box": 1}
    assert summary.skipped == {"tile layer 'Deco' (a picture: no tile classes, no known layer "
                               "name, no collision property)": 1}
    assert rasterise(world) == {(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (5, 0),
                                       (0, 1), (1, 1), (4, 1), (5, 1)}
    with world.query(Player, Position, Collider) as q:
        hero = int(q.entities[0])
        # x 8 + layer offset 8 -> 16 px; top-left y 40 -> centre 48 px from the top
        assert (q[Position]["x"][0], q[Position]["y"][0]) == (1.5, 4 - 3.0)
        assert q[Player]["run_speed"][0] == 3.5
        assert (q[Collider]["w"][0], q[Collider]["h"][0]) == (1.0, 1.0)
    with world.query(Target, Position) as q:
        assert int(q[Target]["target"][0]) == hero and world.is_alive(hero)
        assert (q[Position]["x"][0], q[Position]["y"][0]) == (4.5, 3.0)
    with world.query(Collider, Position, without=(Solid,)) as q:
        box = [(p["x"], p["y"], c["w"], c["h"])
               for p, c in zip(q[Position], q[Collider], strict=True) if c["w"] == 2.0]
    assert box == [(4.0, 3.0, 2.0, 1.0)]  # the template's size at x 40 + 8 (layer offset)


def test_tiled_collision_property_and_infinite_maps(tmp_path: Path) -> None:
    doc = {"type": "map", "version": "1.10", "tiledversion": "1.10.2",
           "orientation": "orthogonal", "renderorder": "right-down", "infinite": True,
           "width": 4, "height": 4, "tilewidth": 8, "tileheight": 8, "nextlayerid": 2,
           "nextobjectid": 1,
           "tilesets": [{"firstgid": 1, "name": "t", "tilewidth": 8, "tileheight": 8,
                         "tilecount": 1, "columns": 1, "image": "t.png", "imagewidth": 8,
                         "imageheight": 8, "margin": 0, "spacing": 0}],
           "layers": [{"id": 1, "name": "Edges", "type": "tilelayer", "visible": True,
                       "opacity": 1, "x": 0, "y": 0, "startx": -16, "starty": 0,
                       "width": 32, "height": 16,
                       "properties": [{"name": "collision", "type": "bool", "value": True}],
                       "chunks": [
                           {"x": -16, "y": 0, "width": 16, "height": 16,
                            "data": [1] * 16 + [0] * 240},
                           {"x": 0, "y": 0, "width": 16, "height": 16,
                            "data": [0] * 240 + [1] * 16}]}]}
    path = tmp_path / "inf.tmj"
    path.write_text(json.dumps(doc))
    world = World()
    summary = load_level(world, path, stock_prefabs(), names=stock_editor_names())
    assert summary.size == (32, 16) and summary.rect_counts == {"ground": 2}
    # chunk (-16, 0) row 0 is the top row; chunk (0, 0) row 15 the bottom row
    assert rasterise(world) == ({(x, 15) for x in range(16)}
                                       | {(x, 0) for x in range(16, 32)})
    with pytest.raises(LevelError, match="'collision'"):
        load_level(World(), path, PrefabRegistry())


def test_tiled_refusals(tmp_path: Path) -> None:
    iso = TMX.replace('orientation="orthogonal"', 'orientation="isometric"')
    (tmp_path / "iso.tmx").write_text(iso)
    (tmp_path / "box.tx").write_text(TEMPLATE)
    with pytest.raises(LevelError, match="'isometric' maps are not supported"):
        load_level(World(), tmp_path / "iso.tmx", tiled_registry())
    (tmp_path / "bad.tmx").write_text(TMX[:300])
    with pytest.raises(LevelError, match=r"bad.tmx: line \d+:\d+: invalid XML"):
        load_level(World(), tmp_path / "bad.tmx", tiled_registry())
    (tmp_path / "m.tmx").write_text(TMX)
    (tmp_path / "box.tx").unlink()
    with pytest.raises(LevelError, match="box.tx"):  # the template is missing
        load_level(World(), tmp_path / "m.tmx", tiled_registry())
    with pytest.raises(LevelError, match="not a Tiled map"):
        load_level(World(), arcade_maps() / "items.json", tiled_registry())
    with pytest.raises(LevelError, match="one level"):
        load_level(World(), arcade_maps() / "map.json", tiled_registry(), level=1)


# --------------------------------------------------------------------------------------------
# cross-check with shared/levels-real: the IntGrid layers rasterised by someone else


REAL = Path(__file__).resolve().parents[2] / "shared" / "levels-real" / "ldtk"


def real_entries() -> list[dict[str, Any]]:
    if not (REAL / "index.json").is_file():
        return []
    entries = json.loads((REAL / "index.json").read_text())
    return [e for e in entries
            if (DATA / e["source"].rsplit("/", 1)[-1]).is_file()]


@pytest.mark.skipif(not real_entries(), reason=f"no shared/levels-real beside the repo ({REAL})")
def test_intgrid_cells_match_the_published_rasters() -> None:
    from PIL import Image

    from ecs_engine.components import Tile

    checked = 0
    for entry in real_entries():
        project = DATA / entry["source"].rsplit("/", 1)[-1]
        doc = raw(project)
        layer_def = next(ld for ld in doc["defs"]["layers"] if ld["identifier"] == entry["layer"])
        reg = PrefabRegistry()
        names: dict[str, str | None] = {}
        for v in layer_def["intGridValues"]:
            reg.register(f"v{v['value']}", Position(), Collider(), Solid(),
                         Tile(kind=v["value"]))
            names[v["identifier"] or entry["layer"]] = f"v{v['value']}"
        world = World()
        load_level(world, project, reg, level=entry["level"], strict=False, names=names)
        png = np.asarray(Image.open(REAL / entry["file"]).convert("RGBA"))
        assert png.shape[:2] == (entry["height"], entry["width"])
        for value, info in entry["values"].items():
            colour = tuple(int(info["colour"][i:i + 2], 16) for i in (1, 3, 5))
            rows, cols = np.nonzero((png[..., :3] == colour).all(axis=-1) & (png[..., 3] > 0))
            want = {(int(c), int(r)) for r, c in zip(rows, cols, strict=True)}
            assert len(want) == info["cells"]
            got: set[tuple[int, int]] = set()
            with world.query(Position, Collider, Tile) as q:
                for p, c, t in zip(q[Position], q[Collider], q[Tile], strict=True):
                    if t["kind"] != int(value):
                        continue
                    x0 = round(p["x"] - c["w"] / 2)
                    y0 = round(entry["height"] - (p["y"] + c["h"] / 2))
                    got |= {(x, y) for x in range(x0, x0 + round(c["w"]))
                            for y in range(y0, y0 + round(c["h"]))}
            assert got == want, (entry["file"], value)
            checked += 1
    assert checked >= 10


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    doc = raw(ALL)
    refs = entity_json(doc, "EntityRefTest")
    refs[1]["iid"] = refs[0]["iid"]
    path = tmp_path / "dup.ldtk"
    path.write_text(json.dumps(doc))
    with pytest.raises(LevelError, match="is used twice"):
        load_level(World(), path, registry(), strict=False)


@component
class Lights:
    colors: field(np.uint8, shape=(3, 4))  # type: ignore[valid-type]
    radius: np.float32 = 0.0


def test_array_of_colors_fills_a_shaped_field() -> None:
    reg = stock_prefabs()
    reg.register("spotlight", Position(), Lights())
    world = World()
    load_level(world, ENTITIES, reg, strict=False,
               names={"SpotLight.flickering": None, "SpotLight.intensity": None})
    doc = raw(ENTITIES)
    want = sorted(
        (e["fieldInstances"][0]["__value"],
         [[int(c[i:i + 2], 16) for i in (1, 3, 5)] + [255]
          for c in e["fieldInstances"][1]["__value"]])
        for e in entity_json(doc, "SpotLight"))
    with world.query(Lights) as q:
        got = sorted((float(r), [c for c in cs.tolist() if any(c)])
                     for r, cs in zip(q[Lights]["radius"], q[Lights]["colors"], strict=True))
    assert got == want


def test_rotated_tiled_objects_turn_about_their_origin(tmp_path: Path) -> None:
    tmx = TMX.replace('<object id="5" type="hero" x="8" y="40" width="16" height="16">',
                      '<object id="5" type="hero" x="8" y="40" width="32" height="16" '
                      'rotation="90">')
    (tmp_path / "m.tmx").write_text(tmx)
    (tmp_path / "box.tx").write_text(TEMPLATE)
    world = World()
    load_level(world, tmp_path / "m.tmx", tiled_registry(), names={"box.tile": None})
    with world.query(Player, Position) as q:
        # origin (8 + 8, 40) px; turned 90 degrees clockwise (y down) the centre offset
        # (16, 8) becomes (-8, 16): centre (8, 56) px -> world (0.5, 4 - 3.5)
        assert (q[Position]["x"][0], q[Position]["y"][0]) == (0.5, 0.5)


@pytest.mark.parametrize("label", ["x", "Position.y"])
def test_a_field_that_would_set_the_placed_position_is_refused(label: str) -> None:
    """The placement sets x and y: an entity field mapped onto them (by name or by a names
    entry) silently moved the entity away from where the editor drew it."""
    world = World()
    names = {**STRINGS_DROPPED, "walls": "wall", "first": "wall", "second": "wall",
             "third_used_in_autoLayer": "wall", "IntGrid_8px_grid": "wall",
             "Labels": None, "RectRegion": None, "CircleRegion": None,
             "EntityFieldsTest.Float": label}
    with pytest.raises(LevelError, match=r"'Float' would set '[xy]', which the editor's "
                                         r"placement sets"):
        load_level(world, ALL, registry(), names=names)
    assert len(world) == 0
