"""Dagster's SQLite event log against Goodput's pooled one (orchestration/storage/event_log.py): CPU of a detect run.

    python bench/bench_event_log.py [--repeats 3] [--scenario simulator/scenarios/small.yaml]

Simulates the scenario once, then for each repeat runs, in two fresh processes side by side (one
per storage class, alternating), the detect job on the scenario's first hour (warm-up) and twice on
its second, on a persistent home instance; reports each measured run's CPU-seconds (this process,
DuckDB's threads included) and the medians. "plain" rewrites the home's dagster.yaml without the
`event_log_storage` block, so Dagster's own SqliteEventLogStorage stores the events.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

ONE = """
import json, sys, time
from pathlib import Path
from orchestration.commands.common import use_home
home = Path(sys.argv[1])
use_home(str(home))
if sys.argv[2] == "plain":
    y = home / "dagster" / "dagster.yaml"
    text = y.read_text()
    head, tail = text.split("# Dagster's SQLite event log", 1)
    y.write_text(head + tail.split("base_dir:", 1)[1].split("\\n", 1)[1])
from orchestration.definitions import build_definitions
from orchestration.storage.instance import open_instance
from orchestration.partitions import hour_keys
from simulator import load_scenario
scenario = load_scenario(Path(sys.argv[3]))
job = build_definitions(home).resolve_job_def("detect")
first, second = hour_keys(scenario.start, scenario.end)[:2]
instance = open_instance()
quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
job.execute_in_process(partition_key=first, instance=instance, run_config=quiet)
cpu = []
for _ in range(2):
    c = time.process_time()
    result = job.execute_in_process(partition_key=second, instance=instance, run_config=quiet)
    cpu.append(time.process_time() - c)
print(json.dumps({"storage": type(instance.event_log_storage).__name__, "cpu": cpu, "events": len(result.all_events)}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scenario", default=str(REPO / "simulator" / "scenarios" / "small.yaml"))
    args = parser.parse_args()
    from simulator import load_scenario, simulate

    scratch = Path(tempfile.mkdtemp(prefix="goodput-bench-eventlog-"))
    try:
        template = scratch / "template"
        simulate(load_scenario(Path(args.scenario)), template)
        cpu: dict[str, list[float]] = {"plain": [], "pooled": []}
        for repeat in range(args.repeats):
            for kind in ("plain", "pooled"):
                home = scratch / f"{kind}-{repeat}"
                shutil.copytree(template, home)
                out = subprocess.run([sys.executable, "-c", ONE, str(home), kind, args.scenario], cwd=REPO,
                                     check=True, capture_output=True, text=True)
                result = json.loads(out.stdout.strip().splitlines()[-1])
                cpu[kind] += result["cpu"]
                print(f"  {kind:6} {result['storage']:28} CPU-s {result['cpu'][0]:.2f} {result['cpu'][1]:.2f} "
                      f"({result['events']} events)", file=sys.stderr, flush=True)
        plain, pooled = statistics.median(cpu["plain"]), statistics.median(cpu["pooled"])
        print(f"detect run CPU-s, median of {len(cpu['plain'])}: SqliteEventLogStorage {plain:.2f}, "
              f"PooledSqliteEventLogStorage {pooled:.2f}, ratio {pooled / plain:.2f}")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
