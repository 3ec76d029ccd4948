"""Prefab registry: instantiate by label, aliases, parameter errors, duplicate names."""

from __future__ import annotations

import numpy as np
import pytest

from ecs_engine import PrefabError, PrefabRegistry, World, component
from ecs_engine.components import (
    Collider,
    Color,
    Enemy,
    Health,
    Patrol,
    Position,
    Tile,
    stock_prefabs,
)


def test_instantiate_sets_params_by_label() -> None:
    reg = stock_prefabs()
    world = World()
    e = reg.instantiate(world, "enemy", x=3, y=4, speed=2.5, hp=7)
    assert world.get(e, Position)["x"] == 3 and world.get(e, Position)["y"] == 4
    assert world.get(e, Patrol)["speed"] == np.float32(2.5)
    assert world.get(e, Health)["hp"] == 7
    assert world.get(e, Health)["max_hp"] == 2  # untouched fields keep the prefab default
    assert world.has(e, Enemy)


def test_instantiate_batch_arrays_and_scalars() -> None:
    reg = stock_prefabs()
    world = World()
    xs = np.arange(5, dtype=np.float64)
    keys = reg.instantiate_batch(world, "ground", x=xs, y=1.5, w=xs + 1, h=2)
    assert len(keys) == 5 and len(world) == 5
    with world.query(Position, Collider, Tile) as q:
        order = np.argsort(q[Position]["x"])
        np.testing.assert_array_equal(q[Position]["x"][order], xs)
        np.testing.assert_array_equal(q[Collider]["w"][order], xs + 1)
        assert np.all(q[Position]["y"] == 1.5) and np.all(q[Collider]["h"] == 2)
        assert np.all(q[Tile]["kind"] == 0)


def test_instantiate_batch_count_without_arrays() -> None:
    reg = stock_prefabs()
    world = World()
    keys = reg.instantiate_batch(world, "coin", count=3, x=1, y=2)
    assert len(keys) == 3
    assert world.count(Position) == 3


def test_dotted_component_field_works_too() -> None:
    reg = stock_prefabs()
    world = World()
    e = reg.instantiate(world, "player", **{"Position.x": 9.0})
    assert world.get(e, Position)["x"] == 9.0


@pytest.mark.parametrize("alias", ["ground1", "GROUND1", "Ground_Tile", "ground"])
def test_aliases_case_insensitive(alias: str) -> None:
    reg = stock_prefabs()
    assert alias in reg
    assert reg[alias].name == "ground"
    assert reg.resolve(alias) is reg["ground"]


def test_player_start_and_enemy1_aliases() -> None:
    reg = stock_prefabs()
    assert reg["Player_Start"].name == "player"
    assert reg["ENEMY1"].name == "enemy"
    assert reg.resolve("no-such-thing") is None
    assert "no-such-thing" not in reg and 3 not in reg


def test_unknown_prefab_lists_known() -> None:
    reg = stock_prefabs()
    with pytest.raises(PrefabError) as info:
        reg.instantiate(World(), "dragon")
    msg = str(info.value)
    assert "dragon" in msg and "enemy" in msg and "coin" in msg


def test_unknown_param_names_prefab_param_and_allowed() -> None:
    reg = stock_prefabs()
    world = World()
    with pytest.raises(PrefabError) as info:
        reg.instantiate(world, "enemy", spede=3)
    msg = str(info.value)
    assert "'enemy'" in msg and "'spede'" in msg and "not a parameter" in msg
    assert "speed" in msg and "hp" in msg  # the allowed ones
    assert len(world) == 0


def test_a_label_two_components_share_is_named_ambiguous() -> None:
    # Pos.x and Vel.x are both labelled 'x': the error says so and names the dotted
    # forms, instead of claiming 'x' is no parameter and listing neither.
    @component
    class Pos:
        x: np.float32 = 0.0

    @component
    class Vel:
        x: np.float32 = 0.0

    reg = PrefabRegistry()
    reg.register("mover", Pos(), Vel(), Health())
    world = World()
    with pytest.raises(PrefabError) as info:
        reg.instantiate_batch(world, "mover", count=2, x=[1.0, 2.0])
    msg = str(info.value)
    assert "'mover'" in msg and "'x' is ambiguous" in msg
    assert "Pos.x" in msg and "Vel.x" in msg
    assert len(world) == 0
    keys = reg.instantiate_batch(world, "mover", count=2, **{"Pos.x": [1.0, 2.0]})
    assert world.get_batch(keys, Pos)["x"].tolist() == [1.0, 2.0]


