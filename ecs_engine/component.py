"""Component schemas: ``@component`` classes declare one numpy structured dtype each."""

from __future__ import annotations

import inspect
import itertools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from functools import cached_property
from typing import Any, TypeVar, dataclass_transform, overload

import numpy as np

from ecs_engine.entity import KEY_DTYPE, NULL, Entity
from ecs_engine.savevalues import portable_dtype

SCHEMA_ATTR = "__component_schema__"
EXACT_ATTR = "__component_exact__"


@dataclass(frozen=True)
class FieldSpec:
    """One column of a component: name, little-endian scalar dtype, per-row shape."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    default: Any
    label: str
    editable: bool
    is_entity: bool
    prefab: bool = False  # the value comes from the entity's prefab (see prefab_fields.py)

    @property
    def numpy_spec(self) -> tuple[Any, ...]:
        return (self.name, self.dtype, self.shape) if self.shape else (self.name, self.dtype)


@dataclass(frozen=True)
class FieldDecl:
    """What ``field(...)`` returns; the decorator turns it into a :class:`FieldSpec`."""

    dtype: Any
    shape: tuple[int, ...]
    default: Any
    label: str | None
    editable: bool
    prefab: bool = False


@dataclass(frozen=True)
class Migration:
    """How rows saved under an older schema become rows of this one (see ``migrate.py``).

    ``renamed``: current field name -> the name it was saved under. ``formerly``: names
    this component was saved under before. ``convert``: field -> function mapping the old
    column (numpy array) to new values, for changes that are not automatic (narrowing);
    values that still do not fit are refused. ``migrate``: old rows (structured array in
    the saved dtype) -> a mapping of field name to column, for anything else.
    """

    renamed: Mapping[str, str] = dataclass_field(default_factory=dict)
    formerly: tuple[str, ...] = ()
    convert: Mapping[str, Callable[[np.ndarray], Any]] = dataclass_field(default_factory=dict)
    migrate: Callable[[np.ndarray], Mapping[str, Any]] | None = None


FieldValue = float | np.generic | np.ndarray | list[Any] | tuple[Any, ...]
"""What a field accepts as a value or default: a Python or numpy scalar, or an array (one
value per row of a batch, or one fixed-shape value)."""


def field_default(value: FieldValue, /) -> Any:
    """The type check of a plain class-body default (``x: np.float32 = 0.0``).

    ``ecs_engine.mypy_plugin`` has mypy check such a default as ``field_default(0.0)``: it
    must be a value the field can be converted from, not an instance of the annotation.
    """
    return value


@overload
def field(dtype: Any, /, shape: int | tuple[int, ...] = (), default: FieldValue = 0,
          label: str | None = None, editable: bool = True, prefab: bool = False) -> Any: ...
@overload
def field(*, shape: int | tuple[int, ...] = (), default: FieldValue = 0,
          label: str | None = None, editable: bool = True, prefab: bool = False) -> Any: ...


def field(
    dtype: Any = None,
    /,
    shape: int | tuple[int, ...] = (),
    default: FieldValue = 0,
    label: str | None = None,
    editable: bool = True,
    prefab: bool = False,
) -> Any:
    """Declare a component field with options, as the class-body default:
    ``hp: np.int16 = field(default=3, label="hp")`` (the dtype comes from the annotation) or
    ``rgba: np.ndarray = field(np.uint8, shape=4)`` (the dtype given, for containers).

    ``shape`` makes a fixed-size container per row, ``label`` is the name level authors
    use, ``editable=False`` keeps the field in saves but hides it from level files.
    ``prefab=True`` makes it prefab data: a save stores it only where an entity differs
    from its prefab, and loading re-derives it from the current prefab (game updates reach
    old saves; instance data such as hp never is prefab data).
    """
    shape_t = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    if any(s <= 0 for s in shape_t):
        raise ValueError(f"field shape must be positive, got {shape_t}")
    return FieldDecl(dtype, shape_t, default, label, editable, prefab)


def _canonical_bools(arr: np.ndarray) -> bool:
    """Whether a bool array's bytes are all 0 or 1 (a view of other bytes as bool, e.g.
    ``np.array([0, 2], np.uint8).view(bool)``, would be saved and hashed as it is, and
    the file's own load refuses such bytes)."""
    return not arr.size or int(arr.view(np.uint8).max()) <= 1


