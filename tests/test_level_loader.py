"""The level loader: shipped levels, coordinates, k, version 0, every error, all-or-nothing,
and real published LDtk geometry."""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from ecs_engine import PrefabRegistry, World, component, levels
from ecs_engine.components import (
    Collider,
    Color,
    Layer,
    Patrol,
    Player,
    Position,
    Solid,
    Tile,
    stock_prefabs,
)
from ecs_engine.levels import LevelError, load_level, partition, plan_level, read_level_file
from ecs_engine.levels.colors import pack_image, parse_hex
from ecs_engine.levels.format import LayerKind
from ecs_engine.levels.images import PNG_SIGNATURE
from ecs_engine.levels.loader import resolve_prefab
from ecs_engine.levels.make_levels import LevelSource, save_png, write_level
from ecs_engine.levels.partition import Method
from tests.world_state import world_state as full_state

REAL_LEVELS = Path(__file__).resolve().parents[2] / "shared" / "levels-real"

GROUND = "#8b5a2b"
BRICK = "#aa4632"
PLAYER = "#2878ff"
ENEMY = "#dc2828"
COIN = "#ffd200"


# --------------------------------------------------------------------------------------------
# helpers


def img(width: int, height: int, pixels: dict[tuple[int, int], str] | None = None) -> np.ndarray:
    """A transparent RGBA image with ``{(col, row): "#rrggbb"}`` painted."""
    out = np.zeros((height, width, 4), np.uint8)
    for (col, row), color in (pixels or {}).items():
        rgba = parse_hex(color)
        assert rgba is not None
        out[row, col] = rgba
    return out


def v1(geometry: list[dict[str, Any]] | None = None, sprites: list[dict[str, Any]] | None = None,
       visuals: list[dict[str, Any]] | None = None, tiles: dict[str, Any] | None = None,
       sprite_colors: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": "ecs-level", "version": 1, "name": "test", "background": "#000000",
        "layers": {"geometry": geometry or [{"file": "geometry/layer1.png"}]},
        "tile_colors": {GROUND: "ground", BRICK: "brick"} if tiles is None else tiles,
        "sprite_colors": ({PLAYER: "player", ENEMY: "enemy", COIN: "coin"}
                          if sprite_colors is None else sprite_colors),
    }
    if sprites is not None:
        doc["layers"]["sprites"] = sprites
    if visuals is not None:
        doc["layers"]["visuals"] = visuals
    doc.update(top)
    return doc


def write(tmp_path: Path, doc: dict[str, Any], images: dict[str, np.ndarray],
          name: str = "lvl") -> Path:
    return write_level(LevelSource(name, doc, images), tmp_path)


def simple_level(tmp_path: Path, **extra: np.ndarray) -> Path:
    """A valid 6x4 level: ground row, a brick, a player and an enemy sprite (k = 1)."""
    geo = img(6, 4, {(c, 3): GROUND for c in range(6)} | {(4, 1): BRICK})
    spr = img(6, 4, {(0, 2): PLAYER, (3, 2): ENEMY})
    images = {"geometry/layer1.png": geo, "sprites/layer1.png": spr} | extra
    return write(tmp_path, v1(sprites=[{"file": "sprites/layer1.png"}]), images)


def world_state(world: World) -> dict[str, Any]:
    """Everything a failed load must leave alone: keys, stores and their contents."""
    state: dict[str, Any] = {"keys": world.entities().copy(), "len": len(world),
                             "types": world.component_types}
    for t in world.component_types:
        store = world.store(t)
        state[t.__name__] = (store.n, store.entities[: store.n].copy(),
                             store.data[: store.n].tobytes())
    return state


def assert_same_state(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            np.testing.assert_array_equal(a[key], b[key])
        elif isinstance(a[key], tuple) and a[key] and isinstance(a[key][0], int):
            n1, e1, d1 = a[key]
            n2, e2, d2 = b[key]
            assert n1 == n2 and d1 == d2
            np.testing.assert_array_equal(e1, e2)
        else:
            assert a[key] == b[key]


@pytest.fixture
def busy_world() -> World:
    """A world that already holds a loaded level plus a few extra entities."""
    world = World(seed=1)
    load_level(world, levels.shipped_level("tutorial"), stock_prefabs())
    reg = stock_prefabs()
    reg.instantiate(world, "coin", x=1, y=2)
    world.despawn(world.entities()[0])  # leave a hole in the slot table
    return world


def expect_error(world: World, path: Path, *needles: str, prefabs: PrefabRegistry | None = None,
                 **kwargs: Any) -> LevelError:
    """Loading must raise LevelError containing every needle and leave ``world`` exactly
    as it was: slot table (generations, free list), stores, groups, registered types."""
    before = world_state(world)
    exact = full_state(world)
    types = world.component_types
    with pytest.raises(LevelError) as info:
        load_level(world, path, prefabs or stock_prefabs(), **kwargs)
    msg = str(info.value)
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    assert_same_state(before, world_state(world))
    assert full_state(world) == exact and world.component_types == types
    return info.value


def solid_boxes(world: World) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                       np.ndarray]:
    with world.query(Position, Collider, Tile, Solid) as q:
        return (q[Position]["x"].astype(np.float64), q[Position]["y"].astype(np.float64),
                q[Collider]["w"].astype(np.float64), q[Collider]["h"].astype(np.float64),
                q[Tile]["kind"].astype(np.int64))


