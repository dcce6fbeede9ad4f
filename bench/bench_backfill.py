"""Backfill benchmark: process every hour of a long scenario through the real Definitions, as a backfill.

    python bench/bench_backfill.py [--quick] [--scenario FILE] [--home DIR] [--out FILE.json]
    python bench/bench_backfill.py --compare [--quick]     # `goodput backfill` vs the demo's loop, side by side

Simulates the scenario in a subprocess (unless --home already holds it), then runs the `detect`
job once per hourly partition on the home's Dagster instance, oldest first, the way
`orchestration.commands.common.run_pipeline` (and a Dagster backfill) does, then `fold_incidents` once. Prints
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
COMPARE = REPO / "bench" / "scenarios" / "backfill_1024_3h.yaml"
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
    parser.add_argument("--compare", action="store_true",
                        help="time `goodput backfill --hours-with-data` against the demo's in-process loop on one raw zone "
                             "(default scenario: 3 h at 1,024 GPUs)")
    args = parser.parse_args(argv)
    from simulator import load_scenario

    path = Path(args.scenario) if args.scenario else (QUICK if args.quick else COMPARE if args.compare else DEFAULT)
    scenario = load_scenario(path)
    if scenario.end > datetime.now(timezone.utc) + timedelta(hours=1):
        # hourly partitions exist only up to the hour in progress (end_offset=1)
        print(f"bench_backfill: {path.name} ends {scenario.end:%Y-%m-%d %H:%M} UTC, after the current hour; "
              "move its start into the past", file=sys.stderr)
        return 2
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="goodput-backfill-"))
    try:
        return (_compare if args.compare else _measure)(args, path, scenario, home)
    finally:
        if not args.home:  # tens of GB at the default size
            shutil.rmtree(home, ignore_errors=True)


def _measure(args, path: Path, scenario, home: Path) -> int:
    from orchestration.commands.common import use_home
    from orchestration.config.home import warehouse_path
    from orchestration.storage.warehouse import WarehouseResource, remove_warehouse

    simulate_s = 0.0
    if not (home / "raw").exists():
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "orchestration.cli", "simulate", "--scenario", str(path),
                        "--out", str(home)], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        simulate_s = time.monotonic() - t0
    remove_warehouse(warehouse_path(home))  # a backfill from an empty warehouse (file, WAL and the home's marker)
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


# -- `goodput backfill` against the demo's loop ---------------------------------------------------
DEMO_LOOP = """
import sys
from datetime import datetime
from orchestration.commands.common import run_pipeline, use_home
home = use_home(sys.argv[1])
run_pipeline(home, datetime.fromisoformat(sys.argv[2]), datetime.fromisoformat(sys.argv[3]), progress=lambda _l: None)
"""


def _timed(command: list[str], home: Path) -> dict:
    """Run one way of processing the home's raw zone from an empty warehouse, in a child process
    (both pay the same imports); wall and CPU seconds (the child's user + system, DuckDB's threads too)."""
    from orchestration.storage.warehouse import remove_warehouse

    remove_warehouse(home / "warehouse.duckdb")   # the file, its WAL and the home's marker
    shutil.rmtree(home / "alerts", ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL, env={**__import__("os").environ,
                   "PYTHONPATH": str(REPO)})
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": after.ru_maxrss / 1024}


def _compare(args, path: Path, scenario, home: Path) -> int:
    from orchestration.config.home import warehouse_path
    from orchestration.storage.warehouse import WarehouseResource

    if not (home / "raw").exists():
        subprocess.run([sys.executable, "-m", "orchestration.cli", "simulate", "--scenario", str(path), "--out", str(home)],
                       cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    hours = len(list(pd.date_range(scenario.start, scenario.end, freq="h", inclusive="left")))
    goodput = [sys.executable, "-m", "orchestration.cli"]
    ways = {
        "goodput backfill --hours-with-data": goodput + ["backfill", "--hours-with-data", "--home", str(home)],
        "demo loop (commands.common.run_pipeline)": [sys.executable, "-c", DEMO_LOOP, str(home), scenario.start.isoformat(),
                                         scenario.end.isoformat()],
    }
    rows, counts = [], {}
    for name, command in ways.items():
        print(f"  {name} ...", file=sys.stderr, flush=True)
        m = _timed(command, home)
        with WarehouseResource(path=str(warehouse_path(home))).connect(read_only=True) as con:
            counts[name] = con.execute("SELECT (SELECT count(*) FROM training_steps), (SELECT count(*) FROM gpu_samples), "
                                       "(SELECT count(*) FROM incidents)").fetchone()
        rows.append({"way": name, "hours": hours, "wall s": f"{m['wall_s']:.0f}", "CPU s": f"{m['cpu_s']:.0f}",
                     "hours per minute": f"{hours / (m['wall_s'] / 60):.2f}",
                     "CPU s per hour": f"{m['cpu_s'] / hours:.0f}", "peak RSS MiB (largest child so far)": f"{m['peak_rss_mib']:,.0f}",
                     "rows (steps, GPU samples, incidents)": ", ".join(f"{n:,}" for n in counts[name]), **{"_m": m}})
    ratio = rows[1]["_m"]["wall_s"] / rows[0]["_m"]["wall_s"]
    print(f"# goodput backfill vs the demo loop, {path.name} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    print(pd.DataFrame([{k: v for k, v in r.items() if k != "_m"} for r in rows]).to_markdown(index=False, disable_numparse=True))
    print(f"\nspeed ratio (goodput backfill / demo loop, hours per minute): {ratio:.2f}; same tables: "
          f"{len(set(counts.values())) == 1}")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "ratio": ratio, "counts": counts}, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