def _scalar_dtype(annotation: Any, where: str) -> tuple[np.dtype, bool]:
    """Map an annotation to (little-endian dtype, is_entity)."""
    if annotation is Entity:
        return KEY_DTYPE, True
    if annotation is bool:
        return np.dtype(np.bool_), False
    if annotation is int:
        return np.dtype("<i8"), False
    if annotation is float:
        return np.dtype("<f8"), False
    try:
        dt = np.dtype(annotation)
    except TypeError as exc:
        raise TypeError(f"{where}: unsupported field type {annotation!r}") from exc
    if dt.kind not in "biuf" or dt.shape or dt.names:
        raise TypeError(f"{where}: field type must be a numeric numpy scalar, got {dt}")
    if not portable_dtype(dt):
        raise TypeError(f"{where}: {dt} is not supported (its layout differs between "
                        f"platforms and has padding bytes, so equal states would save and "
                        f"hash differently): use np.float64")
    return dt.newbyteorder("<") if dt.itemsize > 1 else dt, False


@dataclass(frozen=True)
class ComponentSchema:
    """The resolved schema of a component type."""

    name: str
    fields: tuple[FieldSpec, ...]
    dtype: np.dtype
    defaults: np.ndarray  # shape (1,), the default row
    migration: Migration = Migration()

    @property
    def is_tag(self) -> bool:
        return not self.fields

    @cached_property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @cached_property
    def _specs(self) -> dict[str, FieldSpec]:
        return {f.name: f for f in self.fields}

    def field_spec(self, name: str) -> FieldSpec:
        spec = self._specs.get(name)
        if spec is None:
            raise KeyError(
                f"{self.name} has no field {name!r}; fields are {list(self.field_names)}"
            )
        return spec

    @cached_property
    def converters(self) -> dict[str, Callable[[Any], tuple[Any, int | None]]]:
        """Field name -> ``convert(value)`` with a fast path for one Python scalar of a
        fitting kind (returned as is; numpy converts it exactly on write). Anything else
        goes through :meth:`convert`, which gives the same errors as before."""
        return {f.name: _converter(self, f) for f in self.fields}

    @cached_property
    def exact_scalars(self) -> dict[str, tuple[Callable[[Any], tuple[Any, int | None]],
                                               type, Any, Any]]:
        """One-value field name -> (converter, Python type, lowest, highest): a value of
        exactly that type within the bounds is stored exactly, with no conversion (the
        fast path of constructors and records; anything else takes the converter)."""
        out = {}
        for f in self.fields:
            if f.shape:
                continue
            kind = f.dtype.kind
            if kind == "f":
                big = float(np.finfo(f.dtype).max)
                bounds: tuple[type, Any, Any] = (float, -big, big)  # NaN fails: checked path
            elif kind in "iu":
                info = np.iinfo(f.dtype)
                bounds = (int, int(info.min), int(info.max))
            else:
                bounds = (bool, False, True)
            out[f.name] = (self.converters[f.name], *bounds)
        return out

    @cached_property
    def narrow_floats(self) -> frozenset[str]:
        """One-value float32/float16 fields. A NaN of those types written through a
        Python float (``tolist()``, a row tuple) is widened and narrowed back, which
        quiets a signalling NaN's payload; a numpy scalar of the field's type is written
        bit for bit. So their single values and NaN defaults are kept as numpy scalars
        (converters, ``default_row``), and a batch column with a NaN is written through
        numpy scalars (``ComponentBase._row_tuples``)."""
        return frozenset(f.name for f in self.fields
                         if not f.shape and f.dtype.kind == "f" and f.dtype.itemsize < 8)

    @cached_property
    def default_row(self) -> tuple[Any, ...]:
        """The default row as a tuple of Python values, in field order (a NaN default of
        a float32/float16 field as a numpy scalar: its bits, see ``narrow_floats``)."""
        row = self.defaults[0]
        narrow = self.narrow_floats
        return tuple(row[name] if name in narrow and np.isnan(row[name]) else value
                     for name, value in zip(self.field_names, row.item(), strict=True))

    @cached_property
    def exact_bounds(self) -> dict[str, tuple[type, Any, Any]]:
        """``exact_scalars`` without the converters: one-value field name -> (Python
        type, lowest, highest) (constructors' fast path)."""
        return {name: (kind, lowest, highest)
                for name, (_convert, kind, lowest, highest) in self.exact_scalars.items()}

    @cached_property
    def row_of(self) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
        """``values -> tuple of values in field order`` (every field present)."""
        names = self.field_names
        if len(names) >= 2:
            return operator.itemgetter(*names)
        if names:
            name = names[0]
            return lambda values: (values[name],)
        return lambda values: ()

    @cached_property
    def field_index(self) -> dict[str, int]:
        return {f.name: i for i, f in enumerate(self.fields)}

    @cached_property
    def element(self) -> np.dtype | None:
        """The one scalar dtype of every value in a row, or None when fields differ (or
        there are none). Such a row is also a plain vector: see ``Query.unstructured``."""
        kinds = {f.dtype for f in self.fields}
        return kinds.pop() if len(kinds) == 1 else None

    @cached_property
    def values_per_row(self) -> int:
        """How many ``element`` values one row holds (0 when there is no one dtype)."""
        element = self.element
        return self.dtype.itemsize // element.itemsize if element is not None else 0

    @cached_property
    def flat(self) -> bool:
        """True when no field has a per-row shape (one row is a tuple of scalars)."""
        return all(not f.shape for f in self.fields)

    def convert(self, name: str, value: Any) -> tuple[np.ndarray, int | None]:
        """Check and convert one field value; return (array, batch length or None)."""
        spec = self.field_spec(name)
        core = len(spec.shape)
        if type(value) is np.ndarray and value.dtype == spec.dtype and (
                spec.dtype.kind != "b" or _canonical_bools(value)):  # exact: nothing to check
            if value.ndim == core + 1 and value.shape[1:] == spec.shape:
                return value, value.shape[0]
            if value.shape == spec.shape:
                return value, None
        where = f"{self.name}.{name}"
        arr = self._checked(spec, value, where)
        count: int | None = None
        if arr.ndim == core + 1:
            count = arr.shape[0]
            item_shape = arr.shape[1:]
        elif arr.ndim <= core:
            item_shape = arr.shape
        else:
            raise ValueError(f"{where}: value of shape {arr.shape} does not fit field shape "
                             f"{spec.shape} (or a batch of them)")
        # item_shape must broadcast to spec.shape (and not beyond): right-aligned, each
        # dimension 1 or equal
        if not all(d == 1 or d == f for d, f in zip(reversed(item_shape),
                                                     reversed(spec.shape), strict=False)):
            raise ValueError(f"{where}: value of shape {arr.shape} does not fit field shape "
                             f"{spec.shape}")
        with np.errstate(all="ignore"):
            return arr.astype(spec.dtype, copy=False), count

    def convert_elements(self, name: str, value: Any) -> np.ndarray:
        """Check values for a field's elements (kind, range, whole numbers) whatever their
        shape; return them in the field's dtype (for writes into part of a subarray)."""
        spec = self.field_spec(name)
        arr = self._checked(spec, value, f"{self.name}.{name}")
        with np.errstate(all="ignore"):
            return arr.astype(spec.dtype, copy=False)

    @staticmethod
    def _checked(spec: FieldSpec, value: Any, where: str) -> np.ndarray:
        """``value`` as an array whose values all fit ``spec`` (not yet cast)."""
        try:
            arr = np.asarray(value)
        except Exception as exc:  # ragged lists and the like
            raise ValueError(f"{where}: cannot convert {value!r} to {spec.dtype}") from exc
        if arr.dtype.kind not in "biuf":
            if arr.dtype.kind == "O" and arr.size and all(type(v) is int for v in arr.flat):
                if spec.dtype.kind == "f":  # ints past 64 bits: exact as Python floats?
                    try:
                        arr = np.array([float(v) for v in arr.flat]).reshape(arr.shape)
                    except OverflowError:
                        raise ValueError(f"{where}: value {_short(value)} overflows "
                                         f"{spec.dtype}") from None
                    _check_float_range(arr, spec, where)
                    return arr
                raise ValueError(f"{where}: value {_short(value)} out of range for "
                                 f"{_what(spec)} {_limits(spec.dtype)}")
            raise ValueError(f"{where}: expected {spec.dtype} values, got {arr.dtype} ({value!r})")
        if spec.is_entity and arr.dtype.kind not in "iu":  # as key APIs: 1.0 or True is no key
            raise ValueError(f"{where}: entity keys are integers, got {arr.dtype} "
                             f"({_short(value)})")
        if arr.size and spec.dtype.kind in "iu":
            _check_int_range(arr, spec, where)
        elif arr.size and spec.dtype.kind == "f" and _may_overflow(arr.dtype, spec.dtype):
            _check_float_range(arr, spec, where)
        if spec.dtype.kind == "b":
            if arr.dtype.kind == "b":
                if not _canonical_bools(arr):  # other bytes seen as bool: make them 0/1
                    arr = arr.view(np.uint8) != 0
            elif not np.all((arr == 0) | (arr == 1)):
                raise ValueError(f"{where}: bool field needs True/False, got {value!r}")
        return arr


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _what(spec: FieldSpec) -> str:
    return "entity key" if spec.is_entity else str(spec.dtype)


