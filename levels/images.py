"""Layer images: safe paths, PNG decoding with a pixel limit, colour lookup tables.

Layer images come from players, so they are untrusted: a path may try to leave the level
folder, a file may not be a PNG, or a tiny file may claim a huge size (a decompression bomb).
The size is read from the PNG header and checked before any pixel is decoded.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageChops, UnidentifiedImageError

from ecs_engine.levels.colors import RGBA, pack, pack_image, to_hex, unpack
from ecs_engine.levels.errors import LevelError

__all__ = [
    "DEFAULT_MAX_PIXELS", "PNG_SIGNATURE", "ColorTable", "png_header", "png_size", "read_rgba",
    "resolve_layer_path",
]

DEFAULT_MAX_PIXELS = 64 * 2**20
"""Largest image (width * height) a level may use: 64 Mpx is 256 MB as RGBA."""

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def resolve_layer_path(folder: Path, rel: str, lvl: Path, where: str) -> Path:
    """The real path of a layer file, which must exist and stay inside ``folder``.

    ``rel`` was already checked to be relative without ``..``; this catches symlinks
    (of the file or of a folder on its way) that point out of the level folder.
    """
    path = folder / rel
    if not os.path.lexists(path):
        raise LevelError(path, f"missing: {lvl.name} lists it at {where}, but there is no "
                               f"such file")
    try:
        root = folder.resolve()
        real = path.resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop (RuntimeError before 3.13)
        raise LevelError(path, f"cannot resolve the path (a symlink loop?): {exc}; "
                               f"{lvl.name} lists it at {where}") from None
    if not real.is_relative_to(root):
        raise LevelError(path, f"resolves to {real}, outside the level folder {root} "
                               f"(a symlink?); layer images must live inside the level")
    try:
        is_file = real.is_file()
    except OSError as exc:
        raise LevelError(path, f"cannot read: {exc.strerror or exc}") from None
    if not is_file:
        raise LevelError(path, "is not a file (a folder or a broken link?)")
    return real


def read_rgba(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS,
              shown: Path | None = None) -> NDArray[np.uint8]:
    """Decode a PNG to an ``(H, W, 4)`` uint8 RGBA array (row 0 = top of the image).

    ``shown`` is the path used in error messages (the path as the level names it).
    """
    name = shown or path
    width, height, bit_depth, color_type = png_header(path, name)
    if width * height > max_pixels:
        raise LevelError(name, f"image is {width}x{height} = {width * height} pixels; "
                               f"the limit is {max_pixels} pixels")
    try:
        raw = path.read_bytes()  # once: for pillow and for the row count below
    except OSError as exc:
        raise LevelError(name, f"cannot read: {exc.strerror or exc}") from exc
    try:
        # formats=("PNG",): never hand a player's file to another format's decoder.
        with Image.open(io.BytesIO(raw), formats=("PNG",)) as img:
            if img.size != (width, height):
                raise LevelError(name, f"corrupt PNG: header says {width}x{height}, pillow "
                                       f"reads {img.width}x{img.height}")
            img.load()
            _check_image_data(raw, name, width, height, bit_depth, color_type)
            return _to_rgba(img, bit_depth, color_type)
    except LevelError:
        raise
    except Image.DecompressionBombError as exc:
        raise LevelError(name, f"image too large to decode safely: {exc}") from exc
    except UnidentifiedImageError as exc:
        raise LevelError(name, "corrupt PNG: pillow cannot identify it") from exc
    except MemoryError as exc:
        raise LevelError(name, "out of memory while decoding the image") from exc
    except Exception as exc:
        # Truncated data, bad CRCs and broken zlib streams surface as assorted exception types
        # (OSError, SyntaxError, ValueError, zlib.error, EOFError); all mean "corrupt".
        raise LevelError(name, f"corrupt PNG: {type(exc).__name__}: {exc}") from exc


def png_size(path: Path, shown: Path) -> tuple[int, int]:
    """``(width, height)`` from the PNG signature and IHDR chunk, reading 26 bytes only."""
    width, height, _, _ = png_header(path, shown)
    return width, height


def png_header(path: Path, shown: Path) -> tuple[int, int, int, int]:
    """``(width, height, bit depth, colour type)`` from the signature and IHDR chunk."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(26)
    except OSError as exc:
        raise LevelError(shown, f"cannot read: {exc.strerror or exc}") from exc
    if head[:8] != PNG_SIGNATURE:
        raise LevelError(shown, "not a PNG image (layers must be saved as .png)")
    if len(head) < 26 or head[12:16] != b"IHDR":
        raise LevelError(shown, "corrupt PNG: no IHDR header chunk")
    width, height, bit_depth, color_type = struct.unpack(">IIBB", head[16:26])
    if width == 0 or height == 0:
        raise LevelError(shown, f"empty image ({width}x{height})")
    return width, height, bit_depth, color_type


