"""Tests for ``levels.partition``: exact cover, greedy == thesis port, exact == brute force."""

from __future__ import annotations

import importlib
import json
import time
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.typing import NDArray

from ecs_engine.levels import RECT_DTYPE, partition
from ecs_engine.levels.partition import Method
from tests.thesis_partition import thesis_greedy

# The module, not the function that ``levels`` re-exports under the same name.
partition_module = importlib.import_module("levels.partition")

LEVELS_REAL = Path(__file__).resolve().parents[2] / "shared" / "levels-real"
LDTK_PNGS = sorted((LEVELS_REAL / "ldtk").glob("*.png"))
needs_real_levels = pytest.mark.skipif(
    not LDTK_PNGS, reason=f"real LDtk levels not found in {LEVELS_REAL / 'ldtk'}"
)

FAST = settings(max_examples=150, deadline=None)


# ---------------------------------------------------------------------------------------------
# helpers


def assert_partition(grid: NDArray[np.integer], rects: NDArray[np.void], background: int) -> None:
    """Every non-background cell covered exactly once, by a rectangle of its own value."""
    assert rects.dtype == RECT_DTYPE
    cover = np.zeros(grid.shape, dtype=np.int64)
    for value, x, y, w, h in rects.tolist():
        assert w > 0 and h > 0
        assert 0 <= x and x + w <= grid.shape[1] and 0 <= y and y + h <= grid.shape[0]
        block = grid[y : y + h, x : x + w]
        assert np.all(block == value), "rectangle mixes values"
        assert value != background
        cover[y : y + h, x : x + w] += 1
    np.testing.assert_array_equal(cover, (grid != background).astype(np.int64))
    keys = list(zip(rects["y"].tolist(), rects["x"].tolist(), strict=True))
    assert keys == sorted(keys), "rectangles not sorted by (y, x)"


def as_set(rects: NDArray[np.void]) -> set[tuple[int, ...]]:
    return set(map(tuple, rects.tolist()))


def brute_force_min(grid: NDArray[np.integer], background: int = 0) -> int:
    """Minimum number of single-valued rectangles partitioning the non-background cells.

    Exhaustive search: the first uncovered cell in row-major order must be the top-left cell of
    its rectangle, so only rectangles anchored there are tried (memoised on the covered set).
    """
    n_rows, n_cols = grid.shape
    values = grid.tolist()
    target = 0
    for y in range(n_rows):
        for x in range(n_cols):
            if values[y][x] != background:
                target |= 1 << (y * n_cols + x)

    @cache
    def solve(covered: int) -> int:
        if covered == target:
            return 0
        todo = target & ~covered
        first = (todo & -todo).bit_length() - 1
        y0, x0 = divmod(first, n_cols)
        value = values[y0][x0]

        def free(y: int, x: int) -> bool:
            return values[y][x] == value and not covered >> (y * n_cols + x) & 1

        best = n_rows * n_cols
        max_w = 0
        while x0 + max_w < n_cols and free(y0, x0 + max_w):
            max_w += 1
        for w in range(1, max_w + 1):
            mask = 0
            for y in range(y0, n_rows):
                if not all(free(y, x) for x in range(x0, x0 + w)):
                    break
                for x in range(x0, x0 + w):
                    mask |= 1 << (y * n_cols + x)
                best = min(best, 1 + solve(covered | mask))
        return best

    return solve(0)


def load_ldtk(path: Path) -> NDArray[np.int64]:
    """Decode an LDtk IntGrid PNG: transparent = 0, each distinct RGBA colour = 1, 2, ..."""
    from PIL import Image

    with Image.open(path) as image:
        rgba = np.asarray(image.convert("RGBA"))
    packed = rgba.astype(np.uint32) @ np.array([1 << 24, 1 << 16, 1 << 8, 1], dtype=np.uint32)
    packed[rgba[..., 3] == 0] = 0
    _, codes = np.unique(packed, return_inverse=True)
    grid = codes.reshape(packed.shape).astype(np.int64)
    if not np.any(packed == 0):
        grid += 1  # no transparent pixel: code 0 is a real colour
    return grid


def grids(
    max_side: int = 12, values: int = 3, min_side: int = 1
) -> st.SearchStrategy[NDArray[np.int64]]:
    """Random grids with cell values 0 (background) to ``values``."""
    shapes = st.tuples(st.integers(min_side, max_side), st.integers(min_side, max_side))
    return shapes.flatmap(lambda shape: arrays(np.int64, shape, elements=st.integers(0, values)))


@st.composite
def blobby_grids(draw: st.DrawFn) -> NDArray[np.int64]:
    """Coarse random blocks upscaled, plus a little noise: many long equal runs."""
    rows, cols = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    scale_y, scale_x = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    coarse = draw(arrays(np.int64, (rows, cols), elements=st.integers(0, 3)))
    grid = np.kron(coarse, np.ones((scale_y, scale_x), dtype=np.int64))
    noise = draw(arrays(np.int64, grid.shape, elements=st.sampled_from([0] * 12 + [1, 2])))
    return np.where(noise > 0, noise, grid)