def _limits(dtype: np.dtype) -> str:
    info = np.iinfo(dtype)
    return f"[{info.min}, {info.max}]"


def _check_int_range(arr: np.ndarray, spec: FieldSpec, where: str) -> None:
    """``ValueError`` unless every value of ``arr`` is a whole number the field holds.

    Floats are compared with the exact bounds ``min`` and ``max + 1`` (powers of two, so
    exact as floats): comparing with ``max`` itself would round it up (``2**63 - 1``
    becomes ``2.0**63``) and let ``2.0**63`` wrap to ``-2**63``, ``2.0**64`` to 0 (NULL).
    """
    info = np.iinfo(spec.dtype)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{where}: {spec.dtype} field needs whole numbers, got "
                             f"{_short(arr.tolist())}")
        lo, hi = float(arr.min()), float(arr.max())  # (a float16's own compare with
        # 2.0**64 overflows the bound, with a warning)
        if lo < float(info.min) or hi >= float(info.max + 1):
            raise ValueError(f"{where}: value {lo if lo < float(info.min) else hi} out of "
                             f"range for {_what(spec)} {_limits(spec.dtype)}")
        return
    # Python ints: numpy compares a bool with 2**64 - 1 (a uint64 field's max) by
    # converting the bound to a C long, which raised OverflowError
    lo, hi = int(arr.min()), int(arr.max())
    if lo < info.min or hi > info.max:
        raise ValueError(f"{where}: value {lo if lo < info.min else hi} out of range for "
                         f"{_what(spec)} {_limits(spec.dtype)}")


