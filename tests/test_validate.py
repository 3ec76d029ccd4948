"""Batch level validation: rows per level, bad levels as rows, the same rows on every backend."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from ecs_engine import World
from ecs_engine.components import Position, Projectile
from ecs_engine.levels import shipped_level
from ecs_engine.levels.validate import (
    ValidateConfig,
    config_dict,
    pack_level,
    validate_batch,
    world_invariants,
)
from ecs_engine.scaleout import run_batches

REPO = Path(__file__).resolve().parents[1]


def _without_ms(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "ms"} for r in rows]


@pytest.fixture()
def levels(tmp_path: Path) -> list[Path]:
    good = [shipped_level("tutorial"), shipped_level("thesis_example")]
    broken = tmp_path / "broken"
    shutil.copytree(shipped_level("tutorial"), broken)
    (broken / "level.lvl").write_text('{"format": "ecs-level", "version": 1, "name": ')
    unmapped = tmp_path / "unmapped"
    shutil.copytree(shipped_level("tutorial"), unmapped)
    doc = json.loads((unmapped / "level.lvl").read_text())
    doc["sprite_colors"] = {}
    (unmapped / "level.lvl").write_text(json.dumps(doc))
    return [*good, broken, unmapped]


def test_rows_report_good_and_bad_levels(levels: list[Path]) -> None:
    config = config_dict(ValidateConfig(ticks=30, thumbnail=64))
    rows = validate_batch(config, [pack_level(p) for p in levels])
    assert [r["ok"] for r in rows] == [True, True, False, False]
    for row, path in zip(rows, levels, strict=True):
        assert row["path"] == str(path)
    good = rows[0]
    assert good["error"] is None and good["ticks"] == 30 and good["entities"] > 0
    assert good["rectangles"] > 0 and len(good["state_hash"]) >= 16
    png = good["thumbnail_png"]
    assert png.startswith(b"\x89PNG") and max(Image.open(_bytes_io(png)).size) <= 64
    # Errors name the level the user gave, never the scratch copy the worker loaded.
    assert str(levels[2]) in rows[2]["error"] and "ecs-validate-" not in rows[2]["error"]
    assert "line" in rows[2]["error"] or "JSON" in rows[2]["error"]
    assert str(levels[3]) in rows[3]["error"] and rows[3]["state_hash"] is None


def _bytes_io(data: bytes) -> Any:
    import io

    return io.BytesIO(data)


def test_same_rows_in_process_and_in_a_process_pool(levels: list[Path]) -> None:
    packages = [pack_level(p) for p in levels]
    config = config_dict(ValidateConfig(ticks=20))
    inline = run_batches(validate_batch, packages, shared=config)
    pool = run_batches(validate_batch, packages, shared=config, backend="pool", workers=2,
                       batch_size=1)
    assert _without_ms(inline) == _without_ms(pool)
    again = run_batches(validate_batch, packages, shared=config)
    assert _without_ms(inline) == _without_ms(again)


def test_same_rows_on_ray(levels: list[Path], ray_local: None) -> None:
    packages = [pack_level(p) for p in levels]
    config = config_dict(ValidateConfig(ticks=20))
    inline = run_batches(validate_batch, packages, shared=config)
    on_ray = run_batches(validate_batch, packages, shared=config, backend="ray", workers=2,
                         batch_size=2)
    assert _without_ms(inline) == _without_ms(on_ray)


def test_invariants_catch_dangling_references_and_nan() -> None:
    world = World()
    dead = world.spawn(Position(x=1.0))
    world.despawn(dead)
    world.spawn(Position(x=np.nan), Projectile(owner=dead))
    problems = world_invariants(world)
    assert any("Projectile.owner" in p and "dead" in p for p in problems)
    assert any("Position.x" in p and "non-finite" in p for p in problems)
    assert world_invariants(World()) == []


def test_unreadable_paths_are_level_errors(tmp_path: Path) -> None:
    from ecs_engine.levels import LevelError

    with pytest.raises(LevelError, match="not a level"):
        pack_level(tmp_path / "missing")


def test_cli_writes_json_lines_and_fails_when_a_level_fails(levels: list[Path],
                                                             tmp_path: Path) -> None:
    out, thumbs = tmp_path / "rows.jsonl", tmp_path / "thumbs"
    proc = subprocess.run(
        [sys.executable, "-m", "ecs_engine.levels", "validate", *map(str, levels), "--ticks",
         "10", "--out", str(out), "--thumbnails", str(thumbs), "--workers", "2"],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 1, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["ok"] for r in rows] == [True, True, False, False]
    assert "4 level(s)" in proc.stderr and "2 ok, 2 failed" in proc.stderr
    assert Path(rows[0]["thumbnail"]).is_file() and Image.open(rows[0]["thumbnail"]).size[0] > 1
    ok = subprocess.run(
        [sys.executable, "-m", "ecs_engine.levels", "validate", "tutorial", "--ticks", "5"],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["ok"] is True


def add_failing_system(world: World) -> None:
    """A setup (``--systems tests.test_validate:add_failing_system``) whose system raises
    on its third tick."""
    def boom(world: World, dt: float) -> None:
        if world.tick == 2:
            raise ValueError("boom in my system")

    world.add_system(boom)


def test_an_error_in_a_system_names_the_system_tick_and_line(levels: list[Path]) -> None:
    """The row said only 'ValueError: boom' with ticks 0, though two ticks had run."""
    config = config_dict(ValidateConfig(ticks=30,
                                        systems="tests.test_validate:add_failing_system"))
    (row,) = validate_batch(config, [pack_level(levels[0])])
    assert not row["ok"] and row["ticks"] == 2
    assert re.fullmatch(r"ValueError: boom in my system \(in system 'boom', in world\.step at "
                        r"tick 2\) \[raised at test_validate\.py:\d+\]", row["error"])
