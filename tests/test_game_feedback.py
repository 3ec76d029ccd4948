"""The game-feel systems on tiny worlds: per-tick events, animation frames and facing from
the columns, the blink while invulnerable, hit and pickup effects, the goal and a player
going down."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ecs_engine import World
from ecs_engine.components import (
    Health,
    Lifetime,
    Player,
    Position,
    Sprite,
    Velocity,
    stock_prefabs,
)
from ecs_engine.components.render import (
    FRAME_FALL,
    FRAME_IDLE,
    FRAME_JUMP,
    FRAME_WALK,
    sheet_index,
)
from ecs_engine.systems import add_platformer_systems, events
from ecs_engine.systems.animation import WALK_FPS
from ecs_engine.systems.effects import EFFECT_SECONDS
from ecs_engine.systems.gameplay import WON_AT

DT = 1 / 60


def platformer() -> tuple[World, int]:
    """A 40-unit floor, a player standing at x = 5, the stock systems."""
    world = World(seed=0)
    prefabs = stock_prefabs()
    prefabs.instantiate(world, "ground", x=20, y=0.5, w=40, h=1)
    player = prefabs.instantiate(world, "player", x=5, y=2)
    world.resources["player_start"] = [5.0, 2.0]
    add_platformer_systems(world)
    for _ in range(30):
        world.step(DT)
    return world, player


def sprite(world: World, key: int) -> dict[str, float]:
    rec = world.get(key, Sprite)
    return {f: rec[f].item() for f in ("frame", "flip", "blink", "clock")}


def test_idle_walk_jump_fall_and_facing_come_from_the_columns() -> None:
    world, player = platformer()
    assert sprite(world, player)["frame"] == FRAME_IDLE
    world.resources["input"] = {"left": True}
    world.step(DT)
    assert sprite(world, player)["flip"]  # facing left
    world.resources["input"] = {"right": True}
    frames = []
    for _ in range(30):
        world.step(DT)
        frames.append(sprite(world, player)["frame"])
    # Walking: the frame counts up from FRAME_WALK at WALK_FPS, facing right.
    assert frames[0] == FRAME_WALK
    assert frames[-1] == FRAME_WALK + int(31 * DT * WALK_FPS)  # walking since the left step
    assert not sprite(world, player)["flip"]
    world.resources["input"] = {"left": True, "jump": True}
    world.step(DT)
    assert sprite(world, player)["frame"] == FRAME_JUMP
    assert sprite(world, player)["flip"]
    world.resources["input"] = {}
    seen = set()
    for _ in range(120):
        world.step(DT)
        seen.add(sprite(world, player)["frame"])
    assert {FRAME_JUMP, FRAME_FALL, FRAME_IDLE} <= seen
    assert sprite(world, player)["frame"] == FRAME_IDLE  # landed and standing
    assert sprite(world, player)["flip"]  # standing keeps the last facing


def test_events_are_per_tick_and_name_what_happened() -> None:
    world, player = platformer()
    world.resources["input"] = {"jump": True, "shoot": True}
    world.step(DT)
    kinds = [k for k, _, _ in events(world)]
    assert kinds == ["jump", "shoot"]
    _, ex, ey = events(world, "jump")[0]
    # Where: the player's position after the tick, to within one tick of movement.
    pos = world.get(player, Position)
    assert abs(ex - float(pos["x"])) < 0.01 and abs(ey - float(pos["y"])) < 0.5
    world.resources["input"] = {}
    world.step(DT)
    assert events(world) == []  # cleared every tick


def test_pickups_and_hits_leave_a_short_effect() -> None:
    world, player = platformer()
    prefabs = stock_prefabs()
    prefabs.instantiate(world, "coin", x=5.5, y=1.8)
    world.step(DT)
    assert [k for k, _, _ in events(world)] == ["coin"]
    with world.query(Sprite, Lifetime, Position, readonly=(Sprite, Lifetime, Position)) as q:
        assert len(q) == 1
        assert q[Sprite]["sheet"][0] == sheet_index("sparkle")
        assert np.allclose([q[Position]["x"][0], q[Position]["y"][0]], [5.5, 1.8])
    for _ in range(int(EFFECT_SECONDS / DT) + 2):
        world.step(DT)
    assert world.count(Lifetime) == 0  # gone after EFFECT_SECONDS
    enemy = prefabs.instantiate(world, "enemy", x=5.2, y=1.5, speed=0)
    world.step(DT)
    assert "hurt" in [k for k, _, _ in events(world)]
    assert world.count(Lifetime) == 1  # the hurt burst
    assert world.get(enemy, Health)["hp"] == 2


def test_invulnerable_entities_blink() -> None:
    world, player = platformer()
    world.get(player, Health)["invulnerable"] = 1.0
    blinks = []
    for _ in range(30):
        world.step(DT)
        blinks.append(sprite(world, player)["blink"])
    assert any(blinks) and not all(blinks)
    world.get(player, Health)["invulnerable"] = 0.0
    world.step(DT)
    assert not sprite(world, player)["blink"]


def test_reaching_the_flag_wins_once() -> None:
    world, player = platformer()
    stock_prefabs().instantiate(world, "flag", x=8.0, y=2.0)
    world.resources["input"] = {"right": True}
    goals = 0
    for _ in range(60):
        world.step(DT)
        goals += len(events(world, "goal"))
    assert goals == 1
    assert 0 < world.resources[WON_AT] <= world.tick


def test_a_player_at_zero_hp_is_down_once_and_stays_put() -> None:
    world, player = platformer()
    world.get(player, Health)["hp"] = 1
    stock_prefabs().instantiate(world, "enemy", x=5.3, y=1.5, speed=0)
    world.step(DT)
    assert [k for k, _, _ in events(world, "hurt", "down")] == ["hurt", "down"]
    assert world.get(player, Health)["hp"] == 0
    x = float(world.get(player, Position)["x"])
    world.resources["input"] = {"right": True, "jump": True, "shoot": True}
    downs = 0
    for _ in range(30):
        world.step(DT)
        downs += len(events(world, "down", "jump", "shoot", "hurt"))
    assert downs == 0
    assert world.is_alive(player) and world.count(Player) == 1
    assert float(world.get(player, Position)["x"]) == x
    assert float(world.get(player, Velocity)["x"]) == 0.0
    assert np.isclose(float(world.get(player, Health)["hp"]), 0)


def test_a_long_message_is_shortened_to_fit_the_screen() -> None:
    """A load failure naming a long path ran off both sides of the window."""
    from ecs_engine.demo.hud import fit_line

    text = "load failed: /tmp/a/very/long/path/slot3.sav: truncated: the file ends early"
    short = fit_line(text, 40)
    assert len(short) == 40 and short.startswith("load failed: ") and short.endswith("early")
    assert "…" in short and fit_line("saved slot 1", 40) == "saved slot 1"


def test_end_screen_offers_f9_only_for_a_filled_slot_and_a_file_as_save_dir_is_named(
        tmp_path: Path) -> None:
    from ecs_engine.demo import Game
    from ecs_engine.demo.hud import end_lines

    not_a_folder = tmp_path / "saves"
    not_a_folder.write_text("x")
    game = Game(seed=0, save_dir=not_a_folder)
    assert not game.save_file()
    assert game.message == f"save failed: {not_a_folder} is a file, not a folder for saves"
    with game.world.query(Player, readonly=(Player,)) as q:
        player = int(q.entities[0])
    game.world.get(player, Health)["hp"] = 0  # down: the game-over screen
    game.tick()
    assert game.outcome == "lost"
    lines = end_lines(game)
    assert lines is not None and "F9" not in lines[2]
    game.quicksave()
    lines = end_lines(game)
    assert lines is not None and f"F9: load slot {game.slot}" in lines[2]
