"""Write a run's results: ``<timestamp>.json`` (every sample), ``latest.md`` and charts.

A complete full run writes ``latest.md`` / ``latest_*.png``; a ``--quick`` run writes
``latest-quick.*`` and a run of some scenarios only ``latest-partial.*``, so small runs never
overwrite the full results the README shows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.config import SuiteConfig
from benchmarks.runner import Record
from benchmarks.scenarios import ORDER
from benchmarks.suite import SuiteResult
from benchmarks.targets import Index, Outcome

SCHEMA = 1
BASELINE_NAMES = ("esper", "tcod-ecs", "dicts")


def prefix_for(cfg: SuiteConfig, result: SuiteResult) -> str:
    if cfg.quick:
        return "latest-quick"
    return "latest" if set(result.scenarios) == set(ORDER) else "latest-partial"


def write_all(result: SuiteResult, cfg: SuiteConfig, machine: dict[str, Any],
              outcomes: list[Outcome], argv: Sequence[str] = ()) -> dict[str, Path]:
    """Write the JSON, the Markdown and the charts; returns their paths by kind."""
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.localtime(result.started))
    prefix = prefix_for(cfg, result)
    suffix = prefix.removeprefix("latest")  # "-quick", "-partial" or "" for a full run
    paths = {"json": out_dir / f"{stamp}{suffix}.json", "md": out_dir / f"{prefix}.md"}
    payload = {
        "schema": SCHEMA,
        "created": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(result.started)),
        "mode": "quick" if cfg.quick else "full",
        "command": list(argv),
        "scenarios": result.scenarios,
        "elapsed_s": result.elapsed_s,
        "machine": machine,
        "config": cfg.as_json(),
        "targets": [o.as_json() for o in outcomes],
        "records": result.records,
    }
    paths["json"].write_text(_compact_json(payload))
    charts = write_charts(result.records, out_dir, prefix) if cfg.charts else {}
    paths.update(charts)
    paths["md"].write_text(markdown(payload, outcomes, {k: p.name for k, p in charts.items()}))
    return paths


def _compact_json(payload: dict[str, Any]) -> str:
    """Small but diffable: one line per record and per target."""
    lines = ["{"]
    items = list(payload.items())
    for i, (key, value) in enumerate(items):
        end = "," if i < len(items) - 1 else ""
        if key in ("records", "targets") and value:
            rows = [" " + json.dumps(v, separators=(",", ":")) for v in value]
            lines.append(f"{json.dumps(key)}: [\n" + ",\n".join(rows) + f"\n]{end}")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value, separators=(',', ':'))}{end}")
    return "\n".join(lines) + "\n}\n"


# -- Markdown -----------------------------------------------------------------------------

def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1000
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"


def _x(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    return f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:.3g}x"


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.0f}%"


def _n(n: int) -> str:
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n:,}"


def _mb(nbytes: int | float | None) -> str:
    return "-" if nbytes is None else f"{nbytes / 1e6:.3g}"


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]],
           left: Sequence[int] = (0,)) -> str:
    """A Markdown table; columns in ``left`` are left-aligned, the rest (numbers) right."""
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join(":--" if i in left else "--:" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


class _View:
    """Cell helpers over one run's records."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.ix = Index(records)

    def t(self, scenario: str, op: str, contender: str, n: int,
          variant: str = "") -> float | None:
        return self.ix.median(scenario, op, contender, n, variant)

    def cell(self, scenario: str, op: str, contender: str, n: int, variant: str = "") -> str:
        value = self.t(scenario, op, contender, n, variant)
        if value is not None:
            return _ms(value)
        row = self.ix.get(scenario, op, contender, n, variant)
        if row is None:
            return "-"
        return "skipped" if row.get("status") == "skipped" else row.get("status", "-")

    def sizes(self, scenario: str) -> list[int]:
        return sorted({int(r["n"]) for r in self.records if r["scenario"] == scenario})

    def notes(self, scenario: str) -> list[str]:
        seen: list[str] = []
        for r in self.records:
            if r["scenario"] == scenario and r.get("status") != "ok" and r.get("note"):
                line = f"{r['contender']} at {_n(int(r['n']))}: {r['note']}"
                if line not in seen:
                    seen.append(line)
        return seen


def _section(title: str, intro: str, table: str, notes: list[str]) -> str:
    parts = [f"## {title}", "", intro, "", table]
    if notes:
        parts += [""] + [f"- {n}" for n in notes]
    return "\n".join(parts) + "\n"


