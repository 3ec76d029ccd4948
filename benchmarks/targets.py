"""Performance targets (``--check``): ratios from one run, never absolute times.

Each target names the records it needs; one missing (size not run, scenario not selected,
baseline skipped) makes it SKIP, which does not fail ``--check``. A ratio counts only when
both records were timed interleaved in one group (one process, alternating rounds) and
both results were verified by their fingerprints; a side whose result was wrong makes the
target FAIL. A ratio that misses its bound makes it FAIL, and ``--check`` exits non-zero.
INFO rows (another reading of a target, or a reference) are shown with their verdict but
never fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks.runner import Record

PASS, FAIL, SKIP, INFO = "PASS", "FAIL", "SKIP", "INFO"


@dataclass(frozen=True)
class Outcome:
    """The result of one target."""

    id: str
    title: str
    status: str
    measured: str
    required: str
    value: float | None = None
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class Index:
    """Records by (scenario, op, variant, contender, n)."""

    def __init__(self, records: Iterable[Record]) -> None:
        self.rows: dict[tuple[str, str, str, str, int], Record] = {}
        for r in records:
            self.rows[(r["scenario"], r["op"], r.get("variant", ""), r["contender"],
                       int(r["n"]))] = r

    def get(self, scenario: str, op: str, contender: str, n: int,
            variant: str = "") -> Record | None:
        row = self.rows.get((scenario, op, variant, contender, n))
        if row is None:  # a skipped size: one record covers every op of that contender
            row = self.rows.get((scenario, "all", "", contender.split(" ")[0], n))
        return row

    def median(self, scenario: str, op: str, contender: str, n: int,
               variant: str = "") -> float | None:
        row = self.get(scenario, op, contender, n, variant)
        if row is None or row.get("status") != "ok" or "median_s" not in row:
            return None
        return float(row["median_s"])

    def why_missing(self, scenario: str, op: str, contender: str, n: int,
                    variant: str = "") -> str:
        row = self.get(scenario, op, contender, n, variant)
        if row is None:
            return f"not measured: {scenario}/{op} {contender} at n={n:,} is not in this run"
        return f"{contender} at n={n:,}: {row.get('note') or row.get('status')}"


def show_ratio(value: float) -> str:
    """A ratio with enough digits that a near miss does not print as the bound."""
    return f"{value:,.0f}x" if value >= 1000 else f"{value:.4g}x"


TargetFn = Callable[[Index], Outcome]
M, K = 1_000_000, 1_000


Key = tuple[str, str, str, int, str]


def paired(ix: Index, keys: Iterable[Key]) -> tuple[list[float] | None, str, bool]:
    """Medians of ``keys`` if they may be compared: every record ok, verified by its
    fingerprint and timed in one group. Else ``None``, why, and whether that is a
    failure (a wrong result) rather than a gap."""
    rows = []
    for key in keys:
        row = ix.get(*key)
        if row is not None and row.get("status") == "wrong":
            return None, f"{key[2]} at n={key[3]:,}: {row.get('note', 'wrong result')}", True
        if row is None or row.get("status") != "ok" or "median_s" not in row:
            return None, ix.why_missing(*key), False
        if not row.get("verified"):
            return None, f"{key[2]} at n={key[3]:,}: result not verified", False
        rows.append(row)
    if len({r.get("group") for r in rows}) != 1:
        return None, "not timed interleaved in one process (different groups)", False
    return [float(r["median_s"]) for r in rows], "", False


def _ratio(ix: Index, tid: str, title: str, required: str, bound: float, higher: bool,
           num: Key, den: Key, unit: str = "x", note: str = "") -> Outcome:
    """Outcome for ``median(num) / median(den)`` against ``bound``."""
    medians, why, failed = paired(ix, (num, den))
    if medians is None:
        return Outcome(tid, title, FAIL if failed else SKIP, "-", required, None, why)
    a, b = medians
    value = a / b
    ok = value >= bound if higher else value <= bound
    shown = f"{value * 100:.0f}%" if unit == "%" else show_ratio(value)
    return Outcome(tid, title, PASS if ok else FAIL, shown, required, round(value, 4), note)


def t1(ix: Index) -> list[Outcome]:
    out = []
    for variant, label in (("fresh", ""), ("churned", " after 10% respawned")):
        out.append(_ratio(
            ix, "1" + ("a" if variant == "fresh" else "b"),
            f"movement tick at 1M{label}: engine / plain numpy", "<= 1.3x", 1.3, False,
            ("tick", "tick", "engine", M, variant), ("tick", "tick", "numpy", M, variant)))
    out.append(_info(_ratio(
        ix, "1c", "movement tick at 1M: engine / float32 struct-of-arrays", "reference", 1.0,
        False, ("tick", "tick", "engine", M, "fresh"),
        ("tick", "tick", "numpy f32 SoA", M, "fresh"),
        note="q.unstructured: both fields in one op; a reference, not a target"),
        verdict=False))
    out.append(_ratio(
        ix, "1d", "movement tick at 1M, a line per field: engine / plain numpy", "<= 1.3x",
        1.3, False, ("tick", "tick", "engine per field", M, "fresh"),
        ("tick", "tick", "numpy per field", M, "fresh"),
        note="the engine's overhead on the per-field form too"))
    out.append(_info(_ratio(
        ix, "1e", "movement tick at 100k: a line per field / q.unstructured", "reference", 1.0,
        False, ("tick", "tick", "engine per field", 100 * K, "fresh"),
        ("tick", "tick", "engine", 100 * K, "fresh"),
        note="what the row layout costs a system that steps field by field"), verdict=False))
    return out


def t2(ix: Index) -> list[Outcome]:
    return [_ratio(ix, "2", "movement tick at 100k: esper loop / engine", ">= 40x", 40, True,
                   ("tick", "tick", "esper", 100 * K, ""),
                   ("tick", "tick", "engine", 100 * K, "vs esper"),
                   note="interleaved with the engine ticking the same entities")]


def t3(ix: Index) -> list[Outcome]:
    return [_ratio(ix, "3", "spawn_batch 1M (2 components): engine / numpy fill", "<= 5x", 5,
                   False, ("spawn", "spawn_batch", "engine", M, ""),
                   ("spawn", "spawn_batch", "numpy", M, ""))]


def t4(ix: Index) -> list[Outcome]:
    note = "every array copied (churn variant); the mix has 4 component types"
    return [
        _ratio(ix, "4a", "snapshot 1M: share of memcpy bandwidth (alloc+copy)", ">= 80%", 0.8,
               True, ("snapshot", "snapshot", "memcpy", M, "churn"),
               ("snapshot", "snapshot", "engine", M, "churn"), unit="%", note=note),
        _ratio(ix, "4b", "restore 1M: share of memcpy bandwidth (copy into preallocated)",
               ">= 85%", 0.85, True, ("restore", "restore", "memcpy", M, "churn"),
               ("restore", "restore", "engine", M, "churn"), unit="%", note=note),
        _ratio(ix, "4c", "snapshot 1M kept in a History of 4: share of one-piece alloc+copy",
               ">= 80%", 0.8, True, ("snapshot", "snapshot", "memcpy", M, "history"),
               ("snapshot", "snapshot", "engine", M, "history"), unit="%",
               note="snapshots evicted as a game drops them; the copies kept alike"),
    ]


def t5(ix: Index) -> list[Outcome]:
    return [
        _ratio(ix, "5a", "snapshot 100k: esper deepcopy / engine", ">= 2000x", 2000, True,
               ("snapshot", "snapshot", "esper deepcopy", 100 * K, ""),
               ("snapshot", "snapshot", "engine", 100 * K, "vs esper"),
               note="engine snapshot of the same entities with every array copied"),
        _ratio(ix, "5b", "snapshot 100k: esper pickle.dumps / engine", ">= 300x", 300, True,
               ("snapshot", "save_bytes", "esper pickle", 100 * K, ""),
               ("snapshot", "snapshot", "engine", 100 * K, "vs esper"),
               note="engine world.snapshot() against pickling esper's state"),
        _info(_ratio(ix, "5c", "world to bytes 100k: esper pickle.dumps / engine "
                     "snapshot().to_bytes()", ">= 300x", 300, True,
                     ("snapshot", "save_bytes", "esper pickle", 100 * K, ""),
                     ("snapshot", "save_bytes", "engine", 100 * K, "vs esper"),
                     note="stricter reading of 5 (bytes on both sides); reported, not checked")),
    ]


def _info(outcome: Outcome, verdict: bool = True) -> Outcome:
    """Report a ratio without letting it fail ``--check`` (``verdict``: say whether it
    would pass; False for references that have no bound)."""
    if outcome.status == SKIP or (outcome.status == FAIL and outcome.value is None):
        return outcome
    note = outcome.note
    if verdict:
        note += f" ({'would pass' if outcome.status == PASS else 'would fail'})"
    return Outcome(outcome.id, outcome.title, INFO, outcome.measured, outcome.required,
                   outcome.value, note)


def t6(ix: Index) -> list[Outcome]:
    tid, title, required = "6", "to_bytes + from_bytes 1M / memcpy of the same bytes", "<= 3x"
    medians, why, failed = paired(ix, [("snapshot", "to_bytes", "engine", M, "churn"),
                                       ("snapshot", "from_bytes", "engine", M, "churn"),
                                       ("snapshot", "bytes_memcpy", "memcpy", M, "churn")])
    if medians is None:
        return [Outcome(tid, title, FAIL if failed else SKIP, "-", required, None, why)]
    value = (medians[0] + medians[1]) / medians[2]
    return [Outcome(tid, title, PASS if value <= 3 else FAIL, show_ratio(value), required,
                    round(value, 4), "memcpy = allocate and copy snap.nbytes")]


def t7(ix: Index) -> list[Outcome]:
    tid, title = "7", "History of 600 snapshots (100k static colliders, 10k movers) / ideal"
    required = "<= 1.5x"
    row = ix.get("history", "memory", "engine", 110 * K, "stock")
    if row is None or row.get("status") != "ok":
        return [Outcome(tid, title, SKIP, "-", required, None,
                        "not measured at 100k colliders + 10k movers in this run")]
    if (row["colliders"], row["movers"], row["snapshots"]) != (100 * K, 10 * K, 600):
        return [Outcome(tid, title, SKIP, "-", required, None, "history run at other sizes")]
    value = row["bytes"] / row["ideal_bytes"]
    out = [Outcome(tid, title, PASS if value <= 1.5 else FAIL, show_ratio(value), required,
                   round(value, 4), f"{row['bytes'] / 1e6:.0f} MB held, ideal "
                   f"{row['ideal_bytes'] / 1e6:.0f} MB (600 x movers' rows + one copy of "
                   f"the rest)")]
    strict = row.get("strict_ideal_bytes")
    if strict:
        value = row["bytes"] / strict
        out.append(_info(Outcome(
            "7b", "History of 600 snapshots / first snapshot + 599 x the bytes a tick changes",
            PASS if value <= 1.5 else FAIL, show_ratio(value), required, round(value, 4),
            f"a tick changes {row['changed_bytes'] / 1e3:.0f} kB (the movers' positions); "
            f"snapshots share or copy whole 32,768-row chunks: stricter reading of 7")))
    return out


def t8(ix: Index) -> list[Outcome]:
    out = []
    tid, title, required = "8a", "greedy partition 4096x4096: thesis port / greedy", ">= 50x"
    cells = 4096 * 4096
    greedy = ix.median("partition", "level", "greedy", cells)
    thesis = ix.median("partition", "level", "thesis", cells)
    note = ""
    if thesis is None and greedy is not None:
        measured = [(r["n"], float(r["median_s"])) for k, r in ix.rows.items()
                    if k[:4] == ("partition", "level", "", "thesis") and r.get("status") == "ok"]
        if measured:
            n, t = max(measured)
            thesis = t * cells / n
            side = int(round(n ** 0.5))
            note = (f"thesis port timed at {side}x{side} and scaled by area to 4096x4096 "
                    f"(a 4096 call would take > the thesis budget)")
    if greedy is None or thesis is None:
        out.append(Outcome(tid, title, SKIP, "-", required, None,
                           ix.why_missing("partition", "level", "greedy", cells)))
    else:
        value = thesis / greedy
        out.append(Outcome(tid, title, PASS if value >= 50 else FAIL, show_ratio(value),
                           required, round(value, 4), note))
    tid, title, required = "8b", "exact partition of a 520x210 map", "< 2 s, <= greedy count"
    ex = ix.get("partition", "map", "exact", 520 * 210)
    gr = ix.get("partition", "map", "greedy", 520 * 210)
    if ex is None or gr is None or ex.get("status") != "ok" or gr.get("status") != "ok":
        out.append(Outcome(tid, title, SKIP, "-", required, None, "map not partitioned"))
    else:
        secs = float(ex["median_s"])
        ok = secs < 2 and ex["rects"] <= gr["rects"]
        out.append(Outcome(tid, title, PASS if ok else FAIL,
                           f"{secs:.3g} s, {ex['rects']} vs {gr['rects']} rects", required,
                           round(secs, 4)))
    return out


def t9(ix: Index) -> list[Outcome]:
    note = "the save file's own bytes through the OS, timed interleaved"
    return [
        _ratio(ix, "9a", "world.save 1M / tofile + fsync + rename of the same bytes",
               "<= 1.3x", 1.3, False, ("savefile", "save_file", "engine", M, "churn"),
               ("savefile", "save_file", "tofile", M, "churn"), note=note),
        _ratio(ix, "9b", "World().load 1M / np.fromfile of the same bytes", "<= 2x", 2.0,
               False, ("savefile", "load_file", "engine", M, "fresh world"),
               ("savefile", "load_file", "fromfile", M, "churn"), note=note),
        _ratio(ix, "9c", "world.load into a live world 1M / np.fromfile", "<= 1.5x", 1.5,
               False, ("savefile", "load_file", "engine", M, "live world"),
               ("savefile", "load_file", "fromfile", M, "churn"), note=note),
    ]


def t_scaleout(ix: Index) -> list[Outcome]:
    """Levels validated per minute on a 2-worker pool; Ray's time over the pool's."""
    rows = [r for key, r in ix.rows.items() if key[0] == "scaleout" and key[1] == "validate"]
    if not rows:
        return [Outcome("17", "batch level validation (pool, Ray)", SKIP, "-", "-", None,
                        "scaleout not in this run")]
    n = int(rows[0]["n"])
    check = ix.get("scaleout", "check", "engine", n)
    note = "" if check and check.get("status") == "ok" else "rows differ: results not trusted"
    pool, ray = ix.median("scaleout", "validate", "pool", n), ix.median("scaleout", "validate",
                                                                          "ray", n)
    out = []
    if pool is not None:
        rate = n / pool * 60
        ok = rate >= 1000 and not note
        out.append(Outcome("17a", f"levels validated per minute, pool of 2 ({n} levels)",
                           PASS if ok else FAIL, f"{rate:,.0f}/min", ">= 1,000/min",
                           round(rate, 1), note))
    if pool is not None and ray is not None:
        value = ray / pool
        out.append(Outcome("17b", "Ray / process pool on the same batch",
                           PASS if value <= 1.3 and not note else FAIL, show_ratio(value),
                           "<= 1.3x", round(value, 4), note))
    return out


FRAME_S = 1 / 60


def _frame_share(ix: Index, tid: str, title: str, bound: float, op: str, n: int,
                 note: str = "") -> Outcome:
    """A median as a share of one 60 Hz frame (a ratio to a constant), verified."""
    required = f"<= {bound * 100:.0f}% of a frame ({bound * FRAME_S * 1000:.1f} ms)"
    row = ix.get("sim", op, "engine", n)
    if row is None or row.get("status") != "ok" or "median_s" not in row:
        return Outcome(tid, title, SKIP, "-", required, None,
                       ix.why_missing("sim", op, "engine", n))
    value = float(row["median_s"]) / FRAME_S
    return Outcome(tid, title, PASS if value <= bound else FAIL,
                   f"{value * 100:.0f}% ({float(row['median_s']) * 1000:.2f} ms)", required,
                   round(value, 4), note)


def t10(ix: Index) -> list[Outcome]:
    note = "median of world.step on the demo level; tile grid and general grid agree"
    rb = "restore the frame of 8 ticks ago and re-simulate 8 ticks (ecs_engine.Rollback)"
    return [
        _frame_share(ix, "10a", "demo tick, 100k bouncing bodies", 0.6, "tick", 100 * K,
                     note),
        _frame_share(ix, "10b", "demo tick, 10k bouncing bodies", 0.12, "tick", 10 * K, note),
        _frame_share(ix, "10c", "rollback 8 ticks, default level", 0.18, "rollback", 0, rb),
        _frame_share(ix, "10d", "rollback 8 ticks, 10k bodies", 1.0, "rollback", 10 * K, rb),
        _info(_ratio(ix, "10e", "demo tick 100k: general grid only / tile grid", ">= 1x", 1.0,
                     True, ("sim", "tick", "general grid", 100 * K, ""),
                     ("sim", "tick", "engine", 100 * K, ""),
                     note="static collision of aligned geometry through the tile grid")),
    ]


SMALL_SIZES = (10, 30, 100, 300, 1_000, 10_000)


def t_small(ix: Index) -> list[Outcome]:
    """Issue 11: the 3-system churn tick against esper, small worlds (scenario ``small``)."""
    out = []
    for n in SMALL_SIZES:
        num = ("small", "churn_tick", "engine", n, "")
        den = ("small", "churn_tick", "esper", n, "")
        title = f"3-system churn tick at {n:,}: engine / esper"
        if n == 10:
            out.append(_ratio(ix, "11a", title, "<= 3x", 3.0, False, num, den))
        elif n == 30:
            out.append(_info(_ratio(ix, "11b", title, "<= 3x", 3.0, False, num, den,
                                    note="between the two bounds: reported")))
        elif n == 10_000:
            out.append(_ratio(ix, "11f", f"3-system churn tick at {n:,}: esper / engine",
                              ">= 30x", 30.0, True, den, num,
                              note="4 ticks in a row per timed call"))
            out.append(_info(_ratio(
                ix, "11g", f"3-system churn tick at {n:,}, one cold tick per call: "
                "esper / engine", ">= 30x", 30.0, True, (*den[:4], "first tick"),
                (*num[:4], "first tick"),
                note="each tick right after the other libraries' ticks and a full gc: "
                     "caches cold")))
        else:
            tid = {100: "11c", 300: "11d", 1_000: "11e"}[n]
            out.append(_ratio(ix, tid, title, "<= 1x", 1.0, False, num, den))
    return out


def t_percall(ix: Index) -> list[Outcome]:
    """Issue 11: per-call costs at 100 entities (scenario ``percall``)."""
    n = 100

    def pair(tid: str, title: str, op: str, other: str, bound: float) -> Outcome:
        return _ratio(ix, tid, title, f"<= {bound:g}x", bound, False,
                      ("percall", op, "engine", n, ""), ("percall", op, other, n, ""))

    return [
        pair("12a", "spawn (2 keyword-built components): engine / esper create_entity",
             "spawn", "esper", 10),
        pair("12b", "despawn: engine / esper delete_entity(immediate=True)", "despawn",
             "esper", 10),
        pair("12c", "query enter+exit: engine / esper cached get_components", "query",
             "esper", 3),
        pair("12d", "record read rec['x']: engine / attribute read", "record_read",
             "attribute", 10),
        pair("12e", "record write rec['x'] = v: engine / attribute write", "record_write",
             "attribute", 10),
        _info(pair("12f", "world.get(e, T)['x'] = v / esper component_for_entity(e, T).x = v",
                   "get_set", "esper", 10)),
    ]


def t_unserved(ix: Index) -> list[Outcome]:
    """Issue 11: a query the owning group does not serve (scenario ``unserved``)."""
    n = 100 * K
    return [
        _ratio(ix, "13a", "(Velocity, Gravity) beside the collision group, 100k, every body "
               "falls: unserved / aligned", "<= 2x", 2.0, False,
               ("unserved", "gravity", "unserved", n, "stress"),
               ("unserved", "gravity", "aligned", n, "stress")),
        _info(_ratio(ix, "13b", "(Velocity, Gravity) beside the collision group, 100k, half "
                     "fall, 10% respawned: unserved / aligned", "<= 2x", 2.0, False,
                     ("unserved", "gravity", "unserved", n, "half"),
                     ("unserved", "gravity", "aligned", n, "half"),
                     note="rows scattered through the stores: gathered")),
        _ratio(ix, "13c", "(Velocity, Gravity) beside the collision group, 100k, half fall, "
               "10% respawned, the group the query nests (auto_group): nested / aligned",
               "<= 2x", 2.0, False,
               ("unserved", "gravity", "nested", n, "half"),
               ("unserved", "gravity", "aligned", n, "half")),
    ]


def t_demo_tick(ix: Index) -> list[Outcome]:
    """Issue 11: the demo's default level per tick (an absolute time: reported only)."""
    rows = [r for (scn, *_), r in ix.rows.items() if scn == "demotick"]
    tid, title, required = "14", "demo default level: ms per tick", "<= 0.4 ms"
    row = next((r for r in rows if r.get("status") == "ok" and "per_tick_ms" in r), None)
    if row is None:
        return [Outcome(tid, title, SKIP, "-", required, None, "demotick not in this run")]
    ms = float(row["per_tick_ms"])
    verdict = "would pass" if ms <= 0.4 else "would fail"
    return [Outcome(tid, title, INFO, f"{ms:.3g} ms", required, round(ms, 4),
                    f"absolute time on a shared machine: reported, not checked ({verdict})")]


