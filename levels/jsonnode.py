"""Checked access to an editor's JSON: every read names its JSON path in the error.

Editor files (LDtk projects, Tiled maps) are large documents written by other programs and
sometimes by hand. :class:`Node` wraps one JSON value with its path from the document root, so
a missing key or a wrong type anywhere becomes a :class:`LevelError` such as
``levels[0](Level_0).layerInstances[2](Entities).entityInstances[5](Enemy).px: expected an
array of 2 numbers, got "12"`` instead of a ``KeyError`` deep inside the loader.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.safe_read import read_regular

__all__ = ["MAX_EDITOR_BYTES", "Node", "load_json"]

MAX_EDITOR_BYTES = 256 * 2**20
"""Editor projects can be large (every level of a game in one file), but not this large."""


def load_json(path: Path) -> Any:
    """Parse a JSON file; syntax errors become a :class:`LevelError` with ``line:col``."""
    raw = read_regular(path, MAX_EDITOR_BYTES, "editor file")  # never a FIFO or a device
    try:
        text = raw.decode("utf-8-sig")  # editors on Windows may write a byte-order mark
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise LevelError(path, "not UTF-8 text", where=f"line {line}:{col}") from exc
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise LevelError(path, f"invalid JSON: {exc.msg}",
                         where=f"line {exc.lineno}:{exc.colno}") from exc
    except (ValueError, RecursionError) as exc:
        raise LevelError(path, f"invalid JSON: {exc}") from exc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class Node:
    """One JSON value and where it is (``file`` and a JSON path)."""

    __slots__ = ("file", "path", "value")

    def __init__(self, file: Path, value: Any, path: str = "") -> None:
        self.file = file
        self.value = value
        self.path = path

    def fail(self, message: str, key: str | int | None = None) -> NoReturn:
        raise LevelError(self.file, message, where=self._join(key) or None)

    def _join(self, key: str | int | None) -> str:
        if key is None:
            return self.path
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def named(self, name: Any) -> Node:
        """The same node with a readable name appended to its path, e.g. ``levels[0](Top)``."""
        shown = name if isinstance(name, str) else repr(name)
        return Node(self.file, self.value, f"{self.path}({shown})")

    # ---------------------------------------------------------------------------- containers

    def obj(self) -> dict[str, Any]:
        if not isinstance(self.value, dict):
            self.fail(f"expected an object, got {_kind(self.value)}")
        return self.value

    def has(self, key: str) -> bool:
        return key in self.obj()

    def get(self, key: str) -> Node:
        """The member ``key`` (a null node when absent)."""
        return Node(self.file, self.obj().get(key), self._join(key))

    def req(self, key: str) -> Node:
        """The member ``key``, which must be present."""
        body = self.obj()
        if key not in body:
            self.fail(f"missing key {key!r}")
        return Node(self.file, body[key], self._join(key))

    def items(self) -> Iterator[Node]:
        """The elements of an array (``null`` counts as empty)."""
        if self.value is None:
            return iter(())
        if not isinstance(self.value, list):
            self.fail(f"expected an array, got {_kind(self.value)}")
        return (Node(self.file, v, self._join(i)) for i, v in enumerate(self.value))

    def __len__(self) -> int:
        if self.value is None:
            return 0
        if not isinstance(self.value, list):
            self.fail(f"expected an array, got {_kind(self.value)}")
        return len(self.value)

    @property
    def is_null(self) -> bool:
        return self.value is None

    # ---------------------------------------------------------------------------- scalars

    def text(self) -> str:
        if not isinstance(self.value, str):
            self.fail(f"expected a string, got {_kind(self.value)}")
        return self.value

    def opt_text(self) -> str | None:
        return None if self.value is None else self.text()

    def boolean(self) -> bool:
        if not isinstance(self.value, bool):
            self.fail(f"expected true or false, got {_kind(self.value)}")
        return self.value

    def integer(self, lo: int | None = None, hi: int | None = None) -> int:
        v = self.value
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (
                isinstance(v, float) and not (math.isfinite(v) and v == int(v))):
            self.fail(f"expected a whole number, got {_kind(v)}")
        n = int(v)
        if (lo is not None and n < lo) or (hi is not None and n > hi):
            bounds = f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
            self.fail(f"{n} is out of range {bounds}")
        return n

    def number(self) -> float:
        v = self.value
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            self.fail(f"expected a finite number, got {_kind(v)}")
        return float(v)

    def pair(self) -> tuple[float, float]:
        """A ``[a, b]`` array of two finite numbers."""
        if not (isinstance(self.value, list) and len(self.value) == 2):
            self.fail(f"expected an array of 2 numbers, got {_kind(self.value)}")
        a, b = self.items()
        return a.number(), b.number()
