"""Loading saves into changed schemas: fields matched by name, widening casts, clear errors."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from ecs_engine import SaveFileError, SchemaChangeWarning, Snapshot, World, component, field
from ecs_engine.migrate import migrate_rows
from tests.world_state import world_state


@component(name="Unit")
class UnitV1:
    hp: np.int16 = 10
    speed: np.float32 = 1.5
    slots: np.ndarray = field(np.uint8, shape=3)


def saved_v1() -> tuple[bytes, np.ndarray]:
    world = World(seed=1)
    keys = world.spawn_batch(UnitV1(hp=np.arange(4), speed=2.5, slots=[1, 2, 3]), count=4)
    world.despawn(keys[1])
    return bytes(world.snapshot().to_bytes()), keys


def load_into(*types: type) -> World:
    data, _ = saved_v1()
    world = World()
    world.register(*types)
    world.restore(Snapshot.from_bytes(data), source="file")
    return world


def test_same_schema_needs_no_migration() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        world = load_into(UnitV1)
    rows = world.store(UnitV1).live()
    assert list(rows["hp"]) == [0, 3, 2]  # swap-remove moved the last row into the hole
    assert np.all(rows["slots"] == [1, 2, 3])


def test_added_field_takes_its_default() -> None:
    @component(name="Unit")
    class UnitV2:
        hp: np.int16 = 10
        armor: np.int32 = 7
        speed: np.float32 = 1.5
        slots: np.ndarray = field(np.uint8, shape=3)
        tags: np.ndarray = field(np.uint8, shape=2, default=9)

    world = load_into(UnitV2)
    rows = world.store(UnitV2).live()
    assert rows.dtype == world.store(UnitV2).schema.dtype
    assert list(rows["hp"]) == [0, 3, 2] and np.all(rows["speed"] == 2.5)
    assert np.all(rows["armor"] == 7) and np.all(rows["tags"] == 9)


def test_removed_field_is_dropped_with_a_warning() -> None:
    @component(name="Unit")
    class UnitV3:
        hp: np.int16 = 10
        slots: np.ndarray = field(np.uint8, shape=3)

    with pytest.warns(SchemaChangeWarning, match="'Unit'.*'speed'"):
        world = load_into(UnitV3)
    assert list(world.store(UnitV3).live()["hp"]) == [0, 3, 2]


def test_widened_dtype_is_cast() -> None:
    @component(name="Unit")
    class UnitV4:
        hp: np.int64 = 10
        speed: np.float64 = 1.5
        slots: np.ndarray = field(np.uint16, shape=3)

    world = load_into(UnitV4)
    rows = world.store(UnitV4).live()
    assert rows["hp"].dtype == np.int64 and list(rows["hp"]) == [0, 3, 2]
    assert rows["speed"].dtype == np.float64 and np.all(rows["speed"] == 2.5)
    assert np.all(rows["slots"] == [1, 2, 3])


def test_reordered_fields_are_matched_by_name() -> None:
    @component(name="Unit")
    class UnitV5:
        slots: np.ndarray = field(np.uint8, shape=3)
        speed: np.float32 = 1.5
        hp: np.int16 = 10

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        world = load_into(UnitV5)
    assert list(world.store(UnitV5).live()["hp"]) == [0, 3, 2]


@pytest.mark.parametrize(("annotation", "message"), [
    (np.int8, "'hp': saved as int16.*now has int8"),
    (np.uint16, "'hp': saved as int16.*now has uint16"),
    (np.float16, "'hp': saved as int16.*now has float16"),
])
def test_narrowing_or_unsafe_kind_change_is_an_error(annotation: type, message: str) -> None:
    namespace = {"__annotations__": {"hp": annotation, "speed": np.float32,
                                     "slots": field(np.uint8, shape=3)}}
    UnitBad = component(name="Unit")(type("UnitBad", (), namespace))
    data, _ = saved_v1()
    world = World()
    world.register(UnitBad)
    world.spawn(UnitBad())
    before = world_state(world)
    with pytest.raises(SaveFileError, match=f"component 'Unit' field {message}"):
        world.restore(Snapshot.from_bytes(data))
    assert world_state(world) == before


def test_shape_change_is_an_error() -> None:
    @component(name="Unit")
    class UnitShape:
        hp: np.int16 = 10
        speed: np.float32 = 1.5
        slots: np.ndarray = field(np.uint8, shape=4)

    with pytest.raises(SaveFileError, match=r"'slots': saved with shape \(3,\).*\(4,\)"):
        load_into(UnitShape)


def test_scalar_to_array_field_is_a_shape_change() -> None:
    @component(name="Unit")
    class UnitShape2:
        hp: np.ndarray = field(np.int16, shape=2)
        speed: np.float32 = 1.5
        slots: np.ndarray = field(np.uint8, shape=3)

    with pytest.raises(SaveFileError, match=r"'hp': saved with shape \(\)"):
        load_into(UnitShape2)


def test_unknown_component_is_an_error_naming_it(tmp_path: Path) -> None:
    data, _ = saved_v1()
    world = World()
    with pytest.raises(SaveFileError, match="unknown component 'Unit'.*register"):
        world.restore(Snapshot.from_bytes(data))
    assert len(world) == 0 and world.component_types == ()
    path = tmp_path / "v1.sav"
    path.write_bytes(data)
    with pytest.raises(SaveFileError, match=r"v1\.sav: unknown component 'Unit'.*register"):
        world.load(path)  # a file's problem names the file, like a damaged byte does
    assert len(world) == 0 and world.component_types == ()


def test_failed_migration_emits_no_warning_and_changes_nothing() -> None:
    @component(name="Unit")
    class UnitMixed:
        hp: np.int8 = 0  # narrowing: an error
        slots: np.ndarray = field(np.uint8, shape=3)  # speed removed: would warn

    data, _ = saved_v1()
    world = World()
    world.register(UnitMixed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SaveFileError, match="'hp'"):
            world.restore(Snapshot.from_bytes(data))


def test_migrate_rows_returns_the_same_array_when_nothing_changed() -> None:
    from ecs_engine import schema_of

    schema = schema_of(UnitV1)
    rows = np.zeros(3, schema.dtype)
    assert migrate_rows("Unit", rows, schema) is rows


def test_tag_gaining_a_field_takes_the_default() -> None:
    @component(name="Marker")
    class MarkerV1: ...

    @component(name="Marker")
    class MarkerV2:
        level: np.int32 = 4

    world = World()
    world.spawn_batch(MarkerV1(), count=3)
    data = bytes(world.snapshot().to_bytes())
    other = World()
    other.register(MarkerV2)
    other.restore(Snapshot.from_bytes(data))
    assert list(other.store(MarkerV2).live()["level"]) == [4, 4, 4]


def saved_as(ctype: type, **values: object) -> bytes:
    world = World()
    world.spawn(ctype(**values))
    return bytes(world.snapshot().to_bytes())


def test_integers_into_a_float_too_short_for_them_are_not_automatic() -> None:
    """numpy calls int64 -> float64 a "safe" cast, but float64 holds integers exactly
    only up to 2**53: such a change needs an explicit convert=; narrower integers still
    widen into floats automatically."""
    @component(name="Account")
    class AccountV1:
        coins: np.int64 = 0
        key: np.uint64 = 0
        small: np.int32 = 0
        tiny: np.uint16 = 0

    @component(name="Account")
    class AccountV2:
        coins: np.float64 = 0.0
        key: np.uint64 = 0
        small: np.float64 = 0.0
        tiny: np.float32 = 0.0

    @component(name="Account")
    class AccountV3:
        coins: np.int64 = 0
        key: np.float64 = 0.0
        small: np.float64 = 0.0
        tiny: np.float32 = 0.0

    data = saved_as(AccountV1, coins=2**53 + 1, key=(3 << 32) | 5, small=-7, tiny=65535)
    for ctype, field_name, saved in ((AccountV2, "coins", "int64"), (AccountV3, "key", "uint64")):
        world = World()
        world.register(ctype)
        with pytest.raises(SaveFileError, match=rf"field '{field_name}': saved as {saved}, the "
                                                rf"schema now has float64; converting would "
                                                rf"lose values \(float64 holds integers "
                                                rf"exactly only up to 2\*\*53\)"):
            world.restore(Snapshot.from_bytes(data))
        assert len(world) == 0

    @component(name="Account")
    class AccountV4:
        coins: np.int64 = 0
        key: np.uint64 = 0
        small: np.float64 = 0.0
        tiny: np.float32 = 0.0

    world = World()
    world.register(AccountV4)
    world.restore(Snapshot.from_bytes(data))
    row = world.store(AccountV4).live()[0]
    assert row["coins"] == 2**53 + 1 and row["small"] == -7.0 and row["tiny"] == 65535.0


@pytest.mark.parametrize(("annotation", "value", "fits"), [
    (np.int64, 2.0**63, False), (np.int64, 2.0**63 - 1024, True),
    (np.int64, -(2.0**63), True), (np.int64, -(2.0**63) - 2048, False),
    (np.uint64, 2.0**64, False), (np.uint64, 2.0**64 - 2048, True), (np.uint64, -1.0, False),
    (np.int32, 2.0**31, False), (np.int32, 2.0**31 - 1, True), (np.uint8, 256.0, False),
])
def test_a_converted_value_at_the_edge_of_an_integer_type_fits_or_fails(
        annotation: type, value: float, fits: bool) -> None:
    """A converter's float that equals 2**63 passed a ``<= iinfo(int64).max`` test (the max
    rounds up to 2**63 as a float) and wrapped to -2**63."""
    @component(name="Score")
    class ScoreV1:
        points: np.float64 = 0.0

    namespace = {"__annotations__": {"points": annotation}, "points": 0}
    ScoreInt = component(name="Score", convert={"points": np.rint})(
        type("ScoreInt", (), namespace))
    world = World()
    world.register(ScoreInt)
    snap = Snapshot.from_bytes(saved_as(ScoreV1, points=value))
    if fits:
        world.restore(snap)
        assert float(world.store(ScoreInt).live()["points"][0]) == value
    else:
        with pytest.raises(SaveFileError, match="'points'"):
            world.restore(snap)
        assert len(world) == 0
