"""Test helper: a headless arcade window, or a skip when this machine has no OpenGL."""

from __future__ import annotations

import os
from typing import Any

import pytest


def window_or_skip(width: int, height: int, title: str) -> Any:
    """A headless window; skips the test when no GL context can be created at all, or
    fails instead when ``ECS_REQUIRE_GL=1`` (CI sets it, so a missing system package
    cannot silently turn GL tests into skips)."""
    from ecs_engine.systems.render_gl import make_window

    try:
        return make_window(width, height, title, headless=True)
    except Exception as exc:  # any failure here means there is no usable OpenGL at all
        reason = f"no OpenGL context could be created (headless EGL/Mesa missing?): {exc!r}"
        if os.environ.get("ECS_REQUIRE_GL"):
            pytest.fail(reason)
        pytest.skip(reason)