def t_hierarchy(ix: Index) -> list[Outcome]:
    return [
        _ratio(ix, "13h-a", "instantiate a 10k blueprint (3 Entity fields) into 100k / "
               "spawn_batch of the same rows", "<= 3x", 3.0, False,
               ("hierarchy", "instantiate", "engine", 100 * K, "3 refs"),
               ("hierarchy", "instantiate", "spawn_batch", 100 * K, "3 refs"),
               note="every reference remapped to the new copies, checked"),
        _ratio(ix, "13h-b", "despawn of a 10k subtree / despawn_batch of the same keys",
               "<= 3x", 3.0, False, ("hierarchy", "despawn_subtree", "engine", 100 * K, ""),
               ("hierarchy", "despawn_subtree", "despawn_batch", 100 * K, ""),
               note="root, 99 children, 9,900 grandchildren in a world of 100k"),
        _info(_ratio(ix, "13h-c", "despawn of a 10k subtree / despawn_batch of 10k entities "
                     "without parent links", "<= 3x", 3.0, False,
                     ("hierarchy", "despawn_subtree", "engine", 100 * K, ""),
                     ("hierarchy", "despawn_subtree", "despawn_batch, no links", 100 * K, ""),
                     note="stricter reading of 13h-b: what the subtree's links cost")),
    ]