def _may_overflow(src: np.dtype, dst: np.dtype) -> bool:
    """Whether values of ``src`` can exceed the finite range of float ``dst``."""
    if src.kind == "f":
        return src.itemsize > dst.itemsize
    return src.kind in "iu" and float(np.iinfo(src).max) > float(np.finfo(dst).max)


def _check_float_range(arr: np.ndarray, spec: FieldSpec, where: str) -> None:
    """``ValueError`` for finite values beyond the field's float range (they would become
    infinities); infinities and NaN themselves are kept."""
    top = float(np.finfo(spec.dtype).max)
    # (in the source's own precision when wider: a long double past float64's range
    # would already be an infinity in float64, and pass as one)
    wide = arr if arr.dtype.kind == "f" and arr.dtype.itemsize > 8 else arr.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        over = (np.abs(wide) > top) & np.isfinite(wide)
    if over.any():
        worst = arr.reshape(-1)[int(np.argmax(over.reshape(-1)))]
        raise ValueError(f"{where}: value {worst} overflows {spec.dtype}")


INT64_MIN, UINT64_MAX = -(1 << 63), (1 << 64) - 1


def _converter(schema: ComponentSchema, spec: FieldSpec) -> Callable[[Any], tuple[Any, int | None]]:
    """One field's converter: Python scalars that need no numpy to check pass straight
    through (validated here, once); everything else takes ``schema.convert``."""
    name = spec.name
    slow = schema.convert

    def general(value: Any) -> tuple[Any, int | None]:
        return slow(name, value)

    if spec.shape:
        return general
    kind = spec.dtype.kind
    dtype = spec.dtype
    own = dtype.type  # numpy scalars of the field's own type are already exact
    # A 1-d array of the field's own dtype is a batch as it is (what ``convert`` returns
    # for it, without its lookups: a respawn of a few entities passes such slices).
    if kind == "f":
        big = float(np.finfo(dtype).max)
        narrow = name in schema.narrow_floats

        def to_float(value: Any) -> tuple[Any, int | None]:
            t = type(value)
            if t is float or t is own:
                if -big <= value <= big:  # NaN and inf take the general path
                    return value, None
            elif t is int and INT64_MIN <= value <= UINT64_MAX and -big <= value <= big:
                return float(value), None
            elif t is np.ndarray and value.ndim == 1 and value.dtype == dtype:
                return value, len(value)
            if not narrow:
                return slow(name, value)
            arr, count = slow(name, value)
            if count is None and type(arr) is np.ndarray and arr.ndim == 0:
                return arr[()], None  # a numpy scalar: written bit for bit (a NaN's payload)
            return arr, count

        return to_float
    if kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = int(info.min), int(info.max)

        def to_int(value: Any) -> tuple[Any, int | None]:
            t = type(value)
            if (t is int or t is own) and lo <= value <= hi:
                return value, None
            if t is np.ndarray and value.ndim == 1 and value.dtype == dtype:
                return value, len(value)
            return slow(name, value)

        return to_int

    def to_bool(value: Any) -> tuple[Any, int | None]:
        t = type(value)
        if t is bool:
            return value, None
        if (t is np.ndarray and value.ndim == 1 and value.dtype == dtype
                and _canonical_bools(value)):
            return value, len(value)
        return slow(name, value)

    return to_bool


