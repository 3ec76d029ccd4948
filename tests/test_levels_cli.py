"""``python -m ecs_engine.levels inspect``: summary text, the picture, exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ecs_engine import levels
from ecs_engine.levels.__main__ import main

REPO = Path(__file__).resolve().parents[1]


def test_inspect_prints_summary_and_writes_picture(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo.png"
    assert main(["inspect", str(levels.shipped_level("demo")), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for needle in ("'Demo'", "120 x 40", "k = 4", "greedy", "rectangles", "enemy", "coin",
                   "player start", "loaded in", str(out)):
        assert needle in text, needle
    picture = Image.open(out)
    assert picture.size == (120 * 8, 40 * 8)
    arr = np.asarray(picture.convert("RGBA"))
    # Outlines are near-black; the demo's sky and tiles are not.
    assert (arr[..., :3].max(axis=-1) < 30).sum() > 1000


def test_inspect_outlines_every_rectangle(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.png"
    assert main(["inspect", "tutorial", "--method", "exact", "--out", str(out),
                 "--scale", "4"]) == 0
    assert "exact" in capsys.readouterr().out
    arr = np.asarray(Image.open(out).convert("RGBA"))
    assert arr.shape == (12 * 4, 30 * 4, 4)
    dark = arr[..., :3].max(axis=-1) < 30
    # The brick platform (row 6, cols 12-17) is one rectangle: dark rim, coloured inside.
    top, left, right = 6 * 4, 12 * 4, 18 * 4 - 1
    assert dark[top, left:right + 1].all() and dark[top:top + 4, left].all()
    assert dark[top:top + 4, right].all()
    assert not dark[top + 1:top + 3, left + 1:right].any()


def test_inspect_caps_huge_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.png"
    assert main(["inspect", "stress", "--out", str(out), "--max-side", "1024"]) == 0
    assert Image.open(out).size == (1024, 1024)
    assert "1 px per world unit" in capsys.readouterr().out


def test_inspect_bad_input_exit_code_2(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing" in err
    (tmp_path / "level.lvl").write_text("{ nope")
    assert main(["inspect", str(tmp_path)]) == 2
    assert "line 1:3" in capsys.readouterr().err


def test_inspect_a_misspelt_shipped_name_lists_the_shipped_levels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", "demoo"]) == 2
    err = capsys.readouterr().err
    assert "no shipped level 'demoo' (did you mean 'demo'?)" in err
    assert "'tutorial'" in err
    assert main(["inspect", "tutorial"]) == 0  # the real name still works


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in ("demo", "stress", "thesis_example", "tutorial"))


def test_module_entry_point(tmp_path: Path) -> None:
    out = tmp_path / "thesis.png"
    ok = subprocess.run([sys.executable, "-m", "ecs_engine.levels", "inspect", "thesis_example",
                         "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                        timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "format version 0" in ok.stdout and Image.open(out).size == (80 * 8, 15 * 8)
    bad = subprocess.run([sys.executable, "-m", "ecs_engine.levels", "inspect",
                          str(tmp_path / "nope")],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "error:" in bad.stderr and "nope" in bad.stderr


def _far_apart_level(tmp_path: Path) -> Path:
    """A valid level whose two geometry layers lie 1e7 world units apart."""
    from ecs_engine.levels.make_levels import LevelSource, write_level

    ground = "#8b5a2b"
    geo = np.zeros((4, 6, 4), np.uint8)
    geo[3, :] = (0x8B, 0x5A, 0x2B, 255)
    doc = {"format": "ecs-level", "version": 1, "name": "far", "background": "#000000",
           "layers": {"geometry": [{"file": "geometry/a.png"},
                                   {"file": "geometry/b.png", "offset": [10_000_000, 0]}]},
           "tile_colors": {ground: "ground"}}
    return write_level(LevelSource("far", doc, {"geometry/a.png": geo,
                                                "geometry/b.png": geo}), tmp_path)


def test_inspect_bounds_the_picture_of_far_apart_layers_and_says_what_it_clipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "far.png"
    assert main(["inspect", str(_far_apart_level(tmp_path)), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "clipped" in text and "geometry/b.png" in text and "geometry/a.png" not in \
        text.split("cut off:")[1]
    width, height = Image.open(out).size
    assert width <= 4096 and height <= 4096
    arr = np.asarray(Image.open(out).convert("RGBA"))
    assert (arr[..., :3].max(axis=-1) < 30).sum() > 50  # layer a is drawn, outlined


def test_inspect_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    out = tmp_path / "demo.png"
    proc = subprocess.Popen([sys.executable, "-m", "ecs_engine.levels", "inspect", "demo",
                             "--out", str(out)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `| head -0`: the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert err == "" and out.exists()


def test_inspect_of_a_level_with_unknown_prefabs_points_at_prefabs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A game's own level failed with 'unknown prefab' and no word of --prefabs."""
    import json
    import shutil

    level = tmp_path / "mine"
    shutil.copytree(levels.shipped_level("tutorial"), level)
    spec = json.loads((level / "level.lvl").read_text())
    colour = next(iter(spec["sprite_colors"]))
    spec["sprite_colors"][colour] = "my_own_walker"
    (level / "level.lvl").write_text(json.dumps(spec))
    assert main(["inspect", str(level), "--out", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert "unknown prefab 'my_own_walker'" in err and "--prefabs" in err


def test_validate_with_ray_missing_says_what_to_install(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["validate", "tutorial", "--ray", "", "--ticks", "1"]) == 2
    assert "pip install 'ecs-engine[cluster]'" in capsys.readouterr().err
