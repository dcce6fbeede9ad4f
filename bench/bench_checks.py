"""Benchmark the baselines and every signal's check on one already-ingested hour, in a process of
their own, so the peak memory is theirs and not the ingest's.

    python bench/bench_tick.py --scenario bench/scenarios/scale_1024.yaml --home H   # simulate + ingest
    python bench/bench_checks.py --warehouse H/bench.duckdb --hour 2026-11-30T00:00
    python bench/bench_checks.py --warehouse H/bench.duckdb --hour 2026-11-30T00:00 --shared-frames 3

Prints a markdown table: seconds per baseline table and per signal family, the number of
findings, and the process's peak RSS (DuckDB's native memory included). `--shared-frames N` instead
measures each check step's signals N times each way, alternating, in CPU seconds of this process:
every signal reading its own series frame, against the step's signals sharing the frames they bind
alike (checks/asset_checks.py: shared_read), and checks that both find the same.
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
from checks.asset_checks import evaluate, evaluate_judged, signals_by_step  # noqa: E402
from checks.registry import REGISTRY  # noqa: E402
from orchestration.storage import sql  # noqa: E402
from orchestration.storage.warehouse import WarehouseResource, transaction  # noqa: E402


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True, help="a warehouse whose ingest tables hold the hour")
    parser.add_argument("--hour", required=True, help="UTC hour, e.g. 2026-11-30T00:00")
    parser.add_argument("--window-minutes", type=int, default=30)
    parser.add_argument("--shared-frames", type=int, default=0, metavar="N", help="compare own and shared frame reads, N times each")
    args = parser.parse_args()
    start = pd.Timestamp(args.hour).to_pydatetime()
    end = (pd.Timestamp(args.hour) + pd.Timedelta(hours=1)).to_pydatetime()
    if args.shared_frames:
        return shared_frames(args.warehouse, start, end, args.shared_frames)
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
        with transaction(con):   # the runs' first minutes, as the training baselines keep them
            sql.run(con, "baselines/run_starts", {"start": start, "end": end})
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


def shared_frames(warehouse: str, start, end, repeats: int) -> int:
    """Per check step (asset): CPU seconds of its signals with their own reads and with shared reads."""
    rows = []
    with WarehouseResource(path=warehouse).connect() as con:
        for asset, signals in signals_by_step().items():
            cpu = {"own": [], "shared": []}
            found = {}
            for _ in range(repeats):
                for way in ("own", "shared"):
                    frames = {} if way == "shared" else None
                    t0 = time.process_time()
                    found[way] = [evaluate_judged(con, s, start, end, frames=frames)[1].drop(columns="evidence")
                                  for s in signals]
                    cpu[way].append(time.process_time() - t0)
            for own, shared in zip(found["own"], found["shared"]):
                pd.testing.assert_frame_equal(own, shared)
            own, shared = min(cpu["own"]), min(cpu["shared"])
            rows.append({"check step": f"{asset}_checks ({len(signals)} signals)", "own reads CPU-s": round(own, 2),
                         "shared reads CPU-s": round(shared, 2), "ratio": round(shared / own, 2) if own else None})
    table = pd.DataFrame(rows)
    total = {"check step": "all", "own reads CPU-s": round(table["own reads CPU-s"].sum(), 2),
             "shared reads CPU-s": round(table["shared reads CPU-s"].sum(), 2)}
    total["ratio"] = round(total["shared reads CPU-s"] / total["own reads CPU-s"], 2)
    table = pd.concat([table, pd.DataFrame([total])], ignore_index=True)
    print(f"# check steps, hour {start:%Y-%m-%dT%H:%M} UTC: best of {repeats} alternating runs each way, same findings")
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    print(table.to_markdown(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