def _baseline_cols(v: _View, scenario: str, op: str, n: int, contenders: Sequence[str],
                   variant: str = "") -> list[str]:
    """Each contender's time and ``×``: its time / the engine's time measured interleaved
    with it on the same entities (record variant ``vs <kind>``)."""
    cells = []
    for c in contenders:
        kind = c.split(" ")[0]
        engine = v.t(scenario, op, "engine", n, f"vs {kind}")
        cells += [v.cell(scenario, op, c, n, variant),
                  _x(_div(v.t(scenario, op, c, n, variant), engine))]
    return cells


def _tick(v: _View) -> str | None:
    sizes = v.sizes("tick")
    if not sizes:
        return None
    heads = ["N", "engine ms", "numpy ms", "engine/numpy", "per field: engine ms",
             "engine/numpy", "per field/flat", "f32 SoA ms", "engine/SoA",
             "after 10% churn: engine ms", "engine/numpy"]
    for b in BASELINE_NAMES:
        heads += [f"{b} ms", "×"]
    rows = []
    for n in sizes:
        e = v.t("tick", "tick", "engine", n, "fresh")
        ec = v.t("tick", "tick", "engine", n, "churned")
        ef = v.t("tick", "tick", "engine per field", n, "fresh")
        rows.append([_n(n), v.cell("tick", "tick", "engine", n, "fresh"),
                     v.cell("tick", "tick", "numpy", n, "fresh"),
                     _x(_div(e, v.t("tick", "tick", "numpy", n, "fresh"))),
                     v.cell("tick", "tick", "engine per field", n, "fresh"),
                     _x(_div(ef, v.t("tick", "tick", "numpy per field", n, "fresh"))),
                     _x(_div(ef, e)),
                     v.cell("tick", "tick", "numpy f32 SoA", n, "fresh"),
                     _x(_div(e, v.t("tick", "tick", "numpy f32 SoA", n, "fresh"))),
                     v.cell("tick", "tick", "engine", n, "churned"),
                     _x(_div(ec, v.t("tick", "tick", "numpy", n, "churned")))]
                    + _baseline_cols(v, "tick", "tick", n, BASELINE_NAMES))
    intro = ("One `position += velocity * dt` tick over all entities, in ms. `engine`: the "
             "owning-group query written as the README teaches it, `q.unstructured` giving "
             "x and y as one (n, 2) float32 array, so one op covers both fields; "
             "`engine/numpy`: against the same expression on plain pre-aligned structured "
             "arrays (1.0x = no overhead). `per field`: the same system written a line per "
             "field (`pos[\"x\"] += ...`), against plain numpy written the same way, and "
             "`per field/flat` what that form costs (each op strides over whole rows). "
             "`engine/SoA` (a reference, INFO): against four float32 struct-of-arrays "
             "columns. `×`: contender time / engine time, the "
             "engine ticking the same entities interleaved with the contender's idiomatic "
             "per-entity loop in one process. Every contender's final positions are "
             "fingerprinted and must agree.")
    return _section("Movement tick", intro, _table(heads, rows), v.notes("tick"))


def _spawn(v: _View) -> str | None:
    sizes = v.sizes("spawn")
    if not sizes:
        return None
    heads = ["N", "engine ms", "numpy ms", "engine/numpy"]
    for b in BASELINE_NAMES:
        heads += [f"{b} ms", "×"]
    rows = []
    for n in sizes:
        e = v.t("spawn", "spawn_batch", "engine", n)
        cells = [_n(n), v.cell("spawn", "spawn_batch", "engine", n),
                 v.cell("spawn", "spawn_batch", "numpy", n),
                 _x(_div(e, v.t("spawn", "spawn_batch", "numpy", n)))]
        for b in BASELINE_NAMES:
            cells += [v.cell("spawn", "spawn_batch", b, n),
                      _x(_div(v.t("spawn", "spawn_batch", b, n), e))]
        rows.append(cells)
    intro = ("Creating N entities with Position and Velocity, in ms. `engine/numpy`: "
             "`spawn_batch` against allocating and filling the same two structured arrays. "
             "`×`: contender time / engine time (entities created one by one; separate "
             "processes, so only a rough guide).")
    return _section("Bulk spawn", intro, _table(heads, rows), v.notes("spawn"))


