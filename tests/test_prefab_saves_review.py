"""Prefab-owned fields and blueprints across game updates (an outside review's cases):
a widened field re-derives in its new type, a load's registry becomes the world's, an
instance of a prefab from another registry saves and loads, a renamed prefab's alias
finds its old saves, and an in-memory blueprint of a renamed class migrates."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ecs_engine import Blueprint, PrefabRegistry, World, component, field
from ecs_engine.prefab import prefab_id


@component(name="ReviewWalker")
class Walker:
    speed: np.float32 = field(default=2.0, prefab=True)
    dmg: np.int16 = field(default=1, prefab=True)
    hp: np.int16 = 3


def registry(name: str = "gob", speed: float = 2.0, dmg: int = 1,
             aliases: tuple[str, ...] = ()) -> PrefabRegistry:
    prefabs = PrefabRegistry()
    prefabs.register(name, Walker(speed=speed, dmg=dmg), aliases=list(aliases))
    return prefabs


def test_a_widened_field_takes_the_new_prefab_value_in_its_new_type(tmp_path: Path) -> None:
    world = World()
    keys = registry().instantiate_batch(world, "gob", count=2)
    world.save(tmp_path / "v1.sav")

    @component(name="ReviewWalker")  # the next release widens both fields and rebalances
    class Walker2:
        speed: np.float64 = field(default=2.0, prefab=True)
        dmg: np.int32 = field(default=1, prefab=True)
        hp: np.int16 = 3

    update = PrefabRegistry()
    update.register("gob", Walker2(speed=0.1, dmg=100_000))
    loaded = World()
    loaded.register(Walker2)
    loaded.load(tmp_path / "v1.sav", prefabs=update)
    for key in keys:
        assert loaded.get(int(key), Walker2)["dmg"] == 100_000  # not "does not fit int16"
        assert loaded.get(int(key), Walker2)["speed"] == 0.1  # not float32's 0.100000001


def test_a_load_with_a_registry_makes_it_the_worlds(tmp_path: Path) -> None:
    """Later saves compare against the registry the state was derived from: rows
    re-derived from it are not taken for gameplay's overrides."""
    world = World()
    key = registry(speed=2.0).instantiate(world, "gob")
    world.save(tmp_path / "a.sav")
    v2 = registry(speed=2.5)
    world.load(tmp_path / "a.sav", prefabs=v2)
    assert world.prefabs is v2
    world.save(tmp_path / "b.sav")
    later = World()
    later.register(Walker)
    later.load(tmp_path / "b.sav", prefabs=registry(speed=3.0))
    assert later.get(key, Walker)["speed"] == 3.0


def test_an_instance_of_another_registrys_prefab_saves_and_loads(tmp_path: Path) -> None:
    world = World()
    gob = registry("gob", speed=2.0).instantiate(world, "gob")
    orc = registry("orc", speed=5.0).instantiate(world, "orc")  # not in world.prefabs
    before = world.state_hash()
    world.save(tmp_path / "mixed.sav")
    world.load(tmp_path / "mixed.sav")
    assert world.state_hash() == before
    assert (world.get(gob, Walker)["speed"], world.get(orc, Walker)["speed"]) == (2.0, 5.0)


def test_a_renamed_prefab_finds_its_old_saves_through_an_alias(tmp_path: Path) -> None:
    world = World()
    key = registry("gob", speed=2.0).instantiate(world, "gob")
    world.save(tmp_path / "old.sav")
    renamed = registry("goblin", speed=2.5, aliases=("gob",))
    loaded = World()
    loaded.register(Walker)
    loaded.load(tmp_path / "old.sav", prefabs=renamed)
    assert loaded.get(key, Walker)["speed"] == 2.5
    # The instance now belongs to "goblin": the next update reaches it through its new id.
    loaded.save(tmp_path / "new.sav")
    final = World()
    final.register(Walker)
    final.load(tmp_path / "new.sav", prefabs=registry("goblin", speed=4.0))
    assert final.get(key, Walker)["speed"] == 4.0
    assert prefab_id("goblin") != prefab_id("gob")


@component(name="ReviewOld")
class Old:
    v: np.int32 = 0


@component(name="ReviewNew", formerly=("ReviewOld",))
class New:
    v: np.int32 = 0


def test_an_in_memory_blueprint_of_a_renamed_class_migrates_as_from_a_file() -> None:
    source = World()
    source.spawn(Old(v=5))
    blueprint = source.extract(source.entities())
    for bp in (blueprint, Blueprint.from_bytes(blueprint.to_bytes())):
        world = World()
        world.register(New)
        world.instantiate(bp)
        assert world.component_types == (New,) or set(world.component_types) == {New}
        assert world.count(New) == 1


@component(name="ReviewTimer")
class Timer:
    ms: np.int32 = field(default=100, prefab=True)


def test_a_converted_field_converts_saved_values_but_takes_the_prefab_value_as_it_is(
        tmp_path: Path) -> None:
    """The rows are migrated to the current schema before the current prefab values are
    written: a saved override goes through the converter, a re-derived value does not
    (it is already in today's units)."""
    prefabs = PrefabRegistry()
    prefabs.register("t", Timer(ms=500))
    world = World()
    keys = prefabs.instantiate_batch(world, "t", count=2)
    world.add(int(keys[1]), Timer(ms=300))  # gameplay's own value: saved
    world.save(tmp_path / "ms.sav")

    @component(name="ReviewTimer", convert={"ms": lambda ms: ms / 1000.0})
    class Seconds:
        ms: np.float32 = field(default=0.1, prefab=True)  # now in seconds

    update = PrefabRegistry()
    update.register("t", Seconds(ms=2.0))
    loaded = World()
    loaded.register(Seconds)
    loaded.load(tmp_path / "ms.sav", prefabs=update)
    assert loaded.get(int(keys[0]), Seconds)["ms"] == 2.0  # not 0.002
    assert loaded.get(int(keys[1]), Seconds)["ms"] == np.float32(0.3)  # converted


def test_a_renamed_prefab_s_instances_take_its_id_even_when_all_overridden(
        tmp_path: Path) -> None:
    world = World()
    key = registry("gob").instantiate(world, "gob")
    world.add(key, Walker(speed=9.0, dmg=9, hp=1))  # every prefab-owned field overridden
    world.save(tmp_path / "all.sav")
    loaded = World()
    loaded.register(Walker)
    loaded.load(tmp_path / "all.sav", prefabs=registry("goblin", aliases=("gob",)))
    from ecs_engine.prefab import PrefabOf

    assert int(loaded.get(key, PrefabOf)["id"]) == prefab_id("goblin")
    assert loaded.get(key, Walker)["speed"] == 9.0