class ComponentBase:
    """Base of every ``@component`` class: holds field values, one row or a batch."""

    __slots__ = ("_values", "_batch")
    _values: dict[str, Any]  # arrays, or Python scalars the field's converter checked
    _batch: int | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not args:
            try:
                exact = type(self).__component_exact__  # type: ignore[attr-defined]
            except AttributeError:  # not a @component class: schema_of says so below
                exact = None
            if exact is not None:
                # The common keyword form with Python scalars the fields hold exactly:
                # the call's own fresh kwargs dict becomes the values, unchanged.
                for key, value in kwargs.items():
                    try:
                        kind, lowest, highest = exact[key]
                    except KeyError:  # not a one-value field (or no field): check below
                        break
                    if type(value) is not kind or not lowest <= value <= highest:
                        break
                else:
                    self._values = kwargs
                    self._batch = None
                    return
        schema = schema_of(type(self))
        if not args:  # the keyword form: one converter call per given field
            converters = schema.converters
            exact = schema.exact_scalars
            values: dict[str, Any] = {}
            count: int | None = None
            for key, value in kwargs.items():
                fast = exact.get(key)
                if fast is not None and type(value) is fast[1] and fast[2] <= value <= fast[3]:
                    values[key] = value  # a Python scalar the field stores exactly
                    continue
                convert = converters.get(key)
                if convert is None:
                    raise TypeError(f"{schema.name} has no field {key!r}; fields are "
                                    f"{list(schema.field_names)}")
                arr, n = convert(value)
                if n is not None:
                    if count is not None and n != count:
                        raise ValueError(f"{schema.name}: batch lengths differ ({key!r} has "
                                         f"{n}, earlier fields have {count})")
                    count = n
                values[key] = arr
            self._values = values
            self._batch = count
            return
        names = schema.field_names
        if len(args) > len(names):
            raise TypeError(f"{schema.name} takes at most {len(names)} positional values "
                            f"({', '.join(names) or 'a tag has none'}), got {len(args)}")
        given = dict(zip(names, args, strict=False))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{schema.name} has no field {key!r}; fields are {list(names)}")
            if key in given:
                raise TypeError(f"{schema.name}: field {key!r} given twice")
            given[key] = value
        values = {}
        count = None
        for key, value in given.items():
            arr, n = schema.converters[key](value)
            if n is not None:
                if count is not None and n != count:
                    raise ValueError(f"{schema.name}: batch lengths differ ({key!r} has {n}, "
                                     f"earlier fields have {count})")
                count = n
            values[key] = arr
        self._values = values
        self._batch = count

    def __getattr__(self, name: str) -> Any:
        try:
            values = object.__getattribute__(self, "_values")
        except AttributeError:
            raise AttributeError(name) from None
        schema = schema_of(type(self))
        if name in values:
            value = values[name]
            if isinstance(value, np.ndarray | np.generic):
                return value
            return schema.field_spec(name).dtype.type(value)
        if name in schema.field_names:
            return schema.defaults[name][0]
        raise AttributeError(f"{schema.name} has no field {name!r}")

    def __repr__(self) -> str:
        try:
            values = object.__getattribute__(self, "_values")
        except AttributeError:  # construction failed half-way
            values = {}
        schema = schema_of(type(self))
        inner = ", ".join(
            f"{k}={v if isinstance(v, np.ndarray) else np.asarray(v, schema._specs[k].dtype)!r}"
            for k, v in values.items())
        return f"{schema.name}({inner})"

    def _write(self, data: np.ndarray, rows: slice | np.ndarray,
              select: np.ndarray | None = None) -> None:
        """Write these values (defaults for fields not given) into ``data[rows]``.

        ``select`` picks the batch entries that go to ``rows`` (for a partial batch).
        """
        schema = schema_of(type(self))
        for f in schema.fields:
            value = self._values.get(f.name)
            if value is None:
                value = schema.defaults[f.name][0]
            elif (select is not None and isinstance(value, np.ndarray)
                  and value.ndim > len(f.shape)):
                value = value[select]  # only batched fields; scalars broadcast
            data[f.name][rows] = value

    def _write_one(self, data: np.ndarray, row: int) -> None:
        """``_write_row`` of a component known not to be a batch."""
        values = self._values
        schema = type(self).__component_schema__  # type: ignore[attr-defined]
        if len(values) == len(schema.fields) and schema.flat:
            data[row] = schema.row_of(values)  # every field given: one tuple, in order
        else:
            self._write_row(data, row)

    def _one_row(self) -> tuple[Any, ...] | ComponentBase:
        """The one row a single (not batched) component writes, as ``_row_tuples(1)``
        gives it; the component itself when that is None (``_write_row`` writes it)."""
        values = self._values
        schema = type(self).__component_schema__  # type: ignore[attr-defined]
        if schema.flat and self._batch is None:  # (the common cases: no loop)
            if len(values) == len(schema.fields):
                return schema.row_of(values)
            if not values:
                return schema.default_row
        rows = self._row_tuples(1)
        return self if rows is None else rows[0]

    def _row_tuples(self, n: int) -> list[tuple[Any, ...]] | None:
        """The ``n`` rows these values write (a batch's entries, or the one entity's row
        repeated) as tuples in field order, defaults filled in: each is one structured
        item assignment. None when a field has a per-row shape."""
        schema = type(self).__component_schema__  # type: ignore[attr-defined]
        if not schema.flat:
            return None
        values = self._values
        if not values:
            return [schema.default_row] * n
        narrow = schema.narrow_floats
        if n == 1:  # (one row: the tuple itself, no columns to zip)
            row: list[Any] = []
            for name, default in zip(schema.field_names, schema.default_row, strict=True):
                value = values.get(name, default)
                if isinstance(value, np.ndarray) and value.ndim:
                    value = value.item()  # a batch of one: its exact Python scalar
                    if name in narrow and value != value:
                        return None  # a NaN: _write_row keeps its bits
                row.append(value)
            return [tuple(row)]
        columns: list[Any] = []
        for name, default in zip(schema.field_names, schema.default_row, strict=True):
            value = values.get(name, default)
            if isinstance(value, np.ndarray) and value.ndim:
                column = value.tolist()  # a batch: exact Python scalars
                if name in narrow and (total := sum(column)) != total:
                    return None  # a NaN (or inf - inf): _write_row keeps its bits
                columns.append(column)
            else:
                columns.append(itertools.repeat(value, n))
        return list(zip(*columns, strict=True))

    def _write_row(self, data: np.ndarray, row: int, item: int = 0) -> None:
        """Write these values into ``data[row]``: entry ``item`` of a batch, or the one
        entity's values."""
        schema = schema_of(type(self))
        values = self._values
        batch = self._batch is not None
        if not schema.flat:
            self._write(data, slice(row, row + 1), np.array([item]) if batch else None)
            return
        if not batch and len(values) == len(schema.fields):
            data[row] = tuple(values[n] for n in schema.field_names)
            return
        full = list(schema.default_row)
        index = schema.field_index
        for name, value in values.items():
            if batch and isinstance(value, np.ndarray) and value.ndim:
                value = value[item]
            full[index[name]] = value
        data[row] = tuple(full)