def _copy_section(v: _View, scenario: str, op: str, title: str, intro: str,
                  contenders: Sequence[str], variants: Sequence[str]) -> str | None:
    sizes = [n for n in v.sizes(scenario) if v.ix.get(scenario, op, "engine", n, "churn")]
    if not sizes:
        return None
    heads = ["N"]
    for variant in variants:
        heads += [f"{variant}: MB", "engine ms", "% of memcpy"]
    for c in contenders:
        heads += [f"{c} ms", "×"]
    rows = []
    for n in sizes:
        cells = [_n(n)]
        for variant in variants:
            row = v.ix.get(scenario, op, "engine", n, variant)
            e = v.t(scenario, op, "engine", n, variant)
            cells += [_mb(row.get("bytes") if row else None),
                      v.cell(scenario, op, "engine", n, variant),
                      _pct(_div(v.t(scenario, op, "memcpy", n, variant), e))]
        cells += _baseline_cols(v, scenario, op, n, contenders)
        rows.append(cells)
    return _section(title, intro, _table(heads, rows), v.notes(scenario))


def _bytes(v: _View) -> str | None:
    sizes = [n for n in v.sizes("snapshot")
             if v.t("snapshot", "save_bytes", "engine", n, "churn") is not None]
    if not sizes:
        return None
    heads = ["N", "MB", "to_bytes ms", "from_bytes ms", "(to+from) / memcpy",
             "world→bytes→world ms"]
    for b in BASELINE_NAMES:
        heads += [f"{b} pickle ms", "×"]
    rows = []
    for n in sizes:
        row = v.ix.get("snapshot", "to_bytes", "engine", n, "churn")
        to_b = v.t("snapshot", "to_bytes", "engine", n, "churn")
        from_b = v.t("snapshot", "from_bytes", "engine", n, "churn")
        mem = v.t("snapshot", "bytes_memcpy", "memcpy", n, "churn")
        trip = _sum(v.t("snapshot", "save_bytes", "engine", n, "churn"),
                    v.t("snapshot", "load_bytes", "engine", n, "churn"))
        cells = [_n(n), _mb(row.get("bytes") if row else None), _ms(to_b), _ms(from_b),
                 _x(_div(_sum(to_b, from_b), mem)), _ms(trip)]
        for b in BASELINE_NAMES:
            other = _sum(v.t("snapshot", "save_bytes", f"{b} pickle", n),
                         v.t("restore", "load_bytes", f"{b} pickle", n))
            paired = _sum(v.t("snapshot", "save_bytes", "engine", n, f"vs {b}"),
                          v.t("restore", "load_bytes", "engine", n, f"vs {b}"))
            cells += [_ms(other) if other is not None
                      else v.cell("snapshot", "save_bytes", f"{b} pickle", n),
                      _x(_div(other, paired))]
        rows.append(cells)
    intro = ("Save to bytes and load back, in ms (every array changed, as in the churn "
             "variant). `(to+from) / memcpy`: `snap.to_bytes()` plus `Snapshot.from_bytes()` "
             "against allocating and copying the snapshot's bytes once. "
             "`world→bytes→world`: `world.snapshot().to_bytes()` then "
             "`world.restore(Snapshot.from_bytes(b))`; `×`: the contender's "
             "`pickle.dumps` + `pickle.loads` (installed as its world) / the engine doing the "
             "same with the same entities, interleaved with it.")
    return _section("Save and load through bytes", intro, _table(heads, rows), [])


def _gbs(nbytes: int | None, seconds: float | None) -> str:
    return "-" if nbytes is None or not seconds else f"{nbytes / seconds / 1e9:.3g}"


