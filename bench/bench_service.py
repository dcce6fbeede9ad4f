"""Live cost follows the data: `goodput replay` under the raw-zone sensor, per-tick CPU by minute of the hour.

    python bench/bench_service.py [--scenario FILE] [--tail MIN] [--ticks HH:MM-HH:MM,...] [--out FILE.json]

Replays a scenario (default bench/scenarios/replay_tiers.yaml) in simulated time through the real
sensor and jobs (orchestration/evaluation/replay.py) and reports: CPU-seconds per tick at minute 5 and at
minute 55 of each hour (mean of the minutes 3-7 and 53-57; the target ratio is <= 1.2: a tick reads
a minute of new data whether the hour holds 5 or 55 minutes of it), runs per partition per tick
(at most one), and SEV1 delays (p50 <= 2 min, max <= 4 min). `GOODPUT_INGEST_WHOLE_HOUR=1` reads
each hour whole at every tick (the former cost, for comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def minute_costs(ticks, end) -> tuple[float, float]:
    """Mean CPU-s of a tick at minutes 3-7 and at 53-57 of the scenario's hours: ticks that ran a detect
    run, before the scenario's end (the tail's idle ticks, ~0.04 CPU-s, would pull minute 5 down)."""
    import pandas as pd

    at = pd.to_datetime(ticks["tick"])
    ran = ticks[(ticks["runs"] > 0) & (at < pd.Timestamp(end))]
    minute = pd.to_datetime(ran["tick"]).dt.minute
    return ran[minute.between(3, 7)]["cpu_s"].mean(), ran[minute.between(53, 57)]["cpu_s"].mean()


def hourly_costs(ticks, end) -> dict[str, list]:
    """Per hour of the scenario: [minute 5 CPU-s, minute 55 CPU-s, ratio] (`minute_costs`' ticks). The home's
    first hour has nothing before it: its minute-5 ticks read no lookback, which the later hours all do,
    as every hour does in a service that has been running."""
    import pandas as pd

    at = pd.to_datetime(ticks["tick"])
    out = {}
    for hour in sorted(at.dt.floor("h").unique()):
        early, late = minute_costs(ticks[at.dt.floor("h") == hour], end)
        if pd.notna(early) and pd.notna(late) and early:   # the tail after the scenario's end has neither
            out[f"{pd.Timestamp(hour):%H:%M}"] = [round(float(early), 2), round(float(late), 2), round(float(late / early), 3)]
    return out


def chosen_ticks(spec: str | None):
    """`--ticks`' ranges as replay's `evaluate(tick)` (None: every tick). Cheaper than the whole replay when
    only some minutes are compared (two trees side by side); the first tick after a gap catches up."""
    if not spec:
        return None
    ranges = [tuple(part.split("-")) if "-" in part else (part, part) for part in spec.split(",")]
    return lambda tick: any(first <= f"{tick:%H:%M}" <= last for first, last in ranges)


def main() -> int:
    import pandas as pd

    from orchestration.commands.common import use_home
    from orchestration.evaluation.replay import replay, tier_table
    from simulator import load_scenario, simulate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(REPO / "bench" / "scenarios" / "replay_tiers.yaml"))
    parser.add_argument("--tail", type=float, default=5.0)
    parser.add_argument("--keep", help="folder for the staging and home (default: temporary)")
    parser.add_argument("--out")
    parser.add_argument("--ticks", help="evaluate only these ticks, e.g. 00:50-00:59,01:03-01:07 (HH:MM of the "
                                        "scenario's day, inclusive): a tick left out hands its data to the next one")
    args = parser.parse_args()
    scenario = load_scenario(Path(args.scenario))
    root = Path(args.keep or tempfile.mkdtemp(prefix="goodput-bench-service-"))
    staging, home = root / "staging", root / "home"
    simulate(scenario, staging)
    use_home(str(home))
    t0, cpu0 = time.monotonic(), time.process_time()
    result = replay(staging, home, scenario.start, scenario.end, tail=timedelta(minutes=args.tail),
                    evaluate=chosen_ticks(args.ticks),
                    progress=lambda i, n, line: print(f"  [{i}/{n}] {line}", file=sys.stderr, flush=True))
    wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
    ticks = result.ticks.copy()
    early, late = minute_costs(ticks, scenario.end)
    per_partition = max((max(pd.Series(p).value_counts().tolist() or [0]) for p in ticks["partitions"]), default=0)
    sev1 = result.faults[result.faults["tier"] == "SEV1"]["delay_s"] / 60
    summary = {
        "scenario": scenario.name, "ticks": len(ticks), "detect_runs": int(ticks["runs"].sum()),
        "cpu_s_per_tick_min5": round(float(early), 3), "cpu_s_per_tick_min55": round(float(late), 3),
        "ratio_55_over_5": round(float(late / early), 3) if early else None,
        "by_hour_min5_min55_ratio": hourly_costs(ticks, scenario.end),
        "max_runs_per_partition_per_tick": int(per_partition),
        "sev1_delay_p50_min": round(float(sev1.median()), 2) if len(sev1) else None,
        "sev1_delay_max_min": round(float(sev1.max()), 2) if len(sev1) else None,
        "replay_wall_s": round(wall), "replay_cpu_s": round(cpu),
        "whole_hour_ingest": os.environ.get("GOODPUT_INGEST_WHOLE_HOUR", "") == "1",
        "load_average": os.getloadavg(),
    }
    print(f"# Live cost under the raw-zone sensor: {scenario.name}\n")
    print(pd.DataFrame([summary]).T.to_markdown(headers=["", "value"]))
    print("\n" + tier_table(result.faults).to_markdown(index=False, floatfmt=".1f"))
    if args.out:
        Path(args.out).write_text(json.dumps({**summary, "ticks": json.loads(ticks.to_json(orient="records", date_format="iso"))},
                                             indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
