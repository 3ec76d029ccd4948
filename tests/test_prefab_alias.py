"""Prefab aliases: PrefabRegistry.alias, suggestions in unknown-prefab errors, and the thesis'
own level file (Figure 4.2.5 names its player ``ImpulsePlayerSerializer``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ecs_engine import PrefabError, PrefabRegistry, World
from ecs_engine.components import Player, Position, Solid, stock_prefabs
from ecs_engine.levels import LevelError, load_level


def test_alias_adds_names_case_insensitively() -> None:
    reg = stock_prefabs()
    prefab = reg.alias("enemy", "Mob", "Fighter")
    assert prefab.aliases[-2:] == ("Mob", "Fighter")
    assert reg["mob"].name == "enemy" and reg.resolve("FIGHTER") is reg["enemy"]
    assert reg.alias("walker", "mob").aliases == prefab.aliases  # an alias finds it; no dupes
    with pytest.raises(PrefabError, match="'coin'.*already registered.*'coin'"):
        reg.alias("enemy", "coin")
    with pytest.raises(PrefabError, match="non-empty"):
        reg.alias("enemy", " ")
    with pytest.raises(PrefabError, match="unknown prefab 'dragon'"):
        reg.alias("dragon", "wyrm")


def test_aliases_are_per_registry() -> None:
    a, b = stock_prefabs(), stock_prefabs()
    a.alias("coin", "Gold")
    assert "gold" in a and "gold" not in b


def test_unknown_prefab_lists_aliases_and_suggests_the_closest() -> None:
    reg = stock_prefabs()
    with pytest.raises(PrefabError) as info:
        reg["ImpulsPlayer"]
    text = str(info.value)
    assert "did you mean 'ImpulsePlayer', an alias of 'player'?" in text
    assert "player (aliases: player_start, start, ImpulsePlayer)" in text
    with pytest.raises(PrefabError) as info:
        reg["enemmy"]
    assert "did you mean 'enemy'?" in str(info.value)
    with pytest.raises(PrefabError) as info:
        reg["zzzzzz"]
    assert "did you mean" not in str(info.value)
    assert ("known prefabs are ammo (aliases: ammo_pack), brick (aliases: brick1, brick_tile), "
            "coin") in str(info.value)


def thesis_figure_level(folder: Path) -> Path:
    """The thesis' Figure 4.2.5 layout: version 0, C# serializer names."""
    from PIL import Image

    folder.mkdir()
    doc = {"version": 0, "layer_names": ["layer1"],
           "layer_params": [{"position": {"x": 0, "y": 0}}],
           "obj_colors": [{"r": 0, "g": 0, "b": 0, "a": 255}],
           "obj_prefabs": [{"$type": "Ground1Serializer"}],
           "spr_colors": [{"r": 255, "g": 0, "b": 0, "a": 255}],
           "spr_prefabs": [{"$type": "ImpulsePlayerSerializer"}]}
    (folder / "level.lvl").write_text(json.dumps(doc))
    geo = np.zeros((3, 4, 4), np.uint8)
    geo[2, :] = (0, 0, 0, 255)
    spr = np.zeros((3, 4, 4), np.uint8)
    spr[1, 1] = (255, 0, 0, 255)
    for kind, arr in (("geometry", geo), ("sprites", spr)):
        (folder / kind).mkdir()
        Image.fromarray(arr).save(folder / kind / "layer1.png")
    return folder


def test_thesis_serializer_names_load_with_the_stock_prefabs(tmp_path: Path) -> None:
    world = World()
    summary = load_level(world, thesis_figure_level(tmp_path / "fig"), stock_prefabs())
    assert summary.entity_counts == {"ground": 1, "player": 1}
    assert summary.player_start == (1.5, 1.5)
    assert world.count(Player) == 1 and world.count(Solid) == 1
    with world.query(Player, Position) as q:
        assert q[Position]["y"][0] == 1.5


def test_unknown_prefab_in_a_level_suggests_the_closest(tmp_path: Path) -> None:
    bare = PrefabRegistry()
    for name in ("ground", "player"):
        bare.register(name, *stock_prefabs()[name].components)
    bare.alias("ground", "Ground1")
    world = World()
    with pytest.raises(LevelError) as info:
        load_level(world, thesis_figure_level(tmp_path / "fig"), bare)
    assert "unknown prefab 'ImpulsePlayer'" in str(info.value)
    assert "did you mean 'player'?" in str(info.value)
    assert len(world) == 0
    bare.alias("player", "ImpulsePlayer")
    assert load_level(world, tmp_path / "fig", bare).entity_counts["player"] == 1
