"""Query blocks opened and closed, and their columns taken, in C where the extension is
built.

``with world.query(A, B) as q: q[A]...`` makes at least four calls: ``World.query``,
``Query.__enter__``, ``Query.__getitem__`` (or ``unstructured``) and ``Query.__exit__``.
In the common case each is a few attribute reads and writes, yet a Python call costs
about as much as esper's whole cached ``get_components``, which made entering and leaving
a block ~4x esper's call and a block that takes one column ~0.75 µs before any numpy work.
``_queryblock.c`` runs those common cases in C over the same ``__slots__`` (at the offsets
of their member descriptors) and the same store attributes, and calls the Python methods
for everything else, so behaviour is the same either way. Without a C compiler, or with
``ECS_NO_C=1``, the Python methods run as they are.
"""

from __future__ import annotations

import numpy as np

from ecs_engine.native import c_module


def install(world: type, state: type, query: type, plan: type, clock: type,
            no_keys: object, store: type, chunk_rows: int) -> bool:
    """Put the C fast paths in front of ``World.query``, ``Query.__enter__``,
    ``Query.__exit__``, ``Query.__getitem__`` and ``Query.unstructured`` (``state``:
    World's slotted base holding the counters; ``store``: the class of the stores whose
    columns a query hands out, versioned per ``chunk_rows`` rows); False (nothing
    changed) where the extension is missing or switched off."""
    _queryblock = c_module("_queryblock")
    if _queryblock is None:
        return False
    if query.__dict__.get("__enter__") is _queryblock.enter:  # installed already (its
        return True  # Python methods are the slow paths: they must stay the Python ones)
    # (getattr/setattr: the classes keep their typed Python methods for type checkers)
    slow = [getattr(cls, name) for cls, name in ((query, "__enter__"), (query, "__exit__"),
                                                 (world, "query"))]
    _queryblock.configure(query, plan, clock, state, no_keys, *slow)
    _queryblock.configure_columns(store, np.ndarray, chunk_rows,
                                  *(getattr(query, name) for name in ("__getitem__",
                                                                      "unstructured")))
    setattr(query, "__enter__", _queryblock.enter)  # noqa: B010
    setattr(query, "__exit__", _queryblock.exit)  # noqa: B010
    setattr(query, "__getitem__", _queryblock.column)  # noqa: B010
    setattr(query, "unstructured", _queryblock.flat_column)  # noqa: B010
    setattr(world, "query", _queryblock.query)  # noqa: B010
    return True
