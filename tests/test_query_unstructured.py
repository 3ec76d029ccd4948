"""``Query.unstructured``: a component whose fields share one dtype as an (n, values) array."""

import numpy as np
import pytest

from ecs_engine import World, component, field
from ecs_engine.components import Position, Velocity  # x, y: float32 each


@component
class Box:
    corners: np.ndarray = field(np.float32, shape=(2, 2))  # shaped fields count every value
    angle: np.float32 = 0.0


@component
class Mixed:
    hp: np.int16 = 0
    speed: np.float32 = 0.0


@component
class Marker: ...


def positions(world: World) -> dict[int, tuple[float, float]]:
    with world.query(Position, readonly=(Position,)) as q:
        return {int(e): (float(p["x"]), float(p["y"]))
                for e, p in zip(q.entities.tolist(), q[Position], strict=True)}


@pytest.mark.parametrize("auto_group", [True, False])
def test_one_op_moves_both_fields_aligned_or_gathered(auto_group: bool) -> None:
    world = World(auto_group=auto_group)
    moving = world.spawn_batch(Position(x=np.arange(5.0), y=10), Velocity(x=1, y=-2))
    still = world.spawn_batch(Position(x=100, y=100), count=3)  # not in the query
    with world.query(Position, Velocity, readonly=(Velocity,)) as q:
        assert q.aligned is auto_group
        pos = q.unstructured(Position)
        assert pos.shape == (5, 2) and pos.dtype == np.float32
        pos += q.unstructured(Velocity) * 2  # x then y, in the query's row order
        assert np.array_equal(pos[:, 0], q[Position]["x"])  # the same memory as q[T]
    got = positions(world)
    assert [got[int(k)] for k in moving] == [(i + 2.0, 6.0) for i in range(5)]
    assert [got[int(k)] for k in still] == [(100.0, 100.0)] * 3


def test_writes_move_the_store_version_and_read_only_types_stay_read_only() -> None:
    world = World()
    world.spawn_batch(Position(x=1), Velocity(x=3), count=4)
    store = world.store(Position)
    before = store.version
    with world.query(Position, Velocity, readonly=(Velocity,)) as q:
        vel = q.unstructured(Velocity)
        with pytest.raises(ValueError, match="read-only"):
            vel[0, 0] = 9
        pos = q.unstructured(Position)
    assert store.version != before  # a writable column marks its rows changed
    with pytest.raises(ValueError, match="read-only"):
        pos[0, 0] = 5  # kept past the block: dead, like the column it views
    assert all(v == (1.0, 0.0) for v in positions(world).values())


def test_shaped_fields_widen_the_row_and_empty_queries_keep_the_width() -> None:
    world = World()
    with world.query(Box) as q:
        assert q.unstructured(Box).shape == (0, 5)
    key = world.spawn(Box(corners=[[1, 2], [3, 4]], angle=0.5))
    with world.query(Box) as q:
        row = q.unstructured(Box)
        assert row.tolist() == [[1, 2, 3, 4, 0.5]]
        row[0, 4] = 1.5
    assert float(world.get(key, Box)["angle"]) == 1.5


@pytest.mark.parametrize("ctype, named", [(Mixed, "hp: int16, speed: float32"),
                                          (Marker, "no fields")])
def test_fields_of_different_dtypes_are_a_type_error_naming_them(ctype: type, named: str) -> None:
    world = World()
    world.spawn(ctype())
    with world.query(ctype) as q:
        with pytest.raises(TypeError, match=f"{ctype.__name__} has no single field dtype "
                                            rf"\({named}\)"):
            q.unstructured(ctype)


def test_outside_the_block_and_outside_the_query() -> None:
    world = World()
    world.spawn(Position(), Velocity())
    q = world.query(Position)
    with pytest.raises(RuntimeError, match="with-block"):
        q.unstructured(Position)
    with q:
        with pytest.raises(KeyError, match="Velocity is not part of this query"):
            q.unstructured(Velocity)


@pytest.mark.parametrize("ctype", [Position, Mixed])
def test_kept_flat_views_count_as_outstanding_views_of_the_store(ctype: type) -> None:
    world = World()
    world.spawn_batch(ctype(), count=3)
    store = world.store(ctype)
    assert not store.views_outstanding()  # the store's own flat pair is counted out
    with world.query(ctype) as q:
        kept = q.unstructured(ctype) if ctype is Position else q[ctype]
        derived = kept[1:]  # a view made inside the block, still writable after it
    assert store.views_outstanding()
    del kept, derived
    assert not store.views_outstanding()


def test_flat_views_follow_the_store_when_it_grows_and_after_a_restore() -> None:
    world = World()
    keys = world.spawn_batch(Position(x=np.arange(3.0)), Velocity(x=1))
    snap = world.snapshot()
    world.spawn_batch(Position(x=7), Velocity(x=1), count=5000)  # the arrays are replaced
    with world.query(Position, Velocity) as q:
        pos = q.unstructured(Position)
        pos += q.unstructured(Velocity)
    assert float(world.get(keys[2], Position)["x"]) == 3.0
    world.restore(snap)
    with world.query(Position, Velocity) as q:
        pos = q.unstructured(Position)
        assert pos.shape == (3, 2)
        pos += q.unstructured(Velocity)
    assert [float(world.get(k, Position)["x"]) for k in keys] == [1.0, 2.0, 3.0]
