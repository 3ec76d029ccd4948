"""Query blocks opened and closed in C, where the extension is built.

``with world.query(A, B) as q:`` makes three calls: ``World.query``, ``Query.__enter__``
and ``Query.__exit__``. In the common case each is a few attribute reads and writes, yet
a Python call costs about as much as esper's whole cached ``get_components``, which
made entering and leaving a block ~4x esper's call. ``_queryblock.c`` runs those common
cases in C over the same ``__slots__`` (at the offsets of their member descriptors) and
calls the Python methods for everything else, so behaviour is the same either way.
Without a C compiler, or with ``ECS_NO_C=1``, the Python methods run as they are.
"""

from __future__ import annotations

import os


def install(world: type, state: type, query: type, plan: type, clock: type,
            no_keys: object) -> bool:
    """Put the C fast paths in front of ``World.query``, ``Query.__enter__`` and
    ``Query.__exit__`` (``state``: World's slotted base holding the counters); False
    (nothing changed) where the extension is missing or switched off."""
    if os.environ.get("ECS_NO_C"):
        return False
    try:
        from ecs_engine import _queryblock
    except ImportError:
        return False
    if query.__dict__.get("__enter__") is _queryblock.enter:  # installed already (its
        return True  # Python methods are the slow paths: they must stay the Python ones)
    # (getattr/setattr: the classes keep their typed Python methods for type checkers)
    slow = [getattr(cls, name) for cls, name in ((query, "__enter__"), (query, "__exit__"),
                                                 (world, "query"))]
    _queryblock.configure(query, plan, clock, state, no_keys, *slow)
    setattr(query, "__enter__", _queryblock.enter)  # noqa: B010
    setattr(query, "__exit__", _queryblock.exit)  # noqa: B010
    setattr(world, "query", _queryblock.query)  # noqa: B010
    return True
