"""A detect frame's cost against the raw history retained before its lookback (issue 15: history does
not slow ticks). busy_not_progressing carries each run's last step from before its 6-hour lookback; this
times its SQL on one ingested hour with 0 and with N more hours of step records before the lookback
(copies of the hour, shifted back), alternating, in CPU seconds of this process.

    python bench/bench_tick.py --scenario bench/scenarios/scale_1024.yaml --home H     # one ingested hour
    python bench/bench_history_scan.py --warehouse H/bench.duckdb --hours 12 [--sql OTHER.sql] [--repeats 3]

`--sql` times another version of the file beside the current one (the same bindings).
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
from orchestration import sql  # noqa: E402
from orchestration.warehouse import WarehouseResource  # noqa: E402

HOUR = pd.Timestamp("2026-11-30 00:00")


def with_history(source: str, target: Path, hours: int) -> Path:
    """A copy of the warehouse with `hours` copies of the hour's step records placed before its lookback."""
    shutil.copy(source, target)
    lookback_hours = int(REGISTRY.get("busy_not_progressing").thresholds["lookback_seconds"] // 3600)
    with WarehouseResource(path=str(target)).connect() as con:
        for k in range(hours):
            shift = lookback_hours + 1 + k
            con.execute(f"INSERT INTO training_steps SELECT * REPLACE (time - INTERVAL {shift} HOUR AS time) FROM training_steps "
                        "WHERE time >= $s AND time < $e", {"s": HOUR, "e": HOUR + pd.Timedelta(hours=1)})
    return target


def frame_cpu(warehouse: Path, text: str) -> float:
    params = {"start": HOUR, "end": HOUR + pd.Timedelta(hours=1), **REGISTRY.get("busy_not_progressing").thresholds}
    with WarehouseResource(path=str(warehouse)).connect(read_only=True) as con:
        t0 = time.process_time()
        result = None
        for statement in sql.split_statements(text):
            result = sql.execute_text(con, statement, params)
        rows = len(result.df())
        return time.process_time() - t0 if rows else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--hours", type=int, default=12)
    parser.add_argument("--sql", help="another version of sql/detect/busy_not_progressing.sql to time beside it")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    versions = {"current": sql.sql_text("detect/busy_not_progressing")}
    if args.sql:
        versions["other"] = Path(args.sql).read_text()
    with tempfile.TemporaryDirectory() as folder:
        homes = {0: with_history(args.warehouse, Path(folder) / "h0.duckdb", 0),
                 args.hours: with_history(args.warehouse, Path(folder) / "hn.duckdb", args.hours)}
        cpu: dict[tuple, list] = {}
        for _ in range(args.repeats):
            for name, text in versions.items():
                for hours, home in homes.items():
                    cpu.setdefault((name, hours), []).append(frame_cpu(home, text))
    rows = [{"sql": name, "history before the lookback, hours": hours, "frame CPU-s (best)": round(min(v), 3)}
            for (name, hours), v in cpu.items()]
    print(f"# busy_not_progressing's frame, hour {HOUR:%Y-%m-%dT%H:%M}: best of {args.repeats} alternating runs")
    print(pd.DataFrame(rows).to_markdown(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
