"""Queries: aligned and gathered views, without=, readonly=, errors, nesting, deferral."""

import numpy as np
import pytest

from ecs_engine import NULL, Entity, Query, World, component, field


@component
class Position:
    x: np.float32 = 0.0
    y: np.float32 = 0.0


@component
class Velocity:
    dx: np.float32 = 0.0


@component
class Ammo:
    kinds: np.ndarray = field(np.uint8, shape=4)
    count: np.uint8 = 0


@component
class Target:
    entity: Entity = NULL


@component
class Frozen: ...


def xs(world: World, keys: object) -> list[float]:
    return [float(world.get(int(k), Position)["x"]) for k in np.asarray(keys).tolist()]


def make_world(auto_group: bool = True) -> tuple[World, np.ndarray]:
    """Six entities: all have Position (x = 0..5), odd ones Velocity (dx = 10 * i),
    entity 4 is Frozen, entity 5 has Ammo."""
    world = World(auto_group=auto_group)
    keys = world.spawn_batch(Position(x=np.arange(6), y=1))
    world.add_batch(keys[1::2], Velocity(dx=[10, 30, 50]))
    world.add(keys[4], Frozen())
    world.add(keys[5], Ammo(kinds=[1, 2, 3, 4], count=9))
    return world, keys


def check_rows_aligned(world: World, q: Query) -> None:
    """Row i of every q[T] is the component of entity q.entities[i]."""
    for ctype in q.types:
        arr, store = q[ctype], world.store(ctype)
        assert len(arr) == len(q) == len(q.entities)
        for i, e in enumerate(q.entities.tolist()):
            row = store.sparse[e & 0xFFFF_FFFF]  # (not world.get: it refuses doomed entities)
            assert store.entities[row] == e
            assert arr[i].tobytes() == store.data[row].tobytes()


# -- basic shapes --------------------------------------------------------------------------------


def test_single_type_query_is_an_aligned_view() -> None:
    world, keys = make_world()
    with world.query(Position) as q:
        assert q.aligned and len(q) == 6
        assert set(q.entities.tolist()) == set(keys.tolist())
        assert q.entities.dtype == np.uint64
        check_rows_aligned(world, q)
        q[Position]["y"] = q[Position]["x"] * 2  # a view: visible at once
        assert world.get(keys[3], Position)["y"] == 6
        assert q[Position] is q[Position]  # cached within the block


def test_entities_column_is_read_only() -> None:
    world, _ = make_world()
    for types in ((Position,), (Position, Velocity)):
        with world.query(*types) as q:
            with pytest.raises(ValueError, match="read-only"):
                q.entities[0] = 0


def test_grouped_query_is_aligned_and_contiguous() -> None:
    world, keys = make_world()
    with world.query(Position, Velocity) as q:
        assert q.aligned and len(q) == 3
        assert set(q.entities.tolist()) == set(keys[1::2].tolist())
        check_rows_aligned(world, q)
        pos, vel = q[Position], q[Velocity]
        # contiguous views of the stores' first rows, not copies
        assert np.shares_memory(pos, world.store(Position).data)
        assert np.shares_memory(vel, world.store(Velocity).data)
        pos["x"] += vel["dx"]
    assert xs(world, keys) == [0, 11, 2, 33, 4, 55]
    with world.query(Velocity, Position) as q:  # order of types does not matter
        assert q.aligned
        check_rows_aligned(world, q)


def test_gathered_query_writes_reach_the_store_at_block_exit() -> None:
    world, keys = make_world(auto_group=False)
    with world.query(Position, Velocity) as q:
        assert not q.aligned and len(q) == 3
        check_rows_aligned(world, q)
        q[Position]["x"] += q[Velocity]["dx"]
        q[Velocity]["dx"][0] = -1
    assert xs(world, keys) == [0, 11, 2, 33, 4, 55]
    assert sorted(float(world.get(k, Velocity)["dx"]) for k in keys[1::2]) == [-1, 30, 50]


def test_gathered_subarray_and_reference_writes() -> None:
    world, keys = make_world(auto_group=False)
    world.add(keys[3], Ammo(kinds=7))
    world.add_batch(keys[3:], Target(entity=keys[0]))
    with world.query(Ammo, Target) as q:
        assert not q.aligned and len(q) == 2
        q[Ammo]["kinds"][:, 1] = 42
        q[Target]["entity"] = q.entities  # point at themselves
    assert world.get(keys[5], Ammo)["kinds"].tolist() == [1, 42, 3, 4]
    assert world.get(keys[3], Ammo)["kinds"].tolist() == [7, 42, 7, 7]
    assert world.get(keys[3], Target)["entity"] == keys[3]
    assert world.get(keys[4], Target)["entity"] == keys[0]  # not in the query