def _files(v: _View) -> str | None:
    sizes = [n for n in v.sizes("savefile")
             if v.t("savefile", "save_file", "engine", n, "churn") is not None]
    if not sizes:
        return None
    heads = ["N", "file MB", "save GB/s", "tofile GB/s", "save/tofile", "pickle GB/s",
             "World().load GB/s", "live load GB/s", "fromfile GB/s", "fresh/fromfile",
             "live/fromfile", "unpickle GB/s"]
    rows = []
    for n in sizes:
        def t(op: str, contender: str, variant: str = "churn", n: int = n) -> float | None:
            return v.t("savefile", op, contender, n, variant)

        def size(op: str, contender: str, variant: str = "churn", n: int = n) -> int | None:
            row = v.ix.get("savefile", op, contender, n, variant)
            return row.get("bytes") if row else None

        fsize = size("save_file", "engine")
        fromfile = t("load_file", "fromfile")
        rows.append([_n(n), _mb(fsize), _gbs(fsize, t("save_file", "engine")),
                     _gbs(fsize, t("save_file", "tofile")),
                     _x(_div(t("save_file", "engine"), t("save_file", "tofile"))),
                     _gbs(size("save_file", "pickle columns"),
                          t("save_file", "pickle columns")),
                     _gbs(fsize, t("load_file", "engine", "fresh world")),
                     _gbs(fsize, t("load_file", "engine", "live world")),
                     _gbs(fsize, fromfile),
                     _x(_div(t("load_file", "engine", "fresh world"), fromfile)),
                     _x(_div(t("load_file", "engine", "live world"), fromfile)),
                     _gbs(size("load_file", "pickle columns"),
                          t("load_file", "pickle columns"))])
    intro = ("`world.save(path)` and loading it, as file bytes per second (GB/s), against "
             "the same file's bytes written with `ndarray.tofile` + fsync + rename and read "
             "with `np.fromfile`, and an atomic `pickle` of the same columns (a dict of "
             "arrays), all timed interleaved in one process. `World().load`: into a fresh "
             "world; live: into a world that moved away from the saved state. Every "
             "result is fingerprinted (a file must read back as the state it was written "
             "from).")
    heads2 = ["N"]
    for b in BASELINE_NAMES:
        heads2 += [f"{b} pickle save+load ms", "×"]
    rows2 = []
    for n in v.sizes("savefile"):
        cells = [_n(n)]
        for b in BASELINE_NAMES:
            other = _sum(v.t("savefile", "save_file", f"{b} pickle", n),
                         v.t("savefile", "load_file", f"{b} pickle", n))
            paired = _sum(v.t("savefile", "save_file", "engine", n, f"vs {b}"),
                          v.t("savefile", "load_file", "engine", n, f"vs {b}"))
            cells += [_ms(other) if other is not None
                      else v.cell("savefile", "save_file", f"{b} pickle", n),
                      _x(_div(other, paired))]
        rows2.append(cells)
    intro2 = ("Against the baselines: their state pickled to a file and loaded back "
              "(atomic, fsync) / the engine's `world.save` + `world.load` of the same "
              "entities, interleaved with it.")
    return (_section("Save files", intro, _table(heads, rows), v.notes("savefile")) + "\n"
            + intro2 + "\n\n" + _table(heads2, rows2) + "\n")


def _sum(a: float | None, b: float | None) -> float | None:
    return a + b if a is not None and b is not None else None


def _churn(v: _View) -> str | None:
    sizes = v.sizes("churn")
    if not sizes:
        return None
    heads = ["N", "respawned per tick", "engine ms"]
    for b in BASELINE_NAMES:
        heads += [f"{b} ms", "×"]
    rows = []
    for n in sizes:
        e = v.t("churn", "churn_tick", "engine", n)
        rows.append([_n(n), f"{n // 100:,}", v.cell("churn", "churn_tick", "engine", n)]
                    + [c for b in BASELINE_NAMES for c in (
                        v.cell("churn", "churn_tick", b, n),
                        _x(_div(v.t("churn", "churn_tick", b, n), e)))])
    intro = ("One tick of despawning 1% of the entities at random and spawning as many "
             "(same mix), in ms. `×`: contender time / engine time, each contender timed in "
             "its own process and not fingerprinted: a rough guide, behind no target.")
    return _section("Spawn/despawn churn", intro, _table(heads, rows), v.notes("churn"))


def _history(v: _View) -> str | None:
    rows = []
    for r in v.records:
        if r["scenario"] == "history" and r["op"] == "memory" and r.get("status") == "ok":
            rec = v.ix.get("history", "record", "engine", int(r["n"]), r["variant"])
            rows.append([r["variant"], _n(r["colliders"]), _n(r["movers"]), str(r["snapshots"]),
                         _mb(r["bytes"]), _mb(r["ideal_bytes"]),
                         f"{r['bytes'] / r['ideal_bytes']:.2f}x",
                         f"{r['per_snapshot_bytes'] / 1e3:,.0f}",
                         f"{r['movers_bytes'] / 1e3:,.0f}",
                         _ms(rec.get("median_s") if rec else None)])
    if not rows:
        return None
    heads = ["variant", "colliders", "movers", "snapshots", "held MB", "ideal MB",
             "held/ideal", "KB per snapshot", "movers' KB", "record ms"]
    intro = ("A History ring of snapshots of a world whose colliders never change while the "
             "movers move every tick. Ideal = snapshots x the movers' bytes (all their store "
             "rows, keys included) + one copy of everything else. `stock`: colliders use the "
             "stock `Position` (shared with the movers, so the whole store is copied every "
             "tick); `static-store`: colliders keep their position in a store of their own.")
    return _section("History memory", intro, _table(heads, rows), v.notes("history"))


