"""The incident fold per tick against the history kept: the base commit's fold and this tree's, side by side.

    python bench/bench_fold_history.py WAREHOUSE.duckdb [--days 1,7,30,100] [--base REV] [--ticks 3]
        [--modes fresh,warm,again] [--repeat 1] [--lineage] [--out FILE.json]

WAREHOUSE: a processed warehouse (findings, evaluations, clearings, lineage), e.g. the faults.yaml
home tests/test_fold_incremental.py folds. A history of N days is built from it cheaply, as a
backfilled history would look: day d holds a copy of its findings, clearings and evaluation marks
with every time shifted by d days, each run renamed per day (`<run>-d<d>`: runs end; hosts, GPUs and
endpoints stay, so their groups gather an episode a day), its checkpoint_saved events likewise, and
the hours after the copied ones evaluated clean (the last hour's marks, shifted). Then, for each
code (the base commit's, from a `git worktree` of it on PYTHONPATH, and this tree's), on its own
copy: one fold over the whole history (the state), then `--ticks` ticks, each one new partition (the
source's first hours as day N's) written as the checks write it and folded; `--lineage`: with the
hour's checkpoint_saved events, as the lineage ingest writes them (the checkpoint lineage then
changes every tick, as it does where runs save checkpoints). `fresh`: each tick in a fresh process
as a fold run has (the daemon starts one per run); `warm`: the state fold and every tick in one
process left running; `again`: as warm, each tick's fold first run 5 times on the same state and
rolled back, its CPU-s the median of those (a shared host's noise, less). CPU-seconds of each tick's
fold and store (and the serving_versions read the asset does before it), median over the ticks (with
`--repeat R`, each tick's least over R runs of each code, the codes in turn); both codes' stored
incidents and transitions after the last tick are digested and must agree.
DuckDB runs one thread (GOODPUT_DUCKDB_THREADS=1), as CPU-seconds are the figure on a shared host.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAY_HOURS = 24
SHIFTED = {"findings": ("partition_start", "onset", "detected_at", "last_seen"),
           "clearings": ("partition_start", "last_seen", "cleared_at"),
           "evaluations": ("partition_start", "evaluated_until")}


def _renamed(column: str, runs: list[str], day: int) -> str:
    """SQL: `column` with a run id (or `<run>/...`) renamed to `<run>-d<day>`."""
    cases = " ".join(f"WHEN {column} = '{r}' OR starts_with({column}, '{r}/') THEN '{r}-d{day}' || substr({column}, {len(r) + 1})"
                     for r in runs)
    return f"CASE {cases} ELSE {column} END" if runs else column


def _copy(con, table: str, day: int, runs: list[str], where: str = "TRUE", hours: int = 0) -> None:
    shift = f"INTERVAL {day} DAY + INTERVAL {hours} HOUR"
    replaced = [f"{c} + {shift} AS {c}" for c in SHIFTED[table]]
    if table in ("findings", "clearings"):
        replaced.append(f"{_renamed('entity_id', runs, day)} AS entity_id")
    if table == "findings":
        replaced += [f"{_renamed('run_id', runs, day)} AS run_id",
                     f"CASE WHEN checkpoint IS NULL THEN NULL ELSE {_renamed('checkpoint', runs, day)} END AS checkpoint"]
    con.execute(f"INSERT INTO {table} SELECT * REPLACE ({', '.join(replaced)}) FROM src_{table} WHERE {where}")


def build(source: str, target: str, days: int) -> dict:
    """The history of `days` days from `source` into `target` (run under the base commit's code)."""
    from orchestration.storage.warehouse import WarehouseResource

    shutil.copy(source, target)
    with WarehouseResource(path=target).connect() as con:
        for table in SHIFTED:
            con.execute(f"CREATE TEMP TABLE src_{table} AS SELECT * FROM {table}")
        con.execute("CREATE TEMP TABLE src_lineage AS SELECT * FROM lineage_events WHERE event = 'checkpoint_saved'")
        hours = [h for (h,) in con.execute("SELECT DISTINCT partition_start FROM src_evaluations ORDER BY 1").fetchall()]
        runs = sorted({r for (r,) in con.execute("SELECT DISTINCT run_id FROM src_findings WHERE run_id IS NOT NULL "
                                                 "UNION SELECT DISTINCT run_id FROM src_lineage WHERE run_id IS NOT NULL").fetchall()})
        con.execute("DELETE FROM findings; DELETE FROM clearings; DELETE FROM evaluations; DELETE FROM incidents; "
                    "DELETE FROM incident_transitions; DELETE FROM lineage_events WHERE event = 'checkpoint_saved'")
        # either code's fold state starts empty (the source's own fold state, e.g. fold_meta, would make the
        # state fold an incremental one over nothing)
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE starts_with(table_name, 'fold_')").fetchall():
            con.execute(f"DELETE FROM {table}")
        last = hours[-1]
        for day in range(days):
            for table in SHIFTED:
                _copy(con, table, day, runs)
            for extra in range(1, DAY_HOURS - len(hours) + 1):   # the rest of the day: evaluated, nothing found
                _copy(con, "evaluations", day, runs, f"partition_start = TIMESTAMP '{last}'", extra)
            path = _renamed("checkpoint_path", runs, day)
            con.execute(f"INSERT INTO lineage_events SELECT * REPLACE (time + INTERVAL {day} DAY AS time, "
                        f"{_renamed('run_id', runs, day)} AS run_id, "
                        f"CASE WHEN checkpoint_path IS NULL THEN NULL ELSE {path} END AS checkpoint_path) FROM src_lineage")
        sizes = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in SHIFTED}
    return {"hours": [str(h) for h in hours], "runs": runs, **sizes}


