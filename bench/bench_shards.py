"""Hour x shard partitions in process (docs/deploy.md, "Shards"): one scenario detected unsharded and split into
shards, each in a fresh home, side by side: CPU-s and wall of each hour's runs, and whether the two found the same.

    python bench/bench_shards.py [--scenario tests/fixtures/shards.yaml] [--shards 2] [--repeats 3] [--hours N]

Each repeat runs both layouts in this process (an in-memory Dagster instance, `execute_detect`: with shards, each
shard's partition then the hour), alternating which goes first. Prints the medians, every repeat, and the
incidents and findings compared (they must be equal).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg  # noqa: E402

from orchestration.cli import write_demo_shards  # noqa: E402
from orchestration.definitions import build_definitions  # noqa: E402
from orchestration.jobs import execute_detect  # noqa: E402
from orchestration.partitions import hour_keys  # noqa: E402
from orchestration.shards import configured  # noqa: E402
from orchestration.storage.warehouse import warehouse_for  # noqa: E402
from simulator import load_scenario, simulate  # noqa: E402

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
COMPARED = ("SELECT incident_id, signal, tier, onset, entity_id FROM incidents ORDER BY ALL",
            "SELECT * EXCLUDE (evidence), evidence::VARCHAR FROM findings ORDER BY ALL",
            "SELECT * FROM evaluations ORDER BY ALL", "SELECT * FROM judgements ORDER BY ALL",
            "SELECT * EXCLUDE (evidence), evidence::VARCHAR FROM clearings ORDER BY ALL")


def detect(home: Path, keys: list[str]) -> tuple[float, float, list]:
    """(CPU-s, wall-s) of every hour's detect runs, and the rows compared."""
    defs = build_definitions(home)
    cpu, wall = time.process_time(), time.monotonic()
    with dg.DagsterInstance.ephemeral() as instance:
        for key in keys:
            assert all(r.success for r in execute_detect(defs, configured(home), key, instance, run_config=QUIET))
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        defs.resolve_job_def("fold_incidents").execute_in_process(instance=instance, run_config=QUIET)
    with warehouse_for(home).connect(read_only=True) as con:
        return cpu, wall, [con.execute(q).fetchall() for q in COMPARED]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="tests/fixtures/shards.yaml")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hours", type=int, help="only the scenario's first HOURS hours")
    args = parser.parse_args()
    scenario = load_scenario(Path(args.scenario))
    keys = hour_keys(scenario.start, scenario.end)[:args.hours]
    results: dict[str, list[tuple[float, float]]] = {"unsharded": [], f"{args.shards} shards": []}
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "raw"
        simulate(scenario, template)
        found = {}
        for repeat in range(args.repeats):
            for layout in (list(results) if repeat % 2 == 0 else list(results)[::-1]):
                home = Path(tmp) / f"{repeat}-{layout.replace(' ', '-')}"
                shutil.copytree(template, home)
                if layout != "unsharded":
                    write_demo_shards(home, scenario.cluster.host_names, args.shards)
                cpu, wall, found[layout] = detect(home, keys)
                results[layout].append((cpu, wall))
    print(f"{scenario.name}: {len(keys)} hour(s), {len(scenario.cluster.host_names)} host(s)")
    for layout, runs in results.items():
        print(f"  {layout:>10}: CPU {statistics.median(c for c, _ in runs):6.2f} s  wall {statistics.median(w for _, w in runs):6.2f} s"
              f"  (repeats: {', '.join(f'{c:.2f}/{w:.2f}' for c, w in runs)})")
    same = len({repr(v) for v in found.values()}) == 1
    print(f"  same incidents and findings: {same} ({len(found['unsharded'][0])} incidents, {len(found['unsharded'][1])} findings)")


if __name__ == "__main__":
    main()
