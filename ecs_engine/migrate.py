"""Schema migration: fit saved rows to the component's current schema, by field name.

A field added since the save takes its default, a removed field is dropped with a
``SchemaChangeWarning``, a widening dtype change (``np.can_cast(old, new, "safe")``) is
cast; anything else (narrowing, a change of kind numpy calls unsafe, a shape change) is a
``SaveFileError`` naming the component, the field and both types.
"""

from __future__ import annotations

import warnings

import numpy as np

from ecs_engine.component import ComponentSchema


class SchemaChangeWarning(UserWarning):
    """A save was loaded into a changed schema and lost data (a field was removed)."""


def _field_types(dtype: np.dtype) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """Field name -> (scalar dtype, per-row shape)."""
    out = {}
    for name in dtype.names or ():
        fdt = dtype.fields[name][0]  # type: ignore[index]
        base, shape = fdt.subdtype if fdt.subdtype is not None else (fdt, ())
        out[name] = (base, tuple(shape))
    return out


def migrate_rows(name: str, data: np.ndarray, schema: ComponentSchema) -> np.ndarray:
    """Return ``data`` in ``schema.dtype`` (the same array when nothing changed)."""
    if data.dtype == schema.dtype:
        return data
    from ecs_engine.savefile import SaveFileError

    old = _field_types(data.dtype)
    for spec in schema.fields:
        if spec.name not in old:
            continue
        old_dtype, old_shape = old[spec.name]
        where = f"component {name!r} field {spec.name!r}"
        if old_shape != spec.shape:
            raise SaveFileError(f"{where}: saved with shape {old_shape}, the schema now has "
                                f"{spec.shape}; cannot convert")
        if not np.can_cast(old_dtype, spec.dtype, "safe"):
            raise SaveFileError(f"{where}: saved as {old_dtype}, the schema now has "
                                f"{spec.dtype}; converting would lose values (only widening "
                                f"changes are automatic)")
    out = np.empty(len(data), schema.dtype)
    for spec in schema.fields:
        out[spec.name] = data[spec.name] if spec.name in old else schema.defaults[spec.name][0]
    for dropped in [f for f in old if f not in schema.field_names]:
        warnings.warn(SchemaChangeWarning(
            f"component {name!r}: the save has a field {dropped!r} the schema no longer "
            f"declares; its values are dropped"), stacklevel=4)
    return out
