"""Replay benchmark: detection delay as a user sees it, under the real schedule, per tier.

    python bench/bench_replay.py [--quick] [--scenario FILE ...] [--schedule NAME] [--out FILE.json]

Each scenario is simulated into a staging folder and replayed into a fresh home in simulated time
(orchestration/replay.py): the raw zone grows as each source's data arrives (GPU samples 10 s after
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
import platform
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


def run_one(path: Path, root: Path, sensor: str, tail: float) -> dict:
    from orchestration.cli import use_home
    from orchestration.replay import replay
    from simulator import load_scenario, simulate

    scenario = load_scenario(path)
    staging, home = root / f"{scenario.name}-staging", root / f"{scenario.name}-home"
    t0 = time.monotonic()
    simulate(scenario, staging)
    simulated = time.monotonic() - t0
    use_home(str(home))  # the home's own persistent Dagster instance, as `goodput replay` uses
    load_before = load()
    t0 = time.monotonic()

    def progress(i: int, total: int, line: str) -> None:
        print(f"  [{i}/{total}] {line}", file=sys.stderr, flush=True)

    result = replay(staging, home, scenario.start, scenario.end, sensor_name=sensor,
                    tail=timedelta(minutes=tail), progress=progress)
    return {"name": scenario.name, "path": str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path),
            "result": result, "simulate_s": simulated, "replay_s": time.monotonic() - t0,
            "load_before": load_before, "load_after": load()}


def main() -> int:
    from orchestration.replay import fault_type_table, tier_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one tiny scenario (seconds; CI)")
    parser.add_argument("--scenario", action="append", help="scenario file(s) (default: bench/scenarios/replay_tiers.yaml)")
    parser.add_argument("--sensor", default="raw_zone_detect", help="the sensor to replay")
    parser.add_argument("--tail", type=float, default=15.0, help="minutes to keep ticking after each scenario ends")
    parser.add_argument("--keep", help="keep the staging folders and homes here (default: a temporary folder)")
    parser.add_argument("--out", help="write the tables as JSON here")
    args = parser.parse_args()

    paths = [Path(p) for p in args.scenario] if args.scenario else (QUICK if args.quick else FULL)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="goodput-bench-replay-"))
    runs = [run_one(p, root, args.sensor, 1.0 if args.quick else args.tail) for p in paths]

    faults = pd.concat([r["result"].faults.assign(scenario=r["name"]) for r in runs], ignore_index=True)
    ticks = pd.concat([r["result"].ticks.assign(scenario=r["name"]) for r in runs], ignore_index=True)
    first = runs[0]["result"]
    tiers, types = tier_table(faults), fault_type_table(faults)
    summary = pd.DataFrame([{
        "scenario": r["name"], "file": r["path"], "ticks": len(r["result"].ticks),
        "detect runs": int(r["result"].ticks["runs"].sum()),
        "s per tick p50": round(float(r["result"].ticks["wall_s"].median()), 1),
        "s per tick max": round(float(r["result"].ticks["wall_s"].max()), 1),
        "replay s": round(r["replay_s"]), "simulate s": round(r["simulate_s"], 1),
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
    if args.out:
        Path(args.out).write_text(json.dumps({
            "schedule": first.schedule, "cron": first.cron, "machine": machine(),
            "load": [r["load_before"] for r in runs] + [runs[-1]["load_after"]],
            "summary": json.loads(summary.to_json(orient="records")),
            "tiers": json.loads(tiers.to_json(orient="records")),
            "fault_types": json.loads(types.to_json(orient="records")),
            "faults": json.loads(faults.to_json(orient="records", date_format="iso")),
            "ticks": json.loads(ticks.to_json(orient="records", date_format="iso")),
        }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