def rasterise(world: World, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """Colliders back to a grid (row 0 = top): cover count and tile kind + 1 per cell."""
    x, y, w, h, kind = solid_boxes(world)
    x0 = np.rint(x - w / 2).astype(np.int64)
    top = np.rint(height - (y + h / 2)).astype(np.int64)
    assert np.allclose(x0, x - w / 2) and np.allclose(top, height - (y + h / 2))
    cover = np.zeros((height + 1, width + 1), np.int64)
    kinds = np.zeros_like(cover)
    wi, hi = np.rint(w).astype(np.int64), np.rint(h).astype(np.int64)
    for arr, val in ((cover, np.ones_like(kind)), (kinds, kind + 1)):
        np.add.at(arr, (top, x0), val)
        np.add.at(arr, (top, x0 + wi), -val)
        np.add.at(arr, (top + hi, x0), -val)
        np.add.at(arr, (top + hi, x0 + wi), val)
    return (cover.cumsum(0).cumsum(1)[:height, :width],
            kinds.cumsum(0).cumsum(1)[:height, :width])


# --------------------------------------------------------------------------------------------
# shipped levels


def expected_counts(path: Path) -> tuple[dict[str, int], int]:
    """Entities per prefab and rectangle count, computed straight from the images."""
    lf = read_level_file(path)
    reg = stock_prefabs()
    counts: dict[str, int] = {}
    rects = 0
    kinds: tuple[tuple[LayerKind, Any], ...] = (("geometry", lf.tile_colors),
                                                ("sprites", lf.sprite_colors))
    for kind, rules in kinds:
        for spec in lf.layers_of(kind):
            rgba = np.asarray(Image.open(lf.folder / spec.file).convert("RGBA"))
            packed = pack_image(rgba)
            grid = np.zeros(packed.shape, np.int64)
            for i, rule in enumerate(rules, start=1):
                mask = pack_image(np.array(rule.rgba, np.uint8).reshape(1, 1, 4))[0, 0]
                grid[packed == mask] = i
            name_of = {i: resolve_prefab(reg, r.prefab).name  # type: ignore[union-attr]
                       for i, r in enumerate(rules, start=1)}
            if kind == "geometry":
                r = partition(grid)
                rects += len(r)
                values = r["value"]
            else:
                values = grid[grid > 0]
            for v, n in zip(*np.unique(values, return_counts=True), strict=True):
                counts[name_of[int(v)]] = counts.get(name_of[int(v)], 0) + int(n)
    return counts, rects


@pytest.mark.parametrize("name", ["demo", "stress", "thesis_example", "tutorial"])
def test_shipped_level_loads_with_expected_counts(name: str) -> None:
    assert name in levels.shipped_levels()
    path = levels.shipped_level(name)
    world = World()
    start = time.perf_counter()
    summary = load_level(world, path, stock_prefabs())
    took = time.perf_counter() - start
    print(f"{name}: {summary.rect_total} rects, {summary.entity_total} entities, "
          f"{took * 1000:.0f} ms")
    counts, rects = expected_counts(path)
    assert dict(summary.entity_counts) == counts
    assert summary.rect_total == rects == world.count(Tile)
    assert len(world) == summary.entity_total == len(summary.keys)
    assert sorted(summary.keys.tolist()) == sorted(world.entities().tolist())
    assert summary.player_start is not None and world.count(Player) >= 1
    w, h = summary.size
    cover, _ = rasterise(world, w, h) if name != "thesis_example" else (None, None)
    if cover is not None:
        geo = np.asarray(Image.open(path / "geometry" / "layer1.png").convert("RGBA"))
        np.testing.assert_array_equal(cover, (geo[..., 3] > 0).astype(np.int64))
    assert took < 15.0


def test_shipped_level_contents() -> None:
    demo = load_level(World(), levels.shipped_level("demo"), stock_prefabs())
    assert demo.size == (120, 40) and demo.k == 4
    assert len(demo.rect_counts) >= 2
    assert demo.entity_counts["enemy"] >= 4 and demo.entity_counts["coin"] >= 10
    assert demo.entity_counts["heart"] >= 1 and demo.entity_counts["turret"] >= 1
    assert demo.player_start is not None and demo.player_start[0] < 10
    assert len(demo.visuals) == 1 and demo.visuals[0].image.shape == (160, 480, 4)
    tut = load_level(World(), levels.shipped_level("tutorial"), stock_prefabs())
    assert tut.size == (30, 12)
    assert tut.entity_counts["player"] == 1 and tut.entity_counts["coin"] == 1
    stress = plan_level(levels.shipped_level("stress"), stock_prefabs())
    assert stress.size[0] >= 1024 and stress.size[1] >= 1024
    counts = stress.entity_counts
    assert counts["enemy"] >= 1000 and counts["coin"] >= 1000


def test_stress_level_exact_partition_is_no_larger() -> None:
    path = levels.shipped_level("stress")
    greedy = plan_level(path, stock_prefabs(), "greedy")
    exact = plan_level(path, stock_prefabs(), "exact")
    assert sum(exact.rect_counts.values()) <= sum(greedy.rect_counts.values())


def test_shipped_level_unknown_name() -> None:
    with pytest.raises(KeyError, match="demo"):
        levels.shipped_level("nope")
    with pytest.raises(KeyError):
        levels.shipped_level("../levels")
    assert isinstance(levels.shipped_levels(), tuple)


# --------------------------------------------------------------------------------------------
# coordinates


def test_single_geometry_pixel_world_position(tmp_path: Path) -> None:
    # One cell at (col 2, row 1) of a 5 x 4 image: x in [2, 3), y in [4-1-1, 4-1) = [2, 3).
    path = write(tmp_path, v1(geometry=[{"file": "geometry/layer1.png", "offset": [10, -3]}]),
                 {"geometry/layer1.png": img(5, 4, {(2, 1): GROUND})})
    world = World()
    summary = load_level(world, path, stock_prefabs())
    assert summary.rect_counts == {"ground": 1} and len(world) == 1
    (e,) = world.entities()
    assert world.get(e, Position)["x"] == 12.5 and world.get(e, Position)["y"] == -0.5
    assert world.get(e, Collider)["w"] == 1 and world.get(e, Collider)["h"] == 1
    assert world.has(e, Solid) and world.get(e, Tile)["kind"] == 0


def test_rectangle_centre_and_size(tmp_path: Path) -> None:
    # A 3 x 2 block with its top-left cell at (1, 0) in a 6 x 5 image: world x [1, 4), y [3, 5).
    pixels = {(c, r): BRICK for c in range(1, 4) for r in range(2)}
    path = write(tmp_path, v1(), {"geometry/layer1.png": img(6, 5, pixels)})
    world = World()
    load_level(world, path, stock_prefabs())
    (e,) = world.entities()
    pos, col = world.get(e, Position), world.get(e, Collider)
    assert (pos["x"], pos["y"], col["w"], col["h"]) == (2.5, 4.0, 3.0, 2.0)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_sprite_scale_k(tmp_path: Path, k: int) -> None:
    geo = img(4, 3, {(0, 2): GROUND})
    # The sprite pixel (col, row) = (k + 1, 0) in an image 3k rows high.
    spr = img(4 * k, 3 * k, {(k + 1, 0): ENEMY})
    vis = np.full((3 * k, 4 * k, 4), 200, np.uint8)
    path = write(tmp_path, v1(sprites=[{"file": "sprites/s.png", "offset": [1, 2]}],
                              visuals=[{"file": "visuals/v.png", "offset": [5, 6], "z": 7}]),
                 {"geometry/layer1.png": geo, "sprites/s.png": spr, "visuals/v.png": vis})
    world = World()
    summary = load_level(world, path, stock_prefabs())
    assert summary.k == k
    with world.query(Position, Patrol) as q:
        assert len(q) == 1
        x, y = float(q[Position]["x"][0]), float(q[Position]["y"][0])
    assert x == pytest.approx((k + 1 + 0.5) / k + 1)
    assert y == pytest.approx((3 * k - 0 - 0.5) / k + 2)
    (vis_layer,) = summary.visuals
    image, rect, z = vis_layer
    assert image.shape == (3 * k, 4 * k, 4)
    assert tuple(rect) == (5.0, 6.0, 4.0, 3.0) and z == 7


def test_transparent_and_background_pixels_are_empty(tmp_path: Path) -> None:
    geo = img(3, 2, {(0, 1): GROUND, (1, 1): "#000000", (2, 1): GROUND})
    geo[0, 0] = (255, 0, 255, 0)  # transparent whatever its RGB
    path = write(tmp_path, v1(background="#000000"), {"geometry/layer1.png": geo})
    summary = load_level(World(), path, stock_prefabs())
    assert summary.rect_total == 2 and summary.background == (0, 0, 0, 255)


def test_layer_z_and_colour_params(tmp_path: Path) -> None:
    doc = v1(geometry=[{"file": "geometry/layer1.png", "z": 5}],
             sprites=[{"file": "sprites/layer1.png", "z": -2}],
             tiles={GROUND: "ground", BRICK: {"prefab": "brick", "params": {"z": 9,
                                                                            "color": "#010203"}}},
             sprite_colors={ENEMY: {"prefab": "Enemy1", "params": {"speed": 7.5, "hp": 4}},
                            PLAYER: "PlayerStart"})
    geo = img(4, 2, {(0, 1): GROUND, (3, 1): BRICK})
    spr = img(4, 2, {(1, 0): ENEMY, (2, 0): PLAYER})
    path = write(tmp_path, doc, {"geometry/layer1.png": geo, "sprites/layer1.png": spr})
    world = World()
    summary = load_level(world, path, stock_prefabs())
    assert summary.entity_counts == {"ground": 1, "brick": 1, "enemy": 1, "player": 1}
    assert summary.player_start == (2.5, 1.5)
    with world.query(Tile, Layer, Color) as q:
        by_kind = {int(k): (int(z), list(c)) for k, z, c in
                   zip(q[Tile]["kind"], q[Layer]["z"], q[Color]["rgba"], strict=True)}
    assert by_kind[0][0] == 5  # the layer's z
    assert by_kind[2] == (9, [1, 2, 3, 255])  # the colour's own params win
    with world.query(Patrol, Layer) as q:
        assert q[Patrol]["speed"][0] == 7.5 and q[Layer]["z"][0] == -2


def test_same_prefab_params_share_one_batch(tmp_path: Path) -> None:
    doc = v1(tiles={GROUND: "ground", BRICK: "ground"},
             geometry=[{"file": "geometry/a.png"}, {"file": "geometry/b.png", "offset": [0, 9]}])
    images = {"geometry/a.png": img(3, 1, {(0, 0): GROUND, (2, 0): BRICK}),
              "geometry/b.png": img(3, 1, {(1, 0): GROUND})}
    plan = plan_level(write(tmp_path, doc, images), stock_prefabs())
    assert [(b.prefab, b.count) for b in plan.batches] == [("ground", 3)]


# --------------------------------------------------------------------------------------------
# thesis version 0


def test_thesis_example_v0_loads() -> None:
    path = levels.shipped_level("thesis_example")
    lf = read_level_file(path)
    assert lf.version == 0 and [s.name for s in lf.layers_of("geometry")] == ["layer1", "layer2"]
    world = World()
    summary = load_level(world, path, stock_prefabs())
    assert summary.version == 0 and summary.background is None
    assert summary.entity_counts["player"] == 1 and summary.entity_counts["enemy"] == 2
    assert set(summary.rect_counts) == {"ground", "brick"}
    with world.query(Position, Patrol) as q:
        assert np.all(q[Patrol]["speed"] == 3.0)
        assert q[Position]["x"].max() > 40  # layer2's enemy, shifted by its position
    x, y, w, h, _ = solid_boxes(world)
    assert (x + w / 2).max() == 80  # layer2 (40 wide) starts at x = 40


def test_v0_float_colours_and_case_insensitive_params(tmp_path: Path) -> None:
    doc = {"version": 0, "layer_names": ["a"],
           "obj_colors": [{"r": 0.5, "g": 0.25, "b": 1.0}],
           "obj_prefabs": [{"$type": "StoneSerializer"}],
           "spr_colors": [{"r": 1.0, "g": 0.0, "b": 0.0, "a": 0.5}],
           "spr_prefabs": [{"$type": "WalkerSerializer", "Speed": 2.0, "HP": 9}]}
    geo = np.zeros((2, 2, 4), np.uint8)
    geo[1, :] = (128, 64, 255, 255)
    spr = np.zeros((2, 2, 4), np.uint8)
    spr[0, 1] = (255, 0, 0, 128)
    path = write(tmp_path, doc, {"geometry/a.png": geo, "sprites/a.png": spr})
    world = World()
    summary = load_level(world, path, stock_prefabs())
    assert summary.entity_counts == {"stone": 1, "enemy": 1}
    with world.query(Patrol, Position) as q:
        assert q[Patrol]["speed"][0] == 2.0 and q[Position]["x"][0] == 1.5


# --------------------------------------------------------------------------------------------
# errors: every one names the file, and the world is unchanged


def test_unknown_geometry_colour(tmp_path: Path, busy_world: World) -> None:
    geo = img(6, 4, {(c, 3): GROUND for c in range(6)} | {(4, 1): "#123456",
                                                          (5, 2): "#abcdef"})
    path = write(tmp_path, v1(), {"geometry/layer1.png": geo})
    err = expect_error(busy_world, path, "layer1.png", "pixel (x=4, y=1)", "#123456",
                       "#abcdef", "mapped")
    assert err.file.endswith("layer1.png")


def test_unknown_sprite_colour(tmp_path: Path, busy_world: World) -> None:
    path = simple_level(tmp_path)
    spr = img(6, 4, {(2, 0): "#ff00ff80"})
    save_png(path / "sprites" / "layer1.png", spr)
    expect_error(busy_world, path, "sprites/layer1.png", "pixel (x=2, y=0)", "#ff00ff80")


@pytest.mark.parametrize(("size", "needle"), [((13, 8), "integer multiple"),
                                              ((12, 4), "integer multiple"),
                                              ((5, 4), "integer multiple")])
def test_sprite_size_not_a_multiple(tmp_path: Path, busy_world: World,
                                    size: tuple[int, int], needle: str) -> None:
    path = simple_level(tmp_path)
    save_png(path / "sprites" / "layer1.png", img(*size))
    expect_error(busy_world, path, "sprites/layer1.png", needle, "6x4")


def test_sprite_and_visual_scales_differ(tmp_path: Path, busy_world: World) -> None:
    doc = v1(sprites=[{"file": "sprites/s.png"}], visuals=[{"file": "visuals/v.png"}])
    images = {"geometry/layer1.png": img(3, 2), "sprites/s.png": img(6, 4),
              "visuals/v.png": img(9, 6)}
    expect_error(busy_world, write(tmp_path, doc, images), "visuals/v.png", "one scale")


def test_geometry_layers_of_different_sizes(tmp_path: Path, busy_world: World) -> None:
    doc = v1(geometry=[{"file": "geometry/a.png"}, {"file": "geometry/b.png"}])
    path = write(tmp_path, doc, {"geometry/a.png": img(4, 4), "geometry/b.png": img(4, 5)})
    expect_error(busy_world, path, "geometry/b.png", "4x5", "one size")


def test_missing_files(tmp_path: Path, busy_world: World) -> None:
    path = simple_level(tmp_path)
    (path / "sprites" / "layer1.png").unlink()
    expect_error(busy_world, path, "sprites/layer1.png", "missing", "layers.sprites[0]")
    expect_error(busy_world, tmp_path / "nowhere", "nowhere", "no such level file")
    (path / "level.lvl").unlink()
    expect_error(busy_world, path, "level.lvl", "no such level file")


def test_a_misspelt_layer_file_is_missing_not_stray(tmp_path: Path, busy_world: World) -> None:
    # level.lvl lists sprites/layr1.png, the folder holds sprites/layer1.png: the error is
    # about the listed file that is not there, not "add layer1.png to the level".
    path = simple_level(tmp_path)
    doc = json.loads((path / "level.lvl").read_text())
    doc["layers"]["sprites"][0]["file"] = "sprites/layr1.png"
    (path / "level.lvl").write_text(json.dumps(doc))
    err = expect_error(busy_world, path, "sprites/layr1.png", "missing", "layers.sprites[0]")
    assert "not listed" not in str(err)


def test_extra_unlisted_layer_png(tmp_path: Path, busy_world: World) -> None:
    path = simple_level(tmp_path, **{"visuals/layer1.png": img(6, 4)})
    expect_error(busy_world, path, "visuals/layer1.png", "not listed")
    (path / "visuals" / "layer1.png").unlink()
    (path / "visuals" / "notes.txt").write_text("sources and notes are fine")
    save_png(path / "geometry" / "Layer2.PNG", img(6, 4))
    expect_error(busy_world, path, "Layer2.PNG", "not listed")


def test_json_syntax_error_has_line_and_column(tmp_path: Path, busy_world: World) -> None:
    path = simple_level(tmp_path)
    (path / "level.lvl").write_text('{\n  "format": "ecs-level",\n  "version": 1,,\n}\n')
    err = expect_error(busy_world, path, "level.lvl", "line 3:16", "invalid JSON")
    assert err.where == "line 3:16"


@pytest.mark.parametrize(("change", "needles"), [
    (lambda d: d.pop("name"), ["missing required key 'name'"]),
    (lambda d: d.update(name=5), ["name", "non-empty string"]),
    (lambda d: d.update(version=2), ["version", "unsupported"]),
    (lambda d: d.update(colour="red"), ["unknown key 'colour'"]),
    (lambda d: d["layers"]["geometry"][0].update(offset=[1]), ["offset", "[x, y]"]),
    (lambda d: d["layers"]["geometry"][0].update(z=True), ["layers.geometry[0].z"]),
    (lambda d: d["tile_colors"].update({"#12345": "ground"}), ['"#12345"', "colours"]),
])
def test_wrong_keys_and_types(tmp_path: Path, busy_world: World, change: Any,
                              needles: list[str]) -> None:
    path = simple_level(tmp_path)
    doc = json.loads((path / "level.lvl").read_text())
    change(doc)
    (path / "level.lvl").write_text(json.dumps(doc))
    expect_error(busy_world, path, "level.lvl", *needles)


def test_unknown_prefab_and_parameter(tmp_path: Path, busy_world: World) -> None:
    path = simple_level(tmp_path)
    doc = json.loads((path / "level.lvl").read_text())
    doc["sprite_colors"][ENEMY] = "dragon"
    (path / "level.lvl").write_text(json.dumps(doc))
    expect_error(busy_world, path, "level.lvl", "unknown prefab 'dragon'", "#dc2828",
                 "known prefabs", "enemy")
    doc["sprite_colors"][ENEMY] = {"prefab": "enemy", "params": {"spede": 2}}
    (path / "level.lvl").write_text(json.dumps(doc))
    expect_error(busy_world, path, "level.lvl", f'sprite_colors["{ENEMY}"]', "'spede'",
                 "not a parameter", "speed")
    doc["sprite_colors"][ENEMY] = {"prefab": "enemy", "params": {"speed": [1, 2]}}
    (path / "level.lvl").write_text(json.dumps(doc))
    expect_error(busy_world, path, "level.lvl", "'enemy'", "Patrol.speed")
    doc["sprite_colors"][ENEMY] = {"prefab": "player", "params": {"facing": 1}}
    (path / "level.lvl").write_text(json.dumps(doc))
    expect_error(busy_world, path, "level.lvl", "'facing'", "not editable")


def test_tile_prefab_needs_a_box(tmp_path: Path, busy_world: World) -> None:
    reg = stock_prefabs()
    reg.register("marker", Position())
    doc = v1(tiles={GROUND: "marker"})
    path = write(tmp_path, doc, {"geometry/layer1.png": img(2, 2, {(0, 0): GROUND})})
    expect_error(busy_world, path, "level.lvl", "cannot be a tile", "w, h", prefabs=reg)


def test_component_name_clash_refused_before_spawning(tmp_path: Path) -> None:
    @component(name="Position")
    class OtherPosition:
        x: np.float32 = 0.0

    world = World()
    world.spawn(OtherPosition(x=1.0))
    expect_error(world, simple_level(tmp_path), "level.lvl", "'Position'")


def test_two_prefabs_whose_components_share_a_name_change_nothing(tmp_path: Path,
                                                                  busy_world: World) -> None:
    """Both classes are new to the world: refused before any spawn (it used to spawn the
    first prefab, fail on the second and leave bumped generations and a new store)."""
    @component(name="Marker")
    class MarkerA:
        v: np.int32 = 0

    @component(name="Marker")
    class MarkerB:
        v: np.int32 = 0

    reg = stock_prefabs()
    reg.register("mark_a", Position(), MarkerA())
    reg.register("mark_b", Position(), MarkerB())
    doc = v1(sprites=[{"file": "sprites/layer1.png"}])
    doc["sprite_colors"] = {PLAYER: "mark_a", ENEMY: "mark_b"}
    path = write(tmp_path, doc, {
        "geometry/layer1.png": img(6, 4, {(c, 3): GROUND for c in range(6)}),
        "sprites/layer1.png": img(6, 4, {(0, 2): PLAYER, (3, 2): ENEMY})})
    expect_error(busy_world, path, "level.lvl", "'mark_b'", "prefab 'mark_a' already has",
                 "'Marker'", prefabs=reg)


def test_a_spawn_failing_midway_leaves_the_world_exactly_as_it_was(
    tmp_path: Path, busy_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the engine refuses while spawning (here: the third batch), the spawned
    batches, their slot generations and newly registered stores are all undone."""
    real = World.spawn_batch
    calls = []

    def flaky(self: World, *comps: Any, count: int | None = None) -> np.ndarray:
        calls.append(count)
        if len(calls) == 3:
            raise MemoryError("out of memory (simulated)")
        return real(self, *comps, count=count)

    monkeypatch.setattr(World, "spawn_batch", flaky)
    fresh = World()
    for n, world in enumerate((busy_world, fresh)):
        calls.clear()
        expect_error(world, simple_level(tmp_path / str(n)), "spawning failed", "simulated")
        assert len(calls) == 3
    assert fresh.component_types == () and len(fresh) == 0


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width x height`` but carries almost no pixel data."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data)))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (PNG_SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
            + chunk(b"IEND", b""))


def test_pixel_limit_checked_from_header(tmp_path: Path, busy_world: World) -> None:
    path = simple_level(tmp_path)
    target = path / "sprites" / "layer1.png"
    target.write_bytes(_png_header_only(100_000, 100_000))  # 10 Gpx claimed, 100 bytes
    start = time.perf_counter()
    expect_error(busy_world, path, "sprites/layer1.png", "100000x100000", "limit")
    assert time.perf_counter() - start < 2.0
    save_png(target, img(6, 4))
    expect_error(busy_world, path, "layer1.png", "limit is 20 pixels", max_pixels=20)


def test_pillow_decompression_bomb_is_caught(tmp_path: Path, busy_world: World) -> None:
    path = simple_level(tmp_path)
    (path / "sprites" / "layer1.png").write_bytes(_png_header_only(30_000, 20_000))  # k = 5000
    # With our own limit lifted, pillow's bomb guard fires at open and must be wrapped.
    expect_error(busy_world, path, "sprites/layer1.png", "too large", max_pixels=10**12)


def test_not_a_png_and_corrupt_png(tmp_path: Path, busy_world: World) -> None:
    path = simple_level(tmp_path)
    target = path / "geometry" / "layer1.png"
    good = target.read_bytes()
    buf = io.BytesIO()
    Image.new("RGB", (6, 4)).save(buf, "BMP")
    target.write_bytes(buf.getvalue())
    expect_error(busy_world, path, "geometry/layer1.png", "not a PNG")
    target.write_bytes(b"")
    expect_error(busy_world, path, "geometry/layer1.png", "not a PNG")
    target.write_bytes(good[: len(good) // 2])
    expect_error(busy_world, path, "geometry/layer1.png", "corrupt PNG")
    bad = bytearray(good)
    bad[-20] ^= 0xFF  # inside the last IDAT / its CRC
    target.write_bytes(bytes(bad))
    expect_error(busy_world, path, "geometry/layer1.png", "corrupt PNG")
    target.write_bytes(_png_header_only(6, 4))
    expect_error(busy_world, path, "geometry/layer1.png", "corrupt PNG")


@pytest.mark.parametrize("bad", ["../outside.png", "/etc/passwd.png", "geometry/../../x.png",
                                 "C:/level/x.png", "geometry\\layer1.png", "geometry/x.jpg"])
def test_layer_paths_may_not_escape(tmp_path: Path, busy_world: World, bad: str) -> None:
    path = simple_level(tmp_path)
    doc = json.loads((path / "level.lvl").read_text())
    doc["layers"]["sprites"][0]["file"] = bad
    (path / "level.lvl").write_text(json.dumps(doc))
    expect_error(busy_world, path, "level.lvl", "layers.sprites[0].file")


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks on this platform")
def test_symlinks_pointing_out_are_refused(tmp_path: Path, busy_world: World) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    save_png(outside / "layer1.png", img(6, 4))
    path = simple_level(tmp_path / "a")
    target = path / "sprites" / "layer1.png"
    target.unlink()
    try:
        target.symlink_to(outside / "layer1.png")
    except OSError as exc:  # pragma: no cover - e.g. unprivileged Windows
        pytest.skip(f"cannot create symlinks: {exc}")
    expect_error(busy_world, path, "sprites/layer1.png", "outside the level folder")
    shutil.rmtree(path / "sprites")
    (path / "sprites").symlink_to(outside, target_is_directory=True)
    expect_error(busy_world, path, "sprites/layer1.png", "outside the level folder")
    # A link that stays inside the folder is fine.
    (path / "sprites").unlink()
    (path / "sprites").mkdir()
    save_png(path / "art.png", img(6, 4, {(1, 1): COIN}))
    (path / "sprites" / "layer1.png").symlink_to(path / "art.png")
    summary = load_level(World(), path, stock_prefabs())
    assert summary.entity_counts.get("coin") == 1


def test_failed_load_leaves_world_unchanged_after_partial_work(tmp_path: Path,
                                                              busy_world: World) -> None:
    # Geometry and the first sprite layer are fine; the second sprite layer fails late.
    doc = v1(sprites=[{"file": "sprites/a.png"}, {"file": "sprites/b.png"}])
    images = {"geometry/layer1.png": img(4, 2, {(0, 1): GROUND}),
              "sprites/a.png": img(4, 2, {(1, 0): COIN}),
              "sprites/b.png": img(4, 2, {(3, 0): "#00ff00"})}
    expect_error(busy_world, write(tmp_path, doc, images), "sprites/b.png", "#00ff00")


def test_successful_load_into_busy_world_adds_only_new_entities(tmp_path: Path,
                                                               busy_world: World) -> None:
    before = set(busy_world.entities().tolist())
    summary = load_level(busy_world, simple_level(tmp_path), stock_prefabs())
    after = set(busy_world.entities().tolist())
    assert before <= after and after - before == set(summary.keys.tolist())


# --------------------------------------------------------------------------------------------
# real published geometry (LDtk sample projects)


def _ldtk_images() -> list[Path]:
    return sorted((REAL_LEVELS / "ldtk").glob("*.png"))


@pytest.mark.skipif(not _ldtk_images(), reason=f"real LDtk levels not found in {REAL_LEVELS}")
@pytest.mark.parametrize("method", ["greedy", "exact"])
def test_real_ldtk_geometry(tmp_path: Path, method: Method) -> None:
    tiles = ["ground", "grass", "brick", "stone"]
    checked = 0
    for i, png in enumerate(_ldtk_images()):
        rgba = np.asarray(Image.open(png).convert("RGBA"))
        packed = pack_image(rgba)
        colors = np.unique(packed[rgba[..., 3] > 0])
        assert colors.size <= len(tiles), png.name
        hexes = ["#" + bytes(np.array([c], "<u4").view(np.uint8)).hex() for c in colors]
        doc = v1(tiles={h: tiles[j] for j, h in enumerate(hexes)}, sprite_colors={},
                 background="#010101")
        folder = tmp_path / f"l{i}"
        (folder / "geometry").mkdir(parents=True)
        shutil.copy(png, folder / "geometry" / "layer1.png")
        (folder / "level.lvl").write_text(json.dumps(doc))
        world = World()
        summary = load_level(world, folder, stock_prefabs(), method)
        grid = np.searchsorted(colors, packed) + 1
        grid[rgba[..., 3] == 0] = 0
        rects = partition(grid, method=method)
        assert world.count(Solid) == len(rects) == summary.rect_total, png.name  # no sprites
        h, w = grid.shape
        cover, kinds = rasterise(world, w, h)
        np.testing.assert_array_equal(cover, (grid > 0).astype(np.int64), err_msg=png.name)
        # Each cell's collider carries that cell's own tile type.
        np.testing.assert_array_equal(kinds, grid, err_msg=png.name)
        checked += 1
    assert checked >= 40


# --------------------------------------------------------------------------------------------
# hostile files: LevelError naming the file and the place, never another exception


def _with_lvl_text(path: Path, text: str) -> Path:
    (path / "level.lvl").write_text(text)
    return path


@pytest.mark.parametrize(("make", "needles"), [
    (lambda t: t.replace('"offset": [0, 0]', '"offset": [1' + "0" * 300 + ", 0]"),
     ("line ", "301 digits")),
    (lambda t: t.replace('"offset": [0, 0]', '"offset": [' + "9" * 5000 + ", 0]"),
     ("line ", "5000 digits")),
    (lambda t: t.replace('"name": "test"', '"name": "test", "meta": {"d": '
                         + "[" * 100_000 + "]" * 100_000 + "}"),
     ("line 1:", "nested deeper than 64")),
    (lambda t: t.replace('"name": "test"', '"name": "test", "meta": {"d": '
                         + "[" * 70 + "]" * 70 + "}"),
     ("nested deeper than 64",)),
    (lambda t: t.replace('"name": "test"', '"name": "test",\n"name": "again"'),
     ("line 2:1", "duplicate key 'name'")),
    (lambda t: t.replace('"offset": [0, 0]', '"offset": [0, 0], "z": 1, "z": 2'),
     ("duplicate key 'z'", "the object starts at line ")),
])
def test_hostile_json_is_a_level_error_with_a_location(tmp_path: Path, busy_world: World,
                                                       make: Any, needles: tuple[str, ...],
                                                       ) -> None:
    path = simple_level(tmp_path)
    doc = json.loads((path / "level.lvl").read_text())
    doc["layers"]["sprites"][0]["offset"] = [0, 0]
    text = make(json.dumps(doc))
    _with_lvl_text(path, text)
    expect_error(busy_world, path, "level.lvl", "invalid JSON", *needles)


def test_huge_numbers_elsewhere_are_level_errors(tmp_path: Path, busy_world: World) -> None:
    path = simple_level(tmp_path)
    doc = json.loads((path / "level.lvl").read_text())
    doc["sprite_colors"][ENEMY] = {"prefab": "enemy", "params": {"max_hp": 10**25}}  # int16
    (path / "level.lvl").write_text(json.dumps(doc))
    expect_error(busy_world, path, "level.lvl", f'sprite_colors["{ENEMY}"]')
    doc = json.loads(json.dumps(v1()))
    doc.update(version=0)
    del doc["format"]
    doc.update(layer_names=["layer1"], obj_colors=[{"r": 10**25, "g": 0, "b": 0}],
               obj_prefabs=[{"$type": "GroundSerializer"}])
    (path / "level.lvl").write_text(json.dumps(doc))
    expect_error(busy_world, path, "level.lvl", "obj_colors[0].r")


@pytest.mark.skipif(os.name == "nt", reason="symlinks")
def test_a_layer_that_is_a_symlink_loop_is_a_level_error(tmp_path: Path,
                                                         busy_world: World) -> None:
    path = simple_level(tmp_path)
    target = path / "sprites" / "layer1.png"
    target.unlink()
    loop = path / "sprites" / "loop.png"
    target.symlink_to(loop)
    loop.symlink_to(target)
    doc = json.loads((path / "level.lvl").read_text())
    doc["layers"]["sprites"] = [{"file": "sprites/layer1.png"}, {"file": "sprites/loop.png"}]
    (path / "level.lvl").write_text(json.dumps(doc))
    expect_error(busy_world, path, "sprites/layer1.png", "symlink loop", "layers.sprites[0]")


def test_total_pixels_of_all_layers_are_capped_before_any_decoding(
    tmp_path: Path, busy_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five layers each under the per-image cap but over it together: refused from the
    headers alone (the review's five decompression-bomb layers in a 1.2 MB folder)."""
    from ecs_engine.levels import images

    decoded: list[Path] = []
    real = images.read_rgba

    def spy(p: Path, *a: Any, **k: Any) -> np.ndarray:
        decoded.append(p)
        return real(p, *a, **k)

    monkeypatch.setattr("ecs_engine.levels.loader.read_rgba", spy)
    geo = img(6, 4, {(c, 3): GROUND for c in range(6)})
    images_ = {"geometry/layer1.png": geo}
    sprites = []
    for i in range(4):
        images_[f"sprites/s{i}.png"] = img(60, 40)
        sprites.append({"file": f"sprites/s{i}.png"})
    path = write(tmp_path, v1(sprites=sprites), images_)
    for i in range(4):  # now 6000x4000 each (k = 1000): 24 Mpx each, 96 Mpx together
        (path / "sprites" / f"s{i}.png").write_bytes(_png_header_only(6000, 4000))
    expect_error(busy_world, path, "level.lvl", "96000024 pixels together",
                 "the limit is 67108864 pixels for all layers")
    assert decoded == []
    expect_error(busy_world, path, "level.lvl", "pixels together", max_pixels=10**6)


def _png16(arr: np.ndarray, color_type: int, trns: bytes | None = None) -> bytes:
    """A 16-bit PNG (pillow cannot write these): ``arr`` is (h, w) or (h, w, channels)."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data)))

    h, w = arr.shape[:2]
    rows = arr.reshape(h, -1).astype(">u2")
    raw = b"".join(b"\0" + rows[y].tobytes() for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0)
    return (PNG_SIGNATURE + chunk(b"IHDR", ihdr)
            + (chunk(b"tRNS", trns) if trns is not None else b"")
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_16_bit_pngs_keep_their_transparency(tmp_path: Path) -> None:
    """The same picture as 8-bit and as 16-bit greyscale (or RGB) with a transparent
    colour loads the same: the transparent pixels are empty."""
    grey = "#808080"
    doc = v1(tiles={grey: "ground"}, sprite_colors={})
    geo8 = img(3, 2, {(0, 1): grey, (1, 1): grey})  # other pixels transparent
    path = write(tmp_path, doc, {"geometry/layer1.png": geo8})
    want = load_level(World(), path, stock_prefabs()).rect_counts
    # 16-bit grey: 0x8080 is the tile, 0x1234 (exactly) the transparent grey
    values = np.full((2, 3), 0x1234, np.uint16)
    values[1, :2] = 0x8080
    layer = path / "geometry" / "layer1.png"
    layer.write_bytes(_png16(values, 0, struct.pack(">H", 0x1234)))
    assert load_level(World(), path, stock_prefabs()).rect_counts == want
    rgb = np.repeat(values[..., None], 3, axis=2)
    layer.write_bytes(_png16(rgb, 2, struct.pack(">HHH", 0x1234, 0x1234, 0x1234)))
    assert load_level(World(), path, stock_prefabs()).rect_counts == want
    values[0, 0] = 0x1235  # not the transparent grey: its colour #121212 is unmapped
    layer.write_bytes(_png16(values, 0, struct.pack(">H", 0x1234)))
    with pytest.raises(LevelError, match=r"pixel \(x=0, y=0\).*#121212"):
        load_level(World(), path, stock_prefabs())


def test_entity_count_is_capped_before_building_per_entity_arrays(tmp_path: Path,
                                                                 busy_world: World) -> None:
    path = simple_level(tmp_path)
    many = img(6, 4, {(c, r): COIN for c in range(6) for r in range(3)})  # 18 coins
    save_png(path / "sprites" / "layer1.png", many)
    expect_error(busy_world, path, "sprites/layer1.png", "entities", "the limit is 10",
                 max_entities=10)
    assert load_level(World(), path, stock_prefabs()).entity_counts["coin"] == 18


def test_lone_surrogate_escapes_are_level_errors(tmp_path: Path, busy_world: World) -> None:
    path = simple_level(tmp_path)
    text = (path / "level.lvl").read_text().replace('"name": "test"', '"name": "\\ud800x"')
    (path / "level.lvl").write_text(text)
    expect_error(busy_world, path, "level.lvl", "lone surrogate")
