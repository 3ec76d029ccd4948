"""What users reach for first: alive / get_batch / set_batch / try_get, record attributes,
readable keys, and errors in the engine's terms on the query path."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest

from ecs_engine import NULL, Entity, World, component, field, format_key, make_key


@component
class Position:
    x: np.float32 = 0.0
    y: np.float32 = 0.0


@component
class Velocity:
    x: np.float32 = 0.0


@component
class Bullet:
    owner: Entity = NULL


@component
class Score:
    points: np.int32 = 0
    last: np.ndarray = field(np.int16, shape=2)


def make() -> tuple[World, Entity, Entity]:
    world = World()
    a = world.spawn(Position(x=1, y=2), Velocity(x=3), Score())
    b = world.spawn(Position(x=4, y=5), Score())
    return world, a, b


# -- alive -------------------------------------------------------------------------------
def test_alive_is_vectorised_is_alive_in_any_shape() -> None:
    world, a, b = make()
    dead = world.spawn()
    world.despawn(dead)
    keys = np.array([a, b, dead, NULL, make_key(99, 1)], np.uint64)
    expected = [True, True, False, False, False]
    assert world.alive(keys).tolist() == expected
    assert world.alive(keys).tolist() == [world.is_alive(int(k)) for k in keys]
    assert world.alive(keys.reshape(5, 1)).shape == (5, 1)
    assert world.alive([a, -1, 1 << 40]).tolist() == [True, False, False]  # no key: False
    assert world.alive(np.zeros(0, np.uint64)).shape == (0,)


def test_alive_refuses_what_are_not_keys() -> None:
    world, a, _ = make()
    for bad in ([1.0, 2.0], ["1"], [True, False], [a, None]):
        with pytest.raises(TypeError, match="alive: entity keys must be integers"):
            world.alive(bad)


@pytest.mark.parametrize(("op", "call", "batch"), [
    ("is_alive", lambda w, k: w.is_alive(k), "alive"),
    ("get", lambda w, k: w.get(k, Position), "get_batch"),
    ("try_get", lambda w, k: w.try_get(k, Position), "get_batch"),
    ("despawn", lambda w, k: w.despawn(k), "despawn_batch"),
])
def test_one_key_operations_given_an_array_point_to_the_batch_one(op: str, call: Any,
                                                                   batch: str) -> None:
    world, a, b = make()
    for keys in (np.array([a, b], np.uint64), [a, b]):
        with pytest.raises(TypeError, match=rf"{op}: .* of 2 keys is not an entity key; for "
                                            rf"many keys use world\.{batch}\(keys\)"):
            call(world, keys)
    assert world.is_alive(a) and world.is_alive(b)


# -- get_batch / set_batch ----------------------------------------------------------------
def test_get_batch_follows_references_in_bulk() -> None:
    world, a, b = make()
    world.spawn_batch(Bullet(owner=[a, b, a, a]))
    with world.query(Bullet, readonly=(Bullet,)) as q:
        owners = q[Bullet]["owner"]
        rows = world.get_batch(owners, Position)
    assert rows.dtype == world.store(Position).data.dtype
    assert rows["x"].tolist() == [1, 4, 1, 1] and rows["y"].tolist() == [2, 5, 2, 2]
    rows["x"] = 0  # a copy: the store is untouched
    assert world.get(a, Position).x == 1
    assert world.get_batch([], Velocity).shape == (0,)


def test_get_batch_names_dead_keys_and_keys_without_the_component() -> None:
    world, a, b = make()
    gone = world.spawn(Position())
    world.despawn(gone)
    with pytest.raises(KeyError, match=r"get_batch: 1 of 3 keys are not alive; first at "
                                       r"index 2: Entity\(slot=2, gen=1\) was despawned"):
        world.get_batch([a, b, gone], Position)
    with pytest.raises(KeyError, match=r"get_batch: 1 of 2 keys have no Velocity; first at "
                                       r"index 1: Entity\(slot=1, gen=1\)"):
        world.get_batch([a, b], Velocity)
    with pytest.raises(TypeError, match="get_batch: entity keys must be integers"):
        world.get_batch([1.5], Position)


def test_set_batch_writes_fields_rows_or_an_instance() -> None:
    world, a, b = make()
    world.set_batch([b, a], Position, {"x": [40, 10]})  # only x: y untouched
    assert world.get(a, Position).as_dict() == {"x": 10.0, "y": 2.0}
    assert world.get(b, Position).as_dict() == {"x": 40.0, "y": 5.0}
    world.set_batch([a, b], Position, {"y": 7})  # one value broadcasts
    assert world.get_batch([a, b], Position)["y"].tolist() == [7, 7]
    rows = world.get_batch([a, b], Position)
    rows["x"] += 1
    world.set_batch([a, b], Position, rows)  # read-modify-write round trip
    assert world.get_batch([a, b], Position)["x"].tolist() == [11, 41]
    world.set_batch([a, b], Position, Position(x=np.array([0.5, 1.5])))
    assert world.get_batch([a, b], Position)["x"].tolist() == [0.5, 1.5]
    world.set_batch([a, b], Score, {"last": [[1, 2], [3, 4]], "points": [5, 6]})
    assert world.get(b, Score)["last"].tolist() == [3, 4]
    assert world.get(b, Score).points == 6


@pytest.mark.parametrize(("keys", "values", "error", "match"), [
    ("dead", {"x": [1, 2]}, KeyError, "set_batch: 1 of 2 keys are not alive"),
    ("ab", {"xx": [1, 2]}, KeyError, r"Position has no field 'xx'; fields are \['x', 'y'\]"),
    ("ab", {"x": [1, 2, 3]}, ValueError, "Position.x has 3 values for 2 keys"),
    ("ab", {"x": ["a", "b"]}, ValueError, r"Position\.x: expected float32 values"),
    ("aa", {"x": [1, 2]}, ValueError,
     r"the same entity key appears more than once \(Entity\(slot=0, gen=1\) at indexes 0 "
     r"and 1\)"),
    ("ab", Velocity(x=1), TypeError, "got a Velocity, expected Position values"),
    ("ab", 5, TypeError, "give structured rows"),
    ("a_no_vel", {"x": [1, 2]}, KeyError, "1 of 2 keys have no Velocity"),
])
def test_set_batch_errors_leave_the_world_unchanged(keys: str, values: Any, error: type,
                                                    match: str) -> None:
    world, a, b = make()
    dead = world.spawn(Position())
    world.despawn(dead)
    key_list = {"dead": [a, dead], "ab": [a, b], "aa": [a, a], "a_no_vel": [a, b]}[keys]
    ctype = Velocity if keys == "a_no_vel" else Position
    before = world.state_hash()
    with pytest.raises(error, match=match):
        world.set_batch(key_list, ctype, values)
    assert world.get_batch([a, b], Position).tolist() == [(1.0, 2.0), (4.0, 5.0)]
    assert world.get(a, Velocity).x == 3
    assert world.state_hash() == before


def test_set_batch_is_seen_by_snapshots_and_restores() -> None:
    world, a, b = make()
    snap = world.snapshot()
    world.set_batch([a, b], Position, {"x": [100, 200]})
    later = world.snapshot()  # shares unchanged chunks with snap: the write must show
    assert later.store("Position").data["x"].tolist() == [100, 200]
    world.restore(snap)
    assert world.get_batch([a, b], Position)["x"].tolist() == [1, 4]
    world.restore(later)
    assert world.get_batch([a, b], Position)["x"].tolist() == [100, 200]


def test_batch_calls_inside_a_query_block() -> None:
    world, a, b = make()
    with world.query(Position, Velocity) as q:
        new = world.spawn(Position(x=9))
        with pytest.raises(KeyError, match=r"keys have no Position; first at index 0: "
                                           r"Entity\(slot=2, gen=1\) yet \(it was spawned "
                                           r"inside a query block"):
            world.get_batch([new], Position)
        world.despawn(b)
        with pytest.raises(KeyError, match="already being despawned"):
            world.get_batch([b], Position)
        world.set_batch([a], Position, {"y": 8})  # immediate, like world.get(a, T)["y"] = 8
        assert world.get(a, Position).y == 8
        assert q[Position]["x"].tolist() == [1]
    assert world.get(new, Position).x == 9 and not world.is_alive(b)


# -- try_get, records, keys ---------------------------------------------------------------
def test_try_get_is_none_where_get_raises_keyerror() -> None:
    world, a, b = make()
    assert world.try_get(b, Velocity) is None
    rec = world.try_get(a, Velocity)
    assert rec is not None and rec.x == 3
    world.despawn(b)
    assert world.try_get(b, Position) is None
    assert world.try_get(NULL, Position) is None
    world2 = World()
    assert world2.try_get(a, Position) is None  # no store yet
    assert "Position" not in [t.__name__ for t in world2.component_types]
    with pytest.raises(TypeError, match="not an entity key"):
        world.try_get(cast(Any, 1.5), Position)
    with pytest.raises(TypeError, match="not a component type"):
        world.try_get(a, int)
    with world.query(Position):
        world.despawn(a)
        assert world.try_get(a, Position) is None  # get raises "already being despawned"


def test_record_attribute_access_reads_and_writes_the_store() -> None:
    world, a, _ = make()
    rec = world.get(a, Position)
    assert rec.x == rec["x"] == 1
    rec.x = 3
    rec.y += 1
    assert world.get(a, Position).as_dict() == {"x": 3.0, "y": 3.0}
    with pytest.raises(AttributeError, match=r"Position has no field 'z'; fields are"):
        _ = rec.z
    with pytest.raises(AttributeError, match="Position has no field 'z'"):
        rec.z = 1
    with pytest.raises(ValueError, match=r"Position\.x: expected float32"):
        rec.x = "fast"
    world.despawn(a)
    with pytest.raises(KeyError, match="was despawned"):
        _ = rec.x


def test_format_key_is_exported_and_used_in_errors() -> None:
    world, a, _ = make()
    assert format_key(a) == "Entity(slot=0, gen=1)"
    assert format_key(np.uint64(make_key(7, 3))) == "Entity(slot=7, gen=3)"
    world.despawn(a)
    with pytest.raises(KeyError, match=r"Entity\(slot=0, gen=1\) was despawned"):
        world.get(a, Position)


def test_records_print_keys_readably() -> None:
    @component
    class Links:
        target: Entity = NULL
        many: np.ndarray = field(Entity, shape=(2, 2))
        hp: np.int16 = 3

    world = World()
    a = world.spawn()
    b = world.spawn(Links(target=a, many=[[a, NULL], [NULL, a]]))
    assert repr(world.get(b, Links)) == (
        "Links(target=Entity(slot=0, gen=1), many=[[Entity(slot=0, gen=1), NULL], "
        "[NULL, Entity(slot=0, gen=1)]], hp=3)")
    assert format_key(NULL) == "NULL"


# -- errors on the query path --------------------------------------------------------------
def test_field_typo_in_a_query_names_the_components_and_their_fields() -> None:
    world, _, _ = make()
    with pytest.raises(ValueError, match=r"no field 'xx' in this query's components: "
                                         r"Position \(x, y\); Velocity \(x\)") as info:
        with world.query(Position, Velocity) as q:
            q[Position]["xx"] += 1
    assert "no field of name xx" in str(info.value.__cause__)


def test_writing_a_readonly_column_says_the_query_declared_it() -> None:
    world, a, _ = make()
    for write in ("inplace", "setitem"):
        with pytest.raises(ValueError, match=r"read-only: this query declared "
                                             r"readonly=\(Velocity\)"):
            with world.query(Position, Velocity, readonly=(Velocity,)) as q:
                if write == "inplace":
                    q[Velocity]["x"] += 1
                else:
                    q[Velocity]["x"][0] = 5
    assert world.get(a, Velocity).x == 3


def test_unrelated_value_errors_pass_through_unchanged() -> None:
    world, _, _ = make()
    mine = np.zeros(2, [("x", "f4")])
    with pytest.raises(ValueError, match="^no field of name x$"):
        with world.query(Position, readonly=(Position,)):
            raise ValueError("no field of name x")  # a field the query does have
    with pytest.raises(ValueError, match="^assignment destination is read-only$"):
        with world.query(Position):  # nothing declared read-only
            view = mine.view()
            view.flags.writeable = False
            view["x"][0] = 1
    with pytest.raises(ValueError, match="^bad$"):
        with world.query(Position):
            raise ValueError("bad")


def test_get_of_a_key_spawned_in_a_query_block_says_so() -> None:
    world, a, _ = make()
    with world.query(Position):
        e = world.spawn(Position(x=1))
        with pytest.raises(KeyError, match=r"get: Entity\(slot=2, gen=1\) has no Position yet "
                                           r"\(it was spawned inside a query block: its "
                                           r"components are attached when the outermost "
                                           r"block ends\)"):
            world.get(e, Position)
        world.add(a, Bullet(owner=a))
        with pytest.raises(KeyError, match=r"has no Bullet \(add and remove inside a query "
                                           r"block take effect"):
            world.get(a, Bullet)
    assert world.get(e, Position).x == 1 and world.get(a, Bullet).owner == a
    with pytest.raises(KeyError, match=r"has no Velocity'$"):
        world.get(e, Velocity)
