"""Backfill benchmark: process every hour of a long scenario through the real Definitions, as a backfill.

    python bench/bench_backfill.py [--quick] [--scenario FILE] [--home DIR] [--out FILE.json]

Simulates the scenario in a subprocess (unless --home already holds it), then runs the `detect`
job once per hourly partition on the home's Dagster instance, oldest first, the way
`orchestration.cli.run_pipeline` (and a Dagster backfill) does, then `fold_incidents` once. Prints
the time per partition (median, max), the total, the rows in the warehouse, and this process's peak
RSS (DuckDB's native memory included). The default scenario is 24 hours of a 1,024-rank run
(`bench/scenarios/backfill_1024_24h.yaml`); `--quick` backfills the 1-hour CI scenario in seconds.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEFAULT = REPO / "bench" / "scenarios" / "backfill_1024_24h.yaml"
QUICK = REPO / "bench" / "scenarios" / "quick.yaml"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def backfill(home: Path, start, end) -> list[dict]:
    import dagster as dg

    from orchestration.definitions import build_definitions
    from orchestration.partitions import hour_keys

    defs = build_definitions(home)
    instance = dg.DagsterInstance.get()
    detect = defs.resolve_job_def("detect")
    rows = []
    for key in hour_keys(start, end):
        t0 = time.perf_counter()
        result = detect.execute_in_process(partition_key=key, instance=instance, run_config=QUIET)
        rows.append({"partition": key, "seconds": time.perf_counter() - t0, "success": result.success,
                     "peak_rss_mib": peak_rss_mib()})
        print(f"  detect {key}  {rows[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    defs.resolve_job_def("fold_incidents").execute_in_process(instance=instance, run_config=QUIET)
    rows.append({"partition": "fold_incidents", "seconds": time.perf_counter() - t0, "success": True,
                 "peak_rss_mib": peak_rss_mib()})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the 1-hour CI scenario (seconds)")
    parser.add_argument("--scenario", help="scenario file (default: 24 h at 1,024 GPUs)")
    parser.add_argument("--home", help="a home to (re)use; default a temporary one")
    parser.add_argument("--out", help="also write the measurements as JSON here")
    args = parser.parse_args(argv)
    from simulator import load_scenario

    path = Path(args.scenario) if args.scenario else (QUICK if args.quick else DEFAULT)
    scenario = load_scenario(path)
    if scenario.end > datetime.now(timezone.utc) + timedelta(hours=1):
        # hourly partitions exist only up to the hour in progress (end_offset=1)
        print(f"bench_backfill: {path.name} ends {scenario.end:%Y-%m-%d %H:%M} UTC, after the current hour; "
              "move its start into the past", file=sys.stderr)
        return 2
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="goodput-backfill-"))
    try:
        return _measure(args, path, scenario, home)
    finally:
        if not args.home:  # tens of GB at the default size
            shutil.rmtree(home, ignore_errors=True)


def _measure(args, path: Path, scenario, home: Path) -> int:
    from orchestration.cli import use_home
    from orchestration.home import warehouse_path
    from orchestration.warehouse import WarehouseResource

    simulate_s = 0.0
    if not (home / "raw").exists():
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "orchestration.cli", "simulate", "--scenario", str(path),
                        "--out", str(home)], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        simulate_s = time.monotonic() - t0
    for stale in ("warehouse.duckdb", "warehouse.duckdb.wal"):
        (home / stale).unlink(missing_ok=True)  # a backfill from an empty warehouse
    use_home(str(home))
    t0 = time.monotonic()
    rows = backfill(home, scenario.start, scenario.end)
    total = time.monotonic() - t0
    with WarehouseResource(path=str(warehouse_path(home))).connect(read_only=True) as con:
        counts = dict(zip(("gpu_samples", "training_steps", "incidents"), con.execute(
            "SELECT (SELECT count(*) FROM gpu_samples), (SELECT count(*) FROM training_steps), "
            "(SELECT count(*) FROM incidents)").fetchone()))
    hours = pd.DataFrame([r for r in rows if r["partition"] != "fold_incidents"])
    raw_bytes = sum(f.stat().st_size for f in (home / "raw").rglob("*.jsonl"))
    summary = pd.DataFrame([{
        "scenario": scenario.name, "partitions": len(hours), "raw GB": f"{raw_bytes / 1e9:.1f}",
        "step records": f"{counts['training_steps']:,}", "GPU samples": f"{counts['gpu_samples']:,}",
        "s per partition p50": f"{hours['seconds'].median():.1f}", "max": f"{hours['seconds'].max():.1f}",
        "fold s": f"{rows[-1]['seconds']:.1f}", "backfill total s": f"{total:.0f}",
        "peak RSS MiB": f"{peak_rss_mib():,.0f}", "failed partitions": int((~hours['success']).sum()),
        "simulate s (not part of it)": f"{simulate_s:.0f}",
    }])
    print(f"# Backfill of {path.name} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    print(summary.to_markdown(index=False, disable_numparse=True))
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "counts": counts, "total_seconds": total,
                                              "simulate_seconds": simulate_s, "raw_bytes": raw_bytes,
                                              "peak_rss_mib": peak_rss_mib()}, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