def test_without_excludes() -> None:
    world, keys = make_world()
    with world.query(Position, without=[Frozen, Ammo]) as q:
        assert set(q.entities.tolist()) == set(keys[:4].tolist())
        check_rows_aligned(world, q)
        q[Position]["x"] = -1
    assert xs(world, keys) == [-1, -1, -1, -1, 4, 5]
    with world.query(Position, Velocity, without=[Ammo]) as q:
        assert set(q.entities.tolist()) == {keys[1], keys[3]}
        check_rows_aligned(world, q)
        q[Velocity]["dx"] = 0
    assert [float(world.get(k, Velocity)["dx"]) for k in keys[1::2]] == [0, 0, 50]
    with world.query(Position, without=[Target]) as q:  # a type with no store yet
        assert len(q) == 6 and q.aligned
    world.despawn(keys[4])
    world.remove(keys[5], Ammo)
    with world.query(Position, without=[Frozen, Ammo]) as q:  # excluded stores now empty
        assert len(q) == 5


def test_readonly_views() -> None:
    for auto_group in (True, False):
        world, keys = make_world(auto_group)
        store = world.store(Velocity)
        with world.query(Position, readonly=[Velocity]) as q:  # readonly types join the query
            assert q.aligned is auto_group
            assert Velocity in q.types and len(q) == 3
            version = store.version
            vel = q[Velocity]
            assert store.version == version  # a read-only column does not move the version
            with pytest.raises(ValueError, match="read-only"):
                vel["dx"][0] = 99
            with pytest.raises(ValueError, match="read-only"):
                vel[0] = vel[1]
            q[Position]["x"] = vel["dx"]
        assert sorted(float(world.get(k, Velocity)["dx"]) for k in keys[1::2]) == [10, 30, 50]
        assert xs(world, keys[1::2]) == [10, 30, 50]
        with world.query(Position, readonly=[Position]) as q:
            with pytest.raises(ValueError, match="read-only"):
                q[Position]["x"] += 1
        assert xs(world, keys) == [0, 10, 2, 30, 4, 50]


def test_tag_in_query_and_empty_results() -> None:
    world, keys = make_world()
    with world.query(Frozen, Position) as q:
        assert q.entities.tolist() == [keys[4]]
        assert q[Frozen].dtype.itemsize == 0 and len(q[Frozen]) == 1
    with world.query(Target) as q:
        assert len(q) == 0 and len(q[Target]) == 0 and q.entities.shape == (0,)
    with world.query(Ammo, Frozen) as q:  # both stores non-empty, no entity has both
        assert len(q) == 0 and q[Ammo].shape == (0,)


# -- errors ------------------------------------------------------------------------------------


def test_query_argument_errors() -> None:
    world, _ = make_world()
    with pytest.raises(ValueError, match="at least one component type"):
        world.query()
    with pytest.raises(ValueError, match="lists a component type twice"):
        world.query(Position, Position)
    with pytest.raises(ValueError, match="both requires and excludes Position"):
        world.query(Position, Velocity, without=[Position])
    with pytest.raises(ValueError, match="both requires and excludes Velocity"):
        world.query(Position, readonly=[Velocity], without=[Velocity])
    with pytest.raises(TypeError, match="not a component type"):
        world.query(Position, int)
    with pytest.raises(TypeError, match="not a component type"):
        world.query(Position, without=[str])
    assert world._open_queries == 0


def test_query_outside_its_with_block() -> None:
    world, _ = make_world()
    q = world.query(Position, Velocity)
    with pytest.raises(RuntimeError, match="inside a with-block"):
        len(q)
    with pytest.raises(RuntimeError, match="inside a with-block"):
        q[Position]
    with q:
        assert len(q) == 3
        kept = q[Position]
    for use in (lambda: len(q), lambda: q[Position], lambda: q.aligned):
        with pytest.raises(RuntimeError, match="with world.query"):
            use()
    assert len(kept) == 3  # arrays handed out earlier are still plain arrays


def test_type_not_in_query_is_keyerror() -> None:
    world, _ = make_world()
    with world.query(Position, without=[Frozen]) as q:
        with pytest.raises(KeyError, match=r"Velocity is not part of this query \(Position\)"):
            q[Velocity]
        with pytest.raises(KeyError, match="Frozen is not part of this query"):
            q[Frozen]


# -- nesting and deferral ------------------------------------------------------------------------


