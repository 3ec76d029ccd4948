"""The demo: game logic without GL (saves, slots, rewind, save files, state hash), then
headless end-to-end runs with pixel checks (in process and as ``python -m ecs_engine.demo``)."""

from __future__ import annotations

import os

# Must precede the first arcade import anywhere in this process (see test_render_gl).
os.environ["ARCADE_HEADLESS"] = "1"
os.environ.setdefault("ARCADE_SOUND_BACKENDS", "silent")

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from ecs_engine import Entity, World
from ecs_engine.components import (
    Bouncer,
    Collider,
    Color,
    Health,
    Player,
    Position,
    Solid,
    Sprite,
    Velocity,
    stock_prefabs,
)
from ecs_engine.demo import Game, state_hash
from ecs_engine.demo.game import DT, MAX_TICKS_PER_FRAME, default_zoom, level_geometry
from ecs_engine.demo.headless import ScriptError, load_script, parse_script, run_headless
from ecs_engine.systems import static_grid
from ecs_engine.systems.render_gl import read_pixels
from ecs_engine.systems.render_world import Viewport, camera_center
from tests.gl import window_or_skip

REPO_ROOT = Path(__file__).resolve().parents[1]
TOUR = REPO_ROOT / "demo" / "scripts" / "tour.json"
WIN = REPO_ROOT / "demo" / "scripts" / "win.json"
TUTORIAL_WIN = REPO_ROOT / "demo" / "scripts" / "tutorial_win.json"
SIZE = (480, 270)  # small: llvmpipe fills pixels in software


def play(game: Game, frames: int) -> list[str]:
    """Run ``frames`` headless frames; the state hash after each."""
    out = []
    for _ in range(frames):
        game.step_frame()
        out.append(game.state_hash())
    return out


@pytest.fixture
def game(tmp_path: Path) -> Game:
    g = Game(seed=0, save_dir=tmp_path / "saves")
    g.press("right")
    g.press("shoot")
    return g


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


# ----------------------------------------------------------------------------------------
# state hash


def test_state_hash_sees_row_order_values_keys_and_resources() -> None:
    def two_boxes() -> tuple[World, list[Entity]]:
        w = World(seed=1)
        keys = [w.spawn(Position(x=float(i), y=0.0), Collider()) for i in range(2)]
        return w, keys

    a, _ = two_boxes()
    b, keys = two_boxes()
    b.remove(keys[0], Position)  # re-adding moves it to the last row: same state
    b.add(keys[0], Position(x=0.0, y=0.0))
    assert b.store(Position).entities[0] == keys[1]
    assert state_hash(a) != state_hash(b)  # row order decides the order of float sums
    assert state_hash(a) == a.state_hash() == state_hash(two_boxes()[0])
    a.get(keys[0], Position)["y"] = 1e-7
    assert state_hash(a) != state_hash(two_boxes()[0])
    c, _ = two_boxes()
    c.despawn(c.spawn(Position()))  # same live entities, different slot table
    assert state_hash(a) != state_hash(c)
    d, _ = two_boxes()
    d.resources["camera"] = {"x": 0.0, "y": 0.0}
    assert state_hash(a) != state_hash(d)
    e, _ = two_boxes()
    e.rng.random()
    assert state_hash(a) != state_hash(e)


def test_state_hash_is_stable_across_processes(game: Game) -> None:
    play(game, 30)
    code = ("from demo import Game\n"
            "g = Game(seed=0, save_dir='unused')\n"
            "g.press('right'); g.press('shoot')\n"
            "[g.step_frame() for _ in range(30)]\n"
            "print(g.state_hash())\n")
    out = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == game.state_hash()


# ----------------------------------------------------------------------------------------
# actions


def test_quicksave_quickload_restore_the_exact_state(game: Game) -> None:
    play(game, 40)
    saved = game.state_hash()
    game.quicksave()
    assert game.message == "saved slot 1"
    assert game.last_snapshot is not None and game.last_snapshot.what == "quicksave"
    after = play(game, 50)
    assert game.state_hash() != saved
    assert game.quickload()
    assert game.message == "loaded slot 1"
    assert game.state_hash() == saved
    assert game.last_restore is not None and game.last_restore.nbytes > 0
    # The restored world (rng, resources, allocator) plays on exactly as before.
    assert play(game, 50) == after


def test_slots_are_independent(game: Game) -> None:
    hashes = {}
    for slot in (1, 2, 3):
        play(game, 20)
        game.press(f"slot{slot}")
        game.press("quicksave")
        hashes[slot] = game.state_hash()
        assert game.message == f"saved slot {slot}"
    assert len(set(hashes.values())) == 3
    for slot in (2, 1, 3, 2):
        game.select_slot(slot)
        game.quickload()
        assert game.state_hash() == hashes[slot]
        play(game, 5)
    game.select_slot(4)
    before = game.state_hash()
    assert not game.quickload()
    assert game.message == "slot 4 is empty"
    assert game.state_hash() == before