TARGETS: tuple[Callable[[Index], list[Outcome]], ...] = (t1, t2, t3, t4, t5, t6, t7, t8, t9,
                                                         t_scaleout, t10, t_small, t_percall,
                                                         t_unserved, t_demo_tick, t_hierarchy)


def evaluate(records: Iterable[Record]) -> list[Outcome]:
    """Every target's outcome for one run's records."""
    ix = Index(records)
    out: list[Outcome] = []
    for fn in TARGETS:
        out += fn(ix)
    return out


def exit_code(outcomes: Iterable[Outcome]) -> int:
    """1 if any target failed, else 0 (skipped targets do not fail)."""
    return 1 if any(o.status == FAIL for o in outcomes) else 0


def format_table(outcomes: list[Outcome]) -> str:
    """A plain-text PASS/FAIL table for the terminal."""
    rows = [("#", "target", "measured", "required", "result")]
    rows += [(o.id, o.title, o.measured, o.required, o.status) for o in outcomes]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = []
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    notes = [f"  {o.id}: {o.note}" for o in outcomes if o.note]
    passed = sum(o.status == PASS for o in outcomes)
    failed = sum(o.status == FAIL for o in outcomes)
    skipped = sum(o.status == SKIP for o in outcomes)
    summary = f"{passed} passed, {failed} failed, {skipped} skipped (not measured in this run)"
    if any(o.status == INFO for o in outcomes):
        summary += "; INFO rows are reported, not checked"
    return "\n".join(lines + (["notes:"] + notes if notes else []) + [summary])
