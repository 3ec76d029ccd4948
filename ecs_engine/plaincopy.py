"""A deep copy of plain resource data (dicts, lists, numbers, strings) without
``copy.deepcopy``'s per-object dispatch and memo bookkeeping.

Rollback records the world's resources every tick; they are small JSON-like values
(input flags, a camera dict, the tick's event list), and ``copy.deepcopy`` spends most
of its time on machinery such values do not need (measured: about 4x slower on the demo's
resources). Anything else (tuples, numpy values, objects, a container reachable twice,
whose sharing deepcopy preserves) falls back to ``copy.deepcopy`` for the whole value, so
the result is always what ``copy.deepcopy`` would give.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["copy_resources"]

_ATOMS = frozenset({str, int, float, bool, type(None)})  # immutable: deepcopy returns them


class _NotPlain(Exception):
    """The value holds something only ``copy.deepcopy`` copies faithfully."""


def _plain(value: Any, seen: set[int]) -> Any:
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is not dict and kind is not list:
        raise _NotPlain
    if id(value) in seen:  # shared (or cyclic): deepcopy keeps that sharing, we would not
        raise _NotPlain
    seen.add(id(value))
    if kind is list:
        return [v if type(v) in _ATOMS else _plain(v, seen) for v in value]
    out = {}
    for k, v in value.items():
        if type(k) not in _ATOMS:
            raise _NotPlain
        out[k] = v if type(v) in _ATOMS else _plain(v, seen)
    return out


def copy_resources(value: Any) -> Any:
    """``copy.deepcopy(value)``, fast for plain dicts and lists of numbers and strings."""
    try:
        return _plain(value, set())
    except _NotPlain:
        return copy.deepcopy(value)
