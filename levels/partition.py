"""Rectangle partition of a level's geometry grid.

A geometry grid is a 2-D integer array indexed ``grid[y, x]`` (y = row from the top, x = column),
one cell per world unit. :func:`partition` covers every non-background cell with exactly one
axis-aligned rectangle of a single value; every rectangle becomes one collider entity.

Two methods:

``greedy``
    The thesis' scanline merge, vectorised: per row, maximal runs of one value; a run extends the
    rectangle directly above it only when left edge, right edge and value all match.
``exact``
    A minimum partition per value: maximum independent set of good chords (bipartite matching and
    Koenig's theorem), then one cut from every concave corner left unresolved.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["RECT_DTYPE", "partition"]

RECT_DTYPE = np.dtype([("value", "<i8"), ("x", "<i4"), ("y", "<i4"), ("w", "<i4"), ("h", "<i4")])
"""One rectangle: cell value, top-left cell ``(x, y)`` and size ``(w, h)``, all in grid cells."""

Method = Literal["greedy", "exact"]

_Bool = NDArray[np.bool_]
_Int = NDArray[np.int64]


def partition(
    grid: NDArray[np.integer], method: Method = "greedy", background: int = 0
) -> NDArray[np.void]:
    """Partition the non-background cells of ``grid`` into single-valued rectangles.

    ``grid`` is a 2-D integer array indexed ``grid[y, x]``. Returns a structured array of
    :data:`RECT_DTYPE` (positions and sizes in cells), sorted by ``(y, x)``. Each non-background
    cell lies in exactly one rectangle; background cells lie in none. Cells and ``background``
    compare as numbers, whatever the dtype; a uint64 value above 2**63 - 1 is stored in
    ``value`` by its bits (``rects["value"].view(np.uint64)`` reads it back).
    """
    arr = np.asarray(grid)
    if arr.ndim != 2:
        raise ValueError(
            f"partition: grid must be 2-D, got {arr.ndim}-D array of shape {arr.shape}"
        )
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"partition: grid must have an integer dtype, got {arr.dtype}")
    if method not in ("greedy", "exact"):
        raise ValueError(f"partition: unknown method {method!r}, expected 'greedy' or 'exact'")
    if arr.size == 0:
        return np.empty(0, dtype=RECT_DTYPE)
    cells, bg = _with_background(arr, background)
    if method == "greedy":
        return _greedy(cells, bg)
    return _exact(cells, bg)


def _with_background(arr: NDArray[np.integer], background: int
                     ) -> tuple[NDArray[np.integer], np.integer]:
    """The cells and a background of one dtype that compare exactly as the numbers do.

    A background the grid's dtype can hold is cast to it. One it cannot hold (-1 for a uint8
    or uint64 grid) equals no cell, so any value absent from the grid stands in for it;
    casting both to a common type instead would wrap (uint64 2**64 - 1 is int64 -1)."""
    info = np.iinfo(arr.dtype)
    if info.min <= background <= info.max:
        return arr, arr.dtype.type(background)
    lo, hi = int(arr.min()), int(arr.max())
    if hi < info.max:
        return arr, arr.dtype.type(hi + 1)
    if lo > info.min:
        return arr, arr.dtype.type(lo - 1)
    values = np.unique(arr)  # both ends taken: a gap inside, or a small dtype full
    gaps = np.flatnonzero(np.diff(values) > 1)
    if gaps.size:
        return arr, arr.dtype.type(int(values[gaps[0]]) + 1)
    # every value of an 8/16/32-bit dtype occurs: widen, where one more value exists
    return arr.astype(np.int64), np.int64(info.max + 1)


def _make_rects(value: NDArray[np.integer], x: _Int, y: _Int, w: _Int, h: _Int) -> NDArray[np.void]:
    """Pack rectangle columns (cells), already in row-major ``(y, x)`` order, into RECT_DTYPE."""
    out = np.empty(value.size, dtype=RECT_DTYPE)
    out["value"] = value
    out["x"] = x
    out["y"] = y
    out["w"] = w
    out["h"] = h
    return out


# --------------------------------------------------------------------------------------------
# greedy

_Columns = tuple[NDArray[np.integer], _Int, _Int, _Int, _Int]
"""Rectangle columns ``(value, x, y, w, h)`` in row-major ``(y, x)`` order, before packing."""

_MIN_REPEATED_ROWS = 1 / 16
"""Share of rows equal to the row above from which :func:`_greedy` merges only distinct rows:
dropping rows costs one copy of the rest, far less than the merge saves on the dropped ones."""


def _greedy(cells: NDArray[np.integer], bg: np.integer) -> NDArray[np.void]:
    """Scanline merge over all rows at once (no Python loop over rows or runs).

    A row equal to the row above continues every rectangle above it unchanged, so such rows are
    dropped before the merge and added to the heights afterwards: the output is the same. Levels
    drawn in tiles of several cells repeat most rows, and the merge then sees one row per tile.
    """
    n_rows, n_cols = cells.shape
    rows = np.ascontiguousarray(cells)
    # Compare rows as the widest unsigned words that tile a row (8 uint8 cells per comparison);
    # for integers, equal bits are equal values.
    row_bytes = n_cols * rows.itemsize
    word = next(np.dtype(f"u{k}") for k in (8, 4, 2, 1) if row_bytes % k == 0)
    as_words = rows.view(word)
    new_row = np.ones(n_rows, dtype=bool)
    np.any(as_words[1:] != as_words[:-1], axis=1, out=new_row[1:])
    distinct = np.flatnonzero(new_row)
    if distinct.size > (1 - _MIN_REPEATED_ROWS) * n_rows:
        return _make_rects(*_greedy_rows(rows, bg))
    value, x, y, w, h = _greedy_rows(rows.take(distinct, axis=0), bg)
    # Merged row r stands for the original rows distinct[r] up to distinct[r + 1].
    row_stop = np.append(distinct, n_rows)
    h = row_stop.take(y + h) - row_stop.take(y)
    return _make_rects(value, x, distinct.take(y), w, h)


_U64 = np.dtype("<u8")  # packbits(bitorder="little") bytes read as words: bit i = cell i


def _starts_before(bits: _Bool, starts: _Int, cells: _Int) -> _Int:
    """For each flat cell index in ``cells``, how many runs start before it: the index into
    ``starts`` of the run starting at that cell, if one does.

    ``bits`` is the run-start bitmap that ``starts`` lists, padded to whole 64-bit words. A rank
    query: starts per word (prefix sums) plus a popcount inside the word, O(1) per cell where a
    binary search over all runs is O(log runs) and jumps all over memory.
    """
    bitwise_count = getattr(np, "bitwise_count", None)
    if bitwise_count is None:  # numpy < 2: no popcount ufunc, same answer by binary search
        return np.searchsorted(starts, cells)
    words = np.packbits(bits, bitorder="little").view(_U64)
    word_rank = np.zeros(words.size, dtype=np.intp)
    np.cumsum(bitwise_count(words[:-1]), out=word_rank[1:])
    word_of = cells >> 6
    # Bit index in the word, then the mask of the bits below it (shifts need uint64 operands).
    below = np.bitwise_and(cells, 63, dtype=np.uint64, casting="unsafe")
    np.left_shift(np.uint64(1), below, out=below)
    below -= np.uint64(1)
    below &= words.take(word_of)
    rank = word_rank.take(word_of)
    rank += bitwise_count(below)
    return rank


def _greedy_rows(cells: NDArray[np.integer], bg: np.integer) -> _Columns:
    """The scanline merge proper, on a C-contiguous grid; see :func:`_greedy`."""
    n_cols = cells.shape[1]
    flat = cells.ravel()
    n_cells = flat.size
    # Runs of equal value tile every row, background runs included: a run starts at each column
    # 0 and wherever the value differs from its left neighbour. One bool per cell, plus a
    # sentinel start one past the last cell so that every run stops where the next one starts,
    # padded to whole 64-bit words for _starts_before.
    bits = np.empty(-(-(n_cells + 1) // 64) * 64, dtype=bool)
    np.not_equal(flat[1:], flat[:-1], out=bits[1:n_cells])
    bits[:n_cells:n_cols] = True
    bits[n_cells] = True
    bits[n_cells + 1 :] = False
    # intp index arrays throughout: take() converts any other index dtype on every call, and
    # in this memory-bound code fresh temporaries cost more than the wider integers.
    starts = np.flatnonzero(bits)  # all runs, then the sentinel
    values = flat.take(starts[:-1])
    is_solid = values != bg
    solid = np.flatnonzero(is_solid)
    s = starts.take(solid)
    e = starts[1:].take(solid)  # one past each run's last cell, flat index
    v = values.take(solid)
    del solid
    n_runs = s.size
    if n_runs == 0:
        empty = np.empty(0, dtype=np.intp)
        return v, empty, empty, empty, empty

    # A run (from row 1 on) continues the rectangle above iff the row above has a run starting
    # right above it (flat index - n_cols) with the same value and the same stop.
    below = int(np.searchsorted(s, n_cols))  # runs of row 0 continue nothing
    up = s[below:] - n_cols
    cont = np.zeros(n_runs, dtype=bool)
    cont_below = cont[below:]
    above = _starts_before(bits, starts, up)  # index among all runs, background ones included
    np.logical_and(bits.take(up), values.take(above) == v[below:], out=cont_below)
    solid_before = np.cumsum(is_solid, dtype=np.intp)
    above = solid_before.take(above)
    above -= 1  # index among solid runs: a matching run above has a solid value
    # Where no solid run starts above, `above` may be -1: clip, the mask drops those anyway.
    stop_above = np.take(e, above, mode="clip")
    stop_above += n_cols
    cont_below &= stop_above == e[below:]
    # Per-cell and all-run arrays are done with: free them before the chains need memory.
    del bits, starts, values, is_solid, solid_before, up, stop_above

    # Continuing runs form vertical chains; pointer jumping finds each chain's head in
    # O(log height) passes. Links point one row up, so the passes read nearby memory.
    head = np.arange(n_runs, dtype=np.intp)
    np.copyto(head[below:], above, where=cont_below)
    jumped = np.empty_like(head)
    while True:
        np.take(head, head, out=jumped, mode="clip")  # "clip": no buffering of `out`
        if np.array_equal(jumped, head):
            break
        head, jumped = jumped, head
    first = np.flatnonzero(~cont)  # chain heads, already in row-major (y, x) order
    heights = np.bincount(head, minlength=n_runs).take(first)
    first_start = s.take(first)
    y = first_start // n_cols
    return v.take(first), first_start - y * n_cols, y, e.take(first) - first_start, heights


# --------------------------------------------------------------------------------------------
# exact


def _nearest_true(
    mask: _Bool, ry: _Int, rx: _Int, axis: int, where: Literal["after", "from", "before"]
) -> _Int:
    """Index along ``axis`` (1 = along rows, 0 = down columns) of the nearest True of ``mask``
    on each query's line: ``"after"`` strictly after, ``"from"`` at or after, ``"before"``
    strictly before ``(ry, rx)``. The caller guarantees that such a True exists on the line.
    """
    # One nonzero over the mask, then a binary search per query: far cheaper than a running
    # min/max over the whole grid when queries are sparse (corners, pieces).
    if axis == 1:
        hits = np.flatnonzero(mask)
        line, pos, length = ry, rx, mask.shape[1]
    else:
        hits = np.flatnonzero(mask.T)  # column-major order
        line, pos, length = rx, ry, mask.shape[0]
    key = line.astype(np.int64) * length + pos
    if where == "after":
        found = hits[np.searchsorted(hits, key, side="right")]
    elif where == "from":
        found = hits[np.searchsorted(hits, key, side="left")]
    else:
        found = hits[np.searchsorted(hits, key, side="left") - 1]
    return found - line.astype(np.int64) * length


def _segment_indices(first: _Int, count: _Int, step: int) -> _Int:
    """Flat indices ``first[i] + k * step`` for ``k < count[i]``, all segments concatenated."""
    total = int(count.sum())
    offsets = np.cumsum(count) - count
    k = np.arange(total, dtype=np.int64) - np.repeat(offsets, count)
    return np.repeat(first.astype(np.int64), count) + k * step


def _max_independent_chords(
    h_points: _Int, h_count: _Int, v_points: _Int, v_count: _Int, n_points: int
) -> tuple[_Bool, _Bool]:
    """Maximum independent set of horizontal/vertical chords (Koenig's theorem).

    ``*_points`` are the flat grid-point indices each chord covers (endpoints included, so chords
    sharing a corner conflict), ``*_count`` the points per chord. Returns keep-masks.
    """
    try:  # (only the exact method needs scipy: the demo and greedy levels run without it)
        from scipy.sparse import coo_array, csr_array
        from scipy.sparse.csgraph import breadth_first_order, maximum_bipartite_matching
    except ImportError as missing:
        raise ImportError("partition(method='exact') needs scipy: install the levels extra, "
                          "pip install 'ecs-engine[levels]'") from missing
    n_h, n_v = h_count.size, v_count.size
    # Chords of one orientation are disjoint, so one id per point suffices.
    h_at = np.zeros(n_points, dtype=np.int64)
    h_at[h_points] = np.repeat(np.arange(1, n_h + 1, dtype=np.int64), h_count)
    crossed = h_at[v_points]
    hit = crossed > 0
    eu = crossed[hit] - 1
    ev = np.repeat(np.arange(n_v, dtype=np.int64), v_count)[hit]
    if eu.size == 0:
        return np.ones(n_h, dtype=bool), np.ones(n_v, dtype=bool)
    graph = csr_array((np.ones(eu.size, dtype=np.int8), (eu, ev)), shape=(n_h, n_v))
    mate_u = np.asarray(maximum_bipartite_matching(graph, perm_type="column"), dtype=np.int64)
    # Alternating BFS from the unmatched horizontal chords: H -> V along any edge, V -> H along
    # the matching. A super-source node (last id) feeds all unmatched H chords.
    source = n_h + n_v
    matched_u = np.flatnonzero(mate_u >= 0)
    free_u = np.flatnonzero(mate_u < 0)
    rows = np.concatenate([eu, mate_u[matched_u] + n_h, np.full(free_u.size, source)])
    cols = np.concatenate([ev + n_h, matched_u, free_u])
    directed = coo_array(
        (np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(source + 1, source + 1)
    ).tocsr()
    reached = np.zeros(source + 1, dtype=bool)
    reached[breadth_first_order(directed, source, directed=True, return_predecessors=False)] = True
    # Min vertex cover = (H \ Z) | (V & Z); the independent set is its complement.
    return reached[:n_h], ~reached[n_h:source]


def _exact(cells: NDArray[np.integer], bg: np.integer) -> NDArray[np.void]:
    """Minimum rectangle partition, every value's 4-connected cells handled as its own region."""
    n_rows, n_cols = cells.shape
    padded = np.full((n_rows + 2, n_cols + 2), bg, dtype=cells.dtype)
    padded[1:-1, 1:-1] = cells
    # Grid points (px, py), 0 <= px <= n_cols, 0 <= py <= n_rows; the four cells around a point.
    nw = padded[:-1, :-1]
    ne = padded[:-1, 1:]
    sw = padded[1:, :-1]
    se = padded[1:, 1:]
    full = (nw == ne) & (nw == sw) & (nw == se) & (nw != bg)
    # Concave corner: three cells share a non-background value, the fourth differs. Two diagonal
    # cells of one value (a pinch) are no corner at all: cells are 4-connected.
    miss_nw = (ne == sw) & (ne == se) & (ne != bg) & (nw != ne)
    miss_ne = (nw == sw) & (nw == se) & (nw != bg) & (ne != nw)
    miss_sw = (nw == ne) & (nw == se) & (nw != bg) & (sw != nw)
    miss_se = (nw == ne) & (nw == sw) & (nw != bg) & (se != nw)
    concave = miss_nw | miss_ne | miss_sw | miss_se
    # A corner's cuts run away from its missing cell: east if the gap is on the west, etc.
    go_east = miss_nw | miss_sw
    go_south = miss_nw | miss_ne
    # Border points are never full, so every ray below stops inside its line.
    stop = ~full
    pts_w = n_cols + 1
    n_points = full.size

    # Good chords: a ray from a corner through interior points that ends on another corner.
    # Rays only pass full points, so they never cross other corners and chords on one line
    # are disjoint.
    hy, hx0 = (a.astype(np.int64) for a in np.nonzero(go_east))
    hx1 = _nearest_true(stop, hy, hx0, axis=1, where="after")
    keep = concave[hy, hx1]
    hy, hx0, hx1 = hy[keep], hx0[keep], hx1[keep]
    vy0, vx = (a.astype(np.int64) for a in np.nonzero(go_south))
    vy1 = _nearest_true(stop, vy0, vx, axis=0, where="after")
    keep = concave[vy1, vx]
    vx, vy0, vy1 = vx[keep], vy0[keep], vy1[keep]

    h_count = hx1 - hx0 + 1
    v_count = vy1 - vy0 + 1
    h_points = _segment_indices(hy * pts_w + hx0, h_count, 1)
    v_points = _segment_indices(vy0 * pts_w + vx, v_count, pts_w)
    keep_h, keep_v = _max_independent_chords(h_points, h_count, v_points, v_count, n_points)
    hy, hx0, hx1 = hy[keep_h], hx0[keep_h], hx1[keep_h]
    vx, vy0, vy1 = vx[keep_v], vy0[keep_v], vy1[keep_v]

    resolved = np.zeros(full.shape, dtype=bool)
    resolved[hy, hx0] = True
    resolved[hy, hx1] = True
    resolved[vy0, vx] = True
    resolved[vy1, vx] = True
    # Every other corner gets one horizontal cut, stopped by the boundary or a chosen vertical
    # chord. Two such cuts never meet: a pair that could would be a good chord crossing no chosen
    # chord, contradicting the maximality of the independent set.
    blocker = stop.copy()
    blocker.ravel()[_segment_indices(vy0 * pts_w + vx, vy1 - vy0 + 1, pts_w)] = True
    rest = concave & ~resolved
    ey, ex = (a.astype(np.int64) for a in np.nonzero(rest & go_east))
    ex_end = _nearest_true(blocker, ey, ex, axis=1, where="after")
    wy, wx = (a.astype(np.int64) for a in np.nonzero(rest & ~go_east))
    wx_end = _nearest_true(blocker, wy, wx, axis=1, where="before")
    cut_y = np.concatenate([hy, ey, wy])
    cut_x0 = np.concatenate([hx0, ex, wx_end])
    cut_x1 = np.concatenate([hx1, ex_end, wx])
    # hcut[py, px]: the unit edge (px, py)-(px+1, py) is cut; vcut[py, px]: (px, py)-(px, py+1).
    hcut = np.zeros((n_rows + 1, n_cols), dtype=bool)
    hcut.ravel()[_segment_indices(cut_y * n_cols + cut_x0, cut_x1 - cut_x0, 1)] = True
    vcut = np.zeros((n_rows, n_cols + 1), dtype=bool)
    vcut.ravel()[_segment_indices(vy0 * pts_w + vx, vy1 - vy0, pts_w)] = True
    return _pieces(cells, bg, hcut, vcut)


def _pieces(
    cells: NDArray[np.integer], bg: np.integer, hcut: _Bool, vcut: _Bool
) -> NDArray[np.void]:
    """Read the rectangles off the cut grid and verify they partition the cells exactly."""
    nonbg = cells != bg
    # join_r[y, x]: cells (x, y) and (x+1, y) lie in one piece; join_d likewise downwards.
    join_r = np.zeros(cells.shape, dtype=bool)
    join_r[:, :-1] = (cells[:, :-1] == cells[:, 1:]) & nonbg[:, :-1] & ~vcut[:, 1:-1]
    join_d = np.zeros(cells.shape, dtype=bool)
    join_d[:-1, :] = (cells[:-1, :] == cells[1:, :]) & nonbg[:-1, :] & ~hcut[1:-1, :]
    top_left = nonbg.copy()
    top_left[1:, :] &= ~join_d[:-1, :]
    top_left[:, 1:] &= ~join_r[:, :-1]
    ry, rx = (a.astype(np.int64) for a in np.nonzero(top_left))
    # A piece's width is the joined run along its top row, its height the run down its left
    # column (the last column/row never joins on). _verify rejects non-rectangles.
    w = _nearest_true(~join_r, ry, rx, axis=1, where="from") - rx + 1
    h = _nearest_true(~join_d, ry, rx, axis=0, where="from") - ry + 1
    _verify(nonbg, rx, ry, w, h)
    return _make_rects(cells[ry, rx].astype(np.int64), rx, ry, w, h)


def _verify(nonbg: _Bool, x: _Int, y: _Int, w: _Int, h: _Int) -> None:
    """Raise ``RuntimeError`` unless the rectangles cover each non-background cell exactly once.

    With every rectangle's top row and left column joined (one value), exact cover also rules
    out mixed values: the first foreign cell inside a rectangle would start a piece of its own
    and be covered twice.
    """
    n_rows, n_cols = nonbg.shape
    stride = n_cols + 1
    top, bottom = y * stride, (y + h) * stride
    corners = np.concatenate([top + x, top + x + w, bottom + x, bottom + x + w])
    signs = np.repeat(np.array([1, -1, -1, 1], dtype=np.int32), x.size)
    # 2-D difference array of the rectangles; its prefix sums count the cover of every cell.
    cover = np.zeros((n_rows + 1, stride), dtype=np.int32)
    np.add.at(cover.ravel(), corners, signs)
    np.cumsum(cover, axis=0, out=cover)
    np.cumsum(cover, axis=1, out=cover)
    if not np.array_equal(cover[:n_rows, :n_cols], nonbg):
        raise RuntimeError("partition(method='exact'): cut pieces are not a rectangle partition")
