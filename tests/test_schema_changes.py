"""Schema changes users make, loaded from a save an older schema wrote (tests/data)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ecs_engine import SaveFileError, SchemaChangeWarning, World, component

OLD_SAVE = Path(__file__).resolve().parent / "data" / "schema_v1.sav"


def rows(world: World, ctype: type) -> np.ndarray:
    with world.query(ctype, readonly=(ctype,)) as q:
        return q[ctype][np.argsort(q.entities)].copy()


def load(*types: type) -> World:
    world = World()
    world.register(*types)
    world.load(OLD_SAVE)
    return world


@component(name="Coins")
class Coins:
    amount: np.int32 = 0


@component(name="Level")
class Level:
    value: np.float32 = 0.0


@component(name="Box")
class Box:
    w: np.float32 = 1.0
    h: np.float32 = 1.0


def test_a_declared_field_rename_keeps_the_values() -> None:
    @component(name="Stats", renamed={"move_speed": "speed"})
    class Stats:
        move_speed: np.float32 = 2.5
        hp: np.int16 = 3

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is lost: no warning
        world = load(Stats, Coins, Level, Box)
    np.testing.assert_array_equal(rows(world, Stats)["move_speed"], [9, 8, 7])
    np.testing.assert_array_equal(rows(world, Stats)["hp"], [1, 2, 3])


def test_an_undeclared_rename_warns_naming_both_sides() -> None:
    @component(name="Stats")
    class Stats:
        move_speed: np.float32 = 2.5
        hp: np.int16 = 3

    with pytest.warns(SchemaChangeWarning) as caught:
        world = load(Stats, Coins, Level, Box)
    text = str(caught[0].message)
    assert "['speed']" in text and "dropped" in text
    assert "['move_speed']" in text and "defaults" in text and "renamed=" in text
    np.testing.assert_array_equal(rows(world, Stats)["move_speed"], [2.5] * 3)


def test_a_renamed_class_loads_with_formerly() -> None:
    @component(name="Stats")
    class Stats:
        speed: np.float32 = 2.5
        hp: np.int16 = 3

    @component(formerly="Coins")
    class Gold:
        amount: np.int32 = 0

    world = load(Stats, Gold, Level, Box)
    np.testing.assert_array_equal(rows(world, Gold)["amount"], [5, 6, 7])
    again = World()
    again.register(Stats, Gold, Level, Box)
    again.restore(world.snapshot())  # saved again under its new name
    np.testing.assert_array_equal(rows(again, Gold)["amount"], [5, 6, 7])


def test_an_unknown_component_hints_at_names_and_renames() -> None:
    @component(name="Stats")
    class Stats:
        speed: np.float32 = 2.5
        hp: np.int16 = 3

    @component
    class Gold:
        amount: np.int32 = 0

    world = World()
    world.register(Stats, Gold, Level, Box)
    with pytest.raises(SaveFileError, match=r"unknown component 'Coins'.*name='Coins'.*formerly"):
        world.load(OLD_SAVE)
    assert len(world) == 0


def _stats() -> type:
    @component(name="Stats")
    class Stats:
        speed: np.float32 = 2.5
        hp: np.int16 = 3

    return Stats


def test_narrowing_is_refused_without_a_converter() -> None:
    @component(name="Level")
    class Narrow:
        value: np.int8 = 0

    with pytest.raises(SaveFileError, match=r"'value'.*float32.*int8.*convert="):
        load(_stats(), Coins, Narrow, Box)


def test_narrowing_with_a_converter_still_refuses_values_that_do_not_fit() -> None:
    @component(name="Level", convert={"value": np.rint})
    class Rounded:
        value: np.int8 = 0

    world = load(_stats(), Coins, Rounded, Box)
    np.testing.assert_array_equal(rows(world, Rounded)["value"], [1, 2, 127])

    @component(name="Level", convert={"value": lambda v: np.rint(v) * 2})
    class Doubled:
        value: np.int8 = 0

    world = World()
    world.register(_stats(), Coins, Doubled, Box)
    before = world.snapshot()
    with pytest.raises(SaveFileError, match=r"1 converted value.s. do not fit int8 \(row 2: \[254"):
        world.load(OLD_SAVE)
    assert world.snapshot().entity_count == before.entity_count == 0


def test_a_migrate_hook_rebuilds_rows_column_at_once() -> None:
    calls: list[int] = []

    def to_area(old: np.ndarray) -> dict[str, Any]:
        calls.append(len(old))
        return {"area": old["w"] * old["h"], "sides": 4}

    @component(name="Box", migrate=to_area)
    class Area:
        area: np.float32 = 0.0
        sides: np.uint8 = 0

    with pytest.warns(SchemaChangeWarning, match=r"\['w', 'h'\]"):
        world = load(_stats(), Coins, Level, Area)
    assert calls == [3]
    np.testing.assert_array_equal(rows(world, Area)["area"], [2, 4, 6])
    np.testing.assert_array_equal(rows(world, Area)["sides"], [4, 4, 4])


def test_a_failing_hook_names_the_component_and_changes_nothing() -> None:
    def broken(old: np.ndarray) -> dict[str, Any]:
        raise RuntimeError("boom")

    @component(name="Box", migrate=broken)
    class Area:
        area: np.float32 = 0.0

    world = World()
    world.register(_stats(), Coins, Level, Area)
    with pytest.raises(SaveFileError, match="'Box'.*migrate hook raised RuntimeError: boom"):
        world.load(OLD_SAVE)
    assert len(world) == 0


def test_declarations_are_checked_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="not fields"):
        @component(renamed={"nope": "old"})
        class Bad:
            x: np.float32 = 0.0
    with pytest.raises(TypeError, match=r"current field to the name old saves use \(the "
                                        r"other way round: renamed=\{'speed': 'move_speed'\}"):
        @component(renamed={"move_speed": "speed"})  # old -> new: the wrong way round
        class Flipped:
            speed: np.float32 = 0.0
    with pytest.raises(TypeError, match="not fields"):
        @component(convert={"nope": np.rint})
        class Bad2:
            x: np.float32 = 0.0
