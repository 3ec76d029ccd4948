"""Byte-level copies of column arrays.

numpy copies structured arrays field by field (~20x slower than memcpy at 1M rows);
viewing contiguous arrays as bytes makes the same copy a plain memcpy.
"""

from __future__ import annotations

import numpy as np


def as_bytes(arr: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a C-contiguous array (no copy)."""
    if arr.nbytes == 0:
        return np.empty(0, np.uint8)
    if not arr.flags.c_contiguous:
        raise ValueError("as_bytes needs a C-contiguous array")
    return arr.reshape(-1).view(np.uint8)


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