def test_batch_lengths_that_disagree_name_the_prefab_and_parameters() -> None:
    reg = stock_prefabs()
    world = World()
    with pytest.raises(PrefabError, match=r"prefab 'enemy': instantiate_batch count=2 but "
                                          r"'hp' has 3 values"):
        reg.instantiate_batch(world, "enemy", count=2, hp=[1, 2, 3])
    with pytest.raises(PrefabError, match=r"prefab 'enemy': instantiate_batch array lengths "
                                          r"differ: 'x' has 2 values, 'hp' has 3 values"):
        reg.instantiate_batch(world, "enemy", x=[1.0, 2.0], hp=[1, 2, 3])
    assert len(world) == 0
    assert len(reg.instantiate_batch(world, "enemy", count=3, x=[1.0, 2.0, 3.0], hp=4)) == 3


def test_non_editable_param() -> None:
    reg = stock_prefabs()
    with pytest.raises(PrefabError) as info:
        reg.instantiate(World(), "player", facing=1)
    msg = str(info.value)
    assert "'player'" in msg and "'facing'" in msg and "not editable" in msg
    assert "jump" in msg


def test_wrong_type_names_prefab_and_field() -> None:
    reg = stock_prefabs()
    world = World()
    with pytest.raises(PrefabError) as info:
        reg.instantiate(world, "enemy", speed="fast")
    msg = str(info.value)
    assert "'enemy'" in msg and "speed" in msg
    with pytest.raises(PrefabError, match="hp"):
        reg.instantiate(world, "enemy", hp=2.5)  # int16 field
    # Value errors name the component field (Color.rgba), not the label ("color").
    with pytest.raises(PrefabError, match=r"Color\.rgba"):
        reg.instantiate(world, "coin", color=[1, 2, 3, 4, 5])  # shape 4
    with pytest.raises(PrefabError, match="range"):
        reg.instantiate(world, "coin", color=[1, 2, 3, 300])
    assert len(world) == 0


def test_instantiate_rejects_batches() -> None:
    reg = stock_prefabs()
    with pytest.raises(PrefabError, match="instantiate_batch"):
        reg.instantiate(World(), "coin", x=np.arange(3.0))


def test_duplicate_names_and_aliases() -> None:
    reg = PrefabRegistry()
    reg.register("rock", Position(), Collider(), aliases=("stone",))
    with pytest.raises(PrefabError, match="already registered"):
        reg.register("ROCK", Position())
    with pytest.raises(PrefabError, match="already registered"):
        reg.register("boulder", Position(), aliases=("Stone",))
    with pytest.raises(PrefabError, match="given twice"):
        reg.register("twice", Position(), Position())
    with pytest.raises(PrefabError, match="batch"):
        reg.register("batch", Position(x=np.arange(2.0)))
    assert reg.names == ["rock"]


def test_registry_defaults_are_per_prefab() -> None:
    reg = PrefabRegistry()
    reg.register("red", Position(), Color(rgba=[255, 0, 0, 255]))
    reg.register("blue", Position(), Color(rgba=[0, 0, 255, 255]))
    world = World()
    r = reg.instantiate(world, "red")
    b = reg.instantiate(world, "blue", color=[0, 0, 128, 255])
    assert list(world.get(r, Color)["rgba"]) == [255, 0, 0, 255]
    assert list(world.get(b, Color)["rgba"]) == [0, 0, 128, 255]


def test_two_registries_are_independent() -> None:
    a, b = stock_prefabs(), stock_prefabs()
    a.register("extra", Position())
    assert "extra" in a and "extra" not in b


def test_a_prefab_keeps_its_own_copy_of_the_arrays_it_was_given() -> None:
    """The registry kept the caller's arrays: changing one later changed the prefab, and
    every save re-derived from it."""
    from ecs_engine.components import Color

    rgba = np.array([255, 0, 0, 255], np.uint8)
    reg = PrefabRegistry()
    reg.register("red", Color(rgba=rgba))
    rgba[:] = [0, 0, 0, 255]
    world = World()
    key = reg.instantiate(world, "red")
    assert world.get(key, Color)["rgba"].tolist() == [255, 0, 0, 255]


def test_two_spellings_of_one_parameter_are_refused_not_resolved_by_order() -> None:
    from ecs_engine.components import stock_prefabs

    ground = stock_prefabs()["ground"]
    with pytest.raises(PrefabError, match=r"parameters 'tile' and 'Tile\.kind' set the same "
                                          r"field Tile\.kind; give it once"):
        ground.build({"tile": 1, "Tile.kind": 2})
    assert any(type(c).__name__ == "Tile" for c in ground.build({"Tile.kind": 2}))
