"""Reading a file on one thread while another works on the bytes already in.

A load does four things with a save's bytes: copies them out of the OS (``readinto``),
hashes them, parses them and checks the entity keys among them. At a million entities
each takes milliseconds. Copying and hashing stream through memory, so they go together:
the reading thread hashes each piece right after it arrived, while it is in that core's
cache. Parsing and the key checks wait on memory latency instead, so they run on the
other thread, each as soon as its bytes are in.

Which thread reads depends on the memory. Memory used before (a world's pool) costs
nothing to write, and a second thread reads while the caller parses and checks. Fresh
memory page-faults on first write, and on a virtual machine a page the kernel hands to
another core than the one that freed it can cost ~50x more to fault in (it went back to
the host): the caller, which freed the earlier loads' memory, reads it, and the second
thread parses and checks.

The reader only fills ``buf`` from the front, piece by piece, and never writes below what
it has reported. Small files take one thread: the follower's waits read the next pieces
(a thread's start costs more than it hides).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

import numpy as np

PIECE = 1 << 21  # bytes per readinto: hashed while still in the reading core's cache
THREAD_FROM = 4 << 20  # smaller files are read on the caller's thread alone

Result = TypeVar("Result")
Wait = Callable[[int], int]
"""``wait(n)``: how many bytes are in (and digested) once the first ``n`` are (fewer:
the file ended early, reading it failed, or the load was interrupted; the caller of
``read_following`` then gets the error)."""


class ReadsInto(Protocol):
    """A file opened for reading (``open(path, "rb", buffering=0)``)."""

    def readinto(self, buffer: memoryview, /) -> int | None: ...


def read_following(f: ReadsInto, buf: np.ndarray, size: int,
                   follow: Callable[[Wait], Result],
                   digest: Callable[[memoryview], object] | None = None, digest_to: int = 0,
                   *, fresh: bool = False, threaded: bool | None = None
                   ) -> tuple[int, Result]:
    """Read ``size`` bytes of ``f`` (from its position) into ``buf``, feeding each piece
    of the first ``digest_to`` bytes to ``digest`` in order as it arrives, while
    ``follow(wait)`` works on them; returns the bytes read and what ``follow`` returned.
    ``fresh``: ``buf`` was never written (the caller reads, a second thread follows).
    ``threaded``: two threads (default: for ``THREAD_FROM`` bytes and more).

    Raises what reading or ``follow`` raised (or an interrupt), on the caller's thread,
    once the other thread is done (``buf`` is then the caller's alone again)."""
    reader = _Reader(f, buf, size, digest, digest_to)
    if not (threaded if threaded is not None else size >= THREAD_FROM):
        result = follow(reader.wait_reading)
        reader.wait_reading(size)  # (what the follower did not ask for)
        return reader.finish(), result
    if fresh:
        followed: list[Result] = []
        failed: list[BaseException] = []

        def follow_there() -> None:
            try:
                followed.append(follow(reader.wait))
            except BaseException as exc:  # (raised on the caller's thread below)
                failed.append(exc)

        helper = _start(follow_there)
        try:
            reader.read_all()  # (a read that fails ends the follower's waits)
        finally:
            _join(helper, reader)
        if failed:
            raise failed[0]
        return reader.finish(), followed[0]
    helper = _start(reader.run)
    try:
        result = follow(reader.wait)
        reader.wait(size)
    finally:
        reader.cancel()  # (a follower that raised: the reader stops after its piece)
        _join(helper, reader)
    return reader.finish(), result


def _start(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, name="ecs-engine-load", daemon=True)
    thread.start()
    return thread


def _join(thread: threading.Thread, reader: _Reader) -> None:
    """Wait for ``thread`` also through interrupts (a Ctrl-C here must not leave it
    working on memory the caller takes back): they cancel the read and are raised after."""
    interrupted: BaseException | None = None
    while thread.is_alive():
        try:
            thread.join()
        except BaseException as exc:
            interrupted = interrupted or exc
            reader.cancel()
    if interrupted is not None:
        raise interrupted


class _Reader:
    """The reading side: fills ``buf`` piece by piece and tells waiters how far it got."""

    def __init__(self, f: ReadsInto, buf: np.ndarray, size: int,
                 digest: Callable[[memoryview], object] | None, digest_to: int) -> None:
        self._f = f
        self._view = buf.data
        self._size = size
        self._digest = digest
        self._digest_to = digest_to
        self._got = 0  # written by the reading thread alone
        self._wanted = 0  # a waiter waits for this many: the reader wakes it then
        self._over = size == 0  # no more bytes will come (also: cancelled)
        self._error: BaseException | None = None
        self._state = threading.Condition()

    def wait_reading(self, n: int) -> int:
        """``wait`` for one thread: reads on until ``n`` bytes are in (a read error ends
        the read; ``finish`` raises it)."""
        n = min(n, self._size)
        try:
            while self._got < n and not self._over:
                self._read_piece()
        except Exception as exc:
            self._error, self._over = exc, True
        return self._got

    def wait(self, n: int) -> int:
        n = min(n, self._size)
        if self._got >= n or self._over:  # (the reader only ever adds: no lock needed)
            return self._got
        with self._state:
            self._wanted = n
            self._state.wait_for(lambda: self._got >= n or self._over)
            return self._got

    def run(self) -> None:
        """The reading thread's loop (ends early once ``cancel`` is called)."""
        try:
            self.read_all()
        except BaseException as exc:  # (raised on the caller's thread by finish)
            self._error = exc

    def read_all(self) -> None:
        try:
            while not self._over:
                self._read_piece()  # (readinto and the hash release the GIL)
                with self._state:
                    if self._got >= self._wanted or self._over:
                        self._state.notify_all()
        finally:
            with self._state:
                self._over = True
                self._state.notify_all()

    def cancel(self) -> None:
        """No more reads after the one under way; waits return what is in."""
        with self._state:
            self._over = True
            self._state.notify_all()

    def finish(self) -> int:
        """The bytes read; raises what the reading thread raised."""
        if self._error is not None:
            raise self._error
        return self._got

    def _read_piece(self) -> None:
        got = self._got
        n = self._f.readinto(self._view[got : min(self._size, got + PIECE)])
        if not n:
            self._over = True
            return
        if self._digest is not None and got < self._digest_to:
            self._digest(self._view[got : min(got + n, self._digest_to)])
        self._got = got + n
        if self._got >= self._size:
            self._over = True
