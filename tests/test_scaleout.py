"""ecs_engine.scaleout: one pure batch function, three backends, the same rows."""

from __future__ import annotations

import threading
import time
from pathlib import Path
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


def fails_on_three(shared: str, batch: list[int]) -> list[int]:
    """Batch function: marks each batch it starts in the folder ``shared``; the batch
    holding 3 raises at once, the others take a while."""
    Path(shared, f"started-{batch[0]}").touch()
    if 3 in batch:
        raise ValueError("item 3 is bad")
    time.sleep(0.3)
    return batch


@pytest.mark.parametrize("backend", ["inline", "pool"])
def test_a_failing_batch_says_which_and_stops_the_run_at_once(backend: str,
                                                               tmp_path: Path) -> None:
    """The pool waited for every pending batch before raising (its with block), and the
    error did not say which batch or items failed."""
    with pytest.raises(ValueError, match="item 3 is bad") as info:
        run_batches(fails_on_three, list(range(40)), shared=str(tmp_path), backend=backend,  # type: ignore[arg-type]
                    workers=2, batch_size=2)
    assert info.value.__notes__ == ["in batch 2 of 20: items 2 to 3 of the run"]
    started = len(list(tmp_path.glob("started-*")))
    # Inline stops at the failing batch. The pool had 2 workers busy: batches not started
    # when it failed are dropped, so far fewer than the 20 ever start (it ran them all).
    assert started == 2 if backend == "inline" else started < 10


def test_two_ray_runs_at_once_share_one_runtime() -> None:
    """Two threads each starting Ray: one failed ('called ray.init twice'), or the first
    to finish shut Ray down under the other."""
    ray = pytest.importorskip("ray")
    was_running = ray.is_initialized()
    results: list[Any] = [None, None]

    def run(slot: int, factor: int) -> None:
        try:
            results[slot] = run_batches(scaled, list(range(9)), shared={"factor": factor},
                                        backend="ray", workers=2, batch_size=2)
        except Exception as exc:  # reported below, with the other thread's result
            results[slot] = exc

    threads = [threading.Thread(target=run, args=(i, i + 2)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for slot in range(2):
        assert results[slot] == [{"item": x, "value": x * (slot + 2)} for x in range(9)]
    assert ray.is_initialized() == was_running  # stopped by the last run that started it
