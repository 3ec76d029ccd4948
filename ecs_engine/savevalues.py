"""Free-form save-file values (resources, rng state) as msgpack-native data.

Allowed: None, bool, int (any size), float, str, bytes, list, dict with str keys, numpy
arrays and numpy scalars of bool/int/uint/float/complex dtypes. Two msgpack ext types carry
what msgpack lacks (see SAVE_FORMAT.md): numpy arrays and scalars (codes 1 and 3) and
integers outside the 64-bit range (code 2). Decoding never executes code: it only builds
these types, and rejects everything else.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import msgpack
import numpy as np

EXT_NDARRAY = 1
EXT_BIGINT = 2
EXT_NPSCALAR = 3
MAX_DEPTH = 64  # nesting levels of lists/dicts in one value
MAX_NDIM = 32
BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")  # numpy.random names
_DTYPE_RE = re.compile(r"[<|][biufc][0-9]{1,2}")
_ALLOWED = ("None, bool, int, float, str, bytes, list, dict with str keys, numpy arrays "
            "and numpy scalars of bool/int/float/complex dtypes up to float64/complex128; "
            "a tuple or set: use a list")


def portable_dtype(dt: np.dtype) -> bool:
    """A numeric scalar dtype whose bytes mean the same everywhere: not ``longdouble`` or
    ``clongdouble``, whose layout differs between platforms (x86's 80-bit value in 16
    bytes, IEEE quad on others) and carries padding that would make equal states save
    and hash differently."""
    return dt.kind in "biu" or (dt.kind == "f" and dt.itemsize <= 8) or (
        dt.kind == "c" and dt.itemsize <= 16)


def checked_tick(tick: Any) -> int:
    """``tick`` as the int64 a save file and the state hash store (``TypeError`` for what
    is not an integer, ``ValueError`` outside int64: a save its own loader refuses)."""
    if isinstance(tick, bool) or not isinstance(tick, (int, np.integer)):
        raise TypeError(f"world.tick must be an int, got {type(tick).__name__} {tick!r}")
    if not -(1 << 63) <= int(tick) < (1 << 63):
        raise ValueError(f"world.tick {tick} is outside int64 (a save stores it as one)")
    return int(tick)


def wire_dtype(dt: np.dtype) -> str:
    """The little-endian dtype string of a numeric scalar dtype, e.g. ``'<f4'``, ``'|b1'``."""
    return dt.newbyteorder("<").str if dt.itemsize > 1 else dt.str


def parse_dtype(text: Any, where: str) -> np.dtype:
    """A numeric scalar dtype from its wire string; ``ValueError`` for anything else."""
    if not isinstance(text, str) or not _DTYPE_RE.fullmatch(text):
        raise ValueError(f"{where}: {text!r} is not a little-endian numeric dtype string")
    try:
        dt = np.dtype(text)
    except TypeError as exc:
        raise ValueError(f"{where}: {text!r} is not a numpy dtype") from exc
    if not portable_dtype(dt) or dt.str != text:
        raise ValueError(f"{where}: {text!r} is not a canonical numeric dtype string (long "
                         f"doubles are not portable: use float64)")
    return dt


# -- encoding --------------------------------------------------------------------------


def _array_payload(arr: np.ndarray) -> bytes:
    """dtype-string length (u8), dtype string, ndim (u8), dims (u64 LE each), raw bytes."""
    dtype = wire_dtype(arr.dtype).encode("ascii")
    le = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
    dims = struct.pack(f"<{arr.ndim}Q", *arr.shape)
    return bytes([len(dtype)]) + dtype + bytes([arr.ndim]) + dims + le.tobytes()


def to_wire(value: Any, where: str, depth: int = 0,
            seen: dict[int, str] | None = None) -> Any:
    """``value`` as msgpack-native data plus ext types.

    ``TypeError`` naming ``where`` (e.g. ``resources['grid']``) for unsupported types,
    ``ValueError`` for nesting deeper than ``MAX_DEPTH`` and for a list, dict or array
    reached twice (a file holds values: the two would load as two, and a hash that
    cannot see the sharing would call states equal that go on differently).
    """
    kind = type(value)
    if kind is list or kind is dict or kind is np.ndarray:
        if seen is None:
            seen = {}
        first = seen.get(id(value))
        if first is not None:
            raise ValueError(f"{where} is the same {kind.__name__} object as {first}: "
                             f"saves and state hashes hold values, so the two would load "
                             f"as separate copies; keep one and look it up by name, or "
                             f"store a copy")
        seen[id(value)] = where
    if value is None or kind in (bool, float, str, bytes):
        return value
    if kind is int:
        if -(1 << 63) <= value < (1 << 64):
            return value
        size = (value.bit_length() + 8) // 8  # room for the sign bit
        return msgpack.ExtType(EXT_BIGINT, value.to_bytes(size, "little", signed=True))
    if kind is list or kind is dict:
        if depth >= MAX_DEPTH:
            raise ValueError(f"{where}: nested deeper than {MAX_DEPTH} levels")
        if kind is list:
            return [to_wire(v, f"{where}[{i}]", depth + 1, seen)
                    for i, v in enumerate(value)]
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise TypeError(f"{where}: dict key {k!r} is not a str (save-file dict keys "
                                f"must be str)")
            out[k] = to_wire(v, f"{where}[{k!r}]", depth + 1, seen)
        return out
    # exactly ndarray: subclasses (masked arrays, matrices) would lose their extras
    if (kind is np.ndarray or isinstance(value, np.generic)) and portable_dtype(value.dtype):
        if value.ndim > MAX_NDIM:
            raise ValueError(f"{where}: arrays of more than {MAX_NDIM} dimensions")
        code = EXT_NDARRAY if isinstance(value, np.ndarray) else EXT_NPSCALAR
        return msgpack.ExtType(code, _array_payload(np.asarray(value)))
    raise TypeError(f"{where}: a {kind.__module__}.{kind.__qualname__} cannot be saved or "
                    f"state-hashed (allowed: {_ALLOWED})")


# -- decoding --------------------------------------------------------------------------


def _parse_array(data: bytes) -> np.ndarray:
    view = memoryview(data)
    if len(view) < 1 or len(view) < 2 + view[0]:
        raise ValueError("ndarray ext: payload too short for its header")
    n = view[0]
    dtype = parse_dtype(bytes(view[1 : 1 + n]).decode("ascii", "replace"), "ndarray ext")
    ndim = view[1 + n]
    if ndim > MAX_NDIM:
        raise ValueError(f"ndarray ext: {ndim} dimensions (at most {MAX_NDIM})")
    start = 2 + n + 8 * ndim
    if len(view) < start:
        raise ValueError("ndarray ext: payload too short for its shape")
    shape = struct.unpack_from(f"<{ndim}Q", view, 2 + n)
    count = 1
    for d in shape:
        count *= d
    if count * dtype.itemsize != len(view) - start:
        raise ValueError(f"ndarray ext: shape {shape} of {dtype} needs "
                         f"{count * dtype.itemsize} bytes, the payload holds {len(view) - start}")
    arr = np.frombuffer(view, dtype, count, start).reshape(shape)
    return arr.astype(dtype.newbyteorder("="))  # a writable, native-order copy


def ext_hook(code: int, data: bytes) -> Any:
    """msgpack ``ext_hook``: decode this module's ext types, reject all others."""
    if code == EXT_NDARRAY:
        return _parse_array(data)
    if code == EXT_NPSCALAR:
        arr = _parse_array(data)
        if arr.ndim:
            raise ValueError("numpy scalar ext: has a shape")
        return arr[()]
    if code == EXT_BIGINT:
        if not data:
            raise ValueError("big-int ext: empty payload")
        return int.from_bytes(data, "little", signed=True)
    raise ValueError(f"unknown msgpack ext type {code}")


def check_value(value: Any, where: str) -> None:
    """``ValueError`` unless ``value`` holds only allowed types, nested at most
    ``MAX_DEPTH`` deep (iterative, so hostile nesting cannot exhaust the Python stack)."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        kind = type(item)
        if item is None or kind in (bool, int, float, str, bytes):
            continue
        if isinstance(item, np.ndarray | np.generic) and item.dtype.kind in "biufc":
            continue
        if kind is list or kind is dict:
            if depth >= MAX_DEPTH:
                raise ValueError(f"{path}: nested deeper than {MAX_DEPTH} levels")
            if kind is list:
                stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))
            else:
                for k, v in item.items():
                    if type(k) is not str:
                        raise ValueError(f"{path}: key {k!r} is not a str")
                    stack.append((v, f"{path}[{k!r}]", depth + 1))
            continue
        raise ValueError(f"{path}: a {kind.__name__} is not a save-file value")