def test_nested_queries() -> None:
    world, keys = make_world()
    with world.query(Position, Velocity) as outer:
        assert outer.aligned
        with world.query(Position, without=[Velocity]) as inner:
            assert set(inner.entities.tolist()) == set(keys[0::2].tolist())
            inner[Position]["x"] = 100
            e = world.spawn(Position(x=-5))
        with world.query(Ammo, Position) as inner2:  # no auto group while nested
            assert not inner2.aligned and len(inner2) == 1
            inner2[Ammo]["count"] = 1
        assert not world.has(e, Position)  # inner exits do not flush while outer is open
        assert len(outer) == 3
        outer[Position]["y"] = 7
    assert world.get(e, Position)["x"] == -5
    assert xs(world, keys) == [100, 1, 100, 3, 100, 5]
    assert world.get(keys[5], Ammo)["count"] == 1
    assert [float(world.get(k, Position)["y"]) for k in keys] == [1, 7, 1, 7, 1, 7]
    assert world.store(Ammo).owner is None
    assert world._open_queries == 0


def test_structural_changes_inside_a_block_are_deferred() -> None:
    world, keys = make_world()
    with world.query(Position, Velocity) as q:
        rows_before = q.entities.copy()
        spawned = world.spawn(Position(x=77), Velocity(dx=1))
        batch = world.spawn_batch(Position(x=[80, 81]), Velocity(), count=2)
        world.despawn(keys[1])
        world.despawn_batch(keys[[3, 0]])
        world.add(keys[2], Velocity(dx=2))
        world.add_batch(keys[[4, 5]], Ammo(count=3))
        world.remove(keys[5], Velocity)
        world.remove_batch(keys[[2, 4]], Position)
        # nothing moved yet: the views stay valid and aligned
        assert np.array_equal(q.entities, rows_before) and len(q) == 3
        check_rows_aligned(world, q)
        assert world.is_alive(spawned) and not world.has(spawned, Position)
        assert world.has(keys[1], Velocity) and world.has(keys[5], Velocity)
        assert not world.has(keys[2], Velocity) and world.has(keys[2], Position)
        q[Velocity]["dx"] += 1
        for op in (world.despawn, lambda k: world.add(k, Frozen()),
                   lambda k: world.get(k, Position),
                   lambda k: world.remove(k, Position), lambda k: world.despawn_batch([k])):
            with pytest.raises(KeyError, match="already being despawned"):
                op(keys[1])
    assert [world.is_alive(k) for k in keys] == [False, False, True, False, True, True]
    assert world.get(spawned, Position)["x"] == 77 and world.get(spawned, Velocity)["dx"] == 1
    assert xs(world, batch) == [80, 81]
    assert world.get(keys[2], Velocity)["dx"] == 2 and not world.has(keys[2], Position)
    assert not world.has(keys[4], Position) and world.get(keys[4], Ammo)["count"] == 3
    assert world.get(keys[5], Ammo)["count"] == 3 and not world.has(keys[5], Velocity)
    assert len(world) == 6
    with world.query(Position, Velocity) as q:
        assert q.aligned
        check_rows_aligned(world, q)
        assert set(q.entities.tolist()) == {spawned, *batch.tolist()}


def test_spawn_then_despawn_inside_one_block() -> None:
    world, keys = make_world()
    with world.query(Position):
        e = world.spawn(Position(x=1), Velocity())
        world.add(e, Frozen())
        world.despawn(e)
        f = world.spawn(Position(x=2))  # does not reuse e's slot: e is not freed yet
        assert f != e and (f & 0xFFFF_FFFF) != (e & 0xFFFF_FFFF)
    assert not world.is_alive(e) and world.is_alive(f)
    assert world.count(Frozen) == 1 and world.count(Velocity) == 3
    assert world.count(Position) == 7 and len(world) == 7
    assert world.spawn() & 0xFFFF_FFFF == e & 0xFFFF_FFFF  # now it is, LIFO


def test_deferred_failure_raises_at_block_end_and_other_ops_still_apply() -> None:
    world, keys = make_world()
    with pytest.raises(KeyError, match=r"remove \(deferred\): .* has no Ammo"):
        with world.query(Position):
            world.remove(keys[0], Ammo)  # cannot be checked yet: an add could precede it
            world.despawn(keys[1])
    assert not world.is_alive(keys[1]) and world._open_queries == 0
    assert len(world) == 5


def test_exception_in_block_still_closes_the_query() -> None:
    world, keys = make_world(auto_group=False)
    with pytest.raises(RuntimeError, match="boom"):
        with world.query(Position, Velocity) as q:
            q[Position]["x"] = 9
            world.despawn(keys[0])
            raise RuntimeError("boom")
    assert world._open_queries == 0
    assert not world.is_alive(keys[0])
    assert world.get(keys[1], Position)["x"] == 9  # gathered writes were still written back
    world.despawn(keys[2])  # no query open any more: applies at once
    assert not world.is_alive(keys[2])