def _build_schema(cls: type, name: str) -> ComponentSchema:
    try:
        annotations = inspect.get_annotations(cls, eval_str=True)
    except Exception as exc:
        raise TypeError(f"component {name}: cannot resolve field annotations ({exc})") from exc
    fields: list[FieldSpec] = []
    for fname, ann in annotations.items():
        if fname.startswith("_"):
            continue
        where = f"{name}.{fname}"
        class_value = cls.__dict__.get(fname, inspect.Parameter.empty)
        if isinstance(class_value, FieldDecl):
            decl = class_value if isinstance(ann, FieldDecl) else FieldDecl(
                class_value.dtype if class_value.dtype is not None else ann,
                class_value.shape, class_value.default, class_value.label, class_value.editable,
                class_value.prefab)
        elif isinstance(ann, FieldDecl):
            if ann.dtype is None:
                raise TypeError(f"{where}: field() used as the annotation needs a dtype, "
                                f"e.g. field(np.float32, ...)")
            decl = ann if class_value is inspect.Parameter.empty else FieldDecl(
                ann.dtype, ann.shape, class_value, ann.label, ann.editable, ann.prefab)
        else:
            default = class_value if class_value is not inspect.Parameter.empty else None
            decl = FieldDecl(ann, (), default, None, True)
        dtype, is_entity = _scalar_dtype(decl.dtype, where)
        default = decl.default
        if default is None:
            default = NULL if is_entity else 0
        if decl.prefab and is_entity:
            raise TypeError(f"{where}: an Entity field cannot be prefab data (a prefab holds "
                            f"no entity keys)")
        fields.append(FieldSpec(fname, dtype, decl.shape, default, decl.label or fname,
                                decl.editable, is_entity, decl.prefab))
    dtype = np.dtype([f.numpy_spec for f in fields])
    defaults = np.zeros(1, dtype)
    partial = ComponentSchema(name, tuple(fields), dtype, defaults)
    for f in fields:
        arr, count = partial.convert(f.name, f.default)
        if count is not None:
            raise ValueError(f"{name}.{f.name}: default must be one value, got {f.default!r}")
        defaults[f.name][0] = arr
    defaults.flags.writeable = False
    return partial


