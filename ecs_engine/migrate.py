"""Schema migration: fit saved rows to the component's current schema, by field name.

Automatic, for the changes that cannot lose data: a field added since the save takes its
default, a widening dtype change (``lossless_cast``: numpy's "safe" casts, except integers
into floats too short for them) is cast. A removed field
is dropped with a ``SchemaChangeWarning`` that also names the fields filled with defaults.

Declared on the component (``@component(...)``, see :class:`~ecs_engine.component.Migration`),
for the changes users actually make: a renamed field (``renamed={"new": "old"}``), a renamed
class (``formerly=("Old",)``), an opt-in narrowing (``convert={"hp": np.rint}``: the
converter's values must still fit, or the load fails), and a hook for anything else
(``migrate=fn``: old rows -> ``{field: column}``, vectorised).

Anything else (narrowing without a converter, a shape change) is a ``SaveFileError`` naming
the component, the field and both types, and the world stays as it was.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ecs_engine.component import ComponentSchema, schema_of


class SchemaChangeWarning(UserWarning):
    """A save was loaded into a changed schema and lost data or used defaults."""


def _field_types(dtype: np.dtype) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """Field name -> (scalar dtype, per-row shape)."""
    out = {}
    for name in dtype.names or ():
        fdt = dtype.fields[name][0]  # type: ignore[index]
        base, shape = fdt.subdtype if fdt.subdtype is not None else (fdt, ())
        out[name] = (base, tuple(shape))
    return out


def find_saved_type(types: Iterable[type], saved_name: str) -> type | None:
    """The component type a save's ``saved_name`` belongs to: its current name, or a name
    it declares in ``formerly`` (None if neither)."""
    for ctype in types:
        schema = schema_of(ctype)
        if schema.name == saved_name or saved_name in schema.migration.formerly:
            return ctype
    return None


def unknown_component_hint(saved_names: Sequence[str]) -> str:
    """What to do about saved components no registered type claims."""
    if len(saved_names) == 1:
        (name,) = saved_names
        return (f"unknown component {name!r}: register its type first "
                f"(world.register({name})); if the class was renamed, keep the saved name "
                f"with @component(name={name!r}) or declare @component(formerly={name!r})")
    listed = ", ".join(repr(n) for n in saved_names)
    return (f"unknown components {listed}: register their types first "
            f"(world.register({', '.join(saved_names)})); if a class was renamed, keep the "
            f"saved name with @component(name=...) or declare @component(formerly=...)")


def lossless_cast(old: np.dtype, new: np.dtype) -> bool:
    """Whether casting ``old`` to ``new`` keeps every value: numpy's "safe" casts, except
    integers into floats whose mantissa is too short for them (int64 -> float64 is "safe"
    to numpy, yet rounds every value past 2**53)."""
    if not np.can_cast(old, new, "safe"):
        return False
    if old.kind in "iu" and new.kind in "fc":
        return old.itemsize * 8 - (old.kind == "i") <= np.finfo(new).nmant + 1
    return True


def _fits(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Boolean per value: representable in ``dtype`` without wrapping or rounding."""
    if dtype.kind == "b":
        return (values == 0) | (values == 1)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if values.dtype.kind == "u":
            return values <= info.max
        if values.dtype.kind in "ib":
            as_int = values.astype(np.int64)
            return (as_int >= info.min) & (as_int <= min(info.max, np.iinfo(np.int64).max))
        finite = np.isfinite(values)
        safe = np.where(finite, values, 0)
        # Bounds as powers of two, exact in every float type: info.max (2**63 - 1) as a
        # float rounds up to 2**63, which would pass a <= test and wrap.
        top = 2.0 ** info.bits if dtype.kind == "u" else 2.0 ** (info.bits - 1)
        return finite & (safe == np.round(safe)) & (safe >= info.min) & (safe < top)
    with np.errstate(over="ignore", invalid="ignore"):  # float targets: no overflow to inf
        cast = values.astype(dtype)
    return ~(np.isinf(cast) & ~np.isinf(values.astype(np.float64)))


