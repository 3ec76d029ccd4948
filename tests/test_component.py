"""Component schemas (``@component``, ``field``) and component constructors."""

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest

from ecs_engine import (
    NULL,
    ComponentSchema,
    Entity,
    FieldSpec,
    World,
    component,
    field,
    make_key,
    schema_of,
)
from ecs_engine.component import ComponentBase, component_values, is_component_type


def untyped(obj: object) -> Any:
    """``obj`` with its static type erased: for calls whose runtime error is under test."""
    return cast(Any, obj)


def batch_length(comp: object) -> int | None:
    return component_values(comp)[2]


@component
class Position:
    x: np.float32 = 0.0
    y: np.float32 = 0.0


@component
class Target:
    entity: Entity = NULL


@component
class Ammo:
    kinds: np.ndarray = field(np.uint8, shape=8)
    count: np.uint8 = 0
    loaded_before: np.bool_ = field(editable=False)


@component
class Player: ...


@component(name="stats_v1")
class Stats:
    level: np.int16 = 1
    speed: float = field(np.float64, default=2.5, label="Speed")
    grid: np.ndarray = field(np.int8, shape=(2, 3), default=-1)

    def doubled(self) -> float:
        return 2 * float(self.speed)


@component
class Builtins:
    i: int = 3
    f: float = 0.5
    b: bool = True


# -- schema ----------------------------------------------------------------------------------


def test_schema_fields_dtypes_and_defaults() -> None:
    schema = schema_of(Position)
    assert isinstance(schema, ComponentSchema)
    assert schema.name == "Position"
    assert schema.field_names == ("x", "y")
    assert schema.dtype == np.dtype([("x", "<f4"), ("y", "<f4")])
    assert not schema.is_tag
    assert schema.defaults.shape == (1,)
    assert not schema.defaults.flags.writeable
    spec = schema.field_spec("x")
    assert isinstance(spec, FieldSpec)
    assert (spec.name, spec.shape, spec.label, spec.editable, spec.is_entity) == (
        "x",
        (),
        "x",
        True,
        False,
    )


def test_field_spec_unknown_name_is_keyerror_listing_fields() -> None:
    with pytest.raises(KeyError, match=r"Position has no field 'z'.*\['x', 'y'\]"):
        schema_of(Position).field_spec("z")


def test_entity_field_is_uint64_reference() -> None:
    schema = schema_of(Target)
    spec = schema.field_spec("entity")
    assert spec.is_entity and spec.dtype == np.dtype("<u8")
    assert schema.defaults["entity"][0] == NULL


def test_subarray_and_hidden_fields() -> None:
    schema = schema_of(Ammo)
    kinds = schema.field_spec("kinds")
    assert kinds.shape == (8,) and kinds.dtype == np.uint8
    assert schema.dtype["kinds"].shape == (8,)
    assert schema.field_spec("loaded_before").editable is False
    assert schema.field_spec("count").editable is True
    assert schema.defaults["kinds"][0].tolist() == [0] * 8


def test_pinned_name_label_default_and_methods_survive() -> None:
    schema = schema_of(Stats)
    assert schema.name == "stats_v1"
    assert Stats.__name__ == "Stats"
    speed = schema.field_spec("speed")
    assert speed.label == "Speed" and speed.dtype == np.float64 and speed.default == 2.5
    assert schema.field_spec("level").label == "level"
    assert schema.dtype["grid"].shape == (2, 3)
    assert schema.defaults["grid"][0].tolist() == [[-1] * 3] * 2
    assert Stats(speed=4).doubled() == 8.0
    assert Stats().doubled() == 5.0  # defaults are visible as attributes


def test_python_builtin_annotations() -> None:
    schema = schema_of(Builtins)
    assert schema.dtype == np.dtype([("i", "<i8"), ("f", "<f8"), ("b", "?")])
    assert schema.defaults[0].tolist() == (3, 0.5, True)