_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # samples per pixel of each PNG colour type
# Adam7 passes: (first column, first row, column step, row step)
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))


def _check_image_data(raw: bytes, shown: Path, width: int, height: int, bit_depth: int,
                      color_type: int) -> None:
    """``LevelError`` unless the image data holds every row. A zlib stream that ends
    early inside an intact file decodes without complaint in pillow, its missing rows
    transparent: a level would silently lose them. Counts the bytes the IDAT chunks
    inflate to against what the header promises (each row a filter byte plus its
    samples; per Adam7 pass when interlaced)."""
    import zlib

    interlaced = len(raw) > 28 and raw[28] == 1
    bits = _CHANNELS.get(color_type, 0) * bit_depth

    def row_bytes(w: int) -> int:
        return 1 + (w * bits + 7) // 8

    if interlaced:
        passes = [((width - x0 + dx - 1) // dx, (height - y0 + dy - 1) // dy)
                  for x0, y0, dx, dy in _ADAM7]
        rows = [(w, h) for w, h in passes if w and h]
        expected = sum(h * row_bytes(w) for w, h in rows)
    else:
        expected = height * row_bytes(width)
    inflate = zlib.decompressobj()
    got = 0
    at = 8
    while at + 8 <= len(raw) and got < expected:
        size, kind = struct.unpack(">I4s", raw[at : at + 8])
        if kind == b"IDAT":
            pending = raw[at + 8 : at + 8 + size]
            while pending and got < expected and not inflate.eof:
                # at most what is still missing, a megabyte at a time: the count needs no
                # more (a PNG of a few kilobytes may inflate to gigabytes)
                got += len(inflate.decompress(pending, min(expected - got, 1 << 20)))
                pending = inflate.unconsumed_tail
        elif kind == b"IEND":
            break
        at += 12 + size
    if got < expected:
        held = (f"{got // row_bytes(width)} of {height} rows" if not interlaced
                else "part of its interlaced passes")
        raise LevelError(shown, f"corrupt PNG: the image data holds only {held} "
                                f"({got} of {expected} bytes)")


_GREY, _RGB = 0, 2  # PNG colour types whose tRNS chunk holds one transparent sample value


def _to_rgba(img: Image.Image, bit_depth: int, color_type: int) -> NDArray[np.uint8]:
    """RGBA through pillow's own conversions, honouring the PNG's transparency (tRNS).

    Pillow keeps the tRNS key as the file's raw sample value, but not always its pixels:
    1/2/4-bit greyscale it scales to 8 bits (2-bit 1 becomes 85), 16-bit RGB it cuts to
    8 bits, and 16-bit greyscale it decodes as ``I;16``, whose conversion to RGBA clips
    instead of scaling and drops the key. So the key is brought to the pixels' scale using
    the bit depth from the IHDR chunk (never guessed from the key's size)."""
    transparency = img.info.get("transparency")
    if img.mode.startswith("I"):
        wide = img.convert("I")
        grey = wide.point(lambda v: v * (1 / 256)).convert("L")  # 16 -> 8 bits: high byte
        if isinstance(transparency, int):
            # The exact 16-bit grey is transparent (compared before scaling, as PNG says):
            # |v - t| clipped to 8 bits is 0 only there.
            t = transparency
            above = wide.point(lambda v: v - t).convert("L")
            below = wide.point(lambda v: t - v).convert("L")
            alpha = ImageChops.lighter(above, below).point(lambda d: 255 if d else 0)
        else:
            alpha = Image.new("L", img.size, 255)
        return np.array(Image.merge("RGBA", (grey, grey, grey, alpha)), dtype=np.uint8)
    if color_type == _GREY and bit_depth < 8 and isinstance(transparency, int):
        # exact: pillow scales a b-bit sample v to v * 255 / (2**b - 1), a whole number
        key = transparency * 255 // ((1 << bit_depth) - 1)
        img = img.convert("L") if img.mode == "1" else img.copy()
        img.info["transparency"] = key
    elif color_type == _RGB and bit_depth == 16 and isinstance(transparency, tuple):
        # compare at the 8 bits pillow kept (the high byte of each 16-bit sample)
        img = img.copy()
        img.info["transparency"] = tuple(v >> 8 for v in transparency)
    rgba = img if img.mode == "RGBA" else img.convert("RGBA")
    return np.array(rgba, dtype=np.uint8)


@dataclass(frozen=True)
class ColorTable:
    """Maps packed colours to rule indices ``1..n``; 0 is empty (transparent or background).

    Lookup is one ``np.searchsorted`` over the sorted colour keys: no per-pixel Python.
    """

    keys: NDArray[np.uint32]
    values: NDArray[np.int32]
    empty: NDArray[np.uint32]

    @classmethod
    def build(cls, colors: Sequence[RGBA], empty: Iterable[RGBA] = ()) -> ColorTable:
        keys = np.array([pack(c) for c in colors], dtype=np.uint32)
        order = np.argsort(keys, kind="stable")
        return cls(keys[order], (order + 1).astype(np.int32),
                   np.array(sorted(pack(c) for c in empty), dtype=np.uint32))

    def lookup(self, rgba: NDArray[np.uint8], file: Path,
               what: str) -> NDArray[np.int32]:
        """Rule index per pixel (``(H, W)`` int32, 0 = empty); unknown colours raise
        :class:`LevelError` naming the first such pixel (reading order) and its colour."""
        packed = pack_image(rgba)
        blank = (packed >> np.uint32(24)) == 0
        if self.empty.size:
            blank |= np.isin(packed, self.empty)
        if self.keys.size == 0:
            found = np.zeros(packed.shape, dtype=bool)
            idx = np.zeros(packed.shape, dtype=np.intp)
        else:
            idx = np.searchsorted(self.keys, packed)
            np.minimum(idx, self.keys.size - 1, out=idx)
            found = self.keys[idx] == packed
        bad = ~found & ~blank
        if bad.any():
            row, col = divmod(int(np.argmax(bad)), packed.shape[1])
            unknown = np.unique(packed[bad])
            first = to_hex(unpack(int(packed[row, col])))
            more = ""
            if unknown.size > 1:
                shown = ", ".join(to_hex(unpack(int(v))) for v in unknown[:8])
                more = (f"; {int(bad.sum())} pixels in {unknown.size} unmapped colours "
                        f"({shown}{', ...' if unknown.size > 8 else ''})")
            known = ", ".join(to_hex(unpack(int(k))) for k in self.keys) or "none"
            raise LevelError(file, f"colour {first} is not mapped to {what} (mapped: "
                                   f"{known}){more}", where=f"pixel (x={col}, y={row})")
        out = np.where(found & ~blank, self.values[idx] if self.keys.size else 0, 0)
        return out.astype(np.int32, copy=False)