# ---------------------------------------------------------------------------------------------
# properties


@FAST
@given(grid=st.one_of(grids(), blobby_grids()), method=st.sampled_from(["greedy", "exact"]))
def test_exact_cover_no_mixing(grid: NDArray[np.int64], method: Method) -> None:
    assert_partition(grid, partition(grid, method=method), background=0)


@FAST
@given(
    grid=grids(max_side=8, values=2),
    background=st.integers(-1, 2),
    dtype=st.sampled_from([np.int8, np.uint8, np.int16, np.int32, np.uint64]),
    method=st.sampled_from(["greedy", "exact"]),
)
def test_background_and_dtypes(
    grid: NDArray[np.int64], background: int, dtype: type, method: Method
) -> None:
    typed: NDArray[np.integer] = grid.astype(dtype)
    rects = partition(typed, method=method, background=background)
    assert_partition(typed.astype(np.int64), rects, background=background)


@FAST
@given(grid=st.one_of(grids(max_side=16), blobby_grids()))
def test_greedy_matches_thesis_port(grid: NDArray[np.int64]) -> None:
    fast = partition(grid, method="greedy")
    slow = thesis_greedy(grid)
    assert as_set(fast) == as_set(slow)
    np.testing.assert_array_equal(fast, slow)  # same (y, x) order too


@FAST
@given(
    grid=st.one_of(grids(max_side=20), blobby_grids()),
    dtype=st.sampled_from([np.uint8, np.int16, np.int32, np.int64]),
    drop_rows=st.booleans(),
)
def test_greedy_row_dropping_either_way(
    grid: NDArray[np.int64], dtype: type, drop_rows: bool
) -> None:
    # Greedy merges only the distinct rows when enough rows repeat the row above; forcing
    # either path must not change the output. Odd widths exercise every row-word size.
    typed: NDArray[np.integer] = grid.astype(dtype)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(partition_module, "_MIN_REPEATED_ROWS", 0.0 if drop_rows else 2.0)
        fast = partition(typed, method="greedy")
    np.testing.assert_array_equal(fast, thesis_greedy(typed))


