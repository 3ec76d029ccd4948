"""Byte-level copies of column arrays.

numpy copies structured arrays field by field (~20x slower than memcpy at 1M rows);
viewing contiguous arrays as bytes makes the same copy a plain memcpy.
"""

from __future__ import annotations

import sys
import threading

import numpy as np


def as_bytes(arr: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a C-contiguous array (no copy)."""
    if arr.nbytes == 0:
        return np.empty(0, np.uint8)
    if not arr.flags.c_contiguous:
        raise ValueError("as_bytes needs a C-contiguous array")
    return arr.reshape(-1).view(np.uint8)


def address_of(arr: np.ndarray) -> int:
    """Where a C-contiguous ``arr``'s first byte is (via a byte view: cheap for structured
    dtypes)."""
    return int(as_bytes(arr).__array_interface__["data"][0])


def clone(arr: np.ndarray) -> np.ndarray:
    """A new array equal to ``arr`` (a memcpy, also for structured dtypes)."""
    out = np.empty(arr.shape, arr.dtype)
    copy_into(out, arr)
    return out


def copy_into(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for arrays of one dtype and shape, as a memcpy."""
    if dst.dtype != src.dtype or dst.shape != src.shape:
        raise ValueError(f"copy_into: {src.dtype}{src.shape} does not fit {dst.dtype}{dst.shape}")
    if src.nbytes:
        np.copyto(as_bytes(dst), as_bytes(src))


PACK_ALIGN = 64  # bytes: each packed copy starts on a cache line


class BufferPool:
    """Snapshot buffers one world may reuse once nothing references them any more.

    Copying into memory that was used before costs no page faults, so snapshots taken and
    dropped in a steady rhythm (a History evicting its oldest, a quicksave replaced) copy
    at memcpy speed. The pool keeps the ``keep`` most recent large buffers; one is reused
    only when the pool holds the last reference to it (no snapshot, view or memoryview
    of it is alive anywhere) and the request needs at least half of it. So it retains at
    most ``keep`` buffers nobody else uses (``clear()`` lets them go).
    """

    MIN_BYTES = 1 << 20  # smaller buffers are cheap to allocate: not pooled

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep
        self._buffers: list[np.ndarray] = []
        self._lock = threading.Lock()  # (take and offer from several threads stay consistent)
        self.taken: list[int] | None = None  # a list: the size of each pooled take goes in

    def take(self, nbytes: int) -> np.ndarray:
        """``nbytes`` of writable memory (contents undefined)."""
        buf = self.reuse(nbytes)
        if buf is None:
            buf = np.empty(nbytes, np.uint8)
            self.offer(buf)
        return buf

    def reuse(self, nbytes: int) -> np.ndarray | None:
        """``take`` from memory used before (no page faults), or None: there is none to
        reuse (the caller allocates, and may ``offer`` what it allocated)."""
        if nbytes < self.MIN_BYTES:
            return None
        with self._lock:
            if self.taken is not None:
                self.taken.append(nbytes)
            for i in range(len(self._buffers)):
                # 2 references: the list's and getrefcount's argument; any view,
                # snapshot or exported buffer of it adds one
                if (nbytes <= self._buffers[i].size <= 2 * nbytes
                        and sys.getrefcount(self._buffers[i]) == 2):
                    buf = self._buffers.pop(i)
                    self._buffers.append(buf)  # most recent last
                    return buf[:nbytes]
        return None

    def array(self, length: int, dtype: np.typing.DTypeLike) -> np.ndarray:
        """A 1-d array of ``length`` items of ``dtype`` in memory from ``take``."""
        dtype = np.dtype(dtype)
        return self.take(length * dtype.itemsize).view(dtype)

    def offer(self, buf: np.ndarray) -> None:
        """Let the pool reuse ``buf`` (an owning uint8 array) once it is unreferenced."""
        if buf.size < self.MIN_BYTES or buf.base is not None or buf.dtype != np.uint8:
            return
        with self._lock:
            if not any(b is buf for b in self._buffers):
                self._buffers.append(buf)
                del self._buffers[: -self.keep]

    def trim(self, sizes: list[int]) -> None:
        """Let go of the unreferenced buffers but one for each request of ``sizes``
        (bytes), the most recent: what another round of the same requests reuses (a load
        keeps the memory it replaced for the next load, nothing older or larger)."""
        with self._lock:
            # 2 references: the list's and getrefcount's argument
            idle = [i for i in range(len(self._buffers))
                    if sys.getrefcount(self._buffers[i]) == 2]
            kept = set(range(len(self._buffers))) - set(idle)  # in use: reusable later
            for n in sorted(sizes, reverse=True):  # each the smallest idle buffer it fits
                fits = [i for i in idle if n <= self._buffers[i].size <= 2 * n]
                if fits:
                    best = min(reversed(fits), key=lambda i: self._buffers[i].size)
                    idle.remove(best)
                    kept.add(best)
            self._buffers = [b for i, b in enumerate(self._buffers) if i in kept]

    def clear(self) -> None:
        with self._lock:
            self._buffers.clear()

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self._buffers)


def pack_copies(sources: list[np.ndarray], pool: BufferPool | None = None
                ) -> list[np.ndarray]:
    """Read-only copies of C-contiguous ``sources``, all views into one allocation (from
    ``pool`` when given).

    One large allocation page-faults far less than many small ones (numpy asks the kernel
    for huge pages for large buffers; 256 KB pieces each take their own faults), and a
    recycled one not at all, so a snapshot copying many chunks runs at memcpy speed also
    when snapshots are taken and dropped the way a game does. The buffer lives as long as
    any of the copies.
    """
    offsets = []
    total = 0
    for a in sources:
        offsets.append(total)
        total += -(-a.nbytes // PACK_ALIGN) * PACK_ALIGN
    room = total + PACK_ALIGN  # to start on a cache line wherever the allocation lands
    raw = pool.take(room) if pool is not None else np.empty(room, np.uint8)
    skip = -int(raw.__array_interface__["data"][0]) % PACK_ALIGN
    buf = raw[skip : skip + total]
    out = []
    for a, at in zip(sources, offsets, strict=True):
        if a.nbytes == 0:
            copy = np.empty(a.shape, a.dtype)
        else:
            copy = np.ndarray(a.shape, a.dtype, buf, at)  # cheaper than a view of a slice
            if a.dtype.names is None:
                copy[...] = a  # plain items: numpy copies them with one memcpy
            else:
                np.copyto(as_bytes(copy), as_bytes(a))
        copy.flags.writeable = False
        out.append(copy)
    return out


def take_over(arr: np.ndarray, memory: np.ndarray) -> np.ndarray | None:
    """A writable array over ``arr``'s bytes when they lie in ``memory`` (an owning uint8
    buffer the caller gives up, e.g. a file just read), else None.

    Built on a memoryview: numpy collapses views of views to the array that owns the
    memory, so views of a plain slice would name ``memory`` and a store could not count
    the views of its own array (``views_outstanding``); views of this array name it.
    """
    if (arr.ndim != 1 or arr.size == 0 or arr.dtype.itemsize == 0
            or not arr.flags.c_contiguous or root_of(arr) is not memory):
        return None
    start = arr.__array_interface__["data"][0] - memory.__array_interface__["data"][0]
    return np.frombuffer(memory.data[start : start + arr.nbytes], arr.dtype)


def root_of(arr: np.ndarray) -> np.ndarray:
    """The array that owns ``arr``'s memory (``arr`` itself if it owns it)."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr
