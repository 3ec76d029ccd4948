"""Derived data kept in ``world.caches`` under the store versions it was derived from.

Store versions come from one counter per world and a restore brings a version back
together with the rows it names, so equal versions mean equal rows: data derived from
them (which rows a system reads, which checks found nothing to do) stays right for as
long as they are equal, and is right again when a restore brings them back. Keeping the
last few states, not only the newest, is what makes it pay off in a rollback: the frames
it re-simulates restore layouts this world had a few ticks earlier.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from ecs_engine import World

__all__ = ["KEEP", "derived", "recall", "remember"]

T = TypeVar("T")
KEEP = 8  # states remembered per cache key: a rollback's usual reach (8 frames) sees
# only a few layouts; each entry costs the memory of the rows it lists


def _entries(world: World, key: str) -> dict[Hashable, Any]:
    entries = world.caches.get(key)
    if not isinstance(entries, dict):
        entries = world.caches[key] = {}
    return entries


def remember(world: World, key: str, versions: Hashable, value: Any = True) -> None:
    """Keep ``value`` for these ``versions`` (forgetting the oldest state beyond
    ``KEEP``)."""
    entries = _entries(world, key)
    if versions not in entries and len(entries) >= KEEP:
        del entries[next(iter(entries))]  # the oldest state
    entries[versions] = value


def recall(world: World, key: str, versions: Hashable) -> Any:
    """What was remembered for these ``versions`` (None if nothing is)."""
    entries = world.caches.get(key)
    return entries.get(versions) if isinstance(entries, dict) else None


def derived(world: World, key: str, versions: Hashable, build: Callable[[], T]) -> T:
    """``build()``'s result for these ``versions``, built once while they are remembered
    (``build`` must not return None)."""
    found = recall(world, key, versions)
    if found is None:
        found = build()
        remember(world, key, versions, found)
    return found