def test_tag_has_no_fields() -> None:
    schema = schema_of(Player)
    assert schema.is_tag and schema.field_names == ()
    assert schema.dtype.itemsize == 0
    with pytest.raises(TypeError, match="Player takes at most 0 positional values"):
        untyped(Player)(1)
    with pytest.raises(TypeError, match="Player has no field 'x'"):
        untyped(Player)(x=1)


def test_big_endian_annotation_is_stored_little_endian() -> None:
    @component
    class BigEndian:
        v: np.dtype(">i4") = 7  # type: ignore[valid-type]

    assert schema_of(BigEndian).dtype["v"] == np.dtype("<i4")
    world = World()
    e = world.spawn(BigEndian())
    assert world.get(e, BigEndian)["v"] == 7


def test_is_component_type_and_schema_of_errors() -> None:
    assert is_component_type(Position) and not is_component_type(int)
    with pytest.raises(TypeError, match="not a component type"):
        schema_of(int)
    with pytest.raises(TypeError, match="decorate it with @component"):
        schema_of(type("Plain", (), {}))
    assert schema_of(Position(x=1)) is schema_of(Position)  # instances resolve via the class


def test_component_values_rejects_classes_and_foreign_objects() -> None:
    ctype, values, batch = component_values(Position(x=1))
    assert ctype is Position and set(values) == {"x"} and batch is None
    with pytest.raises(TypeError, match=r"pass a component instance, e.g. Position\(\)"):
        component_values(Position)
    with pytest.raises(TypeError, match="is not a component instance"):
        component_values(42)


@pytest.mark.parametrize(
    ("body", "exc", "msg"),
    [
        ({"name": str}, TypeError, r"Bad\.name: field type must be a numeric numpy scalar"),
        ({"c": complex}, TypeError, r"Bad\.c: field type must be a numeric numpy scalar"),
        ({"o": object}, TypeError, r"Bad\.o: field type must be a numeric"),
        ({"s": "no_such_name"}, TypeError, "Bad: cannot resolve field annotations"),
        ({"r": np.dtype([("a", "i4")])}, TypeError, r"Bad\.r: field type must be"),
    ],
)
def test_bad_field_types_name_component_and_field(
    body: dict[str, object], exc: type[Exception], msg: str
) -> None:
    cls = type("Bad", (), {"__annotations__": body})
    with pytest.raises(exc, match=msg):
        component(cls)


def test_bad_defaults_raise_at_declaration() -> None:
    with pytest.raises(ValueError, match=r"Bad\.v: value 300 out of range for uint8"):
        component(type("Bad", (), {"__annotations__": {"v": np.uint8}, "v": 300}))
    with pytest.raises(ValueError, match=r"Bad\.v: default must be one value"):
        component(type("Bad", (), {"__annotations__": {"v": np.int32}, "v": [1, 2]}))
    with pytest.raises(ValueError, match=r"Bad\.v: .*whole numbers"):
        component(type("Bad", (), {"__annotations__": {"v": np.int32}, "v": 0.5}))


def test_field_shape_must_be_positive() -> None:
    with pytest.raises(ValueError, match="shape must be positive"):
        field(np.uint8, shape=0)
    with pytest.raises(ValueError, match="shape must be positive"):
        field(np.uint8, shape=(2, -1))


# -- constructors ------------------------------------------------------------------------------


def test_scalar_constructor_positional_and_keyword() -> None:
    p = Position(1.5, y=2)
    assert p.x == np.float32(1.5) and p.y == np.float32(2.0)
    assert p.x.dtype == np.float32
    q = Position()
    assert q.x == 0.0  # default
    assert repr(Position(x=1)) == "Position(x=array(1., dtype=float32))"
    with pytest.raises(AttributeError, match="Position has no field 'z'"):
        _ = untyped(p).z


def test_constructor_errors_name_component_and_field() -> None:
    with pytest.raises(TypeError, match=r"Position has no field 'z'; fields are \['x', 'y'\]"):
        untyped(Position)(z=1)
    with pytest.raises(TypeError, match="Position: field 'x' given twice"):
        untyped(Position)(1, x=2)
    with pytest.raises(TypeError, match="Position takes at most 2 positional values"):
        untyped(Position)(1, 2, 3)


