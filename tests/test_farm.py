"""The simulation farm: seeded headless runs whose rows do not depend on the backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ecs_engine.demo.farm import FarmConfig, farm, random_inputs, start_state
from ecs_engine.demo.game import INPUT_ACTIONS

REPO = Path(__file__).resolve().parents[1]
CONFIG = FarmConfig(frames=40, every=20)


def _without_ms(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "ms"} for r in rows]


@pytest.fixture(scope="module")
def inline_rows() -> list[dict[str, Any]]:
    return farm("tutorial", range(0, 4), CONFIG)


def test_random_inputs_are_seeded_and_held_in_segments() -> None:
    a, b = random_inputs(7, 300), random_inputs(7, 300)
    assert a.shape == (300, len(INPUT_ACTIONS)) and a.dtype == bool
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, random_inputs(8, 300))
    changes = np.count_nonzero((a[1:] != a[:-1]).any(axis=1))
    assert changes <= 300 // 4  # held for at least 4 frames at a time


def test_rows_per_seed(inline_rows: list[dict[str, Any]]) -> None:
    assert [r["seed"] for r in inline_rows] == [0, 1, 2, 3]
    for row in inline_rows:
        assert row["frames"] == 40 and len(row["hashes"]) == 2
        assert row["hashes"][-1] == row["state_hash"]
        assert row["player"] in {"alive", "dead", "gone"}
        assert row["outcome"] in {None, "won", "lost"}
    # Different seeds press different keys: different games.
    assert len({r["state_hash"] for r in inline_rows}) == 4


def test_runs_repeat_exactly_and_seeds_do_not_depend_on_their_batch(
        inline_rows: list[dict[str, Any]]) -> None:
    again = farm("tutorial", [3, 1], CONFIG)  # other order, other batch neighbours
    by_seed = {r["seed"]: r for r in _without_ms(inline_rows)}
    assert _without_ms(again) == [by_seed[3], by_seed[1]]


def test_process_pool_gives_the_same_rows(inline_rows: list[dict[str, Any]]) -> None:
    pool = farm("tutorial", range(0, 4), CONFIG, backend="pool", workers=2, batch_size=1)
    assert _without_ms(pool) == _without_ms(inline_rows)


def test_ray_gives_the_same_rows(inline_rows: list[dict[str, Any]], ray_local: None) -> None:
    on_ray = farm("tutorial", range(0, 4), CONFIG, backend="ray", workers=2, batch_size=2)
    assert _without_ms(on_ray) == _without_ms(inline_rows)


def test_start_from_a_save_file(tmp_path: Path, inline_rows: list[dict[str, Any]]) -> None:
    from ecs_engine.demo.game import Game

    game = Game("tutorial", save_dir=tmp_path)
    for _ in range(30):
        game.tick()
    save = tmp_path / "start.sav"
    game.world.save(save)
    rows = farm("tutorial", [0], CONFIG, start=save)
    assert rows[0]["state_hash"] != inline_rows[0]["state_hash"]
    assert _without_ms(farm("tutorial", [0], CONFIG, start=save)) == _without_ms(rows)


def test_cli(tmp_path: Path) -> None:
    out = tmp_path / "farm.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "ecs_engine.demo", "farm", "--level", "tutorial", "--seeds",
         "5:7", "--frames", "30", "--every", "10", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["seed"] for r in rows] == [5, 6] and all(len(r["hashes"]) == 3 for r in rows)
    assert "2 seed(s) x 30 frames" in proc.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "ecs_engine.demo", "farm", "--level", str(tmp_path / "nope")],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert bad.returncode == 2 and "error:" in bad.stderr


def test_a_bad_level_is_named_as_given_not_as_its_scratch_copy(tmp_path: Path) -> None:
    """The error named /tmp/ecs-farm-XXXX/level.lvl, a copy already deleted."""
    import shutil

    from ecs_engine.levels import LevelError, shipped_level

    bad = tmp_path / "badjson"
    shutil.copytree(shipped_level("tutorial"), bad)
    (bad / "level.lvl").write_text('{"format": "ecs-level",\n oops')
    with pytest.raises(LevelError) as info:
        start_state(bad)
    assert str(info.value).startswith(f"{bad}") and "ecs-farm-" not in str(info.value)
    assert info.value.file.startswith(str(bad))
