"""Record: one entity's component, read and written through the store by key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ecs_engine.entity import KeyLike, format_key, key_slot, key_str
from ecs_engine.storage import CHUNK_ROWS, PARENT_LINK

if TYPE_CHECKING:
    from ecs_engine.slotmap import SlotMap
    from ecs_engine.storage import ComponentStore




class Record:
    """``world.get(e, T)``: ``rec["x"]`` or ``rec.x`` reads, ``rec["x"] = 5`` or
    ``rec.x = 5`` writes the live store. (A field named like a method of this class,
    e.g. ``keys``, is reached only as ``rec["keys"]``.)

    Every access finds the entity's row again, so a record stays correct when rows move
    (swap-removes, groups, restores) and raises ``KeyError`` once the entity or its
    component is gone, instead of silently touching another entity's row.
    """

    # ``_at``: (store, layout version, row, chunk of the row) -- the entity's row in the
    # store as of that layout version (a version names one layout, and a restore brings
    # it back with it, so the row is right while the version matches). One tuple, since
    # every attribute read on ``self`` goes through ``__getattr__``'s lookup hook.
    __slots__ = ("_store", "_key", "_slots", "_at")

    def __init__(self, store: ComponentStore, key: KeyLike, slots: SlotMap | None = None,
                 row: int = -1) -> None:
        """``row``: the key's row in ``store`` now, when the caller just looked it up."""
        self._store = store
        self._key = key
        self._slots = slots
        self._at = ((store, store.layout_version, row, row // CHUNK_ROWS) if row >= 0
                    else (store, -1, -1, -1))  # -1: not looked up yet

    def _row(self) -> int:
        store, layout, row, _chunk = self._at
        if store.layout_version == layout:
            return row
        slot = key_slot(self._key)
        row = store.sparse.item(slot) if slot < len(store.sparse) else -1
        if row < 0 or store.entities.item(row) != self._key:
            if self._slots is not None and not self._slots.is_alive(self._key):
                raise KeyError(f"record of {store.schema.name}: {self._slots.why_dead(self._key)}")
            raise KeyError(f"{key_str(self._key)} no longer has {store.schema.name}")
        self._at = (store, store.layout_version, row, row // CHUNK_ROWS)
        return row

    def __getitem__(self, name: str | tuple[str, Any]) -> Any:
        """A field's value; a subarray field as a read-only copy (``rec["kinds", 2]``
        reads one element)."""
        store, layout, row, _chunk = self._at
        if store.layout_version == layout:  # the row is still where it was
            try:
                return store.scalar_columns[name][row]  # the common case: one value
            except (KeyError, TypeError):  # another field, a (name, index) key, a typo
                pass
        index = None
        if type(name) is str:
            column = self._store.columns.get(name)
            if column is None:
                self._check_field(name)
        else:
            name, index = self._split(name)
            column = self._store.columns[name]
        row = self._row()
        value = column[row]  # type: ignore[index]
        if isinstance(value, np.ndarray):
            # A copy: a view would go stale when rows move and could write past change
            # tracking. Read-only, so ``rec["kinds"][2] = 7`` fails loudly instead of
            # writing a copy: write ``rec["kinds", 2] = 7``.
            value = value[index].copy() if index is not None else value.copy()
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        return value

    def __setitem__(self, name: str | tuple[str, Any], value: Any) -> None:
        """Write a field (``rec["x"] = 5``) or elements of a subarray field
        (``rec["kinds", 2] = 7``, ``rec["kinds", 1:3] = [4, 5]``), checked and tracked."""
        store, layout, row, chunk = self._at
        if store.layout_version == layout:  # the row is still where it was
            try:
                writer, exact, lowest, highest = store.scalar_writes[name]
            except (KeyError, TypeError):  # another field, a (name, index) key, a typo
                pass
            else:  # a one-value field
                if type(value) is exact and lowest <= value <= highest:
                    # a Python scalar the field holds exactly: no conversion to check
                    writer[row] = value
                    version = next(store._versions)  # store.touch_row(row), inlined
                    store.data_version = version
                    store.chunk_marks[chunk] = version
                    return
        if store.schema.name == PARENT_LINK:
            raise TypeError("ChildOf is written with world.set_parent, which checks cycles "
                            "and keeps depths right; a record cannot write it")
        if type(name) is not str:
            name, index = self._split(name)
            elements = store.schema.convert_elements(name, value)
            current = store.columns[name][self._row()].copy()
            current[index] = elements
            value = current
        convert = store.schema.converters.get(name)
        if convert is None:
            self._check_field(name)
        arr, count = convert(value)  # type: ignore[misc]
        if count is not None:
            raise ValueError(f"{store.schema.name}.{name}: one value expected, got a "
                             f"batch of {count}")
        row = self._row()
        store.columns[name][row] = arr
        store.touch_row(row)

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails: fields, or a typo
        if name.startswith("__") or name in Record.__slots__:
            raise AttributeError(name)
        schema = self._store.schema
        if name not in schema.field_names:
            raise AttributeError(f"{schema.name} has no field {name!r}; fields are "
                                 f"{list(schema.field_names)}")
        return self[name]

    def __setattr__(self, name: str, value: Any) -> None:
        if name in Record.__slots__:
            object.__setattr__(self, name, value)
        elif name in self._store.schema.field_names:
            self[name] = value
        else:
            raise AttributeError(f"{self._store.schema.name} has no field {name!r}; fields "
                                 f"are {list(self._store.schema.field_names)}")

    def _split(self, key: str | tuple[str, Any]) -> tuple[str, Any]:
        if isinstance(key, tuple):
            if len(key) != 2:
                raise KeyError(f"record keys are a field name or (name, index), got {key!r}")
            name, index = key
            self._check_field(name)
            if not self._store.schema.field_spec(name).shape:
                raise KeyError(f"{self._store.schema.name}.{name} is not a subarray field; "
                               f"write rec[{name!r}]")
            return name, index
        self._check_field(key)
        return key, None

    def _check_field(self, name: str) -> None:
        if name not in self._store.schema.field_names:
            raise KeyError(f"{self._store.schema.name} has no field {name!r}; fields are "
                           f"{list(self._store.schema.field_names)}")

    @property
    def dtype(self) -> np.dtype:
        """The component's structured dtype."""
        return self._store.schema.dtype

    def keys(self) -> tuple[str, ...]:
        return self._store.schema.field_names

    def __iter__(self) -> Iterator[Any]:
        return iter(self.item())

    def __len__(self) -> int:
        return len(self._store.schema.fields)

    def item(self) -> tuple[Any, ...]:
        """The values as a tuple of Python objects (a copy)."""
        return self._store.data[self._row()].item()

    def tolist(self) -> Any:
        """Like ``np.void.tolist``: the values as a tuple."""
        return self._store.data[self._row()].tolist()

    def as_dict(self) -> dict[str, Any]:
        """Field name -> value (a copy; subarrays as lists)."""
        row = self._store.data[self._row()]
        return {n: row[n].tolist() for n in self.keys()}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record):
            other = other.item()
        if isinstance(other, np.void):
            other = other.item()
        if isinstance(other, tuple):
            mine = self._store.data[self._row() : self._row() + 1]
            try:
                theirs = np.array([other], self._store.schema.dtype)
            except (TypeError, ValueError):
                return False
            return bool(mine.tobytes() == theirs.tobytes())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable view

    def __repr__(self) -> str:
        try:
            values = self.as_dict()
        except KeyError as exc:
            return f"<{self._store.schema.name} record: {exc.args[0]}>"
        shown = []
        for spec in self._store.schema.fields:  # keys as Entity(slot=, gen=), not raw ints
            value = values[spec.name]
            if spec.is_entity:
                value = (format_key(value) if not spec.shape else np.array2string(
                    np.asarray(value, np.uint64), separator=", ", formatter={"int": format_key},
                    max_line_width=1 << 30).replace("\n", ""))
                shown.append(f"{spec.name}={value}")
            else:
                shown.append(f"{spec.name}={value!r}")
        return f"{self._store.schema.name}({', '.join(shown)})"
