"""Level loading under an outside review: budgets for editor files, Tiled file references,
PNG transparency at low bit depths, child prefabs of placed entities, turned Tiled shapes,
``inspect``'s picture, reserved parameters, LDtk IntGrid values and partition of uint64 grids.
Each test failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ecs_engine import World
from ecs_engine.components import stock_prefabs
from ecs_engine.levels import LevelError, load_level
from ecs_engine.levels.editor_names import stock_editor_names

TILESET = {"firstgid": 1, "name": "t", "tilewidth": 16, "tileheight": 16, "tilecount": 2,
           "columns": 2, "image": "t.png", "imagewidth": 32, "imageheight": 16, "margin": 0,
           "spacing": 0, "tiles": [{"id": 0, "type": "ground"}, {"id": 1, "type": "coin"}]}


def tmj(file: Path, layers: list[dict[str, Any]], *, width: int = 4, height: int = 4,
        infinite: bool = False, tilesets: list[dict[str, Any]] | None = None) -> Path:
    """A small orthogonal Tiled map (16 px tiles) written as ``.tmj``."""
    doc = {"type": "map", "version": "1.10", "tiledversion": "1.10.2",
           "orientation": "orthogonal", "renderorder": "right-down", "width": width,
           "height": height, "tilewidth": 16, "tileheight": 16, "infinite": infinite,
           "nextlayerid": len(layers) + 1, "nextobjectid": 100, "layers": layers,
           "tilesets": [TILESET] if tilesets is None else tilesets}
    file.write_text(json.dumps(doc))
    return file


def tile_layer(data: np.ndarray, ident: int = 1) -> dict[str, Any]:
    h, w = data.shape
    return {"type": "tilelayer", "id": ident, "name": f"l{ident}", "width": w, "height": h,
            "x": 0, "y": 0, "opacity": 1, "visible": True, "data": data.ravel().tolist()}


def object_layer(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "objectgroup", "id": 9, "name": "o", "x": 0, "y": 0, "opacity": 1,
            "visible": True, "draworder": "topdown", "objects": objects}


def ldtk(file: Path, grid: np.ndarray, layers: int = 1) -> Path:
    """An LDtk project of one level with ``layers`` IntGrid layers of ``grid`` (1 = ground,
    2 = coin)."""
    h, w = grid.shape
    values = [{"value": 1, "identifier": "ground", "color": "#8b5a2b"},
              {"value": 2, "identifier": "coin", "color": "#ffd200"}]
    doc = {"jsonVersion": "1.5.3", "defaultGridSize": 16,
           "defs": {"layers": [{"identifier": f"G{i}", "uid": i, "intGridValues": values}
                               for i in range(layers)],
                    "entities": [], "enums": [], "externalEnums": []},
           "levels": [{"identifier": "L0", "pxWid": w * 16, "pxHei": h * 16,
                       "__bgColor": "#000000",
                       "layerInstances": [
                           {"__identifier": f"G{i}", "__type": "IntGrid", "__gridSize": 16,
                            "__cWid": w, "__cHei": h, "__pxTotalOffsetX": 0,
                            "__pxTotalOffsetY": 0, "layerDefUid": i,
                            "intGridCsv": grid.ravel().tolist(), "entityInstances": []}
                           for i in range(layers)]}]}
    file.write_text(json.dumps(doc))
    return file


# --------------------------------------------------------------------------------------------
# 1. budgets: editor files honour max_pixels= and max_entities=


def test_far_apart_tiled_chunks_are_refused_before_any_grid_is_built(tmp_path: Path) -> None:
    far = 8191  # a 1 kB file whose grid would span 8192 x 8192 tiles per layer
    layers = [{"type": "tilelayer", "id": i + 1, "name": f"l{i}", "x": 0, "y": 0,
               "opacity": 1, "visible": True, "width": far + 1, "height": far + 1,
               "startx": 0, "starty": 0,
               "chunks": [{"x": 0, "y": 0, "width": 1, "height": 1, "data": [1]},
                          {"x": far, "y": far, "width": 1, "height": 1, "data": [1]}]}
              for i in range(2)]
    f = tmj(tmp_path / "huge.tmj", layers, width=1, height=1, infinite=True)
    with pytest.raises(LevelError, match=r"2 tile layer\(s\) .* 134217728 cells .*max_pixels="):
        load_level(World(), f, stock_prefabs())
    # the budget is for all layers together: one layer fits a bigger budget, two do not
    with pytest.raises(LevelError, match="max_pixels="):
        load_level(World(), f, stock_prefabs(), max_pixels=(far + 1) ** 2 + 1)


def test_max_pixels_counts_every_tiled_layer_and_every_ldtk_intgrid_layer(
        tmp_path: Path) -> None:
    grid = np.ones((10, 10), np.int64)
    f = tmj(tmp_path / "m.tmj", [tile_layer(grid, 1), tile_layer(grid, 2)], width=10,
            height=10)
    load_level(World(), f, stock_prefabs(), max_pixels=200)
    with pytest.raises(LevelError, match="200 cells together"):
        load_level(World(), f, stock_prefabs(), max_pixels=199)
    p = ldtk(tmp_path / "p.ldtk", grid, layers=2)
    load_level(World(), p, stock_prefabs(), max_pixels=200)
    with pytest.raises(LevelError, match="200 cells together") as info:
        load_level(World(), p, stock_prefabs(), max_pixels=199)
    assert info.value.where == "levels[0](L0).layerInstances"


@pytest.mark.parametrize("kind", ["tiled", "ldtk"])
def test_max_entities_limits_editor_levels(tmp_path: Path, kind: str) -> None:
    grid = np.full((10, 10), 2, np.int64)  # coins: one entity per cell
    f = (tmj(tmp_path / "m.tmj", [tile_layer(grid)], width=10, height=10) if kind == "tiled"
         else ldtk(tmp_path / "p.ldtk", grid))
    world = World()
    with pytest.raises(LevelError, match=r"100 entities .*limit is 99 \(max_entities=\)"):
        load_level(world, f, stock_prefabs(), max_entities=99)
    assert len(world) == 0
    assert len(load_level(World(), f, stock_prefabs(), max_entities=100).keys) == 100


def test_tiled_objects_count_towards_max_entities(tmp_path: Path) -> None:
    objects = [{"id": i, "type": "coin", "name": "", "x": 8 * i, "y": 8, "width": 0,
                "height": 0, "point": True, "rotation": 0, "visible": True}
               for i in range(1, 6)]
    f = tmj(tmp_path / "m.tmj", [object_layer(objects)])
    with pytest.raises(LevelError, match="5 entities"):
        load_level(World(), f, stock_prefabs(), max_entities=4)


def test_out_of_memory_while_reading_an_editor_file_is_a_level_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ecs_engine.levels import editor_plan

    def exhausted(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(editor_plan, "partition", exhausted)
    f = tmj(tmp_path / "m.tmj", [tile_layer(np.ones((4, 4), np.int64))])
    with pytest.raises(LevelError, match="out of memory"):
        load_level(World(), f, stock_prefabs())


# --------------------------------------------------------------------------------------------
# 2. the files a Tiled map refers to


def _ts_map(file: Path, source: str) -> Path:
    return tmj(file, [tile_layer(np.array([[1, 1]]))], width=2, height=1,
               tilesets=[{"firstgid": 1, "source": source}])


def _tileset(file: Path) -> Path:
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps({**{k: v for k, v in TILESET.items() if k != "firstgid"},
                                "type": "tileset", "version": "1.10"}))
    return file


def test_tileset_paths_outside_the_project_root_are_refused(tmp_path: Path) -> None:
    _tileset(tmp_path / "private" / "secret.json")
    (tmp_path / "maps").mkdir()
    for source, why in [("../private/secret.json", "outside the map's project root"),
                        (str(tmp_path / "private" / "secret.json"), "absolute path"),
                        ("C:\\tiles\\secret.json", "absolute path")]:
        f = _ts_map(tmp_path / "maps" / "m.tmj", source)
        with pytest.raises(LevelError, match=why) as info:
            load_level(World(), f, stock_prefabs())
        assert info.value.where == "tilesets[0].source"
    # a link inside the folder that leads out of it is outside too
    (tmp_path / "maps" / "link.json").symlink_to(tmp_path / "private" / "secret.json")
    with pytest.raises(LevelError, match="outside the map's project root"):
        load_level(World(), _ts_map(tmp_path / "maps" / "m.tmj", "link.json"), stock_prefabs())


def test_a_tiled_project_file_makes_sibling_folders_usable(tmp_path: Path) -> None:
    _tileset(tmp_path / "tilesets" / "t.json")
    (tmp_path / "maps").mkdir()
    f = _ts_map(tmp_path / "maps" / "m.tmj", "../tilesets/t.json")
    with pytest.raises(LevelError, match="outside"):
        load_level(World(), f, stock_prefabs())
    (tmp_path / "game.tiled-project").write_text("{}")
    assert load_level(World(), f, stock_prefabs()).rect_counts == {"ground": 1}
    # a path that climbs out and back in stays allowed without a project (arcade's maps)
    (tmp_path / "game.tiled-project").unlink()
    _tileset(tmp_path / "maps" / "t.json")
    f = _ts_map(tmp_path / "maps" / "m.tmj", "../maps/t.json")
    assert load_level(World(), f, stock_prefabs()).rect_counts == {"ground": 1}


def test_special_files_are_refused_without_reading_them(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "pipe.json")  # reading it would block forever
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "dir.json").mkdir()
    for source, why in [("pipe.json", "not a regular file"), ("dir.json", "not a regular"),
                        ("zero.json", "outside the map's project root")]:
        with pytest.raises(LevelError, match=why) as info:
            load_level(World(), _ts_map(tmp_path / "m.tmj", source), stock_prefabs())
        assert info.value.where == "tilesets[0].source"


def test_missing_tileset_and_template_name_where_they_are_referred_to(tmp_path: Path) -> None:
    with pytest.raises(LevelError, match="'nope.json'.*No such file") as info:
        load_level(World(), _ts_map(tmp_path / "m.tmj", "nope.json"), stock_prefabs())
    assert info.value.where == "tilesets[0].source"
    tmx = tmp_path / "m.tmx"
    tmx.write_text('<?xml version="1.0"?><map version="1.10" orientation="orthogonal" '
                   'renderorder="right-down" width="2" height="1" tilewidth="16" '
                   'tileheight="16" infinite="0" nextlayerid="3" nextobjectid="2">'
                   '<objectgroup id="2" name="o"><object id="1" template="../t.tx" x="0" '
                   'y="0"/></objectgroup></map>')
    with pytest.raises(LevelError, match="outside") as info:
        load_level(World(), tmx, stock_prefabs())
    assert info.value.where == "object(id 1).template"


def test_a_template_s_own_tileset_is_checked_too(tmp_path: Path) -> None:
    (tmp_path / "t.tj").write_text(json.dumps({
        "type": "template", "tileset": {"firstgid": 1, "source": "/etc/passwd"},
        "object": {"gid": 1, "width": 16, "height": 16, "name": "", "type": "coin",
                   "rotation": 0, "visible": True}}))
    f = tmj(tmp_path / "m.tmj", [object_layer([{"id": 1, "template": "t.tj", "x": 0,
                                                "y": 16}])])
    with pytest.raises(LevelError, match="absolute path") as info:
        load_level(World(), f, stock_prefabs())
    assert info.value.file == str(tmp_path / "t.tj")
    assert info.value.where == "tileset.source"


def test_an_ldtk_external_level_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    import os

    p = ldtk(tmp_path / "p.ldtk", np.ones((2, 2), np.int64))
    doc = json.loads(p.read_text())
    doc["levels"][0].update(layerInstances=None, externalRelPath="p/L0.ldtkl")
    p.write_text(json.dumps(doc))
    (tmp_path / "p").mkdir()
    os.mkfifo(tmp_path / "p" / "L0.ldtkl")
    with pytest.raises(LevelError, match="not a regular file"):
        load_level(World(), p, stock_prefabs())


# --------------------------------------------------------------------------------------------
# 3. PNG tRNS at every bit depth


def write_png(file: Path, samples: Any, color_type: int, bit_depth: int,
              trns: bytes | None = None) -> Path:
    """A PNG of raw sample values at any bit depth (pillow cannot write 2-bit grey)."""
    import struct
    import zlib

    s = np.asarray(samples)
    s = s[..., None] if s.ndim == 2 else s
    h, w, _ = s.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    rows = []
    for y in range(h):
        row = s[y].reshape(-1)
        if bit_depth == 16:
            raw = row.astype(">u2").tobytes()
        elif bit_depth == 8:
            raw = row.astype(np.uint8).tobytes()
        else:
            bits = np.unpackbits(row.astype(np.uint8)[:, None], axis=1)[:, 8 - bit_depth:]
            raw = np.packbits(bits.reshape(-1)).tobytes()
        rows.append(b"\x00" + raw)
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0)
    file.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + (chunk(b"tRNS", trns) if trns is not None else b"")
                     + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
    return file


@pytest.mark.parametrize(("bit_depth", "samples", "key", "alpha"), [
    (1, [0, 1, 1, 0], 1, [255, 0, 0, 255]),
    (1, [0, 1, 1, 0], 0, [0, 255, 255, 0]),
    (2, [0, 1, 2, 3], 1, [255, 0, 255, 255]),
    (2, [0, 1, 2, 3], 3, [255, 255, 255, 0]),
    (4, [0, 5, 15, 5], 5, [255, 0, 255, 0]),
    (4, [0, 5, 15, 14], 15, [255, 255, 0, 255]),
    (8, [0, 5, 15, 5], 5, [255, 0, 255, 0]),
])
def test_low_bit_grey_trns_is_compared_at_the_file_s_bit_depth(
        tmp_path: Path, bit_depth: int, samples: list[int], key: int, alpha: list[int]) -> None:
    import struct

    from ecs_engine.levels.images import read_rgba

    f = write_png(tmp_path / "g.png", [samples], 0, bit_depth, struct.pack(">H", key))
    assert read_rgba(f)[0, :, 3].tolist() == alpha


def test_16_bit_rgb_trns_with_a_small_key(tmp_path: Path) -> None:
    import struct

    from ecs_engine.levels.images import read_rgba

    # (10, 20, 30) at 16 bits is (0, 0, 0) at the 8 bits decoded, not (10, 20, 30)
    px = [[[10, 20, 30], [10 * 257, 20 * 257, 30 * 257], [0x1234, 0x5678, 0x9ABC]]]
    f = write_png(tmp_path / "c.png", px, 2, 16, struct.pack(">HHH", 10, 20, 30))
    assert read_rgba(f)[0, :, 3].tolist() == [0, 255, 255]
    f = write_png(tmp_path / "c.png", px, 2, 16, struct.pack(">HHH", 0x1234, 0x5678, 0x9ABC))
    assert read_rgba(f)[0, :, 3].tolist() == [255, 255, 0]


def test_a_2_bit_grey_layer_loads_with_its_transparent_grey_empty(tmp_path: Path) -> None:
    import struct

    (tmp_path / "geometry").mkdir()
    write_png(tmp_path / "geometry" / "layer1.png", [[0, 1, 1, 3]], 0, 2, struct.pack(">H", 1))
    (tmp_path / "level.lvl").write_text(json.dumps({
        "format": "ecs-level", "version": 1, "name": "t", "background": "#87ceeb",
        "layers": {"geometry": [{"file": "geometry/layer1.png"}]},
        "tile_colors": {"#000000": "ground", "#ffffff": "ground"}}))
    assert load_level(World(), tmp_path, stock_prefabs()).rect_counts == {"ground": 2}


# --------------------------------------------------------------------------------------------
# 4. placed entities get their prefab's child prefabs


def gunner_registry() -> Any:
    from ecs_engine.components import Position

    reg = stock_prefabs()
    reg.register("barrel", Position())
    reg.register("gun", Position(), children=[("barrel", 1)])
    reg.register("gunner", *reg["enemy"].components, children=[("gun", 2)])
    return reg


def gunner_folder(folder: Path, sprites: int = 1) -> Path:
    from PIL import Image

    (folder / "geometry").mkdir(parents=True)
    (folder / "sprites").mkdir()
    geo = np.zeros((1, sprites + 1, 4), np.uint8)
    geo[0, 0] = (139, 90, 43, 255)
    spr = np.zeros((1, sprites + 1, 4), np.uint8)
    spr[0, 1:] = (220, 40, 40, 255)
    Image.fromarray(geo).save(folder / "geometry" / "l.png")
    Image.fromarray(spr).save(folder / "sprites" / "l.png")
    (folder / "level.lvl").write_text(json.dumps({
        "format": "ecs-level", "version": 1, "name": "t", "background": "#87ceeb",
        "layers": {"geometry": [{"file": "geometry/l.png"}],
                   "sprites": [{"file": "sprites/l.png"}]},
        "tile_colors": {"#8b5a2b": "ground"}, "sprite_colors": {"#dc2828": "gunner"}}))
    return folder


def _assert_subtrees(world: World, keys: Any, gunners: int) -> None:
    from ecs_engine.components import Patrol

    placed = [int(k) for k in keys if world.has(int(k), Patrol)]
    assert len(placed) == gunners
    for key in placed:
        guns = world.children(key)
        assert len(guns) == 2
        assert all(len(world.children(int(g))) == 1 for g in guns)
    assert len(world) == len(keys) + 4 * gunners  # 2 guns and 2 barrels each


def test_level_folder_entities_get_their_child_prefabs(tmp_path: Path) -> None:
    world = World()
    summary = load_level(world, gunner_folder(tmp_path / "l", sprites=3), gunner_registry())
    _assert_subtrees(world, summary.keys, 3)
    world.despawn_batch(summary.keys)  # a level's keys take their subtrees with them
    assert len(world) == 0


def test_tiled_and_ldtk_entities_get_their_child_prefabs(tmp_path: Path) -> None:
    objects = [{"id": i, "type": "gunner", "name": "", "x": 16 * i, "y": 16, "width": 0,
                "height": 0, "point": True, "rotation": 0, "visible": True}
               for i in (1, 2)]
    f = tmj(tmp_path / "m.tmj", [object_layer(objects)])
    world = World()
    _assert_subtrees(world, load_level(world, f, gunner_registry()).keys, 2)
    grid = np.zeros((2, 2), np.int64)
    p = ldtk(tmp_path / "p.ldtk", grid)
    doc = json.loads(p.read_text())
    doc["defs"]["entities"] = [{"identifier": "gunner", "width": 16, "height": 16}]
    doc["levels"][0]["layerInstances"].append({
        "__identifier": "E", "__type": "Entities", "__gridSize": 16, "__cWid": 2, "__cHei": 2,
        "__pxTotalOffsetX": 0, "__pxTotalOffsetY": 0, "layerDefUid": 99, "intGridCsv": [],
        "entityInstances": [{"__identifier": "gunner", "iid": "a", "px": [8, 8],
                             "__pivot": [0.5, 0.5], "width": 16, "height": 16,
                             "fieldInstances": []}]})
    p.write_text(json.dumps(doc))
    world = World()
    _assert_subtrees(world, load_level(world, p, gunner_registry()).keys, 1)


def test_child_prefabs_are_all_or_nothing_and_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ecs_engine import PrefabRegistry

    folder = gunner_folder(tmp_path / "l", sprites=2)
    world = World()
    world.spawn()
    before = world.state_hash()
    # 1 tile + 2 gunners + 8 children = 11
    with pytest.raises(LevelError, match=r"11 entities .* 8 from their prefabs' child"):
        load_level(world, folder, gunner_registry(), max_entities=10)
    real = PrefabRegistry.spawn_children

    def fails_after(*args: Any) -> None:
        real(*args)
        raise RuntimeError("the engine refused")

    monkeypatch.setattr(PrefabRegistry, "spawn_children", staticmethod(fails_after))
    with pytest.raises(LevelError, match="spawning failed"):
        load_level(world, folder, gunner_registry())
    assert world.state_hash() == before


def test_an_unknown_child_prefab_fails_before_spawning(tmp_path: Path) -> None:
    reg = gunner_registry()
    reg.register("broken", *reg["enemy"].components, children=[("no_such_prefab", 1)],
                 aliases=("gunner2",))
    folder = gunner_folder(tmp_path / "l")
    lvl = json.loads((folder / "level.lvl").read_text())
    lvl["sprite_colors"] = {"#dc2828": "broken"}
    (folder / "level.lvl").write_text(json.dumps(lvl))
    world = World()
    with pytest.raises(LevelError, match="child prefabs") as info:
        load_level(world, folder, reg)
    assert info.value.where == 'sprite_colors["#dc2828"]'
    assert len(world) == 0


# --------------------------------------------------------------------------------------------
# 5. turned Tiled shapes take the bounding box of the turned shape


def _sizes(tmp_path: Path, objects: list[dict[str, Any]]) -> list[tuple[float, ...]]:
    from ecs_engine.components import Collider, Position

    world = World()
    load_level(world, tmj(tmp_path / "m.tmj", [object_layer(objects)], width=8, height=8),
               stock_prefabs())
    with world.query(Position, Collider) as q:
        return sorted((round(float(p["x"]), 4), round(float(p["y"]), 4),
                       round(float(c["w"]), 4), round(float(c["h"]), 4))
                      for p, c in zip(q[Position], q[Collider], strict=True))


@pytest.mark.parametrize(("rotation", "size"), [
    (0, (4.0, 1.0)), (90, (1.0, 4.0)), (180, (4.0, 1.0)), (-90, (1.0, 4.0)),
    (45, (5 / 2 ** 0.5, 5 / 2 ** 0.5)), (30, (4 * 3 ** 0.5 / 2 + 0.5, 2 + 3 ** 0.5 / 2))])
def test_a_turned_rectangle_takes_its_bounding_box(tmp_path: Path, rotation: float,
                                                    size: tuple[float, float]) -> None:
    rect = {"id": 1, "type": "ground", "name": "", "x": 32, "y": 32, "width": 64,
            "height": 16, "rotation": rotation, "visible": True}
    poly = {**rect, "id": 2, "width": 0, "height": 0,
            "polygon": [{"x": 0, "y": 0}, {"x": 64, "y": 0}, {"x": 64, "y": 16},
                        {"x": 0, "y": 16}]}
    got = _sizes(tmp_path, [rect, poly])
    assert got[0] == got[1]  # the same as the same shape drawn as a polygon
    assert got[0][2:] == pytest.approx(size, abs=1e-4)


def test_a_turned_ellipse_and_a_scaled_tile_object(tmp_path: Path) -> None:
    ellipse = {"id": 1, "type": "ground", "name": "", "x": 0, "y": 0, "width": 64,
               "height": 16, "rotation": 90, "ellipse": True, "visible": True}
    tile = {"id": 2, "gid": 1, "name": "", "x": 64, "y": 64, "width": 64, "height": 16,
            "rotation": 90, "visible": True}
    (e, t) = sorted(_sizes(tmp_path, [ellipse, tile]), key=lambda r: r[0])
    assert e[2:] == pytest.approx((1.0, 4.0))
    assert t[2:] == pytest.approx((1.0, 4.0))
    ellipse["rotation"] = 45  # the turned ellipse's own extent, not its box's corners
    (e,) = _sizes(tmp_path, [ellipse])
    half = ((32 * 0.5 ** 0.5) ** 2 + (8 * 0.5 ** 0.5) ** 2) ** 0.5
    assert e[2:] == pytest.approx((2 * half / 16, 2 * half / 16), abs=1e-4)


# --------------------------------------------------------------------------------------------
# 6, 7. inspect: a safe default picture name; fine grids drawn at the picture's size


@pytest.mark.parametrize(("ident", "expected"), [
    ("Level/1", "p-Level_1-inspect.png"), ("/../../escaped", "p-_.._.._escaped-inspect.png"),
    ("..", "p-..-inspect.png"), ("a\\b:c*?", "p-a_b_c_-inspect.png")])
def test_inspect_default_picture_name_stays_in_the_current_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ident: str, expected: str) -> None:
    from ecs_engine.levels.__main__ import main

    p = ldtk(tmp_path / "p.ldtk", np.array([[1, 1], [0, 1]]))
    doc = json.loads(p.read_text())
    doc["levels"][0]["identifier"] = ident
    p.write_text(json.dumps(doc))
    cwd = tmp_path / "a" / "b" / "cwd"
    (cwd / "p-").mkdir(parents=True)
    monkeypatch.chdir(cwd)
    assert main(["inspect", str(p)]) == 0
    assert [f.name for f in cwd.iterdir() if f.is_file()] == [expected]
    assert sorted(f.name for f in tmp_path.rglob("*.png")) == [expected]


def test_inspect_draws_a_fine_editor_grid_at_the_picture_s_size(tmp_path: Path) -> None:
    import tracemalloc

    from ecs_engine.levels import plan_level
    from ecs_engine.levels.inspect import picture

    n = 1024  # cells of 1 px on a 64 px world unit: 16 x 16 world units, 128 x 128 px
    grid = np.zeros((n, n), np.int64)
    grid[n // 2:, :] = 1
    grid[::7, ::5] = 1
    p = ldtk(tmp_path / "fine.ldtk", grid)
    doc = json.loads(p.read_text())
    doc["defaultGridSize"] = 64
    doc["levels"][0].update(pxWid=n, pxHei=n)
    doc["levels"][0]["layerInstances"][0]["__gridSize"] = 1
    p.write_text(json.dumps(doc))
    plan = plan_level(p, stock_prefabs())
    tracemalloc.start()
    try:
        img = picture(plan)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert img.size == (128, 128)
    assert peak < 16 * 2**20  # drawn at 8 px per cell first, it took 256 MB
    arr = np.array(img)
    assert (arr[-10, 60] == (139, 90, 43, 255)).all()  # the solid lower half, in its colour
    assert (arr[-1, -1] == (16, 16, 16, 255)).all()  # the level's edge is outlined


# --------------------------------------------------------------------------------------------
# 8. reserved parameters under any label the prefab accepts


@pytest.mark.parametrize(("level", "edit", "where"), [
    ("demo", lambda d: d["tile_colors"].__setitem__(
        "#8b5a2b", {"prefab": "ground", "params": {"Collider.w": 9}}),
     'tile_colors["#8b5a2b"].params["Collider.w"]'),
    ("demo", lambda d: d["sprite_colors"].__setitem__(
        "#dc2828", {"prefab": "enemy", "params": {"Position.x": 9}}),
     'sprite_colors["#dc2828"].params["Position.x"]'),
    ("thesis_example", lambda d: d["obj_prefabs"][0].__setitem__("W", 9), "obj_prefabs[0].W"),
    ("thesis_example", lambda d: d["obj_prefabs"][0].__setitem__("collider.H", 9),
     'obj_prefabs[0]["collider.H"]'),
    ("thesis_example", lambda d: d["spr_prefabs"][1].__setitem__("X", 9), "spr_prefabs[1].X"),
])
def test_reserved_parameters_are_refused_under_every_label(
        tmp_path: Path, level: str, edit: Any, where: str) -> None:
    import shutil

    from ecs_engine.levels import shipped_level

    folder = tmp_path / "l"
    shutil.copytree(shipped_level(level), folder)
    doc = json.loads((folder / "level.lvl").read_text())
    edit(doc)
    (folder / "level.lvl").write_text(json.dumps(doc))
    with pytest.raises(LevelError, match="the loader sets for every entity") as info:
        load_level(World(), folder, stock_prefabs())
    assert info.value.where == where


# --------------------------------------------------------------------------------------------
# 9. LDtk IntGrid values are whole numbers, never booleans


@pytest.mark.parametrize(("csv", "at"), [([True, False, 1, 1], 0), ([1, 0, 1, False], 3),
                                         ([1, 0, 1.0, 1], 2), ([1, 0, [1], 1], 2),
                                         ([1, 0, 2**70, 1], 2)])
def test_intgrid_csv_refuses_anything_but_integers(tmp_path: Path, csv: list[Any],
                                                   at: int) -> None:
    import re

    p = ldtk(tmp_path / "p.ldtk", np.array([[1, 0], [1, 1]]))
    doc = json.loads(p.read_text())
    doc["levels"][0]["layerInstances"][0]["intGridCsv"] = csv
    p.write_text(json.dumps(doc))
    with pytest.raises(LevelError, match=re.escape(f"expected whole numbers, got {csv[at]!r}")
                       ) as info:
        load_level(World(), p, stock_prefabs())
    assert info.value.where == f"levels[0](L0).layerInstances[0](G0).intGridCsv[{at}]"


# --------------------------------------------------------------------------------------------
# 10. partition compares cells and background as numbers, whatever the dtype


def _covered(rects: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, np.int64)
    for r in rects:
        out[r["y"]:r["y"] + r["h"], r["x"]:r["x"] + r["w"]] += 1
    return out


@pytest.mark.parametrize("method", ["greedy", "exact"])
@pytest.mark.parametrize(("grid", "background"), [
    (np.array([[2**64 - 1, 5]], np.uint64), -1),
    (np.array([[2**64 - 1, 0], [2**63, 2**63]], np.uint64), -2**63),
    (np.array([[-1, 5, 2**62]], np.int64), 2**64 - 1),
    (np.arange(256, dtype=np.uint8).reshape(16, 16), -1),  # every uint8 value present
    (np.arange(-128, 128, dtype=np.int8).reshape(16, 16), 200),
    (np.array([[0, 2**64 - 1], [1, 2**64 - 1]], np.uint64), 2**64 - 1),
])
def test_partition_never_mistakes_a_cell_for_an_unrepresentable_background(
        grid: np.ndarray, background: int, method: Any) -> None:
    from ecs_engine.levels import partition

    rects = partition(grid, method, background=background)
    info = np.iinfo(grid.dtype)
    held = info.min <= background <= info.max  # else no cell can equal it
    expected = grid != grid.dtype.type(background) if held else np.ones(grid.shape, bool)
    assert (_covered(rects, grid.shape) == expected).all()
    values = rects["value"].view(np.uint64) if grid.dtype == np.uint64 else rects["value"]
    for r, v in zip(rects, values, strict=True):
        assert (grid[r["y"]:r["y"] + r["h"], r["x"]:r["x"] + r["w"]] == v).all()


@pytest.mark.parametrize(("data", "bad"), [
    ([True, True, True, True, False, False, False, False], "True"),
    ([1.9, 1.5, 1.2, 1.0, 0.5, 0.4, 0.1, 0.0], "1.9"),
    ([1, 1, 1, 1, 0, 0, 0, 0.5], "0.5"),
])
def test_tiled_tile_data_accepts_whole_numbers_only(tmp_path: Path, data: list[object],
                                                    bad: str) -> None:
    """numpy read true/false and fractions among Tiled tile ids as ids (the twin of the
    LDtk intGridCsv check)."""
    layer = {**tile_layer(np.zeros((2, 4), np.int64)), "data": data}
    path = tmj(tmp_path / "map.tmj", [layer], height=2)
    world = World()
    with pytest.raises(LevelError, match=rf"\.data\[\d+\]\[\d+\]: tile ids are whole "
                                         rf"numbers, got {bad}"):
        load_level(world, path, stock_prefabs(), names=stock_editor_names())
    assert len(world) == 0


def _png(width: int, height: int, depth: int, color_type: int, data: bytes,
         interlace: int = 0) -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(data))
            + chunk(b"IEND", b""))


def test_a_png_whose_image_data_ends_early_is_corrupt_not_partly_transparent(
        tmp_path: Path) -> None:
    """A zlib stream that ends early inside an intact file decodes in pillow with the
    missing rows transparent: a level lost them silently."""
    from ecs_engine.levels.images import read_rgba

    short = tmp_path / "short.png"
    short.write_bytes(_png(4, 4, 8, 6, b"\0" + b"\xff" * 16))  # 1 row of 4
    with pytest.raises(LevelError, match=r"short\.png: corrupt PNG: the image data holds "
                                         r"only 1 of 4 rows \(17 of 68 bytes\)"):
        read_rgba(short)
    whole = tmp_path / "whole.png"
    whole.write_bytes(_png(4, 4, 8, 6, (b"\0" + b"\xff" * 16) * 4))
    assert read_rgba(whole).shape == (4, 4, 4)


def test_interlaced_pngs_are_checked_pass_by_pass(tmp_path: Path) -> None:
    from ecs_engine.levels.images import read_rgba

    # Adam7 on 2x2 grey: pass 1 holds (0, 0), pass 6 (1, 0), pass 7 the second row.
    rows = b"\0\x01" + b"\0\x02" + b"\0\x03\x04"
    good = tmp_path / "interlaced.png"
    good.write_bytes(_png(2, 2, 8, 0, rows, interlace=1))
    assert read_rgba(good)[:, :, 0].tolist() == [[1, 2], [3, 4]]
    cut = tmp_path / "cut.png"
    cut.write_bytes(_png(2, 2, 8, 0, rows[:4], interlace=1))
    with pytest.raises(LevelError, match="holds only part of its interlaced passes"):
        read_rgba(cut)


_TSX = ('<tileset firstgid="1" name="t" tilewidth="16" tileheight="16" tilecount="4" '
        'columns="2"><image source="x.png" width="32" height="32"/>'
        '<tile id="0" type="ground"/></tileset>')


def _tmx(folder: Path, body: str, width: int = 2, height: int = 2) -> Path:
    folder.mkdir(exist_ok=True)
    file = folder / "m.tmx"
    file.write_text(
        f'<?xml version="1.0"?><map version="1.10" tiledversion="1.10.2" '
        f'orientation="orthogonal" '
        f'renderorder="right-down" width="{width}" height="{height}" tilewidth="16" '
        f'tileheight="16" infinite="0" nextlayerid="9" nextobjectid="20">{_TSX}{body}</map>')
    return file


def _solid_cells(world: World) -> set[tuple[int, int]]:
    from ecs_engine.components import Collider, Position, Solid

    cells = set()
    with world.query(Position, Collider, Solid) as q:
        for p, c in zip(q[Position], q[Collider], strict=True):
            for i in range(int(c["w"])):
                for j in range(int(c["h"])):
                    cells.add((int(p["x"] - c["w"] / 2) + i, int(p["y"] - c["h"] / 2) + j))
    return cells


@pytest.mark.parametrize(("offsets", "cells"), [
    ('offsety="-16"', {(0, 2)}),  # up one tile (Tiled writes only the non-zero offset)
    ('offsetx="16"', {(1, 1)}),  # right one tile (pytiled-parser raised KeyError 'offsety')
    ('offsetx="16" offsety="-16"', {(1, 2)}),
])
def test_a_tmx_layer_offset_on_one_axis_moves_the_layer(tmp_path: Path, offsets: str,
                                                        cells: set[tuple[int, int]]) -> None:
    layer = (f'<layer id="1" name="L" width="2" height="2" {offsets}>'
             f'<data encoding="csv">1,0,\n0,0</data></layer>')
    world = World()
    load_level(world, _tmx(tmp_path / "map", layer), stock_prefabs())
    assert _solid_cells(world) == cells


def test_class_type_properties_in_tiled_xml_files_are_an_error_not_dropped(
        tmp_path: Path) -> None:
    """pytiled-parser's XML reader drops class-type properties (its JSON reader keeps
    them): on objects, tiles and templates they are refused, naming the file and owner;
    a tile's collision shapes (which place nothing) may have them."""
    klass = ('<properties><property name="speed" type="class" propertytype="P">'
             '<properties><property name="v" type="float" value="4"/></properties>'
             '</property></properties>')
    on_object = (f'<objectgroup id="2" name="O"><object id="3" type="slime" x="8" y="8">'
                 f'{klass}</object></objectgroup>')
    world = World()
    with pytest.raises(LevelError, match=r"m\.tmx: object\(id 3\): property 'speed' is of "
                                         r"class type, which pytiled-parser's XML reader drops"):
        load_level(world, _tmx(tmp_path / "a", on_object), stock_prefabs())
    assert len(world) == 0
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "t.tsx").write_text(
        '<?xml version="1.0"?><tileset version="1.10" tiledversion="1.10.2" name="t" '
        'tilewidth="16" tileheight="16" tilecount="4" columns="2"><image source="x.png" '
        f'width="32" height="32"/><tile id="0" type="ground">{klass}</tile></tileset>')
    tiles = (folder / "m.tmx")
    tiles.write_text(
        '<?xml version="1.0"?><map version="1.10" tiledversion="1.10.2" '
        'orientation="orthogonal" renderorder="right-down" width="2" height="2" '
        'tilewidth="16" tileheight="16" infinite="0" nextlayerid="9" nextobjectid="20">'
        '<tileset firstgid="1" source="t.tsx"/><layer id="1" name="L" width="2" height="2">'
        '<data encoding="csv">1,0,\n0,0</data></layer></map>')
    with pytest.raises(LevelError, match=r"t\.tsx: tile\(id 0\): property 'speed'"):
        load_level(World(), tiles, stock_prefabs())
    shape = ('<tile id="0" type="ground"><objectgroup draworder="index">'
             f'<object id="1" x="0" y="0" width="16" height="16">{klass}</object>'
             '</objectgroup></tile>')
    layer = ('<layer id="1" name="L" width="2" height="2"><data encoding="csv">1,0,\n0,0'
             '</data></layer>')
    with_shape = _tmx(tmp_path / "c", layer).read_text().replace(
        '<tile id="0" type="ground"/>', shape)
    (tmp_path / "c" / "m.tmx").write_text(with_shape)
    load_level(World(), tmp_path / "c" / "m.tmx", stock_prefabs())  # (a collision shape)