def _partition(v: _View) -> str | None:
    rows = []
    sizes = v.sizes("partition")
    if not sizes:
        return None
    for op in ("map", "level"):
        for n in sizes:
            any_row = next((r for r in v.records if r["scenario"] == "partition"
                            and r["op"] == op and r["n"] == n and "side" in r), None)
            if any_row is None:
                continue
            label = f"{any_row['side']}x{any_row['rows']}"
            cells = [label + (" (map)" if op == "map" else "")]
            for m in ("greedy", "exact", "thesis"):
                row = v.ix.get("partition", op, m, n)
                cells += [v.cell("partition", op, m, n),
                          str(row["rects"]) if row and "rects" in row else "-"]
            cells.append(_x(_div(v.t("partition", op, "thesis", n),
                                 v.t("partition", op, "greedy", n))))
            rows.append(cells)
    heads = ["level", "greedy ms", "rects", "exact ms", "rects", "thesis port ms", "rects",
             "thesis/greedy"]
    intro = ("Partitioning a level's geometry into rectangles, in ms (random blobs of 3 tile "
             "values, 8x8-cell blocks; the map uses 5x5). `thesis/greedy`: the line-by-line "
             "thesis port's time / the vectorised greedy's (same rectangles). `exact` finds "
             "the minimum number of rectangles.")
    return _section("Level partition", intro, _table(heads, rows), v.notes("partition"))


def _detail(v: _View) -> str | None:
    rows = []
    for r in v.records:
        if r["scenario"] == "partition" and r["op"] == "detail" and r["contender"] == "greedy":
            thesis = v.t("partition", "detail", "thesis", int(r["n"]), r["variant"])
            greedy = v.t("partition", "detail", "greedy", int(r["n"]), r["variant"])
            rows.append([f"{r['side']}x{r['rows']}", f"{r['block']}x{r['block']}",
                         f"{r['rects']:,}", _ms(greedy), _ms(thesis), _x(_div(thesis, greedy))])
    if not rows:
        return None
    intro = ("The greedy speed-up depends on the level: the same size with blobs of "
             "different block sizes (smaller blocks: more, shorter runs per row). "
             "`thesis/greedy` as above.")
    return _section("Level partition by level detail", intro,
                    _table(["level", "block", "rects", "greedy ms", "thesis port ms",
                            "thesis/greedy"], rows), [])


def _frame(v: _View) -> str | None:
    rows: list[list[Any]] = []
    for op in ("frame_step", "frame_render"):
        for r in v.records:
            if r["scenario"] == "frame" and r["op"] == op:
                if r.get("status") == "ok":
                    rows.append([op, _n(r["n"]), _ms(r["median_s"]),
                                 f"{r.get('frame_fraction', 0) * 100:.1f}%"])
                else:
                    rows.append([op, _n(r["n"]), r.get("note", r.get("status", "")), "-"])
    if not rows:
        return None
    intro = ("One demo frame (textured sprites, level visuals, HUD) at 1280x720: the default "
             "level as played (0 bodies) and zoomed out over 10k moving bodies, in ms and as "
             "a share of a 16.7 ms frame. Rendered by llvmpipe (software OpenGL) here.")
    return _section("Demo frame", intro,
                    _table(["part", "bodies", "ms", "of a frame"], rows, left=(0, 2)), [])


def _sim(v: _View) -> str | None:
    rows = []
    for r in v.records:
        if r["scenario"] == "sim" and r.get("status") == "ok" and "median_s" in r:
            rows.append([r["op"], r["contender"], _n(r["n"]), _ms(r["median_s"]),
                         f"{r.get('frame_fraction', 0) * 100:.1f}%"])
    if not rows:
        return None
    intro = ("The demo level with n bouncing bodies: one simulation tick (`tick`, tile-grid "
             "collision against the general grid only), and a rollback (`rollback`: restore "
             "the frame of 8 ticks ago and re-simulate 8 ticks, against `world.restore` + 8 "
             "`world.step`; n = 0 is the default level). Both contenders of a row pair end "
             "in the same state hash. Share of a 16.7 ms frame.")
    return _section("Big worlds and rollback", intro,
                    _table(["op", "contender", "bodies", "ms", "of a frame"], rows,
                           left=(0, 1)), [])


