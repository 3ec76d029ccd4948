"""Save files (placeholder until the save format lands)."""

from __future__ import annotations


class SaveFileError(Exception):
    """A save file or snapshot that cannot be loaded; the world is left unchanged."""