@pytest.mark.parametrize(
    ("make", "msg"),
    [
        (lambda: untyped(Position)(x="fast"), r"Position\.x: expected float32 values"),
        (lambda: untyped(Position)(x=None), r"Position\.x: expected float32 values"),
        (lambda: Position(x=[1.0, "a"]), r"Position\.x: expected float32 values"),
        (lambda: Position(x=[[1.0], [2.0, 3.0]]), r"Position\.x: cannot convert"),
        (lambda: untyped(Position)(x=1 + 2j), r"Position\.x: expected float32 values"),
        (lambda: Ammo(count=256), r"Ammo\.count: value 256 out of range for uint8 \[0, 255\]"),
        (lambda: Ammo(count=-1), r"Ammo\.count: value -1 out of range for uint8"),
        (lambda: Ammo(count=[1, 300]), r"Ammo\.count: value 300 out of range"),
        (lambda: Ammo(count=1.5), r"Ammo\.count: uint8 field needs whole numbers"),
        (lambda: Ammo(count=float("nan")), r"Ammo\.count: uint8 field needs whole numbers"),
        (lambda: Ammo(count=float("inf")), r"Ammo\.count: uint8 field needs whole numbers"),
        (lambda: Ammo(loaded_before=2), r"Ammo\.loaded_before: bool field needs True/False"),
        (lambda: Ammo(kinds=[1, 2, 3]), r"Ammo\.kinds: value of shape \(3,\) does not fit"),
        (lambda: Ammo(kinds=np.zeros((2, 3, 8))), r"Ammo\.kinds: value of shape \(2, 3, 8\)"),
        (lambda: Position(x=np.zeros((2, 2))), r"Position\.x: value of shape \(2, 2\)"),
        (lambda: Target(entity=-1), r"Target\.entity: value -1 out of range for entity key"),
        (lambda: Target(entity=0.5), r"Target\.entity: entity keys are integers"),
        (lambda: Stats(level=40000), r"stats_v1\.level: value 40000 out of range for int16"),
    ],
)
def test_unconvertible_values_raise_valueerror_naming_field(
    make: Callable[[], object], msg: str
) -> None:
    with pytest.raises(ValueError, match=msg):
        make()


def test_whole_floats_and_bools_convert() -> None:
    a = Ammo(count=3.0, loaded_before=1)
    assert a.count == 3 and a.count.dtype == np.uint8
    assert a.loaded_before.dtype == np.bool_ and bool(a.loaded_before)
    assert Ammo(loaded_before=np.array([0, 1])).loaded_before.tolist() == [False, True]
    t = Target(entity=make_key(3, 2))
    assert int(t.entity) == make_key(3, 2)


def test_batch_constructor_and_broadcast() -> None:
    xs = np.arange(4, dtype=np.float64)
    p = Position(x=xs, y=7)
    assert batch_length(p) == 4
    assert p.x.tolist() == [0, 1, 2, 3] and p.x.dtype == np.float32
    assert p.y.ndim == 0
    a = Ammo(kinds=np.ones((3, 8)), count=[1, 2, 3])
    assert batch_length(a) == 3 and a.kinds.shape == (3, 8)
    single = Ammo(kinds=np.arange(8))
    assert batch_length(single) is None  # one container, not a batch of 8
    broadcast = Ammo(kinds=5)
    assert batch_length(broadcast) is None and broadcast.kinds.ndim == 0


def test_mismatched_batch_lengths() -> None:
    with pytest.raises(ValueError, match=r"Position: batch lengths differ \('y' has 2"):
        Position(x=[1, 2, 3], y=[1, 2])
    with pytest.raises(ValueError, match="Ammo: batch lengths differ"):
        Ammo(kinds=np.zeros((2, 8)), count=[1, 2, 3])


def test_component_instances_are_lightweight() -> None:
    p = Position(x=1)
    assert isinstance(p, ComponentBase)
    with pytest.raises(AttributeError):
        p.anything_else = 1  # type: ignore[attr-defined]