def _us(seconds: float | None) -> str:
    """Microseconds: two decimals below 10 us, one above."""
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:,.2f}" if seconds < 1e-5 else f"{seconds * 1e6:,.1f}"


def _per(v: _View, scenario: str, op: str, contender: str, n: int, count_key: str,
         variant: str = "") -> float | None:
    """Median seconds per tick or call (the record's median over its ``count_key``)."""
    row = v.ix.get(scenario, op, contender, n, variant)
    median = v.t(scenario, op, contender, n, variant)
    if row is None or median is None:
        return None
    return median / max(1, int(row.get(count_key, 1)))


def _small(v: _View) -> str | None:
    sizes = v.sizes("small")
    if not sizes:
        return None
    rivals = ("esper", "tcod-ecs")
    rows = []
    ratios: dict[str, list[tuple[int, float | None]]] = {b: [] for b in rivals}
    for n in sizes:
        e = _per(v, "small", "churn_tick", "engine", n, "ticks")
        row = [_n(n), _us(e)]
        for rival in rivals:
            b = _per(v, "small", "churn_tick", rival, n, "ticks")
            ratios[rival].append((n, _div(e, b)))
            row += [_us(b), _x(_div(e, b))]
        rows.append(row)
        cold = _per(v, "small", "churn_tick", "engine", n, "ticks", "first tick")
        if cold is not None:
            row = [f"{_n(n)}, first tick", _us(cold)]
            for rival in rivals:
                b = _per(v, "small", "churn_tick", rival, n, "ticks", "first tick")
                row += [_us(b), _x(_div(cold, b))]
            rows.append(row)
    said = [f"against {rival}: {_crossover(ratios[rival])}" for rival in rivals
            if any(r is not None for _, r in ratios[rival])]
    intro = ("The issue-11 tick (movement; gravity on half the entities; a lifetime that "
             "despawns the expired and respawns as many), each library written the way its "
             "users write it, in µs per tick; `engine/…` below 1 means the engine is "
             "faster. Timed interleaved in one process, at least 4 ticks in a row per timed "
             "call (a game ticking), every contender fingerprinted. `first tick`: one tick "
             "per timed call, right after the other libraries' ticks and a full garbage "
             "collection, every cache cold (what a tick costs when the rest of a frame has "
             "pushed the engine's code and numpy's out of the caches: the first numpy call "
             "of each kind then costs tens of µs). Crossover in this run: "
             + "; ".join(said) + ".")
    heads = ["N", "engine µs"] + [c for b in rivals for c in (f"{b} µs", f"engine/{b}")]
    return _section("Small worlds", intro, _table(heads, rows), v.notes("small"))


def _crossover(ratios: list[tuple[int, float | None]]) -> str:
    """Where the engine is as fast or faster from that size on (ratios engine/other)."""
    ahead = [n for i, (n, _) in enumerate(ratios)
             if all(r is not None and r <= 1 for _, r in ratios[i:])]
    return (f"as fast or faster from {_n(ahead[0])} entities on" if ahead
            else "behind at every size measured")


_PER_CALL = (
    ("spawn", "", "esper", "`world.spawn(Position(x=..), Velocity(..))`",
     "`create_entity(P(..), V(..))`"),
    ("despawn", "", "esper", "`world.despawn(e)`", "`delete_entity(e, immediate=True)`"),
    ("query", "", "esper", "`with world.query(P, V):` (enter + exit)",
     "cached `get_components(P, V)`"),
    ("query", "columns", "esper", "the same block reading both columns",
     "cached `get_components(P, V)`"),
    ("record_read", "", "attribute", "`rec[\"x\"]` (a kept record)", "`obj.x`"),
    ("record_write", "", "attribute", "`rec[\"x\"] = v`", "`obj.x = v`"),
    ("get_set", "", "esper", "`world.get(e, T)[\"x\"] = v`",
     "`component_for_entity(e, T).x = v`"),
)


def _percall(v: _View) -> str | None:
    rows = []
    for op, variant, other, engine_call, other_call in _PER_CALL:
        for n in v.sizes("percall"):
            e = _per(v, "percall", op, "engine", n, "calls", variant)
            b = _per(v, "percall", op, other, n, "calls")
            if e is None:
                continue
            rows.append([engine_call, _us(e), other_call, _us(b), _x(_div(e, b))])
    if not rows:
        return None
    intro = ("What one call costs in a world of 100 entities, in µs per call, against the "
             "nearest esper call or a plain attribute access, timed interleaved (1,000 calls "
             "per timed round) and fingerprinted.")
    return _section("Per-call costs", intro,
                    _table(["engine", "µs", "against", "µs", "engine/other"], rows,
                           left=(0, 2)), v.notes("percall"))