def _converted(where: str, fn: Any, column: np.ndarray, dtype: np.dtype,
               shape: tuple[int, ...]) -> np.ndarray:
    from ecs_engine.savefile import SaveFileError

    try:
        out = np.asarray(fn(column))
    except Exception as exc:  # a user's converter: report it with the field it was for
        raise SaveFileError(f"{where}: the converter raised {type(exc).__name__}: {exc}") \
            from None
    if out.shape != column.shape[:1] + shape:
        raise SaveFileError(f"{where}: the converter returned shape {out.shape}, expected "
                            f"{column.shape[:1] + shape}")
    if out.dtype.kind not in "biuf":
        raise SaveFileError(f"{where}: the converter returned {out.dtype} values")
    bad = ~_fits(out, dtype)
    if bad.any():
        first = int(np.flatnonzero(bad.reshape(len(out), -1).any(axis=1))[0]) if out.ndim else 0
        sample = out.reshape(len(out), -1)[first] if out.ndim else out
        raise SaveFileError(f"{where}: {int(bad.sum())} converted value(s) do not fit "
                            f"{dtype} (row {first}: {sample.tolist()})")
    return out.astype(dtype)


def migrate_rows(name: str, data: np.ndarray, schema: ComponentSchema) -> np.ndarray:
    """Return ``data`` in ``schema.dtype`` (the same array when nothing changed)."""
    if data.dtype == schema.dtype:
        return data
    from ecs_engine.savefile import SaveFileError

    migration = schema.migration
    old = _field_types(data.dtype)
    hooked: Mapping[str, Any] = {}
    if migration.migrate is not None:
        try:
            hooked = dict(migration.migrate(data))
        except Exception as exc:
            raise SaveFileError(f"component {name!r}: its migrate hook raised "
                                f"{type(exc).__name__}: {exc}") from None
        unknown = [k for k in hooked if k not in schema.field_names]
        if unknown:
            raise SaveFileError(f"component {name!r}: its migrate hook returned {unknown}, "
                                f"which are not fields; fields are {list(schema.field_names)}")
    out = np.empty(len(data), schema.dtype)
    used: set[str] = set()
    defaulted: list[str] = []
    for spec in schema.fields:
        where = f"component {name!r} field {spec.name!r}"
        source = migration.renamed.get(spec.name, spec.name)
        if spec.name in hooked:
            column = np.asarray(hooked[spec.name])
            if column.ndim <= len(spec.shape):  # one value for every row
                column = np.broadcast_to(column, (len(data), *spec.shape))
            out[spec.name] = _converted(f"{where} (migrate hook)", _same, column, spec.dtype,
                                        spec.shape)
            used.add(source)
            continue
        if source not in old:
            out[spec.name] = schema.defaults[spec.name][0]
            defaulted.append(spec.name)
            continue
        used.add(source)
        old_dtype, old_shape = old[source]
        if source != spec.name:
            where += f" (saved as {source!r})"
        converter = migration.convert.get(spec.name)
        if converter is not None:
            out[spec.name] = _converted(where, converter, data[source], spec.dtype, spec.shape)
            continue
        if old_shape != spec.shape:
            raise SaveFileError(f"{where}: saved with shape {old_shape}, the schema now has "
                                f"{spec.shape}; cannot convert (declare "
                                f"@component(migrate=...) to reshape it)")
        if not lossless_cast(old_dtype, spec.dtype):
            rounding = (f" ({spec.dtype} holds integers exactly only up to "
                        f"2**{np.finfo(spec.dtype).nmant + 1})"
                        if np.can_cast(old_dtype, spec.dtype, "safe") else "")
            raise SaveFileError(f"{where}: saved as {old_dtype}, the schema now has "
                                f"{spec.dtype}; converting would lose values{rounding} (only "
                                f"widening changes are automatic; opt in with "
                                f"@component(convert={{{spec.name!r}: fn}}))")
        out[spec.name] = data[source]
    dropped = [f for f in old if f not in used]
    if dropped:  # a pure addition loses nothing: silent; a loss says what replaced it
        parts = []
        if dropped:
            parts.append(f"the save has field(s) {dropped} the schema no longer declares; "
                         f"their values are dropped")
        if defaulted:
            parts.append(f"field(s) {defaulted} are not in the save and were filled with "
                         f"their defaults")
        hint = (" (a renamed field? declare @component(renamed={'new': 'old'}))"
                if dropped and defaulted else "")
        warnings.warn(SchemaChangeWarning(f"component {name!r}: " + "; ".join(parts) + hint),
                      stacklevel=4)
    return out


def _same(column: np.ndarray) -> np.ndarray:
    return column
