"""Benchmark the baselines and every signal's check on one already-ingested hour, in a process of
their own, so the peak memory is theirs and not the ingest's.

    python bench/bench_tick.py --scenario bench/scenarios/scale_1024.yaml --home H   # simulate + ingest
    python bench/bench_checks.py --warehouse H/bench.duckdb --hour 2026-11-30T00:00

Prints a markdown table: seconds per baseline table and per signal family, the number of
findings, and the process's peak RSS (DuckDB's native memory included).
"""

import argparse
import platform
import resource
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import checks.signals  # noqa: E402,F401
from assets.baselines import series_params
from checks.asset_checks import evaluate  # noqa: E402
from checks.registry import REGISTRY  # noqa: E402
from orchestration import sql  # noqa: E402
from orchestration.warehouse import WarehouseResource, transaction  # noqa: E402


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True, help="a warehouse whose ingest tables hold the hour")
    parser.add_argument("--hour", required=True, help="UTC hour, e.g. 2026-11-30T00:00")
    parser.add_argument("--window-minutes", type=int, default=30)
    args = parser.parse_args()
    start = pd.Timestamp(args.hour).to_pydatetime()
    end = (pd.Timestamp(args.hour) + pd.Timedelta(hours=1)).to_pydatetime()
    rows = []
    before = peak_mib()
    with WarehouseResource(path=args.warehouse).connect() as con:
        size = con.execute("SELECT (SELECT count(*) FROM training_steps WHERE time >= $s AND time < $e), "
                           "(SELECT count(*) FROM gpu_samples WHERE time >= $s AND time < $e)", {"s": start, "e": end}).fetchone()
        for name in ("run_minutes", "rank_minutes", "gpu_minutes"):
            t0 = time.perf_counter()
            with transaction(con):
                written = sql.run(con, f"baselines/{name}", series_params(start, end, args.window_minutes)).fetchone()[0]
            rows.append({"stage": f"baseline {name}", "seconds": time.perf_counter() - t0, "rows/findings": written})
        for family in sorted({s.family for s in REGISTRY}):
            signals = [s for s in REGISTRY if s.family == family]
            t0, found = time.perf_counter(), 0
            for signal in signals:
                found += len(evaluate(con, signal, start, end)[1])
            rows.append({"stage": f"checks {family} ({len(signals)} signals)", "seconds": time.perf_counter() - t0,
                         "rows/findings": found})
    table = pd.DataFrame(rows)
    table["seconds"] = table["seconds"].round(2)
    print(f"# baselines and checks, hour {args.hour} UTC: {size[0]:,} step records, {size[1]:,} GPU samples")
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    print(table.to_markdown(index=False))
    print(f"\ntotal {table['seconds'].sum():.1f} s; peak RSS {peak_mib():.0f} MiB (after imports: {before:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
