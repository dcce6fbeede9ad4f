"""A detect frame's cost against the history kept before its lookback (issue 15: history does not slow
ticks). busy_not_progressing carries each run's last step from before its 6-hour lookback (raw step
records, kept `retention.raw_days`); rank_dropout each rank of the run since its start, silent ones
too (rank_minutes, kept `retention.minutes_days`); memory_fragmentation and the run series' signals
(step_time_regression) each run's first minute (run_minutes). This times a signal's SQL on one ingested hour with 0
and with N more hours of its history before the lookback (copies of the hour, shifted back; the run's
start moved before them), alternating, in CPU seconds of this process.

    python bench/bench_tick.py --scenario bench/scenarios/scale_1024.yaml --home H     # one ingested hour
    python bench/bench_history_scan.py --warehouse H/bench.duckdb --signal rank_dropout --hours 12 [--sql OTHER.sql]

`--sql` times another version of the signal's SQL file beside the current one (the same bindings).
"""

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import checks.signals  # noqa: E402,F401
from checks.registry import REGISTRY  # noqa: E402
from orchestration.storage import sql  # noqa: E402
from orchestration.storage.warehouse import WarehouseResource  # noqa: E402

HOUR = pd.Timestamp("2026-11-30 00:00")


HISTORY = {   # signal -> (tables copied back, with their time column)
    "busy_not_progressing": (("training_steps", "time"),),
    "rank_dropout": (("rank_minutes", "minute"), ("run_minutes", "minute")),
    # a run's age (its first minute) for the warm-up: from the run's every minute before run_starts (migration 135)
    # (their rank reads are bounded by the lookback either way: the run's minutes alone, for months of them)
    "memory_fragmentation": (("run_minutes", "minute"),),
    "step_time_regression": (("run_minutes", "minute"),),
}


def lookback_hours(signal: str) -> int:
    thresholds = REGISTRY.get(signal).thresholds
    return int(thresholds.get("lookback_seconds", 60 * thresholds.get("lookback_minutes", 0)) // 3600)


def with_history(source: str, target: Path, signal: str, hours: int) -> Path:
    """A copy of the warehouse with `hours` copies of the hour's history placed before the signal's lookback
    and the hour before it, and the runs started before the oldest copy."""
    shutil.copy(source, target)
    hour = {"s": HOUR, "e": HOUR + pd.Timedelta(hours=1)}
    with WarehouseResource(path=str(target)).connect() as con:
        first = lookback_hours(signal) + 1
        for table, column in HISTORY[signal]:   # the hour's rows once per hour of history, shifted back
            con.execute(f"INSERT INTO {table} SELECT * EXCLUDE (k) REPLACE ({column} - to_hours(k) AS {column}) "
                        f"FROM {table}, range({first}, {first + hours}) r(k) WHERE {column} >= $s AND {column} < $e", hour)
        if hours:
            con.execute(f"UPDATE lineage_events SET time = time - INTERVAL {lookback_hours(signal) + 1 + hours} HOUR "
                        "WHERE event = 'run_started'")
            # the runs' first minutes as the training baselines keep them (migration 135)
            con.execute("UPDATE run_starts SET first_minute = (SELECT min(minute) FROM run_minutes r "
                        "WHERE r.run_id = run_starts.run_id)")
    return target


def frame_cpu(warehouse: Path, signal: str, text: str) -> float:
    params = {"start": HOUR, "end": HOUR + pd.Timedelta(hours=1), **REGISTRY.get(signal).thresholds}
    with WarehouseResource(path=str(warehouse)).connect(read_only=True) as con:
        t0 = time.process_time()
        rows = len(sql.execute_text(con, text, params).df())
        return time.process_time() - t0 if rows else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--signal", choices=sorted(HISTORY), default="busy_not_progressing")
    parser.add_argument("--hours", type=int, default=12)
    parser.add_argument("--sql", help="another version of the signal's SQL file to time beside it")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    versions = {"current": sql.sql_text(REGISTRY.get(args.signal).query)}
    if args.sql:
        versions["other"] = Path(args.sql).read_text()
    with tempfile.TemporaryDirectory() as folder:
        homes = {0: with_history(args.warehouse, Path(folder) / "h0.duckdb", args.signal, 0),
                 args.hours: with_history(args.warehouse, Path(folder) / "hn.duckdb", args.signal, args.hours)}
        cpu: dict[tuple, list] = {}
        for _ in range(args.repeats):
            for name, text in versions.items():
                for hours, home in homes.items():
                    cpu.setdefault((name, hours), []).append(frame_cpu(home, args.signal, text))
    rows = [{"sql": name, "history before the lookback, hours": hours, "frame CPU-s (best)": round(min(v), 3)}
            for (name, hours), v in cpu.items()]
    print(f"# {args.signal}'s frame, hour {HOUR:%Y-%m-%dT%H:%M}: best of {args.repeats} alternating runs")
    print(pd.DataFrame(rows).to_markdown(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
