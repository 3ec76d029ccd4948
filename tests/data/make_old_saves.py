"""Write the save files of an older schema that tests/test_schema_changes.py loads.

Run ``python -m tests.data.make_old_saves`` to regenerate ``schema_v1.sav``; the file is
checked in, so the tests read exactly what an older release of a game wrote.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ecs_engine import World, component

HERE = Path(__file__).resolve().parent


@component(name="Stats")
class StatsV1:
    speed: np.float32 = 2.5
    hp: np.int16 = 3


@component(name="Coins")
class CoinsV1:
    amount: np.int32 = 0


@component(name="Level")
class LevelV1:
    value: np.float32 = 0.0


@component(name="Box")
class BoxV1:
    w: np.float32 = 1.0
    h: np.float32 = 1.0


def main() -> None:
    world = World(seed=7)
    world.spawn_batch(StatsV1(speed=[9.0, 8.0, 7.0], hp=[1, 2, 3]), CoinsV1(amount=[5, 6, 7]),
                      LevelV1(value=[1.0, 2.4, 126.6]), BoxV1(w=[1.0, 2.0, 3.0], h=2.0))
    world.save(HERE / "schema_v1.sav")


if __name__ == "__main__":
    main()
