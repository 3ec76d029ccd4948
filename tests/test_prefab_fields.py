"""Prefab-owned fields: saves keep what differs from the prefab; loads re-derive the rest."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecs_engine import PrefabRegistry, SaveFileError, Snapshot, World, component, field
from ecs_engine.prefab import PrefabOf, prefab_id
from ecs_engine.prefab_fields import RESERVED


@component(name="pf.Stats")
class Stats:
    speed: np.float32 = field(default=2.5, prefab=True)
    damage: np.int16 = field(default=1, prefab=True)
    hp: np.int16 = 3


@component(name="pf.Pos")
class Pos:
    x: np.float32 = 0.0


@component(name="pf.Bag")
class Bag:
    slots: np.uint8 = field(shape=4, prefab=True)


def registry(speed: float = 4.0, damage: int = 2, slots: tuple[int, ...] = (1, 2, 3, 4),
             order: int = 1) -> PrefabRegistry:
    reg = PrefabRegistry()
    prefabs = [("enemy", (Stats(speed=speed, damage=damage, hp=5), Pos())),
               ("chest", (Bag(slots=np.array(slots, np.uint8)), Pos()))]
    for name, comps in prefabs[::order]:
        reg.register(name, *comps)
    return reg


def column(world: World, ctype: type, name: str) -> np.ndarray:
    with world.query(ctype, readonly=(ctype,)) as q:
        order = np.argsort(q.entities)
        return q[ctype][name][order].copy()


def fresh() -> World:
    world = World()
    world.register(Stats, Pos, Bag, PrefabOf)
    return world


@pytest.fixture()
def saved(tmp_path: Path) -> tuple[Path, np.ndarray]:
    world = World(seed=1)
    reg = registry()
    enemies = reg.instantiate_batch(world, "enemy", count=4, x=[0, 1, 2, 3])
    reg.instantiate(world, "enemy", speed=9.0)  # a level parameter: an override
    world.spawn(Stats(speed=7.0), Pos())  # no prefab: all its data is its own
    reg.instantiate_batch(world, "chest", count=2)
    world.get(enemies[1], Stats)["damage"] = 5  # a gameplay write: an override
    world.get(enemies[2], Stats)["hp"] = 1  # instance data
    path = tmp_path / "game.sav"
    world.save(path)
    return path, enemies


def test_an_update_to_a_prefab_reaches_old_saves(saved: tuple[Path, np.ndarray]) -> None:
    path, _ = saved
    world = fresh()
    world.load(path, prefabs=registry(speed=5.5, damage=3, slots=(9, 9, 9, 9)))
    # enemies 0-3 take the new speed; the level parameter (9) and the no-prefab entity (7) stay
    np.testing.assert_array_equal(column(world, Stats, "speed"), [5.5] * 4 + [9.0, 7.0])
    # the gameplay write (5) survives; every other enemy takes the new damage
    np.testing.assert_array_equal(column(world, Stats, "damage"), [3, 5, 3, 3, 3, 1])
    np.testing.assert_array_equal(column(world, Stats, "hp"), [5, 5, 1, 5, 5, 3])  # instance
    np.testing.assert_array_equal(column(world, Bag, "slots"), [[9, 9, 9, 9]] * 2)


def test_without_a_registry_the_file_restores_exactly(saved: tuple[Path, np.ndarray]) -> None:
    path, _ = saved
    world = fresh()
    world.load(path)
    np.testing.assert_array_equal(column(world, Stats, "speed"), [4, 4, 4, 4, 9, 7])
    np.testing.assert_array_equal(column(world, Stats, "damage"), [2, 5, 2, 2, 2, 1])
    np.testing.assert_array_equal(column(world, Bag, "slots"), [[1, 2, 3, 4]] * 2)
    snap = Snapshot.load(path)
    assert RESERVED not in snap.resources
    assert {s.name for s in snap.stores} == {"pf.Stats", "pf.Pos", "pf.Bag", "PrefabOf"}


def test_the_file_stores_only_overriding_rows(saved: tuple[Path, np.ndarray]) -> None:
    from ecs_engine.savefile import read_file

    raw = read_file(saved[0])
    by_name = {s.name: s for s in raw.stores}
    assert "speed" not in (by_name["pf.Stats"].data.dtype.names or ())
    assert by_name["pf.Stats#speed"].n == 2  # the level parameter and the no-prefab entity
    assert by_name["pf.Stats#damage"].n == 2  # the gameplay write and the no-prefab entity
    assert by_name["pf.Bag#slots"].n == 0


def test_registry_order_does_not_matter(saved: tuple[Path, np.ndarray]) -> None:
    world = fresh()
    world.load(saved[0], prefabs=registry(speed=1.0, order=-1))
    np.testing.assert_array_equal(column(world, Stats, "speed"), [1, 1, 1, 1, 9, 7])
    found = registry(order=-1).by_id(prefab_id("enemy"))
    assert found is not None and found.name == "enemy"


def test_a_prefab_the_registry_lost_is_an_error_and_changes_nothing(
        saved: tuple[Path, np.ndarray]) -> None:
    world = fresh()
    world.spawn(Pos(x=42.0))
    before = world.snapshot()
    reg = PrefabRegistry()
    reg.register("chest", Bag(), Pos())
    with pytest.raises(SaveFileError, match="'enemy'.*no longer has"):
        world.load(saved[0], prefabs=reg)
    after = world.snapshot()
    assert after.entity_count == before.entity_count == 1
    np.testing.assert_array_equal(column(world, Pos, "x"), [42.0])


def test_in_memory_snapshots_stay_exact() -> None:
    world = World()
    reg = registry()
    reg.instantiate_batch(world, "enemy", count=3)
    snap = world.snapshot()
    world.step(0.1)
    world.restore(snap)
    np.testing.assert_array_equal(column(world, Stats, "speed"), [4, 4, 4])
    again = Snapshot.from_bytes(snap.to_bytes())  # no registry: every value as it is
    other = fresh()
    other.restore(again)
    np.testing.assert_array_equal(column(other, Stats, "speed"), [4, 4, 4])


def test_instantiated_entities_remember_their_prefab() -> None:
    world = World()
    reg = registry()
    one = reg.instantiate(world, "Enemy")  # look-ups are case-insensitive; the id is not
    assert int(world.get(one, PrefabOf)["id"]) == prefab_id("enemy")
    assert world.prefabs is reg
    with pytest.raises(Exception, match="added by the registry"):
        reg.register("bad", PrefabOf(id=1))


def test_a_corrupt_prefab_table_is_a_save_file_error(saved: tuple[Path, np.ndarray],
                                                     tmp_path: Path) -> None:
    from ecs_engine.savefile import read_file, write_file

    raw = read_file(saved[0])
    table = dict(raw.resources[RESERVED])
    table["values"] = {"pf.Stats.speed": {"12": [1.0]}}  # values for an unknown field
    import dataclasses

    broken = dataclasses.replace(raw, resources={**raw.resources, RESERVED: table})
    bad = tmp_path / "bad.sav"
    write_file(bad, broken)
    with pytest.raises(SaveFileError):
        fresh().load(bad)
    assert msgpack  # the format stays plain msgpack (see SAVE_FORMAT.md)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([None, 0.5, 4.0, 11.0])),
                min_size=1, max_size=12),
       st.floats(min_value=-100, max_value=100, width=32))
def test_model(entities: list[tuple[bool, float | None]], new_speed: float) -> None:
    """Random worlds against a model: a row follows the new prefab iff it came from a
    prefab and nobody changed it; every other row keeps its own value."""
    import tempfile

    world = World()
    reg = registry()
    expected: list[float] = []
    for from_prefab, write in entities:
        key = reg.instantiate(world, "enemy") if from_prefab else world.spawn(Stats(speed=2.5))
        own = 4.0 if from_prefab else 2.5
        if write is not None:
            world.get(key, Stats)["speed"] = write
            own = write
        follows = from_prefab and own == 4.0
        expected.append(float(np.float32(new_speed)) if follows else own)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.sav"
        world.save(path)
        loaded = fresh()
        loaded.load(path, prefabs=registry(speed=new_speed))
    np.testing.assert_array_equal(column(loaded, Stats, "speed"),
                                  np.array(expected, np.float32))


def test_the_demo_picks_up_a_rebalanced_enemy_from_an_old_save(tmp_path: Path) -> None:
    """Stock prefabs declare tuning as prefab data: a new enemy speed reaches a save."""
    from ecs_engine.components import Enemy, Patrol, stock_prefabs
    from ecs_engine.demo.game import Game

    game = Game("demo", save_dir=tmp_path)
    for _ in range(5):
        game.tick()
    assert game.save_file()
    with game.world.query(Patrol, Enemy, readonly=(Patrol, Enemy)) as q:
        saved_speed = q[Patrol]["speed"].copy()
    assert len(saved_speed) > 0

    rebalanced = stock_prefabs()
    enemy = rebalanced["enemy"]
    comps = [Patrol(speed=11.0) if isinstance(c, Patrol) else c for c in enemy.components]
    patched = PrefabRegistry()
    for name in rebalanced.names:
        p = rebalanced[name]
        patched.register(name, *(comps if name == "enemy" else p.components),
                         aliases=p.aliases)
    later = Game("demo", save_dir=tmp_path)
    later.prefabs = patched
    assert later.load_file(), later.message
    with later.world.query(Patrol, Enemy, readonly=(Patrol, Enemy)) as q:
        speeds = q[Patrol]["speed"]
        # level parameters (the .lvl gives some enemies their own speed) are overrides
        level_set = saved_speed != np.float32(4.0)
        np.testing.assert_array_equal(speeds[~level_set], 11.0)
        np.testing.assert_array_equal(speeds[level_set], saved_speed[level_set])


def test_a_negative_zero_over_a_zero_prefab_value_survives_a_save(tmp_path: Path) -> None:
    """Overrides were found by value (-0.0 == 0.0), so the sign was lost on every load."""
    reg = PrefabRegistry()
    reg.register("still", Stats(speed=0.0), Pos())
    world = World(seed=1)
    world.prefabs = reg
    keys = reg.instantiate_batch(world, "still", count=3)
    world.get(keys[1], Stats)["speed"] = -0.0
    world.get(keys[2], Stats)["speed"] = float("nan")
    world.save(tmp_path / "z.sav")
    for registry in (None, reg):
        loaded = fresh()
        loaded.load(tmp_path / "z.sav", prefabs=registry)
        assert loaded.state_hash() == world.state_hash()
        speed = column(loaded, Stats, "speed")
        assert np.signbit(speed).tolist() == [False, True, False] and np.isnan(speed[2])


@pytest.mark.parametrize("value", [{"names": {}, "values": {}, "order": {}}, "user data"])
def test_the_reserved_resource_key_is_refused_by_every_save(tmp_path: Path,
                                                             value: object) -> None:
    """Without prefab-owned fields (or without a registry) the key was written, and the
    load then took it for the prefab table: a dict vanished, anything else made the
    game's own save unloadable."""
    world = World()
    world.spawn(Pos())
    world.resources[RESERVED] = value
    for save in (lambda: world.save(tmp_path / "r.sav"),
                 lambda: world.snapshot().save(tmp_path / "r.sav"),
                 lambda: world.snapshot().save(tmp_path / "r.sav", prefabs=registry()),
                 lambda: world.snapshot().to_bytes()):
        with pytest.raises(TypeError, match="resources may not use the key"):
            save()
        assert not (tmp_path / "r.sav").exists()


def test_a_malformed_prefab_table_names_the_file(saved: tuple[Path, np.ndarray],
                                                 tmp_path: Path) -> None:
    """The table is read before the load's other checks; its errors name the file too."""
    from ecs_engine.prefab_fields import split
    from ecs_engine.savefile import write_file

    table_snap = split(Snapshot.load(saved[0]), registry())
    bad = tmp_path / "bad.sav"
    write_file(bad, dataclasses.replace(table_snap, resources={**table_snap.resources,
                                                                RESERVED: "not a table"}))
    world = fresh()
    with pytest.raises(SaveFileError, match=f"{bad}: .*prefab table"):
        world.load(bad)
    assert len(world) == 0