@pytest.mark.parametrize("k", [1, 7, 45])
def test_rewind_k_frames_returns_to_the_state_k_frames_earlier(game: Game, k: int) -> None:
    hashes = [game.state_hash(), *play(game, 60)]  # hashes[f] = state after frame f
    game.press("rewind")
    assert game.rewinding
    rewound = play(game, k)
    assert rewound == [hashes[60 - i] for i in range(1, k + 1)]
    assert game.last_restore is not None and game.last_restore.what == "rewind"
    game.release("rewind")
    # Same inputs from the rewound state: the same future as the first time.
    n = min(k, 3)
    assert play(game, n) == hashes[61 - k: 61 - k + n]


def test_rewind_stops_at_the_oldest_recorded_state(tmp_path: Path) -> None:
    g = Game(seed=0, save_dir=tmp_path, history_seconds=10 / 60)  # keeps 10 snapshots
    g.press("right")
    hashes = play(g, 30)
    g.press("rewind")
    play(g, 30)
    assert g.state_hash() == hashes[-10]  # the oldest of the 10 kept
    assert g.message.startswith("rewind: oldest")
    g.release("rewind")
    play(g, 1)


def test_quickload_is_a_rewind_target(game: Game) -> None:
    play(game, 10)
    game.quicksave()
    hashes = play(game, 10)
    game.quickload()
    game.press("rewind")
    game.step_frame()  # one frame back: what was on screen before the load
    assert game.state_hash() == hashes[-1]


def test_save_file_round_trip(game: Game, tmp_path: Path) -> None:
    play(game, 40)
    saved = game.state_hash()
    game.press("slot3")
    game.press("save_file")
    path = tmp_path / "saves" / "slot3.sav"
    assert game.message == f"saved {path}"
    assert path.is_file()
    after = play(game, 30)
    game.press("load_file")
    assert game.message == f"loaded {path}"
    assert game.last_restore is not None and game.last_restore.what == "load file"
    assert game.state_hash() == saved
    assert play(game, 30) == after
    # A fresh game (a new world, as after restarting the demo) loads it too.
    fresh = Game(seed=99, save_dir=tmp_path / "saves")
    fresh.select_slot(3)
    assert fresh.load_file()
    assert fresh.state_hash() == saved


