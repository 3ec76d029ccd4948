"""The one exception a level load raises for bad input."""

from __future__ import annotations

from pathlib import Path


class LevelError(Exception):
    """A level folder, ``.lvl`` file or layer image that cannot be loaded.

    The message always starts with the offending file; ``where`` narrows it down (a JSON key
    path, ``line:col`` of a JSON syntax error, or a pixel ``(x=col, y=row)`` of an image, with
    row 0 at the top of the image).
    """

    def __init__(self, file: str | Path, message: str, *, where: str | None = None) -> None:
        self.file = str(file)
        self.where = where
        self.detail = message
        prefix = f"{self.file}: {where}" if where else self.file
        super().__init__(f"{prefix}: {message}")
