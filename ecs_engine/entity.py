"""Entity keys: 64-bit generational handles (low 32 bits slot, high 32 bits generation)."""

from __future__ import annotations

import operator
from typing import Any, NewType, TypeAlias

import numpy as np

Entity = NewType("Entity", int)
"""A key: ``generation << 32 | slot``. Stored in component columns as ``uint64``."""

KeyLike: TypeAlias = int | np.integer[Any]
"""What takes a single key: an :data:`Entity`, an ``int`` or a numpy integer (an element of
a key array)."""

NULL: Entity = Entity(0)
"""The key that is never alive (generation 0 is never handed out)."""

KEY_DTYPE = np.dtype("<u8")
SLOT_BITS = 32
SLOT_MASK = 0xFFFF_FFFF


def make_key(slot: int, generation: int) -> Entity:
    """Pack a slot index and a generation into one key."""
    return Entity((int(generation) << SLOT_BITS) | int(slot))


def key_slot(key: KeyLike) -> int:
    """The slot index of a key."""
    return int(key) & SLOT_MASK


def key_generation(key: KeyLike) -> int:
    """The generation of a key."""
    return int(key) >> SLOT_BITS


def format_key(key: KeyLike) -> str:
    """A key as people read it, e.g. ``Entity(slot=3, gen=2)`` or ``NULL`` (how errors and
    reprs name keys)."""
    if int(key) == 0:
        return "NULL"
    return f"Entity(slot={key_slot(key)}, gen={key_generation(key)})"


key_str = format_key  # the engine's internal spelling


def reject_repeats(keys: np.ndarray, op: str) -> None:
    """``ValueError`` if a key occurs twice in ``keys``, naming the first and where, e.g.
    ``Entity(slot=3, gen=1) at indexes 0 and 4``."""
    if len(keys) < 2:
        return
    ordered = np.sort(keys)  # (a sort and one compare cost less than np.unique)
    if not np.count_nonzero(ordered[1:] == ordered[:-1]):
        return
    seen: dict[int, int] = {}
    for i, key in enumerate(keys.tolist()):
        if key in seen:
            raise ValueError(f"{op}: the same entity key appears more than once "
                             f"({format_key(key)} at indexes {seen[key]} and {i})")
        seen[key] = i


def as_key(value: object, op: str) -> int:
    """``value`` as an int key, for every operation that takes one key.

    ``TypeError`` for anything that is not an integer (floats, numeric strings, bools,
    arrays): ``int()`` would truncate ``3.7`` or parse ``"3"`` into some other entity's
    key. Any integer passes; whether it is a live key is the caller's question.
    """
    try:
        if type(value) is bool:
            raise TypeError
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        if isinstance(value, list | tuple) or (isinstance(value, np.ndarray) and value.ndim):
            batch = BATCH_OF.get(op)
            hint = (f"for many keys use world.{batch}(keys)" if batch
                    else "many keys go through the batch functions")
            what = "an array" if isinstance(value, np.ndarray) else f"a {type(value).__name__}"
            raise TypeError(f"{op}: {what} of {len(value)} keys is not an entity key; "
                            f"{hint}") from None
        raise TypeError(f"{op}: {value!r} is not an entity key (an int, e.g. from "
                        f"spawn; many keys go through the batch functions)") from None


BATCH_OF = {"is_alive": "alive", "get": "get_batch", "try_get": "get_batch",
            "despawn": "despawn_batch", "add": "add_batch", "remove": "remove_batch"}
"""The vectorised counterpart of each one-key operation (named in errors)."""


_SLOT_MASK_KEY = np.array(SLOT_MASK, np.uint64)  # (a 0-d array: ``&`` with it costs less
_SLOT_MASK_KEY.flags.writeable = False  # than with a scalar made on every call)


def key_slots(keys: np.ndarray) -> np.ndarray:
    """Slot indices of a uint64 key array (int64)."""
    return (keys & _SLOT_MASK_KEY).view(np.int64)  # masked values fit: a view is exact


def as_keys(keys: object) -> np.ndarray:
    """Convert a sequence of keys to a 1-D ``uint64`` array (no copy if already one)."""
    arr = np.asarray(keys)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"entity keys must be a 1-D sequence, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "ui":
        raise TypeError(f"entity keys must be integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "i" and arr.size and arr.min() < 0:
        raise ValueError("entity keys cannot be negative")
    return arr.astype(KEY_DTYPE, copy=False)