def _corrupt(kind: str, good: bytes) -> bytes:
    if kind == "garbage":
        return b"this is not a save file" * 10
    if kind == "truncated":
        return good[: len(good) // 2]
    if kind == "bitflip":
        flipped = bytearray(good)
        flipped[len(good) * 2 // 3] ^= 0x10
        return bytes(flipped)
    return b""


@pytest.mark.parametrize("kind", ["garbage", "truncated", "bitflip", "empty", "missing"])
def test_bad_save_file_reports_and_leaves_the_game_unchanged(game: Game, tmp_path: Path,
                                                             kind: str) -> None:
    play(game, 20)
    assert game.save_file()
    good = game.save_path().read_bytes()
    play(game, 20)
    bad = tmp_path / f"{kind}.sav"
    if kind != "missing":
        bad.write_bytes(_corrupt(kind, good))
    before = game.state_hash()
    restore_before = game.last_restore
    assert not game.load_file(bad)
    assert game.message.startswith("load failed: ")
    assert len(game.message) > len("load failed: ") + 10  # says what is wrong
    assert game.state_hash() == before
    assert game.last_restore is restore_before
    play(game, 5)  # and the game runs on


def test_save_file_error_message_is_shown_verbatim(game: Game, tmp_path: Path) -> None:
    from ecs_engine import SaveFileError, Snapshot

    bad = tmp_path / "bad.sav"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(SaveFileError) as info:
        Snapshot.load(bad)
    game.load_file(bad)
    assert game.message == f"load failed: {info.value}"


def test_actions_are_validated(game: Game) -> None:
    with pytest.raises(ValueError, match="unknown action 'fly'"):
        game.press("fly")
    with pytest.raises(ValueError, match="slot must be 1..4"):
        game.select_slot(5)


# ----------------------------------------------------------------------------------------
# time and setup


def test_fixed_timestep_is_independent_of_frame_time(tmp_path: Path) -> None:
    g = Game(seed=0, save_dir=tmp_path)
    assert g.advance(DT * 0.5) == 0
    assert g.advance(DT * 0.6) == 1  # the two halves add up to one tick
    assert g.advance(DT * 3.05) == 3
    assert g.advance(1.0) == MAX_TICKS_PER_FRAME  # a stall does not spiral
    assert g.advance(DT * 0.5) <= 1
    # Real-time play and headless frames run the same ticks: same state for same ticks.
    h = Game(seed=0, save_dir=tmp_path)
    play(h, g.world.tick)
    assert h.state_hash() == g.state_hash()


def test_player_falling_out_of_the_level_respawns(game: Game) -> None:
    with game.world.query(Player, Position) as q:
        q[Position]["y"] = -50.0
    game.step_frame()
    x, y = game.player_position() or (0.0, 0.0)
    start = game.world.resources["player_start"]
    assert abs(x - start[0]) < 0.5 and abs(y - start[1]) < 0.5


def test_stress_bodies_start_clear_of_walls_and_stay(tmp_path: Path) -> None:
    g = Game(seed=5, stress=500, save_dir=tmp_path)
    assert g.stress == 500 and g.world.count(Bouncer) == 500
    grid = static_grid(g.world)
    with g.world.query(Bouncer, Position, Collider, Color) as q:
        pos, col = q[Position], q[Collider]
        hw, hh = col["w"] / 2, col["h"] / 2
        inside = grid.overlaps(pos["x"] - hw, pos["y"] - hh, pos["x"] + hw, pos["y"] + hh)
        assert not inside.any()
        assert len(np.unique(q[Color]["rgba"], axis=0)) > 400  # random colours
    play(g, 120)
    assert g.world.count(Bouncer) == 500  # fallen ones drop back in
    again = Game(seed=5, stress=500, save_dir=tmp_path)
    play(again, 120)
    assert again.state_hash() == g.state_hash()


def test_level_argument_accepts_names_and_folders(tmp_path: Path) -> None:
    from ecs_engine.levels import shipped_level

    by_name = Game("tutorial", save_dir=tmp_path)
    by_path = Game(shipped_level("tutorial"), save_dir=tmp_path)
    assert by_name.state_hash() == by_path.state_hash()
    assert by_name.world.count(Solid) > 0
    with pytest.raises(KeyError, match="shipped levels are"):
        Game("no-such-level", save_dir=tmp_path)


def test_input_scripts_are_checked() -> None:
    events = load_script(TOUR)
    presses = {a for e in events for a in e.press}
    assert {"right", "jump", "shoot", "quicksave", "quickload", "rewind", "slot2"} <= presses
    assert [e.frame for e in events] == sorted(e.frame for e in events)
    with pytest.raises(ScriptError, match="unknown action"):
        parse_script([{"frame": 1, "press": ["fly"]}])
    with pytest.raises(ScriptError, match="'frame' must be"):
        parse_script([{"frame": -1, "press": ["left"]}])
    with pytest.raises(ScriptError, match="unknown key"):
        parse_script([{"frame": 1, "hold": ["left"]}])


def test_game_logic_and_runner_do_not_import_arcade() -> None:
    # Game must be usable without GL, and the runner must be able to switch arcade to
    # headless mode, which only works before arcade's first import.
    code = ("import sys, demo, demo.game, demo.headless, demo.__main__, systems.render_world\n"
            "print('arcade' in sys.modules)\n")
    env = subprocess_env()
    env.pop("ARCADE_HEADLESS", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_help_works_without_a_display() -> None:
    env = subprocess_env()
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "ARCADE_HEADLESS"):
        env.pop(var, None)
    out = subprocess.run([sys.executable, "-m", "ecs_engine.demo", "--help"], env=env,
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "--headless" in out.stdout and "--stress" in out.stdout


def test_no_display_says_how_to_run_headless_and_exits_2(tmp_path: Path) -> None:
    env = subprocess_env()
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "ARCADE_HEADLESS"):
        env.pop(var, None)
    out = subprocess.run([sys.executable, "-m", "ecs_engine.demo"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "python -m ecs_engine.demo --headless --frames 300 --screenshot shot.png" in out.stderr
    assert "ARCADE_HEADLESS=1" in out.stderr
    assert "Traceback" not in out.stderr


# ----------------------------------------------------------------------------------------
# headless end to end (GL)


@pytest.fixture(scope="module")
def window() -> Iterator[Any]:
    """One headless window; skip if no GL context at all (fail with ECS_REQUIRE_GL=1)."""
    win = window_or_skip(SIZE[0], SIZE[1], "test_demo")
    yield win
    win.close()


def boxes(world: World) -> np.ndarray:
    """(left, bottom, right, top) of every drawn box (flat or sprite), shape (N, 4)."""
    out = []
    for drawn in (Color, Sprite):
        with world.query(Position, Collider, drawn, readonly=(Position, Collider, drawn)) as q:
            p, c = q[Position], q[Collider]
            out.append(np.stack([p["x"] - c["w"] / 2, p["y"] - c["h"] / 2,
                                 p["x"] + c["w"] / 2, p["y"] + c["h"] / 2], axis=1))
    return np.unique(np.concatenate(out).astype(np.float64), axis=0)


def covered(all_boxes: np.ndarray, x: float, y: float, margin: float) -> bool:
    b = all_boxes
    return bool(np.any((b[:, 0] - margin < x) & (x < b[:, 2] + margin)
                       & (b[:, 1] - margin < y) & (y < b[:, 3] + margin)))


def game_viewport(game: Game, size: tuple[int, int] = SIZE) -> Viewport:
    return Viewport.follow(camera_center(game.world), size, default_zoom(size[1]), game.bounds)


def textured(pixels: np.ndarray, what: str) -> None:
    """A picture, not a flat box: many colours, none covering nearly all of the area (a
    stone tile at 9 px per unit is ~70% one grey)."""
    flat = pixels.reshape(-1, pixels.shape[-1])
    colours, counts = np.unique(flat, axis=0, return_counts=True)
    assert len(colours) >= 6, (what, len(colours))
    assert counts.max() < 0.85 * len(flat), (what, counts.max() / len(flat))


def check_player_pixel(img: np.ndarray, game: Game) -> None:
    """The player's box on screen holds the textured character (not a flat colour)."""
    view = game_viewport(game)
    x, y = game.player_position() or (np.nan, np.nan)
    row, col = view.to_pixel(x, y)
    assert 2 <= row < SIZE[1] - 2 and 2 <= col < SIZE[0] - 2
    with game.world.query(Player, Collider, readonly=(Player, Collider)) as q:
        w, h = float(q[Collider]["w"][0]), float(q[Collider]["h"][0])
    ppu = view.pixels_per_unit
    half_w, half_h = max(2, int(w * ppu * 0.4)), max(2, int(h * ppu * 0.4))
    textured(img[row - half_h: row + half_h + 1, col - half_w: col + half_w + 1], "player")


def check_tile_pixel(img: np.ndarray, game: Game, rows: tuple[int, int] = (0, SIZE[1])) -> None:
    """Wide on-screen geometry rectangles that nothing else overlaps show their tile
    picture: textured, and repeated once per world unit (the view's zoom is a whole number
    of pixels, so one tile's pixels equal the next one's exactly). Only rectangle rows of
    pixels inside ``rows`` are looked at (keeps clear of a HUD)."""
    view = game_viewport(game)
    ppu = int(view.pixels_per_unit)
    assert ppu == view.pixels_per_unit
    left, bottom, right, top = view.visible_rect()
    others = boxes(game.world)
    checked = 0
    with game.world.query(Solid, Position, Collider, readonly=(Solid, Position, Collider)) as q:
        pos, col = q[Position], q[Collider]
        for i in np.argsort(-(col["w"] * col["h"]), kind="stable"):  # biggest first
            x0 = max(float(pos["x"][i] - col["w"][i] / 2), left) + 0.2
            x1 = min(float(pos["x"][i] + col["w"][i] / 2), right) - 0.2
            y0 = max(float(pos["y"][i] - col["h"][i] / 2), bottom) + 0.2
            y1 = min(float(pos["y"][i] + col["h"][i] / 2), top) - 0.2
            if x1 - x0 < 3 or y1 - y0 < 0.5:
                continue
            # Nothing but this rectangle may cover the area (sprites reach past their box).
            hits = ((others[:, 0] < x1 + 1) & (x0 - 1 < others[:, 2])
                    & (others[:, 1] < y1 + 1) & (y0 - 1 < others[:, 3]))
            if int(hits.sum()) != 1:
                continue
            top_left, bottom_right = view.to_pixel(x0, y1), view.to_pixel(x1, y0)
            r0 = max(int(top_left[0]), rows[0])
            r1 = min(int(bottom_right[0]), rows[1] - 1)
            if r1 - r0 < 3:
                continue
            area = img[r0:r1 + 1, int(top_left[1]):int(bottom_right[1]) + 1]
            textured(area, f"tile {i}")
            np.testing.assert_array_equal(area[:, ppu:], area[:, :-ppu])  # repeats per unit
            checked += 1
            if checked == 3:
                break
    assert checked >= 1, "no geometry tile on screen to check"


def sky_pixel(game: Game, img_shape: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
    """An empty pixel well inside one uniform texel region of the level's visual layer:
    (row, col, the visual's colour there)."""
    view = game_viewport(game)
    visual = game.summary.visuals[0]
    image = visual.image
    vl, vb, vw, vh = visual.rect
    all_boxes = boxes(game.world)
    # Leave the top rows alone: a HUD, if any, lives there.
    for row in range(img_shape[0] // 3, img_shape[0] * 2 // 3, 7):
        for col in range(img_shape[1] // 4, img_shape[1] * 3 // 4, 7):
            x, y = (float(v) for v in view.to_world(row, col))
            if covered(all_boxes, x, y, margin=1.0):
                continue
            tx = int((x - vl) / vw * image.shape[1])
            ty = int((vb + vh - y) / vh * image.shape[0])
            patch = image[max(ty - 1, 0): ty + 2, max(tx - 1, 0): tx + 2].reshape(-1, 4)
            if len(patch) == 9 and (patch == patch[0]).all():
                return row, col, tuple(int(v) for v in patch[0])
    raise AssertionError("no empty sky pixel found")


def test_tour_in_process_pixels_saves_and_rewind(window: Any, tmp_path: Path) -> None:
    game = Game(seed=0, save_dir=tmp_path / "saves")
    script = load_script(TOUR)
    frames = 260
    hashes: dict[int, str] = {}
    images: dict[int, np.ndarray] = {}
    checked: list[int] = []

    def on_frame(frame: int, g: Game, view: Any) -> None:
        hashes[frame] = g.state_hash()
        if frame in (90, 200):
            images[frame] = read_pixels(window)
        if frame % 30 == 0 or frame in (90, 200):
            img = images.get(frame)
            img = read_pixels(window) if img is None else img
            check_player_pixel(img, g)
            check_tile_pixel(img, g)
            row, col, sky = sky_pixel(g, img.shape)
            assert tuple(img[row, col]) == sky, (frame, row, col)
            checked.append(frame)

    result = run_headless(game, frames, script=script, size=SIZE, hud=False, window=window,
                          on_frame=on_frame)
    assert result.frames == frames and checked
    # Quicksave at frame 90, quickload at frame 200 (see demo/scripts/tour.json).
    assert hashes[200] == hashes[90]
    assert hashes[199] != hashes[90]
    # llvmpipe is deterministic for identical draws: require exact pixel equality.
    np.testing.assert_array_equal(images[200], images[90])
    # Rewind held for frames 230..249: 20 steps back from frame 229's state.
    assert hashes[249] == hashes[209]
    assert hashes[250] != hashes[249]
    assert game.slots.keys() == {1, 2}
    assert result.state_hash == game.state_hash() == hashes[frames]

    # With the visual layer gone, empty sky shows the level's background colour.
    row, col, _ = sky_pixel(game, images[90].shape)
    view_obj = GameViewProbe(window, game)
    img = view_obj.draw_without_visuals()
    assert game.summary.background is not None
    assert tuple(img[row, col]) == tuple(game.summary.background)
    check_player_pixel(img, game)


class GameViewProbe:
    """Draws the game the way the headless runner does, minus the visual layers."""

    def __init__(self, window: Any, game: Game) -> None:
        from ecs_engine.demo.window import GameView

        self.window = window
        self.view = GameView(game, window, hud=False)

    def draw_without_visuals(self) -> np.ndarray:
        self.view.renderer.set_visuals(())
        self.view.draw_frame()
        return read_pixels(self.window)


def test_keys_map_to_actions(window: Any, tmp_path: Path) -> None:
    import arcade

    from ecs_engine.demo.window import KEYMAP, GameView

    game = Game(seed=0, save_dir=tmp_path)
    view = GameView(game, window, hud=True)
    assert {KEYMAP[k] for k in (arcade.key.W, arcade.key.UP, arcade.key.SPACE)} == {"jump"}
    assert {KEYMAP[k] for k in (arcade.key.J, arcade.key.X)} == {"shoot"}
    view.on_key_press(arcade.key.A, 0)
    view.on_key_press(arcade.key.LEFT, 0)
    view.on_key_release(arcade.key.A, 0)
    assert game.held == {"left"}  # Left is still down
    view.on_key_release(arcade.key.LEFT, 0)
    assert game.held == set()
    view.on_key_press(arcade.key.D, 0)
    assert view.game.advance(3 * DT + 1e-9) == 3
    view.on_key_press(arcade.key.KEY_3, 0)
    view.on_key_press(arcade.key.F5, 0)
    assert game.slot == 3 and set(game.slots) == {3}
    saved = game.state_hash()
    view.on_key_press(arcade.key.S, arcade.key.MOD_CTRL)
    assert (tmp_path / "slot3.sav").is_file()
    view.on_update(5 * DT + 1e-9)
    view.on_key_press(arcade.key.F9, 0)
    assert game.state_hash() == saved and game.message == "loaded slot 3"
    view.on_update(5 * DT + 1e-9)
    view.on_key_press(arcade.key.L, arcade.key.MOD_CTRL)
    assert game.state_hash() == saved and game.message.startswith("loaded ")
    view.on_update(5 * DT + 1e-9)
    ticked = game.state_hash()
    view.on_key_press(arcade.key.R, 0)
    view.on_update(DT)  # one rewind step per frame, whatever the frame time
    assert game.rewinding and game.state_hash() != ticked
    view.on_key_release(arcade.key.R, 0)
    assert not game.rewinding
    assert not view.hud.engine and view.hud.help and view.hud.player
    view.on_key_press(arcade.key.F3, 0)
    assert view.hud.engine
    view.on_key_press(arcade.key.F1, 0)
    assert not view.hud.help
    start = Game(seed=0, save_dir=tmp_path).state_hash()
    view.on_key_press(arcade.key.ENTER, 0)
    assert game.state_hash() == start and game.world.tick == 0
    assert game.message == "restarted"


def test_player_hud_hearts_always_on_engine_hud_behind_f3(window: Any, tmp_path: Path) -> None:
    shots: dict[str, np.ndarray] = {}
    views: dict[str, Any] = {}

    def grab(name: str) -> Any:
        def hook(frame: int, g: Game, view: Any) -> None:
            shots[name], views[name] = read_pixels(window), view
        return hook

    run_headless(Game(seed=0, save_dir=tmp_path), 1, size=SIZE, hud=True, window=window,
                 on_frame=grab("hud"))
    run_headless(Game(seed=0, save_dir=tmp_path), 1, size=SIZE, hud=False, window=window,
                 on_frame=grab("plain"))
    run_headless(Game(seed=0, save_dir=tmp_path), 1, size=SIZE, hud=True, engine_hud=True,
                 window=window, on_frame=grab("engine"))
    hud = views["hud"].hud
    hearts = hud.heart_boxes
    assert len(hearts) == 5  # max_hp of the stock player
    for left, bottom, w, h in hearts:
        row, col = SIZE[1] - 1 - int(bottom + h * 0.55), int(left + w / 2)
        r, g, b, _ = (int(v) for v in shots["hud"][row, col])
        assert r > 180 and g < 110 and b < 130, (row, col, (r, g, b))  # a red heart
        r, g, b, _ = (int(v) for v in shots["plain"][row, col])
        assert not (r > 180 and g < 110 and b < 130)
    differs = np.any(shots["hud"] != shots["plain"], axis=2)
    assert differs[-SIZE[1] // 10:, : SIZE[0] // 3].mean() > 0.3  # the key help
    # The engine HUD is off by default: the top right shows only the level.
    top_right = (slice(0, SIZE[1] // 5), slice(SIZE[0] * 2 // 3, SIZE[0]))
    np.testing.assert_array_equal(shots["hud"][top_right], shots["plain"][top_right])
    engine = np.any(shots["engine"][top_right] != shots["plain"][top_right], axis=2)
    assert engine.mean() > 0.3  # its panel with fps, entities, snapshot times


def test_messages_expire_after_two_seconds(tmp_path: Path) -> None:
    game = Game(seed=0, save_dir=tmp_path)
    assert game.visible_message.startswith("level 'Demo'")
    game.quicksave()
    for _ in range(int(1.9 / DT)):
        game.step_frame()
    assert game.visible_message == "saved slot 1"
    for _ in range(int(0.2 / DT) + 1):
        game.step_frame()
    assert game.visible_message == "" and game.message == "saved slot 1"
    game.press("rewind")
    for _ in range(200):
        game.step_frame()  # rewinding refreshes its message every frame
    assert game.visible_message.startswith("rewind")
    game.release("rewind")
    game.advance(2.5)
    assert game.visible_message == ""


def test_game_over_freezes_then_f9_and_restart_bring_play_back(tmp_path: Path) -> None:
    game = Game("tutorial", seed=0, save_dir=tmp_path)
    start = game.state_hash()
    play(game, 10)
    game.quicksave()
    saved = game.state_hash()
    player = int(game.world.store(Player).entities[0])
    game.world.get(player, Health)["hp"] = 1
    x, y = game.player_position() or (0.0, 0.0)
    game.prefabs.instantiate(game.world, "enemy", x=x + 0.3, y=y - 0.3, speed=0)
    game.step_frame()
    assert game.outcome == "lost" and game.message == "game over"
    status = game.player_status()
    assert status is not None and status.hp == 0
    frozen = game.state_hash()
    assert not game.tick() and game.advance(1.0) == 0
    assert game.state_hash() == frozen  # nothing moves on the end screen
    game.press("quickload")
    assert game.outcome is None and game.state_hash() == saved
    play(game, 3)
    game.world.get(player, Health)["hp"] = 0
    game.step_frame()
    assert game.outcome == "lost"
    game.press("restart")
    assert game.outcome is None and game.state_hash() == start and game.world.tick == 0


def test_demo_level_win_script_reaches_the_flag(tmp_path: Path) -> None:
    """The shipped demo level can be won: demo/scripts/win.json plays it to the flag.
    (If a physics change breaks this, the level or the script needs a look.)"""
    game = Game(seed=0, save_dir=tmp_path)
    events = load_script(WIN)
    by_frame: dict[int, list[Any]] = {}
    for ev in events:
        by_frame.setdefault(ev.frame, []).append(ev)
    for frame in range(1, 1000):
        for ev in by_frame.get(frame, ()):
            for a in ev.release:
                game.release(a)
            for a in ev.press:
                game.press(a)
        game.step_frame()
        if game.outcome is not None:
            break
    assert game.outcome == "won", game.player_position()
    assert game.won_seconds is not None and 5 < game.won_seconds < 17
    assert game.total_coins == 25


def test_sounds_play_once_per_live_tick_never_while_rewinding(tmp_path: Path) -> None:
    from ecs_engine.demo.audio import SOUNDS, SoundBoard

    game = Game(seed=0, save_dir=tmp_path)
    board = SoundBoard(enabled=False)
    game.press("right")
    game.press("shoot")
    game.press("jump")
    heard: list[list[str]] = []
    for _ in range(40):
        game.step_frame()
        heard.append(board.play(game.cues))
        game.cues.clear()
    flat = [k for frame in heard for k in frame]
    assert flat.count("jump") >= 1 and "shoot" in flat
    assert heard[0] == ["shoot"]  # the player starts in the air: no jump yet
    assert all(k in SOUNDS for k in flat)
    assert list(board.played) == flat
    game.release("jump")
    game.press("rewind")
    for _ in range(30):
        game.step_frame()
        assert board.play(game.cues) == []  # restoring states replays nothing
    game.release("rewind")
    game.press("quickload")  # empty slot: a message, no sound
    assert list(game.cues) == []
    for path in SOUNDS.values():  # every sound file ships with arcade
        from ecs_engine.systems.sprite_atlas import resolve_resource

        assert resolve_resource(path).stat().st_size > 0


def test_win_screen_after_a_scripted_run(window: Any, tmp_path: Path) -> None:
    from ecs_engine.demo.hud import WIN_RGBA, end_lines

    game = Game("tutorial", seed=0, save_dir=tmp_path)
    script = [*load_script(TUTORIAL_WIN), *parse_script([{"frame": 30, "press": ["quicksave"]}])]
    shot = tmp_path / "win.png"
    result = run_headless(game, 160, script=script, size=SIZE, window=window, screenshot=shot)
    assert game.outcome == "won" and result.message == "goal reached!"
    lines = end_lines(game)
    assert lines is not None and lines[0] == "You win!"
    assert re.fullmatch(r"time \d+\.\d s   coins 1 / 1", lines[1]), lines[1]
    img = np.asarray(Image.open(shot).convert("RGBA")).astype(int)
    middle = img[SIZE[1] // 4: SIZE[1] * 3 // 4, SIZE[0] // 4: SIZE[0] * 3 // 4]
    title = np.all(np.abs(middle[..., :3] - np.array(WIN_RGBA[:3])) < 40, axis=2)
    assert title.sum() > 100  # the green "You win!"
    # The level still draws behind the shade: sky, tiles and the player, not a flat fill.
    assert len(np.unique(img[SIZE[1] * 3 // 4:, SIZE[0] // 2:].reshape(-1, 4), axis=0)) > 20
    # F9 from the win screen: back to frame 30, playing again.
    game.press("quickload")
    assert game.outcome is None and game.world.tick == 30
    assert game.tick()


def test_sprites_in_the_shipped_levels() -> None:
    from ecs_engine.levels import load_level, shipped_level

    for name in ("demo", "tutorial"):
        world = World()
        load_level(world, shipped_level(name), stock_prefabs())
        with world.query(Sprite, readonly=(Sprite,)) as q:
            sheets = set(q[Sprite]["sheet"].tolist())
        from ecs_engine.components import sheet_index

        assert sheet_index("flag") in sheets, name  # every shipped playable level has a goal
        assert {sheet_index("player"), sheet_index("grass")} <= sheets


def test_python_m_demo_headless_subprocess(window: Any, tmp_path: Path) -> None:
    shot = tmp_path / "shot_{frame}.png"
    out = subprocess.run(
        [sys.executable, "-m", "ecs_engine.demo", "--headless", "--frames", "60",
         "--size", "480x270", "--screenshot", str(shot)],
        env=subprocess_env(ARCADE_HEADLESS="1"), cwd=tmp_path, capture_output=True, text=True,
        timeout=120)
    assert out.returncode == 0, out.stderr
    path = tmp_path / "shot_60.png"
    assert path.is_file()
    match = re.search(r"state hash\s+([0-9a-f]{32})", out.stdout)
    assert match, out.stdout
    # The same run in this process reaches the same state: compare hash, then pixels.
    game = Game(seed=0, save_dir=tmp_path)
    play(game, 60)
    assert match.group(1) == game.state_hash()
    img = np.asarray(Image.open(path).convert("RGBA"))
    assert img.shape == (SIZE[1], SIZE[0], 4)
    assert (img[..., 3] == 255).all()  # opaque, HUD panels included
    check_player_pixel(img, game)
    # The HUD is on: its status panel covers the top quarter, the key help the bottom tenth.
    check_tile_pixel(img, game, rows=(SIZE[1] // 4, SIZE[1] - SIZE[1] // 10))
    row, col, sky = sky_pixel(game, img.shape)
    assert tuple(img[row, col]) == sky


def test_a_save_of_another_level_is_refused_and_the_game_goes_on(game: Game,
                                                                  tmp_path: Path) -> None:
    play(game, 10)
    assert game.save_file()
    other = Game("tutorial", seed=0, save_dir=tmp_path / "saves")
    before = other.state_hash()
    assert not other.load_file()
    assert "is a save of level 'Demo', not" in other.message
    assert other.state_hash() == before


def test_sounds_load_and_play_through_arcade_audio(window: Any) -> None:
    """With audio on (the silent driver here), every cue's sound loads through arcade and
    plays; a kind seen twice in a frame plays once; unknown kinds are ignored."""
    import arcade

    from ecs_engine.demo.audio import SOUNDS, SoundBoard

    board = SoundBoard(enabled=True)
    cues = [(kind, 0.0, 0.0) for kind in SOUNDS] + [("jump", 1.0, 1.0), ("no-such", 0.0, 0.0)]
    assert board.play(cues) == list(SOUNDS)
    assert set(board._loaded) == set(SOUNDS)
    assert all(isinstance(s, arcade.Sound) for s in board._loaded.values())


def test_rollback_resimulation_queues_no_extra_sounds(tmp_path: Path) -> None:
    """With the sync test on, every tick is rewound and re-simulated, yet each live tick's
    events are queued once: the same cues as a plain run."""
    runs = []
    for synctest in (False, True):
        game = Game(seed=0, save_dir=tmp_path, synctest=synctest)
        game.press("right")
        game.press("shoot")
        game.press("jump")
        queued = []
        for _ in range(60):
            game.step_frame()
            queued += list(game.cues)
            game.cues.clear()
        runs.append((queued, game.state_hash()))
    assert runs[0] == runs[1]
    assert [k for k, _, _ in runs[0][0]].count("shoot") >= 2


def test_shipped_input_scripts_load_by_name(tmp_path: Path) -> None:
    """From an install, demo/scripts/win.json is deep in site-packages: the name works."""
    assert load_script("win") == load_script(Path(__file__).parents[1] / "demo" / "scripts"
                                             / "win.json")
    (tmp_path / "win").write_text("[]")  # a file of that name is the file
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        assert load_script("win") == []
    finally:
        os.chdir(cwd)
    with pytest.raises(ScriptError, match="nosuch"):
        load_script("nosuch")


def test_a_missing_level_path_is_named_as_a_path() -> None:
    from ecs_engine.demo.game import resolve_level

    with pytest.raises(KeyError, match="no such level folder or file: '/nonexistent'"):
        resolve_level("/nonexistent")
    with pytest.raises(KeyError, match="no shipped level 'nosuch'"):
        resolve_level("nosuch")


def test_without_arcade_the_demo_and_make_window_name_the_extra() -> None:
    code = ("import sys; sys.modules['arcade'] = None\n"
            "from ecs_engine.demo.__main__ import main\n"
            "print('exit', main(['--headless', '--frames', '1']))\n"
            "from ecs_engine.systems.render_gl import make_window\n"
            "try:\n"
            "    make_window(10, 10, 'x')\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "exit 2" in proc.stdout and "pip install 'ecs-engine[arcade]'" in proc.stderr
    assert "rendering needs arcade: install the arcade extra" in proc.stdout


def test_a_save_not_made_in_this_level_is_refused(game: Game, tmp_path: Path) -> None:
    """A save claiming level "Demo" that another world made (or one of an edited Demo)
    loaded and wiped the level: only the name was checked."""
    play(game, 10)
    foreign = World(seed=1)
    foreign.spawn_batch(Position(x=[1.0, 2.0]), Velocity(x=1.0))
    foreign.resources["level"] = game.summary.name
    foreign.save(tmp_path / "foreign.sav")
    edited = Game(seed=1, save_dir=tmp_path / "edited")
    with edited.world.query(Solid, readonly=(Solid,)) as q:
        first_solid = int(q.entities[0])
    edited.world.get(first_solid, Collider)["w"] += 1.0  # another version of the level
    edited.world.resources["level_geometry"] = level_geometry(edited.world)
    edited.world.save(tmp_path / "edited.sav")
    before = game.state_hash()
    for name in ("foreign", "edited"):
        assert not game.load_file(tmp_path / f"{name}.sav")
        assert "was not saved in this level 'Demo'" in game.message
        assert game.state_hash() == before


def test_the_player_cannot_leave_the_demo_level_past_the_flag() -> None:
    """The right wall stopped 5 units above the ground: a jump over the flag walked out of
    the level, fell, and respawned at the start, never winning."""
    for start_x in (111.0, 112.0):
        game = Game(seed=0)
        with game.world.query(Player, readonly=(Player,)) as q:
            player = int(q.entities[0])
        game.world.get(player, Position)["x"] = start_x
        game.world.get(player, Position)["y"] = 6.9
        game.press("right")
        game.press("jump")
        for _ in range(240):
            game.tick()
        game.release("right")
        game.release("jump")
        for _ in range(60):  # land
            game.tick()
        where = game.player_position()
        assert where is not None and 117.0 < where[0] < 120.0  # past the flag, at the wall
        game.press("left")
        for _ in range(120):
            game.tick()
            if game.outcome:
                break
        assert game.outcome == "won"


@pytest.mark.parametrize("fps", [30, 60, 144])
def test_a_held_rewind_goes_back_at_real_time_at_any_frame_rate(fps: int) -> None:
    """Rewind stepped one tick per drawn frame: a second held went back 0.5 s at 30 fps
    and 2.4 s at 144 fps. And its message stayed up after R was let go."""
    game = Game(seed=0)
    game.press("right")
    for _ in range(120):
        game.advance(1 / 60)
    assert game.world.tick == 120
    game.press("rewind")
    for _ in range(fps):  # one second held
        game.advance(1 / fps)
    assert abs(game.world.tick - 60) <= 1  # (fps sums of 1/fps are not exactly 1.0)
    assert game.visible_message.startswith("rewinding")
    game.release("rewind")
    assert game.visible_message == ""
    before = game.world.tick
    game.advance(1 / fps)  # play resumes with no backlog from the rewind
    assert game.world.tick - before == {30: 2, 60: 1, 144: 0}[fps]


def test_a_clock_reading_of_infinity_or_nan_is_ignored() -> None:
    game = Game(seed=0)
    for bad in (float("inf"), float("nan"), -1.0):
        game.advance(bad)
    assert game.world.tick == 0 and game.elapsed == 0.0
    game.advance(1 / 60)
    assert game.world.tick == 1 and game.visible_message  # the level message shows
