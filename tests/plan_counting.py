"""Test helper: count the full resolves of query plans (``QueryPlan._resolve`` calls)."""

from __future__ import annotations

import pytest

from ecs_engine import World
from ecs_engine.query import QueryPlan


def count_resolves(monkeypatch: pytest.MonkeyPatch, method: str = "_resolve") -> list[int]:
    """A one-item list counting full resolves from now on (undone with ``monkeypatch``);
    ``method="resolve"`` counts every call of ``QueryPlan.resolve`` instead (fast paths
    included)."""
    calls = [0]
    real = getattr(QueryPlan, method)

    def counted(self: QueryPlan, world: World) -> None:
        calls[0] += 1
        real(self, world)

    monkeypatch.setattr(QueryPlan, method, counted)
    return calls
