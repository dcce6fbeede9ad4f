"""Where a live tick's CPU grows within the hour: every check of one hour and its badput, as a tick at minute M sees them.

    python bench/bench_tick.py ...  or  goodput demo --home H --scenario bench/scenarios/replay_1024_2h.yaml
    PYTHONPATH=TREE python bench/bench_check_growth.py H/warehouse.duckdb --hour 2026-11-30T01:00 \
        --minutes 5,55 [--repeats 3] [--live] [--out FILE.json]

For each minute M (alternating, `--repeats` rounds): a copy of the warehouse (beside it) cut at hour + M, that is
every raw and per-minute row from then on deleted and the hour's stored results too (what a live tick at minute M
holds), then every check of the hour run as the detect job's check steps run them (`judge_signal` and `store` per signal
in step order on one connection, the step's shared reads; with `--live` as a live run judges them after the tick a
minute before, stored: the `live_window` signals by window), then the `badput` asset's SQL stages as a live run of
its step runs them after the tick a minute before (rolled back: the copy is cut again each round), DuckDB on one
thread. Prints each round's total and, from the medians, the signals (and badput's stages, `badput:<stage>`) whose
CPU grows most from the first minute to the last. It imports whatever tree is on PYTHONPATH, so two trees are
compared side by side by running it alternately with each.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

import checks.signals  # noqa: F401  (registers the signals)
from assets.badput import BadputConfig, write_hour
from checks.asset_checks import judge_signal, signals_by_step, store
from orchestration.config.peak_flops import peak_table
from orchestration.storage import sql
from orchestration.storage.warehouse import WarehouseResource

# the tables a live tick has only up to its minute, and the column that says when a row happened
CUT = {"badput_minutes": "minute", "gpu_minutes": "minute", "gpu_samples": "time", "lineage_events": "time",
       "prediction_outcomes": "time", "predictions": "time", "rank_minutes": "minute", "run_minutes": "minute",
       "serving_metrics": "time", "serving_minutes": "minute", "training_steps": "time", "checkpoint_audits": "saved_at",
       "step_ends": "minute", "gpu_counter_minutes": "minute"}
RESULTS = ("findings", "clearings", "judgements", "evaluations")


def cut_copy(source: str, start: pd.Timestamp, minute: int) -> WarehouseResource:
    """A copy of the warehouse as a live tick at `minute` of the hour beginning `start` holds it."""
    path = str(Path(source).with_name(f"growth_{os.getpid()}_{minute}.duckdb"))
    shutil.copy(source, path)
    cut = (start + pd.Timedelta(minutes=minute)).to_pydatetime()
    warehouse = WarehouseResource(path=path)
    with warehouse.connect() as con:
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        for table, column in CUT.items():
            if table in tables:
                con.execute(f"DELETE FROM {table} WHERE {column} >= $cut", {"cut": cut})
        for table in RESULTS:
            con.execute(f"DELETE FROM {table} WHERE partition_start >= $start", {"start": start.to_pydatetime()})
    return warehouse


def check_cpu(warehouse: WarehouseResource, start: pd.Timestamp, minute: int, live: bool = False) -> dict[str, float]:
    """CPU-seconds of each signal's check of the hour, in the detect job's step order. `live`: as a live run judges
    it after the tick a minute before (the `live_window` signals by window: checks/windowed.py)."""
    begin, end = start.to_pydatetime(), (start + pd.Timedelta(hours=1)).to_pydatetime()
    cpu = {}
    with warehouse.connect() as con:
        if live:
            tick_before(con, start, minute)
        for signals in signals_by_step().values():
            frames: dict = {}
            for signal in signals:
                before = time.process_time()
                store(con, begin, [judge_signal(con, signal, begin, end, None, frames, None, live)])
                cpu[signal.name] = time.process_time() - before
    return cpu


@contextlib.contextmanager
def held_back(con, held) -> Iterator[list[str]]:
    """The cut tables' rows from `held` on set aside for the block (what the tick a minute before held), then put
    back; yields the tables."""
    tables = [t for t in CUT if t in {n for (n,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}]
    for table in tables:
        con.execute(f"CREATE TEMP TABLE held_{table} AS SELECT * FROM {table} WHERE {CUT[table]} >= $held", {"held": held})
        con.execute(f"DELETE FROM {table} WHERE {CUT[table]} >= $held", {"held": held})
    yield tables
    for table in tables:
        con.execute(f"INSERT INTO {table} SELECT * FROM held_{table}")
        con.execute(f"DROP TABLE held_{table}")


def tick_before(con, start: pd.Timestamp, minute: int) -> None:
    """The checks of the tick a minute before `minute`, stored: the rows from then on held back meanwhile, then put
    back and marked changed, as ingest marks them (sql/baselines/mark_dirty.sql)."""
    begin, end = start.to_pydatetime(), (start + pd.Timedelta(hours=1)).to_pydatetime()
    held = (start + pd.Timedelta(minutes=minute - 1)).to_pydatetime()
    with held_back(con, held) as tables:
        for signals in signals_by_step().values():
            frames: dict = {}
            store(con, begin, [judge_signal(con, signal, begin, end, None, frames) for signal in signals])
    for table in tables:
        sql.run(con, "baselines/mark_dirty", {"source": table, "first": held, "last": end})


def badput_cpu(warehouse: WarehouseResource, start: pd.Timestamp, minute: int) -> dict[str, float]:
    """CPU-seconds of each of the `badput` asset's SQL stages (assets/badput.py) as a live tick at `minute` runs
    them: after the tick a minute before it (the rows from then on held back, the hour written, the rows put
    back), rolled back."""
    begin, end = start.to_pydatetime(), (start + pd.Timedelta(hours=1)).to_pydatetime()
    held = (start + pd.Timedelta(minutes=minute - 1)).to_pydatetime()
    peaks = peak_table(Path(warehouse.path).parent)
    cpu: dict[str, float] = {}
    with warehouse.connect() as con:
        con.execute("BEGIN")
        with held_back(con, held):
            write_hour(con, begin, end, BadputConfig(), peaks, live=False)
        write_hour(con, begin, end, BadputConfig(), peaks, live=True, clock=cpu)
        con.execute("ROLLBACK")
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse")
    parser.add_argument("--hour", default="2026-11-30T01:00", help="the hour's start (UTC)")
    parser.add_argument("--minutes", default="5,55", help="minutes of the hour a tick runs at, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="write every round's CPU per signal here (JSON)")
    parser.add_argument("--live", action="store_true", help="judge as a live run after the tick a minute before "
                                                             "(the live_window signals by window)")
    args = parser.parse_args()
    os.environ["GOODPUT_DUCKDB_THREADS"] = "1"
    start = pd.Timestamp(args.hour)
    minutes = [int(m) for m in args.minutes.split(",")]
    rounds: dict[int, list[dict[str, float]]] = {m: [] for m in minutes}
    for round_ in range(args.repeats):
        for minute in minutes:
            warehouse = cut_copy(args.warehouse, start, minute)
            try:
                rounds[minute].append({**check_cpu(warehouse, start, minute, args.live), **badput_cpu(warehouse, start, minute)})
            finally:
                Path(warehouse.path).unlink()
            print(f"round {round_ + 1} minute {minute}: {sum(rounds[minute][-1].values()):.2f} CPU-s (checks and badput)",
                  flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rounds))
    median = {m: {s: sorted(r[s] for r in rounds[m])[len(rounds[m]) // 2] for s in rounds[m][0]} for m in minutes}
    first, last = minutes[0], minutes[-1]
    print(f"{'signal':32s} {'minute ' + str(first):>10s} {'minute ' + str(last):>10s} {'growth':>8s}")
    for name in sorted(median[first], key=lambda s: median[first][s] - median[last][s])[:20]:
        a, b = median[first][name], median[last][name]
        print(f"{name:32s} {a:10.3f} {b:10.3f} {b - a:+8.3f}")
    for label, keep in (("all checks", lambda s: not s.startswith("badput:")), ("badput", lambda s: s.startswith("badput:"))):
        print(f"{label:32s} {sum(v for s, v in median[first].items() if keep(s)):10.3f} "
              f"{sum(v for s, v in median[last].items() if keep(s)):10.3f}")


if __name__ == "__main__":
    sys.exit(main())
