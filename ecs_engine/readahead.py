"""Reading a file on a second thread while the caller works on the bytes already in.

A load does three things with a save's bytes: copies them out of the OS (``readinto``),
hashes them, and checks the entity keys among them. At a million entities each takes
milliseconds. Copying and hashing stream through memory, so they belong together: the
reading thread hashes each piece right after it arrived, from its own core's cache. The
key checks wait on memory latency instead, so they run beside the read on the caller's
thread, each as soon as its bytes are in.

The thread only fills ``buf`` from the front, piece by piece, and never writes below
what it has reported; what the bytes mean is the caller's business. Small files are read
on the caller's thread, in the same pieces (a thread's start costs more than it hides).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

import numpy as np

PIECE = 1 << 21  # bytes per readinto: hashed while still in the reading core's cache
THREAD_FROM = 4 << 20  # smaller files are read on the caller's thread


class ReadsInto(Protocol):
    """A file opened for reading (``open(path, "rb", buffering=0)``)."""

    def readinto(self, buffer: memoryview, /) -> int | None: ...


class ReadAhead:
    """Fills ``buf[:size]`` from ``f`` (from its current position), feeding each piece
    of the first ``digest_to`` bytes to ``digest`` in order as it arrives. ``wait(n)``
    returns how many bytes are in (and digested) once the first ``n`` are (fewer: the
    file ended early, or a read failed).

    A context manager: leaving it stops and joins the thread (``buf`` is the caller's
    alone again) and raises the error a read on the thread raised, if any."""

    def __init__(self, f: ReadsInto, buf: np.ndarray, size: int,
                 digest: Callable[[memoryview], object] | None = None, digest_to: int = 0,
                 threaded: bool | None = None) -> None:
        self._f = f
        self._view = buf.data
        self._size = size
        self._digest = digest
        self._digest_to = digest_to
        self._got = 0  # written by the reading thread alone
        self._wanted = 0  # the caller waits for this many: the reader wakes it then
        self._over = size == 0  # no more bytes will come
        self._stop = False
        self._error: BaseException | None = None
        self._state = threading.Condition()
        self._thread: threading.Thread | None = None
        if threaded if threaded is not None else size >= THREAD_FROM:
            self._thread = threading.Thread(target=self._run, name="ecs-engine-file-read",
                                            daemon=True)
            self._thread.start()

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
        if kind is None and self._error is not None:
            raise self._error

    def wait(self, n: int) -> int:
        n = min(n, self._size)
        if self._thread is None:
            while self._got < n and not self._over:
                self._read_piece()
            return self._got
        if self._got >= n or self._over:  # (the reader only ever adds: no lock needed)
            return self._got
        with self._state:
            self._wanted = n
            self._state.wait_for(lambda: self._got >= n or self._over)
            return self._got

    def close(self) -> None:
        """Stop reading and wait for the thread (again: nothing)."""
        if self._thread is not None:
            with self._state:
                self._stop = True
            self._thread.join()
            self._thread = None
        self._over = True

    def _read_piece(self) -> None:
        got = self._got
        n = self._f.readinto(self._view[got : min(self._size, got + PIECE)])
        if not n:
            self._over = True
            return
        if self._digest is not None and got < self._digest_to:
            self._digest(self._view[got : min(got + n, self._digest_to)])
        self._got = got + n

    def _run(self) -> None:
        try:
            while not self._over and not self._stop:
                self._read_piece()  # (readinto and the hash release the GIL)
                with self._state:
                    if self._got >= self._wanted or self._over:
                        self._state.notify_all()
        except BaseException as exc:  # (raised on the caller's thread by __exit__)
            self._error = exc
        finally:
            with self._state:
                self._over = True
                self._state.notify_all()
