"""One demo frame (reported only, no target): simulate 10k bodies, render 10k quads.

HOOK for the lead, to fill in once ``systems`` has its physics/collision systems:
:func:`build_frame` must return ``(step, render)`` callables for a world holding a level's
colliders plus ``n`` moving bodies; ``step()`` runs one simulation step (physics and
collision against the colliders) and ``render()`` writes the bodies into a
``systems.render_gl.QuadBatch`` and draws it (headless). Until then this scenario reports
"skipped" with the reason, never a made-up number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.runner import Op, Record, Timing, progress, record, timed_records
from benchmarks.scenarios import Job, Plan

NAME = "frame"
TITLE = "Demo frame (reported only)"
FRAME_MS = 1000 / 60
BODIES = 10_000


def plan(cfg: Any) -> Plan:
    yield Job(NAME, "engine", BODIES)


def build_frame(n: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The hook (see the module docstring). ``ImportError`` while ``systems`` lacks the
    systems this needs; ``NotImplementedError`` until the hook is written."""
    import systems.collision  # noqa: F401
    import systems.physics  # noqa: F401

    raise NotImplementedError("frame hook not filled in yet (benchmarks/scenarios/frame.py: "
                              "build_frame)")


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    try:
        step, render = build_frame(n)
    except ImportError as exc:
        note = f"skipped: systems not available ({exc})"
    except NotImplementedError as exc:
        note = f"skipped: {exc}"
    else:
        ops = {"step": Op(step), "render": Op(render)}
        names = {"step": ("frame_step", "", "engine"), "render": ("frame_render", "", "engine")}
        out = timed_records(NAME, n, ops, timing, names)
        for r in out:
            r["frame_fraction"] = round(r["median_s"] * 1000 / FRAME_MS, 4)
        return out
    progress(f"  frame: {note}")
    return [record(NAME, op, "engine", n, status="skipped", note=note)
            for op in ("frame_step", "frame_render")]


JOBS = {"engine": engine}