def _unserved(v: _View) -> str | None:
    rows = []
    for variant in ("stress", "half"):
        for n in v.sizes("unserved"):
            row = v.ix.get("unserved", "gravity", "unserved", n, variant)
            u = v.t("unserved", "gravity", "unserved", n, variant)
            nested = v.t("unserved", "gravity", "nested", n, variant)
            a = v.t("unserved", "gravity", "aligned", n, variant)
            if row is None or u is None:
                continue
            rows.append([variant, _n(n), str(row.get("served_as", "-")), _ms(u), _ms(nested),
                         _ms(a), _x(_div(u, a)), _x(_div(nested, a))])
    if not rows:
        return None
    intro = ("`(Velocity, Gravity)` beside the demo's collision group (which owns Velocity), "
             "in ms: `unserved` as the engine serves it with the group alone "
             "(`World(auto_group=False)`, as the demo: views when its matches are one run "
             "of the group, else gathered), `nested` with `auto_group` on, where the query's "
             "first tick nests `(Position, Velocity, Collider, Grounded, Gravity)` in the "
             "group (views from then on), `aligned` the same update where a group owns both "
             "types. `stress`: every body falls; `half`: half of them, after 10% were "
             "respawned (the matches are scattered through the group).")
    return _section("Queries no group serves", intro,
                    _table(["variant", "N", "served as", "unserved ms", "nested ms",
                            "aligned ms", "unserved/aligned", "nested/aligned"], rows,
                           left=(0, 2)), v.notes("unserved"))


def _targets(outcomes: list[Outcome]) -> str:
    rows = [[o.id, o.title, o.measured, o.required, f"**{o.status}**" if o.status == "FAIL"
             else o.status, o.note] for o in outcomes]
    intro = ("The issues' performance targets, each a ratio measured in this run "
             "(SKIP: not measured in this run).")
    return _section("Targets", intro,
                    _table(["#", "target", "measured", "required", "result", "note"], rows,
                           left=(0, 1, 2, 3, 4, 5)), [])


SECTIONS: tuple[Callable[[_View], str | None], ...] = (
    _tick, _spawn,
    lambda v: _copy_section(
        v, "snapshot", "snapshot", "Snapshot to memory",
        "`world.snapshot()` in ms, with new values in every column between repetitions "
        "(`values`: layout unchanged, so only data columns are copied), with 1% of the "
        "entities also respawned (`churn`: every array is copied), and the churn case kept "
        "the way a game keeps snapshots (`history`: a History of 4 evicting the oldest). "
        "MB: what the snapshot copied. `% of memcpy`: allocate-and-copy of those same "
        "bytes from the live arrays (for `history`: in one piece, kept and dropped alike) / "
        "engine time (100% = memcpy speed); both results fingerprinted. `×`: contender "
        "time / the engine's snapshot of the same entities (every array copied), "
        "interleaved with it.",
        ("esper deepcopy", "tcod-ecs deepcopy", "dicts deepcopy", "dicts comprehension"),
        ("values", "churn", "history")),
    lambda v: _copy_section(
        v, "restore", "restore", "Restore from memory",
        "`world.restore(snap)` in ms after the world moved away from `snap` (`values`: "
        "only data columns differ and are copied back; `churn`: everything is). `% of "
        "memcpy`: `np.copyto` of the same bytes into preallocated buffers / engine time; "
        "both results fingerprinted. `×`: contender time (a deep copy installed as its "
        "world) / the engine restoring the same entities, interleaved with it.",
        ("esper deepcopy", "tcod-ecs deepcopy", "dicts deepcopy", "dicts comprehension"),
        ("values", "churn")),
    _bytes, _files, _churn, _small, _percall, _unserved, _history, _partition, _detail,
    _frame, _sim,
)


