"""The command-line tools on editor files: ``inspect`` and the demo on LDtk projects and Tiled
maps, ``--level``/``--editor-level``, ``--lenient`` and ``--prefabs module:function``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ecs_engine.components import Player, Position
from ecs_engine.demo import Game
from ecs_engine.levels.__main__ import main

from .gl import window_or_skip
from .test_level_editors import ENTITIES, PLATFORMER, SEPARATE, arcade_maps

REPO = Path(__file__).resolve().parents[1]

GAME_MODULE = '''
from ecs_engine import PrefabRegistry
from ecs_engine.components import stock_prefabs


def make():
    reg = stock_prefabs()
    reg.alias("ground", "dirt", "walls")
    reg.alias("stone", "ladder")
    reg.alias("enemy", "Mob")
    reg.alias("coin", "Chest", "Door")
    return reg, {"Player.items": None, "Mob.loot": None, "Mob.patrol": None,
                 "Chest.content": None, "Door.locked": None}


def not_a_registry():
    return 42
'''


@pytest.fixture
def game_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "mygame_prefabs.py").write_text(textwrap.dedent(GAME_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "mygame_prefabs"


def test_inspect_ldtk_level_by_name_and_index(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sep.png"
    assert main(["inspect", str(SEPARATE), "--level", "World_Level_2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "'World_Level_2'" in text and "LDtk 1.5.3" in text and "stone" in text
    assert Image.open(out).size == (15 * 8, 15 * 8)
    assert main(["inspect", str(SEPARATE), "--level", "1", "--out", str(out)]) == 0
    assert "'World_Level_1'" in capsys.readouterr().out


def test_inspect_strict_and_lenient(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "e.png"
    assert main(["inspect", str(ENTITIES), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Entities.ldtk" in err and "entity 'Chest'" in err and "unknown prefab" in err
    assert main(["inspect", str(ENTITIES), "--lenient", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "skipped      entity 'Chest' x2" in text
    assert out.is_file()


def test_inspect_tiled_map_draws_its_colliders(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.png"
    assert main(["inspect", str(arcade_maps() / "level_1.json"), "--out", str(out),
                 "--scale", "2"]) == 0
    text = capsys.readouterr().out
    assert "'level_1'" in text and "Tiled" in text and "ground" in text and "coin" in text
    arr = np.asarray(Image.open(out).convert("RGBA"))
    assert arr.shape == (20 * 2, 40 * 2, 4)
    # the bottom row of the map is solid ground in level_1: drawn in the ground colour
    assert (arr[-1, :, :3] != arr[0, 0, :3]).any(axis=-1).mean() > 0.5


def test_inspect_with_a_games_prefabs(tmp_path: Path, game_module: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.png"
    assert main(["inspect", str(PLATFORMER), "--prefabs", f"{game_module}:make",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "skipped" not in text and "coin" in text and "enemy" in text
    with pytest.raises(SystemExit):
        main(["inspect", str(PLATFORMER), "--prefabs", f"{game_module}:not_a_registry"])
    assert "must return a PrefabRegistry" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["inspect", str(PLATFORMER), "--prefabs", "no_such_module_xyz:make"])
    assert "cannot import" in capsys.readouterr().err


def test_game_plays_an_ldtk_level(tmp_path: Path) -> None:
    game = Game(PLATFORMER, save_dir=tmp_path, strict=False, editor_level=0)
    assert game.summary.name == "Your_typical_2D_platformer"
    assert game.summary.entity_counts["player"] == 1
    start = game.world.resources["player_start"]
    for _ in range(30):
        game.tick()
    with game.world.query(Player, Position) as q:
        # the player stands on the level's ground: it fell at most a little from the start
        assert abs(float(q[Position]["y"][0]) - start[1]) < 1.0


def test_demo_runs_editor_files_headless(tmp_path: Path, game_module: str) -> None:
    window_or_skip(64, 64, "probe").close()
    env = dict(os.environ, ARCADE_HEADLESS="1",
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    for args in ([str(PLATFORMER), "--prefabs", f"{game_module}:make"],
                 [str(arcade_maps() / "map.json")]):
        out = subprocess.run([sys.executable, "-m", "ecs_engine.demo", *args, "--headless",
                              "--frames", "20", "--size", "320x180", "--screenshot",
                              str(tmp_path / "shot.png")], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr
        assert (tmp_path / "shot.png").is_file()
    out = subprocess.run([sys.executable, "-m", "ecs_engine.demo", str(ENTITIES), "--headless",
                          "--frames", "1"], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 2 and "entity 'Chest'" in out.stderr
