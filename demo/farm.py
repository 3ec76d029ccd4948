"""A simulation farm: many seeded headless runs of the demo from one start snapshot.

``python -m ecs_engine.demo farm --level demo --seeds 0:1000 --frames 600 --workers 2``
runs each seed with seeded random input (held keys that change every few frames, biased to
run right) and writes one JSON line per seed: the final ``World.state_hash``, the hashes every
``--every`` frames, and the player's outcome. Balance tests, replay checks and training data
are built on such tables, and hashes are comparable across machines: the same seed gives the
same row on every backend (in-process, process pool, Ray) and on every run.

The start state travels as snapshot bytes (``ray.put`` once); each batch builds the game
once and restores that snapshot before every seed, so a seed's result does not depend on
which worker ran it or what ran there before.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ecs_engine import SaveFileError, Snapshot
from ecs_engine.components import Health, Player, Position, Score
from ecs_engine.demo.game import INPUT_ACTIONS, Game, resolve_level
from ecs_engine.levels import LevelError
from ecs_engine.levels.validate import (
    LevelPackage,
    as_named_by_user,
    pack_level,
    unpack_level,
)
from ecs_engine.scaleout import Backend, run_batches

__all__ = ["FarmConfig", "farm_batch", "main", "random_inputs", "start_state"]

_RUN_RIGHT = {"left": 0.15, "right": 0.6, "jump": 0.3, "shoot": 0.2}
"""Chance of holding each action in an input segment: mostly running right and jumping."""


@dataclass(frozen=True)
class FarmConfig:
    """``frames`` ticks per seed at 60 Hz; a hash every ``every`` frames (0: only the last)."""

    frames: int = 600
    every: int = 60


def random_inputs(seed: int, frames: int) -> np.ndarray:
    """``(frames, len(INPUT_ACTIONS))`` booleans: held keys in segments of 4-40 frames."""
    rng = np.random.default_rng([seed, 0x1A9D])  # its own stream, apart from world.rng
    out = np.zeros((frames, len(INPUT_ACTIONS)), dtype=bool)
    chance = np.array([_RUN_RIGHT.get(a, 0.0) for a in INPUT_ACTIONS])
    frame = 0
    while frame < frames:
        length = int(rng.integers(4, 41))
        out[frame:frame + length] = rng.random(len(INPUT_ACTIONS)) < chance
        frame += length
    return out


def start_state(level: str | os.PathLike[str], start: Path | None = None
                ) -> tuple[LevelPackage, bytes]:
    """The packaged level and the start snapshot's bytes (the level's first tick, or the
    save file ``start``, which must belong to that level)."""
    package = pack_level(resolve_level(level))
    game = _game(package)
    snap = Snapshot.load(start) if start is not None else game.world.snapshot()
    if start is not None:
        game.world.restore(snap)  # checks it fits this level's components
    return package, bytes(snap.to_bytes())


def _game(package: LevelPackage) -> Game:
    """The game for a packaged level, built in a scratch folder (workers share no files)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ecs-farm-") as tmp:
        root = Path(tmp)
        try:
            return Game(unpack_level(package, root), history_seconds=1 / 60,
                        save_dir=root / "saves")
        except LevelError as exc:  # it names the scratch copy, gone when this returns
            raise as_named_by_user(exc, package, root) from None


def _outcome(game: Game) -> dict[str, Any]:
    world = game.world
    with world.query(Player, Position, readonly=(Player, Position)) as q:
        keys = q.entities.copy()
        x = float(q[Position]["x"][0]) if len(q) else None
    if keys.size == 0:
        return {"player": "gone", "outcome": game.outcome, "won_seconds": None, "hp": 0,
                "coins": 0, "x": None}
    player = int(keys[0])
    hp = int(world.get(player, Health)["hp"]) if world.has(player, Health) else None
    coins = int(world.get(player, Score)["coins"]) if world.has(player, Score) else 0
    alive = hp is None or hp > 0
    return {"player": "alive" if alive else "dead", "outcome": game.outcome,
            "won_seconds": game.won_seconds, "hp": hp, "coins": coins,
            "x": None if x is None else round(x, 3)}


