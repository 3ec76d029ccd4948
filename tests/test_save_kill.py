"""Atomic saves: a process killed (SIGKILL) at random moments while saving a large world
over and over never leaves a damaged save behind: the file always loads, as one complete
save (the previous or the next), and a stale temp file never gets in the way."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ecs_engine import World, component
from ecs_engine.atomicfile import temp_name_pattern

ENTITIES = 2_000_000  # one save is ~66 MB and takes ~50-100 ms here
ROUNDS = 6

WRITER = """
import sys
import numpy as np
from ecs_engine import World, component

@component
class Body:
    x: np.float64 = 0.0
    y: np.float64 = 0.0

path, count, i = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
world = World(seed=0)
world.spawn_batch(Body(), count=count)
while True:
    i += 1
    with world.query(Body) as q:
        q[Body]["x"] = i
        q[Body]["y"] = -i
    world.resources["i"] = i
    world.save(path)
    print(i, flush=True)
"""


@component
class Body:
    x: np.float64 = 0.0
    y: np.float64 = 0.0


def load_and_check(path: Path) -> int:
    """Load the save; every row must come from the same save as the counter."""
    world = World()
    world.register(Body)
    world.load(path)
    i = world.resources["i"]
    rows = world.store(Body).live()
    assert len(rows) == ENTITIES
    assert np.all(rows["x"] == i) and np.all(rows["y"] == -i)
    return int(i)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_killed_mid_save_leaves_a_loadable_save(tmp_path: Path) -> None:
    path = tmp_path / "world.sav"
    pattern = temp_name_pattern(path)

    def temp_files() -> list[Path]:
        return [p for p in tmp_path.iterdir() if pattern.fullmatch(p.name)]

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    rng = random.Random(7)
    last = 0
    killed_mid_write = 0
    for round_no in range(ROUNDS):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(ENTITIES),
                                 str(last)], env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()  # one save finished: the loop is running
            assert first.strip(), "the writer died before its first save"
            if round_no % 2:  # any moment
                time.sleep(rng.uniform(0.0, 0.25))
            else:  # while the temp file is being written or synced
                deadline = time.monotonic() + 5
                while not temp_files() and time.monotonic() < deadline:
                    time.sleep(0.0005)
                time.sleep(rng.uniform(0.0, 0.01))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        killed_mid_write += bool(temp_files())
        loaded = load_and_check(path)
        assert loaded >= last + 1  # never older than a save we saw finish
        last = loaded
    assert killed_mid_write >= 1, "no kill landed inside a save: the test proved nothing"
    # the next save (this process) replaces a stale temp file and leaves none behind
    world = World()
    world.register(Body)
    world.load(path)
    world.resources["i"] = last + 1
    with world.query(Body) as q:
        q[Body]["x"] = last + 1
        q[Body]["y"] = -(last + 1)
    world.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["world.sav"]
    assert load_and_check(path) == last + 1
