"""Benchmark the drift check on 10k, 100k and 1M prediction rows against evidently alone on the same rows.

    python bench/bench_drift.py            # 10k, 100k, 1M rows per side (~minutes; 1M needs a few GB)
    python bench/bench_drift.py --quick    # 2k rows, seconds (what CI runs, tests/test_bench_quick.py)
    python bench/bench_drift.py --rows 10000 50000 --out DIR

For each size it writes that many predictions into the reference hour and as many into the judged
hour (prompt lengths x1.3 there: a drift) of one endpoint in a fresh warehouse, then times
  * the drift check as Goodput runs it: the drift_reports work (DuckDB row counts and means over the
    full windows, a deterministic sample of at most `max_rows` per side, evidently's DataDriftPreset
    and its HTML report on the sample, the drift history written) plus the input_drift check;
  * evidently alone on the same rows: every row of both windows read into pandas (features
    expanded), DataDriftPreset run and its HTML report saved, as one would without the sampling.
Prints a markdown table with the machine noted. No timing is asserted anywhere.

Measured 2026-11-30 on a shared 2-core AMD EPYC VM (load ~6 from other work, so absolute times are
pessimistic; Python 3.11, DuckDB 1.5, evidently 0.7.23), one drifted column found by both sides:

| rows per side | drift check (s) | rows evidently saw | evidently alone (s) | speed-up |
|---:|---:|---:|---:|---:|
| 10,000 | 0.69 | 5,000 | 1.14 | x1.7 |
| 100,000 | 2.19 | 5,000 | 6.51 | x3.0 |
| 1,000,000 | 4.41 | 5,000 | 42.4 | x9.6 |

The drift check's time grows with the DuckDB scans only (counts, means, the hash-ordered sample);
evidently alone grows with the rows (reading and expanding them, then its statistics and report).
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from assets.drift import DriftConfig, compute_drift, evidently_drift, sample  # noqa: E402
from checks.asset_checks import evaluate  # noqa: E402
from checks.registry import REGISTRY  # noqa: E402
from orchestration.progress import Ticker  # noqa: E402
from orchestration.storage import sql  # noqa: E402
from orchestration.storage.warehouse import WarehouseResource, transaction  # noqa: E402

REFERENCE = datetime(2026, 11, 30, 0, 10)     # version v1 began serving at 00:00: first stable hour
HOUR = datetime(2026, 11, 30, 2, 0)           # the judged hour
SIZES = (10_000, 100_000, 1_000_000)


def build(path: Path, rows: int) -> WarehouseResource:
    warehouse = WarehouseResource(path=str(path))
    with warehouse.connect() as con, transaction(con):
        con.execute("SELECT setseed(0.42)")
        sql.run(con, "quality/bench_predictions", {"n": rows, "from": REFERENCE - timedelta(minutes=10), "shift": 0.0,
                                                   "prefix": "warm-"})
        sql.run(con, "quality/bench_predictions", {"n": rows, "from": REFERENCE, "shift": 0.0, "prefix": "ref-"})
        sql.run(con, "quality/bench_predictions", {"n": rows, "from": HOUR, "shift": 0.3, "prefix": "cur-"})
    return warehouse


def drift_check(warehouse: WarehouseResource, reports: Path, config: DriftConfig) -> tuple[float, float, int, int]:
    t0, c0 = time.perf_counter(), time.process_time()
    with warehouse.connect() as con:
        scores = compute_drift(con, HOUR, HOUR + timedelta(hours=1), config, reports)
        with transaction(con, new_drift_scores=scores):
            sql.run(con, "quality/replace_drift", {"start": HOUR, "end": HOUR + timedelta(hours=1)})
        _, findings = evaluate(con, REGISTRY.get("input_drift"), HOUR, HOUR + timedelta(hours=1))
    sampled = int(scores["current_sampled"].iloc[0]) if not scores.empty else 0
    return time.perf_counter() - t0, time.process_time() - c0, sampled, int(scores["drifted"].sum())


def evidently_alone(warehouse: WarehouseResource, report: Path, rows: int, config: DriftConfig) -> tuple[float, float, int]:
    t0, c0 = time.perf_counter(), time.process_time()
    with warehouse.connect(read_only=True) as con:
        reference = sample(con, "bench-api", "v1", REFERENCE, REFERENCE + timedelta(hours=1), 2 * rows)
        current = sample(con, "bench-api", "v1", HOUR, HOUR + timedelta(hours=1), 2 * rows)
    scores, snapshot = evidently_drift(current, reference, config)
    snapshot.save_html(str(report))
    return time.perf_counter() - t0, time.process_time() - c0, int(scores["drifted"].sum())


def warm_up(config: DriftConfig) -> None:
    """Import evidently and run it once on a few rows, so neither side pays the imports (seconds)."""
    import numpy as np

    tiny = pd.DataFrame({"x": np.arange(50.0), "c": ["a", "b"] * 25})
    evidently_drift(tiny.copy(), tiny.copy(), config)[1].get_html_str(as_iframe=False)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
        cpu = model
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small size (2,000 rows), seconds")
    parser.add_argument("--rows", type=int, nargs="+", help="rows per side (default 10k, 100k, 1M)")
    parser.add_argument("--max-rows", type=int, default=DriftConfig().max_rows, help="the drift check's sample cap")
    parser.add_argument("--out", default=None, help="folder for the warehouses and reports (default: a temp dir)")
    args = parser.parse_args()
    sizes = [2_000] if args.quick else (args.rows or list(SIZES))
    config = DriftConfig(max_rows=args.max_rows)
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-drift-"))
    out.mkdir(parents=True, exist_ok=True)
    warm_up(config)
    rows = []
    with Ticker(total=len(sizes)) as ticker:
        for n in sizes:
            home = out / f"rows-{n}"
            home.mkdir(exist_ok=True)
            ticker.update(f"{n:,} rows: writing the predictions")
            warehouse = build(home / "warehouse.duckdb", n)
            ticker.update(f"{n:,} rows: drift check")
            check_s, check_cpu, sampled, drifted = drift_check(warehouse, home / "reports", config)
            ticker.update(f"{n:,} rows: evidently alone")
            alone_s, alone_cpu, alone_drifted = evidently_alone(warehouse, home / "evidently-alone.html", n, config)
            ticker.step()
            rows.append({"rows per side": f"{n:,}", "drift check (s)": round(check_s, 2),
                         "drift check (CPU-s)": round(check_cpu, 2),
                         "rows evidently saw": f"{sampled:,}", "columns drifted": drifted,
                         "evidently alone (s)": round(alone_s, 2), "evidently alone (CPU-s)": round(alone_cpu, 2),
                         "columns drifted (alone)": alone_drifted,
                         "speed-up": f"x{alone_s / check_s:.1f}"})
    table = pd.DataFrame(rows)
    print(f"Drift check vs evidently alone ({'quick' if args.quick else 'full'}; max_rows {config.max_rows:,}); "
          f"machine: {machine()}\n")
    print(table.to_markdown(index=False))
    print(json.dumps({"out": str(out)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