def markdown(payload: dict[str, Any], outcomes: list[Outcome], charts: dict[str, str]) -> str:
    m = payload["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items()
                         if v and k in ("numpy", "esper", "tcod-ecs"))
    head = [
        "# Benchmark results",
        "",
        f"{payload['created']} · {payload['mode']} run of {', '.join(payload['scenarios'])} "
        f"({payload['elapsed_s']:.0f} s) · {m['cpu']}, {m['cpu_count']} cores · Python "
        f"{m['python']}, {versions} · the C key check (a load's) "
        f"{'built' if m.get('c_key_check', True) else 'not built: loads took the numpy path'}"
        ".",
        "",
        "Medians of repeated runs after a warm-up, gc off while timing, every store changed "
        "between repetitions. The machine is shared, so absolute times are noisy: compare the "
        "ratios: every target ratio against a reference or a baseline comes from one "
        "process with the contenders timed in alternating rounds, and every contender's "
        "final state is fingerprinted (a fast wrong answer is reported as wrong, not as a "
        "win). Not so, and said where they appear: the churn and bulk-spawn tables' "
        "baseline columns (each contender in its own process, unfingerprinted: a rough "
        "guide, no target), 8a (each partition method timed alone) and 17b (a warm Ray "
        "against a process pool started per call). "
        "Produced by `python -m benchmarks`; raw samples in the JSON next to this file.",
        "",
        "",
    ]
    body = [_targets(outcomes)] if outcomes else []
    view = _View(payload["records"])
    for section in SECTIONS:
        text = section(view)
        if text:
            body.append(text)
    if charts:
        body.append("## Charts\n\n" + "\n".join(f"![{k}]({name})" for k, name in charts.items())
                    + "\n")
    return "\n".join(head) + "\n".join(body)


# -- charts -------------------------------------------------------------------------------

def write_charts(records: list[Record], out_dir: Path, prefix: str) -> dict[str, Path]:
    """PNG charts (log-log where sizes span decades); returns their paths by name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    v = _View(records)
    paths: dict[str, Path] = {}

    def series(scenario: str, op: str, contender: str, variant: str = ""
               ) -> tuple[list[int], list[float]]:
        pts = [(n, v.t(scenario, op, contender, n, variant)) for n in v.sizes(scenario)]
        ok = [(n, t * 1000) for n, t in pts if t is not None]
        return [p[0] for p in ok], [p[1] for p in ok]

    def chart(name: str, title: str, lines: list[tuple[str, str, str, str, str]],
              xlabel: str) -> None:
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
        drawn = 0
        for label, scen, op, contender, variant in lines:
            xs, ys = series(scen, op, contender, variant)
            if xs:
                style = "-o" if contender in ("engine", "greedy") else "--."
                ax.plot(xs, ys, style, label=label)
                drawn += 1
        if not drawn:
            plt.close(fig)
            return
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("ms (median, log scale)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out_dir / f"{prefix}_{name}.png"
        fig.savefig(path)
        plt.close(fig)
        paths[name] = path

    chart("snapshot", "Snapshot to memory (every array changed)", [
        ("engine world.snapshot()", "snapshot", "snapshot", "engine", "churn"),
        ("memcpy of the same bytes", "snapshot", "snapshot", "memcpy", "churn"),
        ("esper deepcopy", "snapshot", "snapshot", "esper deepcopy", ""),
        ("tcod-ecs deepcopy", "snapshot", "snapshot", "tcod-ecs deepcopy", ""),
        ("dicts deepcopy", "snapshot", "snapshot", "dicts deepcopy", ""),
        ("dicts comprehension", "snapshot", "snapshot", "dicts comprehension", ""),
    ], "entities")
    chart("restore", "Restore from memory (every array changed)", [
        ("engine world.restore()", "restore", "restore", "engine", "churn"),
        ("np.copyto of the same bytes", "restore", "restore", "memcpy", "churn"),
        ("esper deepcopy", "restore", "restore", "esper deepcopy", ""),
        ("tcod-ecs deepcopy", "restore", "restore", "tcod-ecs deepcopy", ""),
        ("dicts deepcopy", "restore", "restore", "dicts deepcopy", ""),
        ("dicts comprehension", "restore", "restore", "dicts comprehension", ""),
    ], "entities")
    chart("tick", "Movement tick", [
        ("engine (owning-group query)", "tick", "tick", "engine", "fresh"),
        ("plain numpy arrays", "tick", "tick", "numpy", "fresh"),
        ("esper loop", "tick", "tick", "esper", ""),
        ("tcod-ecs loop", "tick", "tick", "tcod-ecs", ""),
        ("dicts loop", "tick", "tick", "dicts", ""),
    ], "entities")
    chart("partition", "Level partition", [
        ("greedy (vectorised)", "partition", "level", "greedy", ""),
        ("exact (minimum)", "partition", "level", "exact", ""),
        ("thesis port (pure Python)", "partition", "level", "thesis", ""),
    ], "cells")
    return paths