def _migration(name: str, fields: tuple[str, ...], renamed: Mapping[str, str] | None,
               formerly: str | tuple[str, ...],
               convert: Mapping[str, Callable[[np.ndarray], Any]] | None,
               migrate: Callable[[np.ndarray], Mapping[str, Any]] | None) -> Migration:
    for option, keys in (("renamed", renamed or {}), ("convert", convert or {})):
        unknown = [k for k in keys if k not in fields]
        if unknown:
            hint = ""
            if option == "renamed":
                hint = "; renamed maps a current field to the name old saves use"
                flipped = {v: k for k, v in (renamed or {}).items()
                           if k in unknown and v in fields}
                if flipped:
                    hint += f" (the other way round: renamed={flipped!r}?)"
            raise TypeError(f"component {name}: {option} names {unknown}, which are not "
                            f"fields; fields are {list(fields)}{hint}")
    for new, old in (renamed or {}).items():
        if not isinstance(old, str) or not old or old == new:
            raise TypeError(f"component {name}: renamed[{new!r}] must be the old field name")
    if isinstance(formerly, str):
        formerly = (formerly,)
    if name in formerly:
        raise TypeError(f"component {name}: formerly lists its own name")
    for fn in [*(convert or {}).values(), *([migrate] if migrate is not None else [])]:
        if not callable(fn):
            raise TypeError(f"component {name}: converters and migrate must be callables")
    return Migration(dict(renamed or {}), tuple(formerly), dict(convert or {}), migrate)


