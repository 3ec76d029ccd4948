"""Per-tick game events: what happened this tick, for sounds, effects and the HUD.

Systems append ``[kind, x, y]`` (x, y in world units) to ``world.resources["events"]``;
:func:`clear_events` empties it at the start of every tick. Events are ordinary state (they
are snapshotted, saved and hashed like any resource), so a re-simulated tick produces the
same events as the original run; whoever plays sounds decides which ticks are live.

Kinds used by the stock systems: ``jump``, ``shoot`` (a player did), ``hurt`` (a player was
hit), ``down`` (a player reached 0 hp), ``hit`` (a projectile hit something with health),
``defeat`` (an enemy reached 0 hp), ``coin``, ``heart``, ``ammo`` (a pickup was taken),
``goal`` (a player reached the goal).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ecs_engine import World

__all__ = ["EVENTS", "clear_events", "emit", "events"]

EVENTS = "events"  # the resource name


def clear_events(world: World, dt: float) -> None:
    """Start the tick with no events (the first stock system)."""
    del dt
    if world.resources.get(EVENTS) != []:
        world.resources[EVENTS] = []


def emit(world: World, kind: str, x: Any, y: Any) -> None:
    """Append one event per position: ``x``, ``y`` are scalars or equal-length arrays
    (world units). Positions are rounded to 1/1000 unit so events stay small."""
    xs = np.atleast_1d(np.asarray(x, np.float64))
    ys = np.atleast_1d(np.asarray(y, np.float64))
    if xs.size == 0:
        return
    if xs.shape != ys.shape:  # (equal shapes, the usual case, broadcast to themselves)
        xs, ys = np.broadcast_arrays(xs, ys)
    out = world.resources.setdefault(EVENTS, [])
    # ndarray.round is what np.round calls, without its Python wrapper
    out.extend([kind, px, py] for px, py in zip(xs.round(3).tolist(), ys.round(3).tolist(),
                                                 strict=True))


def events(world: World, *kinds: str) -> list[tuple[str, float, float]]:
    """This tick's events (of ``kinds`` only, when given) as ``(kind, x, y)``."""
    out = world.resources.get(EVENTS) or []
    return [(str(k), float(x), float(y)) for k, x, y in out if not kinds or k in kinds]
