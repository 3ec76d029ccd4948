"""The optional C parts: a function from one of the extensions ``setup.py`` builds.

Each C part has a numpy or Python path that gives the same answers; a part is used only
where its extension was built and ``ECS_NO_C`` is not set in the environment (which
forces every such path, for tests and comparisons).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any


def c_module(module: str) -> ModuleType | None:
    """The extension ``ecs_engine.<module>``, or None where it is missing or ``ECS_NO_C``
    is set."""
    if os.environ.get("ECS_NO_C"):
        return None
    try:
        return importlib.import_module(f"ecs_engine.{module}")
    except ImportError:
        return None


def c_function(module: str, name: str) -> Any | None:
    """``ecs_engine.<module>.<name>``, or None where that extension is not used."""
    found = c_module(module)
    return None if found is None else getattr(found, name)
