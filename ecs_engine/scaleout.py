"""Run one pure batch function in-process, on a local process pool, or on a Ray cluster.

The trade-off: a task costs a process pool ~0.1 ms and Ray ~0.2 ms to dispatch, while a level
validation or a seeded simulation costs 10-1000 ms, so work goes in batches of items and the
large shared input (a start snapshot, a configuration) travels once: pool workers receive it
in their initializer, Ray stores it once with ``ray.put``. The function is pure
(``func(shared, batch) -> rows``, bytes and plain values in, plain rows out), so the three
backends give the same rows in the same order; tests compare them.

Ray is imported only when the ``"ray"`` backend is chosen (``pip install 'ecs-engine[cluster]'``).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import threading
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from typing import Any, Literal, TypeVar

__all__ = ["BACKENDS", "Backend", "BatchFunction", "plan_batches", "run_batches"]

Backend = Literal["inline", "pool", "ray"]
BACKENDS: tuple[Backend, ...] = ("inline", "pool", "ray")

Item = TypeVar("Item")
Row = TypeVar("Row")
BatchFunction = Callable[[Any, list[Item]], list[Row]]
"""``func(shared, batch) -> rows``: one row per item, module-level (it is pickled by name)."""
Stream = Generator[tuple[int, list[Any]], None, None]  # (batch index, its rows) as they finish

# Pool workers keep the shared input here: set once per worker process by the initializer,
# read by every batch that worker runs. It lives only in worker processes, never the caller.
_WORKER_SHARED: dict[str, Any] = {}


class _RayRuns:
    """Ray is one runtime per process, so runs in one process share it: the first run
    starts it (unless the caller already did), and the last one to finish stops it. Two
    runs at once would otherwise start it twice, or one would stop it under the other.

    A run on another thread than the main one starts Ray from a thread of its own that
    lives until the runtime stops: Ray's processes are killed when the thread that started
    them exits (Linux's parent-death signal follows the thread), which would take the
    runtime from under the other runs as soon as the first run's thread ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._started = False  # by a run (an instance the caller started is left running)
        self._keeper: tuple[threading.Thread, threading.Event] | None = None

    def enter(self, ray: Any, workers: int, address: str | None) -> None:
        with self._lock:
            if not ray.is_initialized():
                if address:
                    start = functools.partial(ray.init, address=address, log_to_driver=True,
                                              logging_level=logging.WARNING)
                else:  # "local": a new instance, never a stray cluster left on the machine
                    start = functools.partial(ray.init, address="local", num_cpus=workers,
                                              include_dashboard=False,
                                              logging_level=logging.WARNING)
                if threading.current_thread() is threading.main_thread():
                    start()
                else:
                    self._keeper = _keep(start)
                self._started = True
            self._users += 1

    def leave(self, ray: Any) -> None:
        with self._lock:
            self._users -= 1
            if not self._users and self._started:
                self._started = False
                ray.shutdown()
                if self._keeper is not None:
                    thread, stop = self._keeper
                    self._keeper = None
                    stop.set()
                    thread.join()


def _keep(start: Callable[[], Any]) -> tuple[threading.Thread, threading.Event]:
    """Run ``start`` on a new thread that then waits until told to stop; raises what
    ``start`` raised."""
    ready, stop = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    def keeper() -> None:
        try:
            start()
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)
            return
        finally:
            ready.set()
        stop.wait()

    thread = threading.Thread(target=keeper, name="ecs-engine-ray", daemon=True)
    thread.start()
    ready.wait()
    if failure:
        raise failure[0]
    return thread, stop


_RAY_RUNS = _RayRuns()


def plan_batches(count: int, workers: int, batch_size: int | None = None) -> list[range]:
    """Split ``count`` items into contiguous batches: ``batch_size`` each, or by default
    about four batches per worker (enough to balance uneven items, few enough that the
    per-task overhead stays small)."""
    if count <= 0:
        return []
    if batch_size is None:
        batch_size = max(1, math.ceil(count / (max(1, workers) * 4)))
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return [range(i, min(count, i + batch_size)) for i in range(0, count, batch_size)]


def _pool_init(shared: Any) -> None:
    _WORKER_SHARED["value"] = shared


def _pool_call(func: Callable[[Any, list[Any]], list[Any]], batch: list[Any]) -> list[Any]:
    return func(_WORKER_SHARED["value"], batch)