def _fold(con) -> dict:
    """One fold as the incidents asset runs it (the serving versions read, the fold, the store), either code."""
    from assets import incident_fold as full
    from assets import incidents_incremental as inc
    from orchestration.storage import sql

    versions = sql.frame(con, "incidents/serving_versions")
    if hasattr(inc, "store"):   # the base commit's fold returns the tables and stores them apart
        folded, transitions, counts = inc.fold_incrementally(con, full.Lifecycle(), versions, full.triage.WINDOW_SECONDS)
        inc.store(con, folded, transitions, counts.pop("_state"))
    else:
        counts = inc.fold_incrementally(con, full.Lifecycle(), versions, full.triage.WINDOW_SECONDS)
    return {k: v for k, v in counts.items() if isinstance(v, (int, float, bool))}


def state(history: str, work: str) -> dict:
    """Under one code, in its own process: the history copied to `work` and folded once (the state)."""
    from orchestration.storage.warehouse import WarehouseResource

    shutil.copy(history, work)
    with WarehouseResource(path=work).connect() as con:
        cpu = time.process_time()
        counts = _fold(con)
        return {"cpu_s": round(time.process_time() - cpu, 3), **counts}


def _write(con, source: str, days: int, index: int, lineage: bool = False) -> None:
    """The source's hour `index` written as day `days`'s, as the checks store a partition: rows replaced
    and marked for the fold in one transaction; with `lineage`, the hour's checkpoint_saved events too
    (as the lineage ingest writes an hour: a run saves checkpoints while the checks look at it)."""
    con.execute(f"ATTACH '{source}' AS src (READ_ONLY)")
    runs = sorted({r for (r,) in con.execute("SELECT DISTINCT run_id FROM src.findings WHERE run_id IS NOT NULL UNION "
                                             "SELECT DISTINCT run_id FROM src.lineage_events WHERE event = 'checkpoint_saved' "
                                             "AND run_id IS NOT NULL").fetchall()})
    marks = "fold_marks" in {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    hour = con.execute("SELECT DISTINCT partition_start FROM src.evaluations ORDER BY 1").fetchall()[index][0]
    for table in SHIFTED:
        con.execute(f"CREATE OR REPLACE TEMP TABLE src_{table} AS SELECT * FROM src.{table}")
    at = f"TIMESTAMP '{hour}' + INTERVAL {days} DAY"
    con.execute("BEGIN TRANSACTION")
    for table in SHIFTED:
        con.execute(f"DELETE FROM {table} WHERE partition_start = {at}")
        _copy(con, table, days, runs, f"partition_start = TIMESTAMP '{hour}'")
    if marks:
        con.execute(f"INSERT INTO fold_marks SELECT DISTINCT signal, {at} FROM src_evaluations "
                    f"WHERE partition_start = TIMESTAMP '{hour}'")
    if lineage:
        con.execute(f"DELETE FROM lineage_events WHERE event = 'checkpoint_saved' AND time >= {at} AND time < {at} + INTERVAL 1 HOUR")
        path = _renamed("checkpoint_path", runs, days)
        con.execute(f"INSERT INTO lineage_events SELECT * REPLACE (time + INTERVAL {days} DAY AS time, "
                    f"{_renamed('run_id', runs, days)} AS run_id, "
                    f"CASE WHEN checkpoint_path IS NULL THEN NULL ELSE {path} END AS checkpoint_path) "
                    f"FROM src.lineage_events WHERE event = 'checkpoint_saved' "
                    f"AND time >= TIMESTAMP '{hour}' AND time < TIMESTAMP '{hour}' + INTERVAL 1 HOUR")
    con.execute("COMMIT")
    con.execute("DETACH src")


def _timed(con) -> dict:
    """One fold, timed (CPU-s of this process, wall), with what the tables hold after it."""
    cpu, wall = time.process_time(), time.monotonic()
    counts = _fold(con)
    out = {"cpu_s": round(time.process_time() - cpu, 4), "wall_s": round(time.monotonic() - wall, 4), **counts}
    out["incidents"] = con.execute("SELECT count(*) FROM incidents").fetchone()[0]
    out["digest"] = [str(con.execute(f"SELECT bit_xor(hash(t)) FROM {table} t").fetchone()[0])
                     for table in ("incidents", "incident_transitions")]
    return out


def tick(source: str, work: str, days: int, index: int, lineage: bool = False) -> dict:
    """Under one code, in a fresh process as a fold run has: the source's hour `index` written as day
    `days`'s (rows replaced and marked as the checks store a partition), then one fold, timed."""
    from orchestration.storage.warehouse import WarehouseResource

    with WarehouseResource(path=work).connect() as con:
        _write(con, source, days, index, lineage)
        return _timed(con)


def _rolled_back(con) -> float:
    """CPU-s of one fold of what is marked now, in a transaction then rolled back (the state stays as it
    was, so the same tick can be folded again). Codes whose fold_incrementally wraps `_fold` only."""
    from assets import incident_fold as full
    from assets import incidents_incremental as inc
    from orchestration.storage import sql

    con.execute("BEGIN TRANSACTION")
    try:
        cpu = time.process_time()
        inc._fold(con, full.Lifecycle(), sql.frame(con, "incidents/serving_versions"), full.triage.WINDOW_SECONDS)
        return time.process_time() - cpu
    finally:
        con.execute("ROLLBACK")


def warm(source: str, history: str, work: str, days: int, ticks: int, lineage: bool = False, again: int = 0) -> dict:
    """Under one code, in one process left running (the service's): the history copied to `work` and
    folded once (the state), then `ticks` ticks on the same connection, each timed: the same hours as
    the fresh-process ticks, so both end with the same tables. `again` > 0: each tick is first folded
    that often and rolled back, and its CPU-s is the median of those (the host's noise, not the tick)."""
    from orchestration.storage.warehouse import WarehouseResource

    shutil.copy(history, work)
    with WarehouseResource(path=work).connect() as con:
        _fold(con)
        out = []
        for index in range(ticks):
            _write(con, source, days, index, lineage)
            rolled = [_rolled_back(con) for _ in range(again)]
            out.append(_timed(con))
            if rolled:
                out[-1] = {**out[-1], "once_cpu_s": out[-1]["cpu_s"], "cpu_s": round(statistics.median(rolled), 4)}
    return {"ticks": out}


def _child(code: Path, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code), "GOODPUT_DUCKDB_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, str(REPO / "bench" / "bench_fold_history.py"), *args], cwd=code, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"child {args[:2]} under {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run(code: Path, source: str, history: str, work: str, days: int, ticks: int, modes: list[str], *extra: str) -> dict:
    """Under one code: the fresh-process ticks (a state fold, then each tick in its own process) and the
    warm-process ticks (the state fold and every tick in one process), each on its own copy."""
    out: dict = {}
    if "fresh" in modes:
        out["state"] = _child(code, "--state", history, work)
        out["fresh"] = [_child(code, "--tick", source, work, str(days), str(index), *extra) for index in range(ticks)]
        os.remove(work)
    if "warm" in modes:
        out["warm"] = _child(code, "--warm", source, history, work, str(days), str(ticks), *extra)["ticks"]
        os.remove(work)
    if "again" in modes:
        out["again"] = _child(code, "--warm", source, history, work, str(days), str(ticks), "--again", "5", *extra)["ticks"]
        os.remove(work)
    for mode in modes:
        out[f"{mode}_cpu_s"] = statistics.median(t["cpu_s"] for t in out[mode])
        out[f"{mode}_each"] = [t["cpu_s"] for t in out[mode]]
        out["incidents"], out["digest"] = out[mode][-1]["incidents"], out[mode][-1]["digest"]
    out["groups_folded"] = [t["groups_folded"] for t in out[modes[0]]]
    return out


def _least(repeats: list[dict], modes: list[str]) -> dict:
    """One code's repeats as one: per tick the least CPU-s of its repeats (a shared host's noise only
    adds), the median of those per mode, and the least state fold."""
    out = {k: repeats[-1][k] for k in ("incidents", "digest", "groups_folded")}
    for mode in modes:
        out[f"{mode}_each"] = [min(tick) for tick in zip(*(r[f"{mode}_each"] for r in repeats))]
        out[f"{mode}_cpu_s"] = statistics.median(out[f"{mode}_each"])
    if "state" in repeats[0]:
        out["state"] = {"cpu_s": min(r["state"]["cpu_s"] for r in repeats)}
    return {**out, "repeats": repeats}


def _table(rows: list[dict], modes: list[str]) -> str:
    head = ["days", "findings", "incidents", *[f"{code} {mode} CPU-s / tick" for mode in modes for code in ("base", "this")],
            "ticks' CPU-s, this", "groups refolded a tick", "base state fold", "this state fold"]
    lines = ["| " + " | ".join(head) + " |", "|" + "--:|" * len(head)]
    for r in rows:
        cells = [str(r["days"]), f"{r['findings']:,}", f"{r['incidents']:,}",
                 *[f"{r[code][f'{mode}_cpu_s']:.3f}" for mode in modes for code in ("base", "this")],
                 " ; ".join(f"{mode} " + " / ".join(f"{c:.2f}" for c in r["this"][f"{mode}_each"]) for mode in modes),
                 ", ".join(map(str, r["this"]["groups_folded"])),
                 *[f"{r[code]['state']['cpu_s']:.2f}" if "state" in r[code] else "-" for code in ("base", "this")]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse", nargs="?")
    parser.add_argument("--days", default="1,7,30,100")
    parser.add_argument("--base", default="main", help="the commit whose fold is the 'before' (a git worktree of it)")
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--modes", default="fresh,warm", help="fresh: each tick in its own process; warm: all in one; "
                        "again: warm, each tick's fold repeated 5 times on the same state and rolled back, the median")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each code, in turn; per tick the least CPU-s")
    parser.add_argument("--again", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--lineage", action="store_true", help="each tick also writes its hour's checkpoint_saved events")
    parser.add_argument("--out")
    parser.add_argument("--build", nargs=3, metavar=("SOURCE", "TARGET", "DAYS"), help=argparse.SUPPRESS)
    parser.add_argument("--state", nargs=2, metavar=("HISTORY", "WORK"), help=argparse.SUPPRESS)
    parser.add_argument("--tick", nargs=4, metavar=("SOURCE", "WORK", "DAYS", "INDEX"), help=argparse.SUPPRESS)
    parser.add_argument("--warm", nargs=5, metavar=("SOURCE", "HISTORY", "WORK", "DAYS", "TICKS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        print(json.dumps(build(args.build[0], args.build[1], int(args.build[2]))))
        return 0
    if args.state:
        print(json.dumps(state(*args.state), default=str))
        return 0
    if args.tick:
        print(json.dumps(tick(args.tick[0], args.tick[1], int(args.tick[2]), int(args.tick[3]), args.lineage), default=str))
        return 0
    if args.warm:
        print(json.dumps(warm(*args.warm[:3], int(args.warm[3]), int(args.warm[4]), args.lineage, args.again), default=str))
        return 0
    modes = [m for m in ("fresh", "warm", "again") if m in args.modes.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="goodput-bench-foldhist-"))
    base = scratch / "base"
    subprocess.run(["git", "worktree", "add", "--detach", str(base), args.base], cwd=REPO, check=True, capture_output=True)
    rows = []
    try:
        source = str(Path(args.warehouse).resolve())
        for days in [int(d) for d in args.days.split(",")]:
            history = str(scratch / f"history-{days}.duckdb")
            built = _child(base, "--build", source, history, str(days))
            extra = ["--lineage"] if args.lineage else []
            repeats: dict[str, list] = {"base": [], "this": []}
            for _ in range(args.repeat):   # the codes in turn, so both meet the same load
                for code, path in (("base", base), ("this", REPO)):
                    work = str(scratch / f"{code}-{days}.duckdb")
                    repeats[code].append(_run(path, source, history, work, days, args.ticks, modes, *extra))
            runs = {code: _least(r, modes) for code, r in repeats.items()}
            assert runs["base"]["digest"] == runs["this"]["digest"], f"{days} days: the two folds stored different incidents"
            rows.append({"days": days, "findings": built["findings"], "incidents": runs["this"]["incidents"], **runs})
            print(f"{days} days: " + "; ".join(f"{mode}: base {runs['base'][f'{mode}_cpu_s']} CPU-s a tick, "
                                                f"this {runs['this'][f'{mode}_cpu_s']}" for mode in modes), flush=True)
            os.remove(history)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
    print(_table(rows, modes))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
