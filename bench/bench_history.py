"""History benchmark (issue 15): does a week of history slow the ticks down?

    python bench/bench_history.py [--scenario FILE] [--home DIR] [--raw-days 3] [--out FILE.json]

Simulates the scenario (default `bench/scenarios/history_256_7d.yaml`: 7 days at 256 GPUs) unless
`--home` already holds it, then walks its hours oldest first as the service does: the `detect` job
for the hour, then `fold_incidents` (what the run-status sensor starts after each detect run), both
in this process on the home's Dagster instance. At the end of each simulated day it runs the daily
maintenance's own functions with that day's end as "now" (retention, raw-zone hours older than
`compress_after_days` to zstd, compaction), so the raw zone and the warehouse age as a service's would.

Per hour it records wall and CPU seconds (this process's, DuckDB's threads included) of the detect
run and of the fold; per day the warehouse and raw-zone sizes. It prints a table per day and the
ratios of day 7 to day 1 (targets: detect CPU per partition <= 1.1, fold flat).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEFAULT = REPO / "bench" / "scenarios" / "history_256_7d.yaml"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def timed(fn, *args, **kwargs):
    """(what `fn` returns, wall s, CPU s of this process)."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - w0, time.process_time() - c0


def tree_bytes(root: Path, pattern: str = "*") -> int:
    return sum(f.stat().st_size for f in root.rglob(pattern) if f.is_file())


def maintain(home: Path, now, settings) -> dict:
    """The daily maintenance asset's steps, with the simulated day's end as now."""
    from orchestration.home import raw_root, warehouse_path
    from orchestration.maintenance import apply_retention, compact, compress, compressible_hours
    from orchestration.warehouse import warehouse_for

    with warehouse_for(home).connect() as con:
        deleted = apply_retention(con, now, settings.raw_days, settings.minutes_days)
        files = compressible_hours(raw_root(home), con, now, settings.compress_after_days)
    saved = sum(compress(path) for path in files)
    compacted = compact(warehouse_path(home))
    return {"rows_deleted": sum(deleted.values()), "files_compressed": len(files), "bytes_saved": saved,
            "compacted": compacted}


def walk(home: Path, scenario) -> tuple[list[dict], list[dict]]:
    from orchestration.definitions import build_definitions
    from orchestration.home import raw_root, warehouse_path
    from orchestration.instance import open_instance
    from orchestration.partitions import hour_keys
    from orchestration.service_config import load_service_settings

    settings = load_service_settings(home).retention
    defs = build_definitions(home)
    instance = open_instance()
    detect, fold = defs.resolve_job_def("detect"), defs.resolve_job_def("fold_incidents")
    hours, days = [], []
    keys = hour_keys(scenario.start, scenario.end)
    for i, key in enumerate(keys):
        d_run, d_wall, d_cpu = timed(detect.execute_in_process, partition_key=key, instance=instance,
                                     run_config=QUIET, raise_on_error=False)
        f_run, f_wall, f_cpu = timed(fold.execute_in_process, instance=instance, run_config=QUIET, raise_on_error=False)
        day = i // 24 + 1
        hours.append({"partition": key, "day": day, "detect_s": d_wall, "detect_cpu_s": d_cpu, "fold_s": f_wall,
                      "fold_cpu_s": f_cpu, "success": d_run.success and f_run.success})
        print(f"  day {day} {key}  detect {d_wall:.1f} s ({d_cpu:.1f} CPU-s)  fold {f_wall:.1f} s ({f_cpu:.1f} CPU-s)",
              file=sys.stderr, flush=True)
        if (i + 1) % 24 == 0 or i + 1 == len(keys):
            now = scenario.start + timedelta(hours=i + 1)
            done, m_wall, m_cpu = timed(maintain, home, now, settings)
            days.append({"day": day, **done, "maintenance_s": m_wall, "maintenance_cpu_s": m_cpu,
                         "warehouse_mib": warehouse_path(home).stat().st_size / 2**20,
                         "raw_plain_mib": tree_bytes(raw_root(home), "*.jsonl") / 2**20,
                         "raw_zstd_mib": tree_bytes(raw_root(home), "*.zst") / 2**20})
            print(f"  end of day {day}: {days[-1]}", file=sys.stderr, flush=True)
    return hours, days


def report(hours: pd.DataFrame, days: pd.DataFrame) -> str:
    per_day = hours.groupby("day").agg(partitions=("partition", "size"), detect_cpu_p50=("detect_cpu_s", "median"),
                                       detect_wall_p50=("detect_s", "median"), detect_cpu_max=("detect_cpu_s", "max"),
                                       fold_cpu_p50=("fold_cpu_s", "median"), fold_wall_p50=("fold_s", "median"),
                                       failed=("success", lambda s: int((~s).sum())))
    table = per_day.join(days.set_index("day")[["rows_deleted", "files_compressed", "warehouse_mib", "raw_plain_mib",
                                                "raw_zstd_mib", "maintenance_cpu_s"]])
    first, last = table.iloc[0], table.iloc[-1]
    ratios = {"detect CPU p50, last day / day 1": last["detect_cpu_p50"] / first["detect_cpu_p50"],
              "fold CPU p50, last day / day 1": last["fold_cpu_p50"] / first["fold_cpu_p50"]}
    return (table.round(2).to_markdown() + "\n\n" + "\n".join(f"- {k}: {v:.2f}" for k, v in ratios.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(DEFAULT))
    parser.add_argument("--home", help="a home to (re)use; default a temporary one (removed after)")
    parser.add_argument("--raw-days", type=float, default=3.0,
                        help="retention.raw_days of the home (default 3, so the week shows raw rows bounded)")
    parser.add_argument("--out", help="also write the measurements as JSON here")
    args = parser.parse_args(argv)
    from orchestration.cli import use_home
    from simulator import load_scenario

    scenario = load_scenario(Path(args.scenario))
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="goodput-history-"))
    try:
        if not (home / "raw").exists():
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", "orchestration.cli", "simulate", "--scenario", str(args.scenario),
                            "--out", str(home)], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
            print(f"simulated in {time.monotonic() - t0:.0f} s", file=sys.stderr)
        (home / "service.yaml").write_text(yaml.safe_dump({"retention": {"raw_days": args.raw_days}}))
        use_home(str(home))
        hours, days = walk(home, scenario)
        text = report(pd.DataFrame(hours), pd.DataFrame(days))
        print(f"# History: {scenario.name}, retention.raw_days {args.raw_days} "
              f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n\n{text}")
        if args.out:
            Path(args.out).write_text(json.dumps({"hours": hours, "days": days}, default=str, indent=1))
        return 0
    finally:
        if not args.home:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