def _check_rows(rows: list[Any], batch: Sequence[Any], func: Callable[..., Any]) -> list[Any]:
    if not isinstance(rows, list) or len(rows) != len(batch):
        got = f"{len(rows)} rows" if isinstance(rows, list) else type(rows).__name__
        raise RuntimeError(f"{getattr(func, '__name__', func)!r} returned {got} for a batch "
                           f"of {len(batch)}; it must return a list with one row per item")
    return rows


def _iter_inline(func: Callable[[Any, list[Any]], list[Any]], shared: Any,
                 batches: list[list[Any]]) -> Stream:
    for index, batch in enumerate(batches):
        yield index, _result(functools.partial(func, shared, batch), index, batches)


def _iter_pool(func: Callable[[Any, list[Any]], list[Any]], shared: Any,
               batches: list[list[Any]], workers: int) -> Stream:
    # "spawn": workers import the function by name, with no copy of the caller's threads,
    # locks or open windows (fork would inherit them); it is also what Ray's workers do.
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"),
                               initializer=_pool_init, initargs=(shared,))
    finished = False
    try:
        pending: dict[Future[list[Any]], int] = {
            pool.submit(_pool_call, func, batch): i for i, batch in enumerate(batches)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                yield index, _result(future.result, index, batches)
        finished = True
    finally:
        # On a failure, batches not started are dropped and the caller does not wait for
        # the running ones (their workers exit when done).
        pool.shutdown(wait=finished, cancel_futures=True)


def _iter_ray(func: Callable[[Any, list[Any]], list[Any]], shared: Any,
              batches: list[list[Any]], workers: int,
              address: str | None) -> Stream:
    try:
        import ray
    except ImportError as missing:
        raise ImportError("the ray backend needs Ray: pip install 'ecs-engine[cluster]'") \
            from missing
    _RAY_RUNS.enter(ray, workers, address)
    pending: dict[Any, int] = {}
    try:
        shared_ref = ray.put(shared)  # stored once; every task receives a reference to it
        remote = ray.remote(max_retries=0)(func)
        pending = {remote.remote(shared_ref, batch): i for i, batch in enumerate(batches)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index = pending.pop(ref)
                yield index, _result(functools.partial(ray.get, ref), index, batches)
    finally:
        for ref in pending:  # a failure (or the caller stopped): drop the rest
            ray.cancel(ref, force=True)
        _RAY_RUNS.leave(ray)


def _result(get: Callable[[], list[Any]], index: int, batches: list[list[Any]]) -> list[Any]:
    """A batch's rows; its exception, if it raised, says which batch and items it ran."""
    try:
        return get()
    except Exception as exc:
        first = sum(len(b) for b in batches[:index])
        exc.add_note(f"in batch {index + 1} of {len(batches)}: items {first} to "
                     f"{first + len(batches[index]) - 1} of the run")
        raise


def run_batches(
    func: Callable[[Any, list[Item]], list[Row]],
    items: Sequence[Item],
    *,
    shared: Any = None,
    backend: Backend = "inline",
    workers: int | None = None,
    batch_size: int | None = None,
    address: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Row]:
    """``func(shared, batch)`` over ``items`` in batches; the rows in the order of ``items``.

    ``backend``: ``"inline"`` (this process), ``"pool"`` (``workers`` local processes) or
    ``"ray"`` (a local Ray instance with ``workers`` CPUs, or the cluster at ``address``,
    e.g. ``"auto"`` or ``"ray://head:10001"``; an already initialised Ray is used as is).
    ``progress(n)`` is called with the number of items finished so far. A batch that raises
    stops the run with its exception: make ``func`` turn expected failures into rows.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {list(BACKENDS)}")
    workers = max(1, workers or os.cpu_count() or 1)
    ranges = plan_batches(len(items), 1 if backend == "inline" else workers, batch_size)
    batches = [[items[i] for i in r] for r in ranges]
    results: list[list[Row] | None] = [None] * len(batches)
    if backend == "inline":
        stream = _iter_inline(func, shared, batches)
    elif backend == "pool":
        stream = _iter_pool(func, shared, batches, workers)
    else:
        stream = _iter_ray(func, shared, batches, workers, address)
    finished = 0
    try:
        for index, rows in stream:
            results[index] = _check_rows(rows, batches[index], func)
            finished += len(batches[index])
            if progress is not None:
                progress(finished)
    finally:
        stream.close()  # a failure here (or in progress) stops the workers now, not at gc
    return [row for rows in results if rows is not None for row in rows]
