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

Side by side: a shared machine's load moves CPU-seconds by tens of percent over the hours the walk
takes, so the walk's day-1 and day-7 figures are measured under different loads. At the end of day 1
the home is copied (warehouse, Dagster instance, that day's last raw hour); after the walk the last
hour of day 1 (on that copy) and of day 7 (on the week-old home) are run again, alternately, each in
a fresh process reading its hour whole (`GOODPUT_INGEST_WHOLE_HOUR=1`, the same work on both), then
folded. Their ratio is the figure that holds under load (`--repeats`, default 3 each).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
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
    from orchestration.config.home import raw_root, warehouse_path
    from orchestration.maintenance import apply_retention, compact, compress, compressible_hours
    from orchestration.storage.warehouse import warehouse_for

    with warehouse_for(home).connect() as con:
        deleted = apply_retention(con, now, settings.raw_days, settings.minutes_days)
        files = compressible_hours(raw_root(home), con, now, settings.compress_after_days)
    saved = sum(compress(path) for path in files)
    compacted = compact(warehouse_path(home))
    return {"rows_deleted": sum(deleted.values()), "files_compressed": len(files), "bytes_saved": saved,
            "compacted": compacted}


def snapshot_day(home: Path, copy: Path, key: str) -> None:
    """Copy `home` as it stands (warehouse, Dagster instance, settings) to `copy`, with only the raw
    hour `key` of the raw zone: what re-running that hour later needs, as it was then."""
    from orchestration.config.home import raw_root
    from orchestration.storage.raw_zone import hour_dir

    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(home, copy, ignore=lambda d, names: ["raw"] if Path(d) == home else [])
    hour = datetime.strptime(key, "%Y-%m-%d-%H:%M")
    for source in (d.name for d in raw_root(home).iterdir() if d.is_dir()):
        folder = hour_dir(raw_root(home), source, hour)
        if folder.is_dir():
            shutil.copytree(folder, copy / folder.relative_to(home))


def rerun(home: Path, key: str) -> dict:
    """Run the hour `key` again on `home`, read whole, then fold (a fresh process: `--rerun`)."""
    out = subprocess.run([sys.executable, __file__, "--rerun", str(home), "--partition", key], cwd=REPO, check=True,
                         capture_output=True, text=True, env={**os.environ, "GOODPUT_INGEST_WHOLE_HOUR": "1"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def rerun_here(home: Path, key: str) -> dict:
    """In this process: the detect run of `key` and a fold, timed (imports and set-up excluded)."""
    from orchestration.commands.common import use_home

    use_home(str(home))
    return run_hour(*jobs(home), key)


def jobs(home: Path) -> tuple:
    """(detect job, fold job, the home's instance); GOODPUT_HOME must point at `home` first."""
    from orchestration.definitions import build_definitions
    from orchestration.storage.instance import open_instance

    defs = build_definitions(home)
    return defs.resolve_job_def("detect"), defs.resolve_job_def("fold_incidents"), open_instance()


def run_hour(detect, fold, instance, key: str) -> dict:
    """What the service does for an hour with new data: its detect run, then a fold; each timed."""
    d_run, d_wall, d_cpu = timed(detect.execute_in_process, partition_key=key, instance=instance, run_config=QUIET,
                                 raise_on_error=False)
    f_run, f_wall, f_cpu = timed(fold.execute_in_process, instance=instance, run_config=QUIET, raise_on_error=False)
    return {"detect_s": d_wall, "detect_cpu_s": d_cpu, "fold_s": f_wall, "fold_cpu_s": f_cpu,
            "success": d_run.success and f_run.success}


def side_by_side(first: tuple[Path, str], last: tuple[Path, str], repeats: int) -> pd.DataFrame:
    """The two hours run again alternately, `repeats` times each (see the module's docstring)."""
    rows = []
    for r in range(repeats):
        for label, (home, key) in (("day 1", first), ("last day", last)):
            rows.append({"repeat": r + 1, "hour": label, "partition": key, **rerun(home, key)})
            print(f"  side by side {label} {key}: {rows[-1]}", file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def side_report(rows: pd.DataFrame) -> str:
    medians = rows.groupby("hour")[["detect_cpu_s", "detect_s", "fold_cpu_s", "fold_s"]].median()
    ratio = medians.loc["last day"] / medians.loc["day 1"]
    return ("Side by side (alternating fresh processes, the hour read whole, medians):\n\n"
            + medians.round(2).to_markdown() + "\n\n"
            + f"- detect CPU, last day / day 1: {ratio['detect_cpu_s']:.3f}\n"
            + f"- fold CPU, last day / day 1: {ratio['fold_cpu_s']:.3f}\n"
            + f"- every run succeeded: {bool(rows['success'].all())}")


def walk(home: Path, scenario, day1_copy: Path | None = None) -> tuple[list[dict], list[dict]]:
    from orchestration.config.home import raw_root, warehouse_path
    from orchestration.config.service_config import load_service_settings
    from orchestration.partitions import hour_keys

    settings = load_service_settings(home).retention
    detect, fold, instance = jobs(home)
    hours, days = [], []
    keys = hour_keys(scenario.start, scenario.end)
    for i, key in enumerate(keys):
        day = i // 24 + 1
        hours.append({"partition": key, "day": day, **run_hour(detect, fold, instance, key)})
        h = hours[-1]
        print(f"  day {day} {key}  detect {h['detect_s']:.1f} s ({h['detect_cpu_s']:.1f} CPU-s)  "
              f"fold {h['fold_s']:.1f} s ({h['fold_cpu_s']:.1f} CPU-s)", file=sys.stderr, flush=True)
        if (i + 1) % 24 == 0 or i + 1 == len(keys):
            now = scenario.start + timedelta(hours=i + 1)
            done, m_wall, m_cpu = timed(maintain, home, now, settings)
            days.append({"day": day, **done, "maintenance_s": m_wall, "maintenance_cpu_s": m_cpu,
                         "warehouse_mib": warehouse_path(home).stat().st_size / 2**20,
                         "raw_plain_mib": tree_bytes(raw_root(home), "*.jsonl") / 2**20,
                         "raw_zstd_mib": tree_bytes(raw_root(home), "*.zst") / 2**20})
            print(f"  end of day {day}: {days[-1]}", file=sys.stderr, flush=True)
            if day == 1 and day1_copy is not None:
                snapshot_day(home, day1_copy, key)
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
    parser.add_argument("--repeats", type=int, default=3, help="side-by-side re-runs of each hour (0: none)")
    parser.add_argument("--rerun", help=argparse.SUPPRESS)   # one side-by-side measurement, in its own process
    parser.add_argument("--partition", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rerun:
        print(json.dumps(rerun_here(Path(args.rerun), args.partition)))
        return 0
    from orchestration.commands.common import use_home
    from simulator import load_scenario

    scenario = load_scenario(Path(args.scenario))
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="goodput-history-"))
    try:
        if not (home / "raw").exists():
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", "orchestration.cli", "simulate", "--scenario", str(args.scenario),
                            "--out", str(home)], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
            print(f"simulated in {time.monotonic() - t0:.0f} s", file=sys.stderr)
        start = pd.Timestamp(scenario.start).tz_convert("UTC").strftime("%Y-%m-%d-%H:%M")
        (home / "service.yaml").write_text(yaml.safe_dump({"retention": {"raw_days": args.raw_days},
                                                           "partitions": {"start": start}}))
        use_home(str(home))
        day1 = home.parent / f"{home.name}-day1"
        hours, days = walk(home, scenario, day1 if args.repeats else None)
        text = report(pd.DataFrame(hours), pd.DataFrame(days))
        if args.repeats and day1.exists():
            keys = [h["partition"] for h in hours]
            side = side_by_side((day1, keys[23]), (home, keys[-1]), args.repeats)
            text += "\n\n" + side_report(side)
            hours += [{"side_by_side": True, **r} for r in side.to_dict("records")]
        print(f"# History: {scenario.name}, retention.raw_days {args.raw_days} "
              f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n\n{text}")
        if args.out:
            Path(args.out).write_text(json.dumps({"hours": hours, "days": days}, default=str, indent=1))
        return 0
    finally:
        if not args.home:
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(home.parent / f"{home.name}-day1", ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