def test_same_component_name_twice_in_one_world_is_type_error() -> None:
    @component(name="Position")
    class OtherPosition:
        z: np.float32 = 0.0

    world = World()
    world.spawn(Position())
    with pytest.raises(TypeError, match="two component types are named 'Position'") as info:
        world.spawn(OtherPosition())
    assert "OtherPosition" in str(info.value) and "@component(name=...)" in str(info.value)
    assert len(world) == 1  # the failed spawn allocated nothing
    e = world.spawn()
    with pytest.raises(TypeError, match="two component types are named"):
        world.add(e, OtherPosition())
    with pytest.raises(TypeError, match="two component types are named"):
        world.query(OtherPosition).__enter__()
    assert world._open_queries == 0  # the failed query closed itself
    # another world may use the other class under that name
    other = World()
    f = other.spawn(OtherPosition(z=1))
    assert other.get(f, OtherPosition)["z"] == 1


def test_redecorating_under_another_name_gives_distinct_types() -> None:
    @component(name="Pos2D")
    class A:
        x: np.float32 = 0.0

    @component(name="Pos3D")
    class B:
        x: np.float32 = 0.0

    world = World()
    e = world.spawn(A(x=1), B(x=2))
    assert world.get(e, A)["x"] == 1 and world.get(e, B)["x"] == 2


def test_field_as_the_default_takes_its_dtype_from_the_annotation() -> None:
    @component
    class Hit:
        hp: np.int16 = field(default=100, label="health", editable=False)

    spec = schema_of(Hit).fields[0]
    assert (spec.dtype, spec.default, spec.label, spec.editable) == (np.dtype("<i2"), 100,
                                                                    "health", False)
    with pytest.raises(TypeError, match="needs a dtype"):
        @component
        class Broken:
            x: field(label="x")  # type: ignore[valid-type]


@component
class Wide:
    i64: np.int64 = 0
    u64: np.uint64 = 0
    ref: Entity = NULL
    i32: np.int32 = 0
    half: np.float16 = 0.0
    single: np.float32 = 0.0


@pytest.mark.parametrize(("name", "value"), [
    ("i64", 2.0**63), ("i64", -(2.0**63) - 4096), ("i64", np.float32(2.0**63)),
    ("i64", [1.0, 2.0**63]), ("i64", 2**63), ("i64", -(2**63) - 1), ("i64", 2**70),
    ("u64", 2.0**64), ("u64", np.float32(2.0**64)), ("u64", -1.0), ("u64", 2**64),
    ("ref", 2.0**64), ("ref", [2.0**64]), ("ref", -1), ("ref", 2**64),
    ("i32", 2.0**31), ("i32", -(2.0**31) - 1), ("i32", np.int64(2**31)),
    ("half", 70000), ("half", 1e6), ("half", np.int64(10**6)), ("single", 1e39),
    ("single", [1.0, -1e300]),
])
def test_values_beyond_a_fields_range_raise_instead_of_wrapping(name: str, value: object,
                                                                ) -> None:
    """Floats at the integer limits used to wrap (2.0**63 became -2**63, 2.0**64 became 0,
    i.e. NULL); ints used to overflow float16 to inf."""
    with pytest.raises(ValueError, match=rf"Wide\.{name}: (value .* (out of range|overflows)|"
                                         rf"entity keys are integers)"):
        untyped(Wide)(**{name: value})
    world = World()
    e = world.spawn(Wide())
    with pytest.raises(ValueError, match=rf"Wide\.{name}"):
        world.get(e, Wide)[name] = value
    assert world.get(e, Wide)[name] == 0


@pytest.mark.parametrize(("name", "value", "stored"), [
    ("i64", -(2.0**63), -(2**63)), ("i64", 2**63 - 1, 2**63 - 1),
    ("i64", 2.0**63 - 1024, 2**63 - 1024), ("u64", 2.0**64 - 2048, 2**64 - 2048),
    ("u64", 2**64 - 1, 2**64 - 1), ("ref", 2**64 - 1, 2**64 - 1),
    ("i32", -(2.0**31), -(2**31)), ("i32", 2**31 - 1, 2**31 - 1),
    ("half", 65504, 65504.0), ("single", float("inf"), float("inf")),
])
def test_values_at_the_exact_limits_are_kept(name: str, value: object, stored: object) -> None:
    assert getattr(untyped(Wide)(**{name: value}), name) == stored


