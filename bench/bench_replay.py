"""Replay benchmark: detection delay as a user sees it, under the real schedule, per tier.

    python bench/bench_replay.py [--quick] [--scenario FILE ...] [--schedule NAME] [--out FILE.json]

Each scenario is simulated into a staging folder and replayed into a fresh home in simulated time
(orchestration/evaluation/replay.py): the raw zone grows as each source's data arrives (GPU samples 10 s after
their time, step records 2 s), each staged checkpoint folder appears in the home with the
`checkpoint_saved` line that names it (damage included), the `detect` schedule's cron ticks are evaluated with the real
schedule and their run requests executed through the real `detect` job on the home's Dagster
instance, then `fold_incidents`. A fault's delay is from its onset to the end of the first tick
whose runs produced an incident that the shared scorer matches to it (tick time + the runs' wall
time). Prints the delay per tier (median, max) against the targets, per fault type, and the ticks'
own run times, with the machine and its load.

`--quick` replays bench/scenarios/replay_quick.yaml (one hang, 13 one-minute ticks; what CI runs).
The default, bench/scenarios/replay_tiers.yaml, has training, GPU, checkpoint (a bit flip on a real
safetensors checkpoint, an overdue save) and serving faults (latency, queue, errors on an endpoint)
of every tier in 2 hours (135 ticks).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import resource
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

QUICK = [REPO / "bench" / "scenarios" / "replay_quick.yaml"]
FULL = [REPO / "bench" / "scenarios" / "replay_tiers.yaml"]


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else platform.processor()
    import dagster
    import duckdb

    return (f"{os.cpu_count()} CPU cores ({cpu}), CPython {platform.python_version()}, "
            f"DuckDB {duckdb.__version__}, Dagster {dagster.__version__}")


def load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def tier_fault_types(tier: str) -> set[str]:
    """The simulator fault types that a signal of `tier` (its catalogue tier) is meant to catch."""
    import checks.signals  # noqa: F401  (registers the signals)
    from checks.registry import REGISTRY

    return {fault for signal in REGISTRY if signal.tier == tier for fault in signal.fault_types}


def windows(truth: pd.DataFrame, types: set[str], before: float, after: float) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """[onset - before, onset + after] (minutes) around each fault of `types`, overlapping ones merged."""
    spans = sorted((f.onset - pd.Timedelta(minutes=before), f.onset + pd.Timedelta(minutes=after))
                   for f in truth.itertuples() if f.type in types)
    merged: list[list[pd.Timestamp]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def run_one(path: Path, root: Path, sensor: str, tail: float, window_tier: str | None = None,
            before: float = 2.0, after: float = 6.0) -> dict:
    from orchestration.commands.common import use_home
    from orchestration.evaluation.replay import replay
    from orchestration.evaluation.scoring import load_truth
    from simulator import load_scenario, simulate

    scenario = load_scenario(path)
    staging, home = root / f"{scenario.name}-staging", root / f"{scenario.name}-home"
    t0 = time.monotonic()
    simulate(scenario, staging)
    simulated = time.monotonic() - t0
    use_home(str(home))  # the home's own persistent Dagster instance, as `goodput replay` uses
    load_before = load()
    t0, cpu0 = time.monotonic(), _cpu()
    spans, evaluate = [], None
    if window_tier:   # only the sensor ticks around the tier's faults; the data between arrives at the next one
        spans = windows(load_truth(staging / "ground_truth.jsonl"), tier_fault_types(window_tier), before, after)

        def evaluate(tick) -> bool:
            moment = pd.Timestamp(tick).tz_convert("UTC").tz_localize(None)
            return any(lo <= moment <= hi for lo, hi in spans)

    def progress(i: int, total: int, line: str) -> None:
        print(f"  [{i}/{total}] {line}", file=sys.stderr, flush=True)

    result = replay(staging, home, scenario.start, scenario.end, sensor_name=sensor,
                    tail=timedelta(minutes=tail), progress=progress, evaluate=evaluate)
    return {"name": scenario.name, "path": str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path),
            "result": result, "simulate_s": simulated, "replay_s": time.monotonic() - t0, "replay_cpu_s": _cpu() - cpu0,
            "load_before": load_before, "load_after": load(), "windows": spans}


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the runs execute in this process)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def delay_parts(result, tier: str) -> pd.DataFrame:
    """Each detected fault of `tier`, its delay split into parts that add up to it:
    evidence (the incident's `opened`, data time, minus the onset: the signal's own window, and for
    minute-bucketed signals the rest of the last evidence minute), the wait from then to the first
    evaluated sensor tick, ticks that passed without seeing it (extra: data latency past the tick,
    a run in flight), and that tick's runs (detect + fold; wall, and CPU beside it). Data latency
    (<= 10 s) lies inside the minute bucket: the minute's last GPU sample (:50) arrives at :00."""
    ticks = result.ticks.assign(tick=lambda f: pd.to_datetime(f["tick"], utc=True).dt.tz_localize(None))
    ticks["seen"] = ticks["tick"] + pd.to_timedelta(ticks["wall_s"], unit="s")
    incidents = result.incidents
    rows = []
    for fault in result.faults[result.faults["tier"] == tier].itertuples():
        mine = incidents[(incidents["first_seen"] == fault.first_seen) & incidents["signal"].isin(fault.signals)]
        opened = pd.Timestamp(mine["opened"].min())
        at = ticks.iloc[(ticks["seen"] - fault.first_seen).abs().argmin()]
        earliest = min(ticks["tick"][ticks["tick"] >= opened].min(), at["tick"])   # the first evaluated tick after the evidence
        rows.append({
            "fault": f"{fault.type} {fault.entity}", "onset": fault.onset.strftime("%H:%M:%S"),
            "signals": ", ".join(fault.signals),
            "evidence (min)": (opened - fault.onset).total_seconds() / 60,
            "wait for tick (min)": (earliest - opened).total_seconds() / 60,
            "extra ticks (min)": (at["tick"] - earliest).total_seconds() / 60,
            "runs wall (min)": at["wall_s"] / 60, "runs CPU (min)": at["cpu_s"] / 60,
            "delay (min)": fault.delay_s / 60,
            "delay, runs at CPU time (min)": (fault.delay_s - at["wall_s"] + at["cpu_s"]) / 60,
        })
    return pd.DataFrame(rows)


