"""Colours: ``#rrggbb[aa]`` strings, RGBA tuples and RGBA packed into one ``uint32``.

Packing is little-endian (``r | g << 8 | b << 16 | a << 24``), i.e. exactly the bytes of an
RGBA pixel viewed as ``<u4``, so a decoded image packs without copying.
"""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

RGBA = tuple[int, int, int, int]

_HEX = re.compile(r"#([0-9a-fA-F]{6}|[0-9a-fA-F]{8})")


def parse_hex(text: str) -> RGBA | None:
    """``"#rrggbb"`` (alpha 255) or ``"#rrggbbaa"`` as RGBA 0-255, or None if malformed."""
    m = _HEX.fullmatch(text)
    if m is None:
        return None
    digits = m.group(1)
    if len(digits) == 6:
        digits += "ff"
    return (int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16),
            int(digits[6:8], 16))


def to_hex(rgba: RGBA) -> str:
    """RGBA 0-255 as ``#rrggbb`` when opaque, else ``#rrggbbaa``."""
    r, g, b, a = rgba
    return f"#{r:02x}{g:02x}{b:02x}" if a == 255 else f"#{r:02x}{g:02x}{b:02x}{a:02x}"


def pack(rgba: RGBA) -> int:
    """One RGBA colour as its packed ``uint32`` value."""
    r, g, b, a = rgba
    return r | g << 8 | b << 16 | a << 24


def unpack(value: int) -> RGBA:
    """A packed ``uint32`` colour back to RGBA 0-255."""
    v = int(value)
    return (v & 0xFF, v >> 8 & 0xFF, v >> 16 & 0xFF, v >> 24 & 0xFF)


def pack_image(rgba: NDArray[np.uint8]) -> NDArray[np.uint32]:
    """An ``(H, W, 4)`` uint8 image as ``(H, W)`` packed colours (a view when contiguous)."""
    arr = np.ascontiguousarray(rgba, dtype=np.uint8)
    return arr.view("<u4")[..., 0]