def farm_batch(shared: dict[str, Any], seeds: list[int]) -> list[dict[str, Any]]:
    """The pure batch function: one row per seed (see the module doc)."""
    config = FarmConfig(**shared["config"])
    package = LevelPackage(**shared["level"])
    start = Snapshot.from_bytes(shared["snapshot"])
    game = _game(package)
    rows = []
    for seed in seeds:
        began = time.perf_counter()
        game.world.restore(start)
        game.world.rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state
        inputs = random_inputs(seed, config.frames)
        hashes: list[str] = []
        for frame in range(config.frames):
            game.held = {a for a, on in zip(INPUT_ACTIONS, inputs[frame], strict=True) if on}
            game.tick()
            if config.every and (frame + 1) % config.every == 0:
                hashes.append(game.world.state_hash())
        rows.append({"seed": int(seed), "frames": config.frames,
                     "state_hash": game.world.state_hash(), "hashes": hashes,
                     **_outcome(game), "ms": round((time.perf_counter() - began) * 1e3, 3)})
    return rows


def farm(level: str | os.PathLike[str], seeds: range | list[int], config: FarmConfig, *,
         backend: Backend = "inline", workers: int = 1, address: str | None = None,
         start: Path | None = None, batch_size: int | None = None,
         progress: Any = None) -> list[dict[str, Any]]:
    """Run ``seeds`` on ``backend`` (``inline``, ``pool`` or ``ray``); rows in seed order."""
    package, snapshot = start_state(level, start)
    shared = {"config": {"frames": config.frames, "every": config.every},
              "level": {"source": package.source, "entry": package.entry,
                        "files": dict(package.files)},
              "snapshot": snapshot}
    return run_batches(farm_batch, list(seeds), shared=shared, backend=backend,
                       workers=workers, address=address, batch_size=batch_size,
                       progress=progress)


def _seeds(text: str) -> range:
    first, sep, last = text.partition(":")
    try:
        lo, hi = (int(first), int(last)) if sep else (int(first), int(first) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A:B (seeds A..B-1) or one seed, "
                                         f"got {text!r}") from None
    if not 0 <= lo < hi:
        raise argparse.ArgumentTypeError(f"empty or negative seed range {text!r}")
    return range(lo, hi)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m ecs_engine.demo farm",
        description="Run many seeded headless games from one start snapshot; one JSON line "
                    "per seed with its state hashes and the player's outcome.")
    p.add_argument("--level", default="demo", help="shipped level name or level path")
    p.add_argument("--seeds", type=_seeds, default=range(0, 8), help="A:B runs seeds A..B-1")
    p.add_argument("--frames", type=int, default=600, help="ticks per seed (60 per second)")
    p.add_argument("--every", type=int, default=60, help="a state hash every K frames")
    p.add_argument("--start", type=Path, default=None, help="start from this save file")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=1, help="local worker processes")
    where.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                       help="run on Ray: local, or the cluster at ADDRESS (auto, ray://...)")
    p.add_argument("--batch-size", type=int, default=None, help="seeds per task")
    p.add_argument("--out", type=Path, default=None, help="JSON lines file (default stdout)")
    args = p.parse_args(argv)
    if args.frames < 1 or args.every < 0 or args.workers < 1:
        p.error("--frames and --workers must be >= 1, --every >= 0")
    backend: Backend = ("ray" if args.ray is not None
                        else "pool" if args.workers > 1 else "inline")
    workers = (os.cpu_count() or 1) if args.ray is not None else args.workers
    began = time.perf_counter()
    try:
        rows = farm(args.level, args.seeds, FarmConfig(args.frames, args.every),
                    backend=backend, workers=workers, address=args.ray or None,
                    start=args.start, batch_size=args.batch_size)
    except (LevelError, SaveFileError, OSError, ValueError, KeyError, ImportError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {message}", file=sys.stderr)
        return 2
    out = args.out.open("w") if args.out else sys.stdout
    try:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    seconds = time.perf_counter() - began
    alive = sum(r["player"] == "alive" for r in rows)
    won = sum(r["outcome"] == "won" for r in rows)
    print(f"farm: {len(rows)} seed(s) x {args.frames} frames with {backend} "
          f"({workers} worker(s)) in {seconds:.1f} s; player alive in {alive}, won {won}",
          file=sys.stderr)
    return 0