_C = TypeVar("_C", bound=type)


@overload
def component(cls: _C, /) -> _C: ...
@overload
def component(*, name: str | None = None, renamed: Mapping[str, str] | None = None,
              formerly: str | tuple[str, ...] = (),
              convert: Mapping[str, Callable[[np.ndarray], Any]] | None = None,
              migrate: Callable[[np.ndarray], Mapping[str, Any]] | None = None,
              ) -> Callable[[_C], _C]: ...


@dataclass_transform(field_specifiers=(field,))
def component(cls: type | None = None, /, *, name: str | None = None,
              renamed: Mapping[str, str] | None = None, formerly: str | tuple[str, ...] = (),
              convert: Mapping[str, Callable[[np.ndarray], Any]] | None = None,
              migrate: Callable[[np.ndarray], Mapping[str, Any]] | None = None) -> Any:
    """Class decorator: declare a component type from annotated fields.

    ``@component`` or ``@component(name="pinned")``; the name (class name by default)
    identifies the component in save files and levels. Schema changes that old save files
    must survive are declared here: ``renamed={"new_field": "old_field"}``,
    ``formerly=("OldClassName",)``, ``convert={"hp": np.rint}`` (opt-in narrowing) and
    ``migrate=fn`` (old rows -> ``{field: column}``); see :class:`Migration`.
    """

    def wrap(c: type) -> type:
        comp_name = name or c.__name__
        schema = _build_schema(c, comp_name)
        schema = replace(schema, migration=_migration(comp_name, schema.field_names, renamed,
                                                      formerly, convert, migrate))
        schema.defaults.flags.writeable = False
        namespace = {k: v for k, v in c.__dict__.items()
                     if k not in schema.field_names and k not in ("__dict__", "__weakref__")}
        namespace.pop("__annotations__", None)
        namespace["__slots__"] = ()
        namespace[SCHEMA_ATTR] = schema
        namespace[EXACT_ATTR] = schema.exact_bounds  # constructors' fast path
        new_cls = type(c.__name__, (ComponentBase,), namespace)
        new_cls.__qualname__ = c.__qualname__
        new_cls.__annotations__ = dict(c.__dict__.get("__annotations__", {}))
        return new_cls

    return wrap(cls) if cls is not None else wrap


def schema_of(ctype: Any) -> ComponentSchema:
    """The schema of a component type (``TypeError`` if it is not one)."""
    schema = getattr(ctype, SCHEMA_ATTR, None)
    if not isinstance(schema, ComponentSchema):
        raise TypeError(f"{ctype!r} is not a component type (decorate it with @component)")
    return schema


def type_schema(ctype: Any) -> ComponentSchema:
    """``schema_of`` for an argument that must be the component class itself: an
    instance (which finds its class's schema too) is a ``TypeError`` naming the mistake."""
    schema = schema_of(ctype)
    if not isinstance(ctype, type):
        raise TypeError(f"pass the component class {schema.name} itself, not an instance "
                        f"({schema.name}(...))")
    return schema


def is_component_type(obj: Any) -> bool:
    return isinstance(getattr(obj, SCHEMA_ATTR, None), ComponentSchema)


def detached(comp: ComponentBase) -> ComponentBase:
    """A copy of a component instance that no longer shares the caller's arrays."""
    twin = object.__new__(type(comp))
    twin._values = {k: v.copy() if isinstance(v, np.ndarray) else v
                    for k, v in comp._values.items()}
    twin._batch = comp._batch
    return twin


def as_component(comp: object) -> ComponentBase:
    """``comp``, checked to be a component instance (``TypeError`` saying what it is)."""
    if not isinstance(comp, ComponentBase):
        if is_component_type(comp):
            raise TypeError(f"pass a component instance, e.g. {schema_of(comp).name}(), "
                            f"not the class")
        raise TypeError(f"{comp!r} is not a component instance")
    return comp


def component_values(comp: object) -> tuple[type, Mapping[str, np.ndarray], int | None]:
    """Validate a component instance; return (type, values, batch length)."""
    checked = as_component(comp)
    return type(checked), checked._values, checked._batch