def test_nan_and_infinity_stay_allowed_in_float_fields() -> None:
    assert np.isnan(Wide(single=float("nan")).single)
    assert Wide(half=float("-inf")).half == -np.inf


def test_bools_fit_a_uint64_field_like_any_int_field() -> None:
    """numpy compared a bool with a uint64 field's max (2**64 - 1) by converting the
    bound to a C long: True, np.bool_(True) or a bool array raised OverflowError there
    (an int64 field took them as 0/1). And a float16 batch for a 64-bit int field
    warned about an overflowing cast while range-checking."""
    import warnings

    @component
    class Link:
        to: np.uint64 = 0
        n: np.int64 = 0

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        world = World()
        for value in (True, np.bool_(True)):
            assert world.get(world.spawn(Link(to=value)), Link)["to"] == 1
        keys = world.spawn_batch(Link(to=np.array([True, False])))
        assert [world.get(int(k), Link)["to"] for k in keys] == [1, 0]
        record = world.get(world.spawn(Link()), Link)
        record["to"] = np.bool_(True)
        assert record["to"] == 1
        (key,) = world.spawn_batch(Link(n=np.array([6e4], np.float16)))
        assert world.get(int(key), Link)["n"] == 60000
        with pytest.raises(ValueError, match="whole numbers"):
            Link(to=np.array([0.5], np.float16))


def test_long_double_fields_are_refused() -> None:
    """On x86 a long double is an 80-bit value in 16 bytes: 6 padding bytes of whatever
    was in memory went into save files and state hashes, so equal states differed (and
    '<f16' means IEEE quad elsewhere)."""
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("long double is double on this platform")
    with pytest.raises(TypeError, match=r"Precise\.v: .* is not supported .* use np\.float64"):
        component(type("Precise", (), {"__annotations__": {"v": np.longdouble}}))


def test_bool_fields_store_only_0_or_1_bytes() -> None:
    """A uint8 mask viewed as bool reached the store as it was: equal values hashed
    differently and the world saved a file its own load refused."""
    from ecs_engine import Snapshot, World

    @component(name="BoolBytesFlag")
    class Flag:
        on: np.bool_ = False

    mask = np.array([0, 2, 1, 255], np.uint8).view(np.bool_)
    world, plain = World(seed=1), World(seed=1)
    keys = world.spawn_batch(Flag(on=mask), count=4)
    world.add_batch(world.spawn_batch(Flag(), count=4), Flag(on=mask))
    world.set_batch(keys, Flag, {"on": mask})
    plain_keys = plain.spawn_batch(Flag(on=[False, True, True, True]), count=4)
    plain.add_batch(plain.spawn_batch(Flag(), count=4), Flag(on=[False, True, True, True]))
    plain.set_batch(plain_keys, Flag, {"on": [False, True, True, True]})
    assert int(world.store(Flag).live().view(np.uint8).max()) == 1
    assert world.state_hash() == plain.state_hash()
    Snapshot.from_bytes(world.snapshot().to_bytes())  # loads: every byte 0 or 1


def test_python_ints_past_64_bits_fit_float_fields() -> None:
    @component(name="BigFloats")
    class F:
        f32: np.float32 = 0.0
        f64: np.float64 = 0.0

    assert F(f64=2**100).f64 == 2.0**100 and F(f32=2**70).f32 == np.float32(2.0**70)
    with pytest.raises(ValueError, match="overflows float32"):
        F(f32=2**200)
    with pytest.raises(ValueError, match="overflows float64"):
        F(f64=10**400)
    if np.dtype(np.longdouble).itemsize > 8:
        with pytest.raises(ValueError, match="overflows float64"):
            F(f64=np.longdouble("1e400"))
