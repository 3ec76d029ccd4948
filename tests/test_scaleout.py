"""ecs_engine.scaleout: one pure batch function, three backends, the same rows."""

from __future__ import annotations

from typing import Any

import pytest

from ecs_engine.scaleout import BACKENDS, plan_batches, run_batches


def scaled(shared: dict[str, int], batch: list[int]) -> list[dict[str, int]]:
    """A pure batch function (module level: workers import it by name)."""
    return [{"item": x, "value": x * shared["factor"]} for x in batch]


def wrong_count(shared: Any, batch: list[int]) -> list[int]:
    return batch[:-1]


@pytest.mark.parametrize(("count", "workers", "size"), [(0, 2, None), (1, 2, None),
                                                        (10, 2, None), (10, 1, 3), (7, 8, 1)])
def test_plan_batches_cover_every_item_once_in_order(count: int, workers: int,
                                                     size: int | None) -> None:
    batches = plan_batches(count, workers, size)
    flat = [i for r in batches for i in r]
    assert flat == list(range(count))
    if size:
        assert all(len(r) <= size for r in batches)


def test_plan_batches_rejects_empty_batches() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        plan_batches(5, 1, 0)


@pytest.mark.parametrize("backend", ["inline", "pool"])
def test_rows_come_back_in_item_order(backend: str) -> None:
    seen: list[int] = []
    rows = run_batches(scaled, list(range(23)), shared={"factor": 3}, backend=backend,  # type: ignore[arg-type]
                       workers=2, batch_size=4, progress=seen.append)
    assert rows == [{"item": x, "value": 3 * x} for x in range(23)]
    assert seen[-1] == 23 and seen == sorted(seen)


def test_ray_gives_the_same_rows(ray_local: None) -> None:
    items = list(range(17))
    expected = run_batches(scaled, items, shared={"factor": 5})
    assert run_batches(scaled, items, shared={"factor": 5}, backend="ray", workers=2,
                       batch_size=3) == expected


def test_a_function_must_return_one_row_per_item() -> None:
    with pytest.raises(RuntimeError, match="one row per item"):
        run_batches(wrong_count, [1, 2, 3])


def test_unknown_backend() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        run_batches(scaled, [1], shared={"factor": 1}, backend="threads")  # type: ignore[arg-type]
    assert BACKENDS == ("inline", "pool", "ray")
