"""`goodput replay --scenario FILE`: detection delay as a user would see it, under the real sensor.

Simulates the scenario into a staging folder, then grows the home's raw zone from it as simulated
time passes while the raw-zone sensor ticks once a minute through the real Definitions
(orchestration/evaluation/replay.py). Prints, per tier and per fault type, how long after each fault's onset
an incident for it first appeared, against the targets (SEV1 5 min, SEV2 30 min, SEV3 a day).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from orchestration.commands.common import CliError, use_home


def add_parser(sub) -> None:
    p = sub.add_parser("replay", help="replay a scenario in simulated time under the real sensor; report delays per tier")
    p.add_argument("--scenario", required=True, help="scenario file (YAML or JSON), see docs/scenario.md")
    p.add_argument("--home", help="GOODPUT_HOME to grow (must hold no raw zone yet; default: $GOODPUT_HOME or ./.goodput)")
    p.add_argument("--staging", help="folder for the simulated raw zone (default: a temporary folder, removed after)")
    p.add_argument("--latency", action="append", default=[], metavar="SOURCE=SECONDS",
                   help="data latency of a raw-zone source (repeatable; defaults: gpu_samples=10, training_steps=2, others 0)")
    p.add_argument("--tail", type=float, default=15.0, help="minutes to keep ticking after the scenario ends (default 15)")
    p.add_argument("--sensor", default="raw_zone_detect", help="the sensor to replay (default: raw_zone_detect)")
    p.add_argument("--out", help="write the per-fault, per-tick and per-incident results as JSON here")
    p.set_defaults(func=cmd_replay)


def parse_latency(items: list[str]) -> dict[str, float]:
    latency = {}
    for item in items:
        source, sep, value = item.partition("=")
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not sep or not source or seconds < 0:
            raise CliError(f"--latency {item!r}: expected SOURCE=SECONDS with SECONDS >= 0, e.g. gpu_samples=10")
        latency[source] = seconds
    return latency


def cmd_replay(args) -> int:
    from datetime import timedelta

    from orchestration.config.home import raw_root
    from orchestration.progress import Ticker
    from simulator import ScenarioError, load_scenario, simulate

    latency = parse_latency(args.latency)
    try:
        scenario = load_scenario(Path(args.scenario))
    except ScenarioError as error:
        raise CliError(str(error)) from None
    # the home first: the code location's partitions start from GOODPUT_HOME's raw zone when it loads
    home = use_home(args.home)
    from orchestration.evaluation.replay import fault_type_table, replay, tier_table
    if raw_root(home).exists() and any(raw_root(home).iterdir()):
        raise CliError(f"{raw_root(home)} already holds a raw zone: replay grows an empty one; pass --home to an empty folder")
    staging = Path(args.staging) if args.staging else Path(tempfile.mkdtemp(prefix="goodput-replay-"))
    try:
        with Ticker() as ticker:
            ticker.update(f"simulating {scenario.name} into {staging}")
            simulate(scenario, staging)
        with Ticker() as ticker:
            def progress(i: int, total: int, line: str) -> None:
                ticker.total = total
                ticker.step()
                ticker.update(line)

            result = replay(staging, home, scenario.start, scenario.end, latency=latency,
                            sensor_name=args.sensor, tail=timedelta(minutes=args.tail), progress=progress)
    finally:
        if not args.staging:
            shutil.rmtree(staging, ignore_errors=True)
    ticks = result.ticks
    print(f"replayed {scenario.name}: {len(ticks)} ticks of {result.schedule} ({result.cron}), "
          f"{int(ticks['runs'].sum())} detect runs, {ticks['wall_s'].sum():.0f} s of runs; "
          f"data latency " + ", ".join(f"{k} {v:g} s" for k, v in result.latency.items()))
    print("\nDelay from fault onset to the first incident a user sees, per tier:\n")
    print(tier_table(result.faults).to_markdown(index=False, floatfmt=".1f"))
    print("\nPer fault type:\n")
    print(fault_type_table(result.faults).to_markdown(index=False, floatfmt=".1f"))
    if args.out:
        Path(args.out).write_text(json.dumps({
            "scenario": args.scenario, "schedule": result.schedule, "cron": result.cron, "latency": result.latency,
            "faults": json.loads(result.faults.to_json(orient="records", date_format="iso")),
            "ticks": json.loads(result.ticks.to_json(orient="records", date_format="iso")),
            "incidents": json.loads(result.incidents.to_json(orient="records", date_format="iso")),
        }, indent=1))
    return 0
