"""Big worlds and rollback, as fractions of a 60 Hz frame (16.7 ms).

``tick``: one demo simulation tick (``world.step``) with ``n`` bouncing stress bodies on the
shipped demo level, with static collision through the tile grid (``engine``) and, timed
interleaved in the same process, through the general grid only (``general grid``, the
path unaligned colliders take); both worlds must end in the same state hash.

``rollback``: GGPO-style rollback on the same level with ``n`` stress bodies (0 = the
default level): restore the frame of 8 ticks ago and re-simulate the 8 ticks with corrected
inputs (:class:`ecs_engine.Rollback`), against the plain way (``world.restore`` of a
snapshot, then 8 ``world.step``); both must end in the same state (the straight run with
the corrected inputs).
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks.runner import Op, Record, Timing, timed_records
from benchmarks.scenarios import Job, Plan

NAME = "sim"
TITLE = "Big worlds and rollback (frame fractions)"
FRAME_MS = 1000 / 60
ROLLBACK_FRAMES = 8


def plan(cfg: Any) -> Plan:
    """Full runs: ticks at 10k and 100k bodies, rollback on the default level and with 10k
    bodies. Quick runs: the largest configured size up to 10k only."""
    big = (10_000, 100_000) if not cfg.quick else (min(max(cfg.sizes), 10_000),)
    for n in big:
        yield Job(NAME, "tick", n)
    for n in (0, min(max(cfg.sizes), 10_000)):
        yield Job(NAME, "rollback", n)


def _game(n: int) -> Any:
    os.environ.setdefault("ARCADE_HEADLESS", "1")
    from ecs_engine.demo.game import Game

    return Game("demo", stress=n, history_seconds=1 / 60, save_dir=os.devnull)


def _fraction(rows: list[Record]) -> list[Record]:
    for r in rows:
        if "median_s" in r:
            r["frame_fraction"] = round(r["median_s"] * 1000 / FRAME_MS, 4)
    return rows


def tick(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    from ecs_engine.components import Collider, Position, Solid
    from ecs_engine.demo.game import DT
    from ecs_engine.systems.colliders import CACHE_KEY, LevelColliders, level_colliders
    from ecs_engine.systems.grid import box_edges

    tiles, general = _game(n), _game(n)
    if level_colliders(tiles.world).tiles is None:
        raise AssertionError("the demo level should use the tile grid")
    # The same boxes, every one through the general grid (as if none were aligned).
    version = level_colliders(general.world).version
    with general.world.query(Solid, Position, Collider,
                             readonly=(Solid, Position, Collider)) as q:
        edges = box_edges(q[Position], q[Collider])
    general.world.caches[CACHE_KEY] = LevelColliders.build(*edges, version=version,
                                                           use_tiles=False)
    ops = {"engine": Op(lambda: tiles.world.step(DT),
                        fingerprint=lambda _: (tiles.world.tick, tiles.world.state_hash())),
           "general": Op(lambda: general.world.step(DT),
                         fingerprint=lambda _: (general.world.tick,
                                                general.world.state_hash()))}
    names = {"engine": ("tick", "", "engine"), "general": ("tick", "", "general grid")}
    return _fraction(timed_records(NAME, n, ops, timing, names))


def rollback(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    from ecs_engine import Rollback
    from ecs_engine.demo.game import DT, INPUT_ACTIONS

    def inputs(frame: int, corrected: bool) -> dict[str, bool]:
        held = {"right": True, "jump": frame % 5 == 0, "shoot": frame % 3 == 0}
        if corrected:  # the remote player actually ran left and did not shoot
            held = {"left": True, "jump": frame % 4 == 0}
        return {k: held.get(k, False) for k in INPUT_ACTIONS}

    game = _game(n)
    world = game.world
    for f in range(30):  # warm the level up: projectiles in flight, bodies landed
        world.resources["input"] = inputs(f, False)
        world.step(DT)
    start = world.tick
    rb = Rollback(world, frames=ROLLBACK_FRAMES, dt=DT)
    guessed = [inputs(start + i, False) for i in range(ROLLBACK_FRAMES)]
    fixed = [inputs(start + i, True) for i in range(ROLLBACK_FRAMES)]
    for g in guessed:
        rb.advance(g)
    if world.tick != start + ROLLBACK_FRAMES:
        raise AssertionError("rollback setup: wrong number of frames")

    # The plain way, on a second world: restore a snapshot, then step 8 ticks.
    plain = _game(n)
    pw = plain.world
    for f in range(30):
        pw.resources["input"] = inputs(f, False)
        pw.step(DT)
    snap = pw.snapshot()

    def restore_and_step() -> None:
        pw.restore(snap)
        for i in range(ROLLBACK_FRAMES):
            pw.resources["input"] = fixed[i]
            pw.step(DT)

    # Both end where a straight run with the corrected inputs ends.
    ops = {"rollback": Op(lambda: rb.rollback(start, fixed),
                          fingerprint=lambda _: (world.tick, world.state_hash())),
           "plain": Op(restore_and_step, fingerprint=lambda _: (pw.tick, pw.state_hash()))}
    names = {"rollback": ("rollback", "", "engine"),
             "plain": ("rollback", "", "restore + step")}
    out = timed_records(NAME, n, ops, timing, names)
    for r in out:
        r["frames"] = ROLLBACK_FRAMES
        r["entities"] = len(world)
    return _fraction(out)


JOBS = {"tick": tick, "rollback": rollback}