def test_a_completed_tmx_still_finds_its_external_tileset(tmp_path: Path) -> None:
    folder = tmp_path / "map"
    folder.mkdir()
    (folder / "t.tsx").write_text(
        '<?xml version="1.0"?><tileset version="1.10" tiledversion="1.10.2" name="t" '
        'tilewidth="16" tileheight="16" tilecount="4" columns="2"><image source="x.png" '
        'width="32" height="32"/><tile id="0" type="ground"/></tileset>')
    file = folder / "m.tmx"
    file.write_text(
        '<?xml version="1.0"?><map version="1.10" tiledversion="1.10.2" '
        'orientation="orthogonal" renderorder="right-down" width="2" height="2" '
        'tilewidth="16" tileheight="16" infinite="0" nextlayerid="9" nextobjectid="20">'
        '<tileset firstgid="1" source="t.tsx"/><layer id="1" name="L" width="2" height="2" '
        'offsety="-16"><data encoding="csv">1,0,\n0,0</data></layer></map>')
    world = World()
    load_level(world, file, stock_prefabs())
    assert _solid_cells(world) == {(0, 2)}


def test_image_data_past_the_last_row_is_not_inflated_or_refused(tmp_path: Path) -> None:
    """Extra inflated bytes after the rows (which pillow ignores), spread over several
    IDAT chunks: accepted, and the count stops at what the rows need (a small file can
    inflate to gigabytes)."""
    import struct
    import zlib

    from ecs_engine.levels.images import read_rgba

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    stream = zlib.compress((b"\0" + b"\xff" * 16) * 4 + b"\0" * (64 << 20), 9)
    parts = [stream[i : i + len(stream) // 5 + 1] for i in range(0, len(stream),
                                                                 len(stream) // 5 + 1)]
    header = struct.pack(">IIBBBBB", 4, 4, 8, 6, 0, 0, 0)
    png = tmp_path / "extra.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                    + b"".join(chunk(b"IDAT", p) for p in parts) + chunk(b"IEND", b""))
    assert len(parts) > 2 and read_rgba(png).shape == (4, 4, 4)