@settings(max_examples=100, deadline=None)
@given(bits=arrays(np.bool_, st.integers(1, 400)))
def test_starts_before_matches_binary_search(bits: NDArray[np.bool_]) -> None:
    padded = np.zeros(-(-bits.size // 64) * 64, dtype=bool)
    padded[: bits.size] = bits
    starts = np.flatnonzero(padded)
    cells = np.arange(bits.size, dtype=np.intp)
    np.testing.assert_array_equal(
        partition_module._starts_before(padded, starts, cells), np.searchsorted(starts, cells)
    )


@pytest.mark.parametrize("block", [1, 3, 8])
@pytest.mark.parametrize("popcount", [True, False])
def test_greedy_large_levels(block: int, popcount: bool) -> None:
    # Benchmark-like levels: many 64-cell words per row, long chains, rows repeated or not;
    # without np.bitwise_count (numpy < 2) the rank query falls back to a binary search.
    rng = np.random.default_rng(block)
    shape = (-(-203 // block), -(-173 // block))
    coarse = np.where(rng.random(shape) < 0.45, rng.integers(1, 4, shape), 0)
    grid = np.kron(coarse, np.ones((block, block), np.uint8))[:203, :173].astype(np.uint8)
    with pytest.MonkeyPatch.context() as mp:
        if not popcount:
            mp.delattr(np, "bitwise_count", raising=False)
        fast = partition(grid, method="greedy")
    np.testing.assert_array_equal(fast, thesis_greedy(grid))


@FAST
@given(grid=st.one_of(grids(max_side=16), blobby_grids()))
def test_exact_never_worse_than_greedy(grid: NDArray[np.int64]) -> None:
    assert len(partition(grid, method="exact")) <= len(partition(grid, method="greedy"))


@settings(max_examples=250, deadline=None)
@given(grid=grids(max_side=5, values=2))
def test_exact_is_minimum_small(grid: NDArray[np.int64]) -> None:
    assert len(partition(grid, method="exact")) == brute_force_min(grid)


@settings(max_examples=100, deadline=None)
@given(grid=grids(max_side=6, values=1, min_side=3))
def test_exact_is_minimum_one_value(grid: NDArray[np.int64]) -> None:
    # One value: holes, pinches (diagonal touching cells) and several components are common.
    assert len(partition(grid, method="exact")) == brute_force_min(grid)


# ---------------------------------------------------------------------------------------------
# known cases

L_SHAPE = [[1, 0, 0], [1, 0, 0], [1, 1, 1]]
PLUS = [[0, 1, 0], [1, 1, 1], [0, 1, 0]]
SQUARE_WITH_HOLE = [[1, 1, 1], [1, 0, 1], [1, 1, 1]]
CHECKER_2X2 = [[1, 2], [2, 1]]
# Pinch: diagonal cells of one value around a background cell; no concave corner there.
PINCH_RING = [[1, 1, 0], [1, 0, 1], [0, 1, 1]]
# Staircase where greedy's row runs are far from optimal.
COMB = [[1, 0, 1, 0, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]]


@pytest.mark.parametrize(
    ("grid", "expected"),
    [
        (L_SHAPE, 2),
        (PLUS, 3),
        (SQUARE_WITH_HOLE, 4),
        (CHECKER_2X2, 4),
        (PINCH_RING, 4),
        (COMB, 4),
        ([[7]], 1),
        ([[3, 3], [3, 3]], 1),
    ],
)
def test_known_exact_counts(grid: list[list[int]], expected: int) -> None:
    arr = np.array(grid, dtype=np.int64)
    rects = partition(arr, method="exact")
    assert_partition(arr, rects, background=0)
    assert len(rects) == expected
    assert brute_force_min(arr) == expected


def test_l_shape_rectangles() -> None:
    rects = partition(np.array(L_SHAPE), method="greedy")
    assert rects.tolist() == [(1, 0, 0, 1, 2), (1, 0, 2, 3, 1)]
    exact = partition(np.array(L_SHAPE), method="exact")
    assert len(exact) == 2


def test_greedy_runs_never_split() -> None:
    # The second row's run is wider than the first's: it starts a new rectangle.
    grid = np.array([[0, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]])
    assert partition(grid).tolist() == [(1, 1, 0, 2, 1), (1, 0, 1, 4, 2)]


def test_exact_large_square_with_hole() -> None:
    grid = np.ones((40, 30), dtype=np.int64)
    grid[10:20, 5:25] = 0
    assert len(partition(grid, method="exact")) == 4


@pytest.mark.parametrize("method", ["greedy", "exact"])
@pytest.mark.parametrize("shape", [(0, 0), (0, 5), (4, 0)])
def test_empty_grid(method: Method, shape: tuple[int, int]) -> None:
    rects = partition(np.zeros(shape, dtype=np.int32), method=method)
    assert rects.dtype == RECT_DTYPE and rects.size == 0


@pytest.mark.parametrize("method", ["greedy", "exact"])
def test_all_background(method: Method) -> None:
    assert partition(np.full((5, 7), 4), method=method, background=4).size == 0
    assert partition(np.zeros((5, 7), dtype=np.uint8), method=method).size == 0


@pytest.mark.parametrize(
    ("grid", "method", "match"),
    [
        (np.zeros(5, dtype=np.int64), "greedy", "2-D"),
        (np.zeros((2, 2, 2), dtype=np.int64), "exact", "2-D"),
        (np.zeros((2, 2), dtype=np.float64), "greedy", "integer dtype"),
        (np.zeros((2, 2), dtype=bool), "exact", "integer dtype"),
        (np.zeros((2, 2), dtype=np.int64), "optimal", "unknown method"),
    ],
)
def test_validation(grid: NDArray[np.generic], method: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        partition(grid, method=method)  # type: ignore[arg-type]


def test_deterministic() -> None:
    rng = np.random.default_rng(7)
    grid = np.kron(rng.integers(0, 3, (12, 12)), np.ones((4, 3), dtype=np.int64))
    methods: tuple[Method, ...] = ("greedy", "exact")
    for method in methods:
        first = partition(grid, method=method)
        np.testing.assert_array_equal(first, partition(grid.copy(), method=method))


# ---------------------------------------------------------------------------------------------
# real published levels


@needs_real_levels
def test_ldtk_decoding_matches_index() -> None:
    index_path = LEVELS_REAL / "ldtk" / "index.json"
    if not index_path.exists():
        pytest.skip(f"{index_path} missing")
    entries = {e["file"]: e for e in json.loads(index_path.read_text())}
    for path in LDTK_PNGS:
        entry = entries.get(path.name)
        if entry is None:
            continue
        grid = load_ldtk(path)
        assert grid.shape == (entry["height"], entry["width"])
        cells = sorted(v["cells"] for v in entry["values"].values())
        assert sorted(np.bincount(grid.ravel())[1:].tolist()) == cells


@needs_real_levels
@pytest.mark.parametrize("path", LDTK_PNGS, ids=[p.stem for p in LDTK_PNGS])
def test_real_level(path: Path) -> None:
    grid = load_ldtk(path)
    greedy = partition(grid, method="greedy")
    exact = partition(grid, method="exact")
    assert_partition(grid, greedy, background=0)
    assert_partition(grid, exact, background=0)
    assert as_set(greedy) == as_set(thesis_greedy(grid))
    assert len(exact) <= len(greedy)


@needs_real_levels
def test_real_levels_tiled_to_large_map() -> None:
    # Real geometry tiled to a ~520x210 map, the size the exact method must handle in time.
    grid = load_ldtk(max(LDTK_PNGS, key=lambda p: load_ldtk(p).size))
    tiled = np.tile(grid, (-(-210 // grid.shape[0]), -(-520 // grid.shape[1])))[:210, :520]
    greedy = partition(tiled, method="greedy")
    started = time.perf_counter()
    exact = partition(tiled, method="exact")
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0, f"exact partition of a 520x210 map took {elapsed:.2f} s"
    assert_partition(tiled, exact, background=0)
    assert as_set(greedy) == as_set(thesis_greedy(tiled))
    assert len(exact) <= len(greedy)