def test_deferred_spawns_join_groups_correctly() -> None:
    world, _ = make_world()
    with world.query(Position, Velocity):
        pass  # creates the group
    for _ in range(3):
        with world.query(Position, Velocity) as q:
            world.spawn_batch(Position(x=[1, 2]), Velocity(dx=[3, 4]))
            world.despawn(int(q.entities[0]))
            world.add(world.spawn(Position()), Velocity(dx=5))
    with world.query(Position, Velocity) as q:
        assert q.aligned and len(q) == 3 + 3 * 2
        check_rows_aligned(world, q)
    group = world.store(Position).owner
    assert group is not None and group.size == 9


def test_deferred_spawn_keeps_the_values_of_the_call() -> None:
    world = World()
    world.spawn(Position(x=1))
    xs = np.array([10.0, 20.0])
    with world.query(Position):
        keys = world.spawn_batch(Position(x=xs))
        xs[:] = -1  # the caller reuses its buffer before the block ends
    assert [float(world.get(k, Position)["x"]) for k in keys] == [10.0, 20.0]


def test_float_overflow_into_float32_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"Position\.x: value .* overflows float32"):
        Position(x=1e300)
    assert np.isinf(Position(x=np.inf).x)  # an infinity asked for is kept


def test_copying_query_keeps_writes_made_meanwhile_elsewhere() -> None:
    world = World(auto_group=False)
    keys = world.spawn_batch(Position(x=[1.0, 2.0, 3.0]), Velocity(dx=1.0))
    with world.query(Position, Velocity) as q:
        assert not q.aligned
        pos = q[Position]  # read, and change only the first row
        pos["x"][0] = 10.0
        world.get(keys[1], Position)["x"] = 99.0  # a write through another path
        with world.query(Position) as inner:
            inner[Position]["y"][2] += 5.0
    assert [float(world.get(k, Position)["x"]) for k in keys] == [10.0, 99.0, 3.0]
    assert float(world.get(keys[2], Position)["y"]) == 5.0


def test_entity_fields_take_integer_keys_only() -> None:
    """1.0, True or a float64 key were stored as keys, though every key API refuses them."""
    from ecs_engine import NULL, Entity

    @component(name="QRef")
    class Ref:
        to: Entity = NULL

    world = World()
    e = world.spawn(Ref())
    for bad in (1.0, True, np.float64(2.0**32), np.array([1.0])):
        with pytest.raises(ValueError, match="entity keys are integers"):
            world.get(e, Ref)["to"] = bad
    with pytest.raises(ValueError, match="entity keys are integers"):
        Ref(to=1.0)
    world.get(e, Ref)["to"] = np.uint64(e)
    assert world.get(e, Ref)["to"] == e


def test_kept_query_keys_are_a_view_when_views_serve_the_query() -> None:
    """As the README says: a view-served query's entities follow the store; a copy keeps
    the keys."""
    world = World()
    keys = world.spawn_batch(Position(x=np.arange(5.0)), count=5)
    with world.query(Position, readonly=(Position,)) as q:
        view, kept = q.entities, q.entities.copy()
    world.despawn(int(kept[0]))
    assert kept.tolist() == keys.tolist()
    assert not view.flags.writeable and view[0] != kept[0]  # the last key moved into row 0


@pytest.mark.parametrize("grouped", [True, False])
def test_a_record_write_to_another_field_of_a_row_a_gathered_block_changes_survives(
        grouped: bool) -> None:
    """A gathered block wrote whole changed rows back: a world.get write to another field
    of such a row inside the block was lost, though it stuck when a group's views served
    the same query (the same code gave two results by layout)."""
    world = World(auto_group=False)
    keys = world.spawn_batch(Position(x=np.arange(4.0)), count=4)
    world.add_batch(keys[::2], Velocity())
    if grouped:
        world.group(Position, Velocity)
    with world.query(Position, Velocity) as q:
        q[Position]["x"] += 100
        world.get(int(keys[0]), Position)["y"] = 7  # another field of a changed row
        world.get(int(keys[2]), Position)["x"] = -1  # the same field: the block's value wins
    assert (world.get(int(keys[0]), Position)["x"], world.get(int(keys[0]), Position)["y"]) \
        == (100.0, 7.0)
    expected_x2 = -1.0 if grouped else 102.0  # (views: the later write; gathered: the block)
    assert world.get(int(keys[2]), Position)["x"] == expected_x2


@component(name="QueryHp")
class QueryHp:
    hp: np.int16 = 0
    shield: np.uint8 = 0


def test_an_out_of_range_write_to_a_query_column_names_the_fields_of_that_type() -> None:
    world = World()
    world.spawn(QueryHp())
    with pytest.raises(OverflowError, match=r"out of bounds for int16: .* its int16 fields: "
                                            r"QueryHp\.hp \(range \[-32768, 32767\]\)"):
        with world.query(QueryHp) as q:
            q[QueryHp]["hp"] = 100_000
    with pytest.raises(OverflowError, match=r"uint8 fields: QueryHp\.shield"):
        with world.query(QueryHp) as q:
            q[QueryHp]["shield"] = -1