def not_replayed() -> str:
    """The parts of a deployment's delay the replay does not execute (it runs the sensor's requests in
    process, then the fold, at once): read from the code, so the figures follow it."""
    import re

    from orchestration.config import home as home_module
    from orchestration.sensors.alerts import fold_incidents_after_detect, incident_alerts
    from orchestration.sensors.raw import raw_zone_detect

    dequeue = re.search(r"dequeue_interval_seconds:\s*(\d+)", Path(home_module.__file__).read_text())
    return (f"raw-zone sensor every {raw_zone_detect.minimum_interval_seconds} s (the replay ticks each minute, "
            f"{CADENCE_NOTE}); run queue dequeued every {dequeue.group(1) if dequeue else '?'} s (detect, then fold); "
            f"fold sensor every {fold_incidents_after_detect.minimum_interval_seconds} s; "
            f"alert sensor every {incident_alerts.minimum_interval_seconds} s; and each run's process start")


CADENCE_NOTE = "so its wait for a tick is up to twice the daemon's"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one tiny scenario (seconds; CI)")
    parser.add_argument("--scenario", action="append", help="scenario file(s) (default: bench/scenarios/replay_tiers.yaml)")
    parser.add_argument("--sensor", default="raw_zone_detect", help="the sensor to replay")
    parser.add_argument("--tail", type=float, default=15.0, help="minutes to keep ticking after each scenario ends")
    parser.add_argument("--keep", help="keep the staging folders and homes here (default: a temporary folder)")
    parser.add_argument("--out", help="write the tables as JSON here")
    parser.add_argument("--windows", metavar="TIER", help="evaluate only the sensor ticks around the faults a signal of "
                        "this tier catches (e.g. SEV1): the same delays for those faults, in a fraction of the time")
    parser.add_argument("--before", type=float, default=2.0, help="--windows: minutes before each onset")
    parser.add_argument("--after", type=float, default=6.0, help="--windows: minutes after each onset")
    parser.add_argument("--parts", default="SEV1", help="the tier whose delays are split into their parts")
    args = parser.parse_args()

    paths = [Path(p) for p in args.scenario] if args.scenario else (QUICK if args.quick else FULL)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="goodput-bench-replay-"))
    # the code location's partitions start from GOODPUT_HOME's raw zone when it loads: load it for the
    # first replay home (empty, as every home a replay grows), never for a GOODPUT_HOME inherited from the caller
    from orchestration.commands.common import use_home
    from simulator import load_scenario

    use_home(str(root / f"{load_scenario(paths[0]).name}-home"))
    from orchestration.evaluation.replay import fault_type_table, tier_table

    runs = [run_one(p, root, args.sensor, 1.0 if args.quick else args.tail, args.windows, args.before, args.after)
            for p in paths]
    with open(root / "replay_runs.pickle", "wb") as handle:   # the results, to report again without replaying
        pickle.dump(runs, handle)

    faults = pd.concat([r["result"].faults.assign(scenario=r["name"]) for r in runs], ignore_index=True)
    ticks = pd.concat([r["result"].ticks.assign(scenario=r["name"]) for r in runs], ignore_index=True)
    first = runs[0]["result"]
    tiers, types = tier_table(faults), fault_type_table(faults)
    summary = pd.DataFrame([{
        "scenario": r["name"], "file": r["path"], "ticks": len(r["result"].ticks),
        "detect runs": int(r["result"].ticks["runs"].sum()),
        "s per tick p50": round(float(r["result"].ticks["wall_s"].median()), 1),
        "s per tick max": round(float(r["result"].ticks["wall_s"].max()), 1),
        "replay s": round(r["replay_s"]), "replay CPU s": round(r["replay_cpu_s"]), "simulate s": round(r["simulate_s"], 1),
        "faults": len(r["result"].faults), "detected": int(r["result"].faults["tier"].notna().sum()),
        "incidents": len(r["result"].incidents),
        "false alarms": int(r["result"].incidents["false_alarm"].sum()),
    } for r in runs])

    print(f"# Replay under the real sensor: {first.schedule} ({first.cron})")
    print(f"machine: {machine()}; {runs[0]['load_before']} before, {runs[-1]['load_after']} after")
    print("data latency: " + ", ".join(f"{k} {v:g} s" for k, v in first.latency.items()))
    print("\n## Scenarios\n")
    print(summary.to_markdown(index=False))
    print("\n## Delay from fault onset to the first incident a user sees, per tier\n")
    print(tiers.to_markdown(index=False, floatfmt=".1f"))
    print("\n## Per fault type\n")
    print(types.to_markdown(index=False, floatfmt=".1f"))
    print("\n## Per fault\n")
    per_fault = faults.assign(
        onset=faults["onset"].dt.strftime("%H:%M"),
        seen=faults["first_seen"].dt.strftime("%H:%M:%S").fillna("-"),
        delay_min=(faults["delay_s"] / 60).round(1),
        signals=faults["signals"].map(", ".join))[["scenario", "type", "entity", "onset", "tier", "signals", "seen", "delay_min"]]
    print(per_fault.rename(columns={"delay_min": "delay (min)"}).to_markdown(index=False))
    parts = pd.concat([delay_parts(r["result"], args.parts).assign(scenario=r["name"]) for r in runs], ignore_index=True)
    if not parts.empty:
        print(f"\n## {args.parts} delay in its parts\n")
        print(parts.to_markdown(index=False, floatfmt=".2f"))
        print(f"\n{args.parts} delay p50 {parts['delay (min)'].median():.2f} min, max {parts['delay (min)'].max():.2f}; "
              f"with each tick's runs at their CPU time (a quiet machine): p50 "
              f"{parts['delay, runs at CPU time (min)'].median():.2f}, max {parts['delay, runs at CPU time (min)'].max():.2f}")
    for r in runs:
        if r["windows"]:
            print(f"{r['name']}: ticks evaluated only in " + ", ".join(f"{lo:%H:%M:%S}-{hi:%H:%M:%S}" for lo, hi in r["windows"]))
    print(f"not executed by the replay (a deployment adds them): {not_replayed()}")
    if args.out:
        Path(args.out).write_text(json.dumps({
            "schedule": first.schedule, "cron": first.cron, "machine": machine(),
            "load": [r["load_before"] for r in runs] + [runs[-1]["load_after"]],
            "summary": json.loads(summary.to_json(orient="records")),
            "tiers": json.loads(tiers.to_json(orient="records")),
            "delay_parts": json.loads(parts.to_json(orient="records")) if not parts.empty else [],
            "fault_types": json.loads(types.to_json(orient="records")),
            "faults": json.loads(faults.to_json(orient="records", date_format="iso")),
            "ticks": json.loads(ticks.to_json(orient="records", date_format="iso")),
        }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
