"""Detect-run cost by check layout: one step per signal (39 check steps) against one step per asset
(checks/asset_checks.py's multi_asset_checks, 7 check steps), side by side in one process.

    python bench/bench_check_steps.py [--scenario FILE] [--hours N] [--repeat N] [--out FILE.json]

Each repetition runs the real `detect` job in process on hours 00.. of a fresh copy of one simulated
home, once per layout, alternating, and reports wall and CPU seconds (this process: the in-process
executor runs every step here) per hour. Same findings either way: the script compares them.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def definitions(home: Path, per_signal: bool):
    import dagster as dg

    import checks
    from checks.asset_checks import build_check, signal_checks
    from checks.registry import REGISTRY
    from orchestration.definitions import build_definitions

    defs = build_definitions(home)
    if not per_signal:
        return defs
    others = [c for c in dg.load_asset_checks_from_package_module(checks)
              if not any(c.check_keys & g.check_keys for g in signal_checks)]
    return dg.Definitions(assets=list(defs.assets), asset_checks=[*others, *(build_check(s) for s in REGISTRY)],
                          jobs=list(defs.jobs), resources=defs.resources)


def run(template: Path, root: Path, per_signal: bool, keys: list[str]) -> dict:
    import dagster as dg
    import duckdb

    home = root / ("per-signal" if per_signal else "per-asset")
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(template, home)
    job = definitions(home, per_signal).resolve_job_def("detect")
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    walls, cpus, steps = [], [], 0
    with dg.instance_for_test() as instance:
        for key in keys:
            t, c = time.perf_counter(), time.process_time()
            result = job.execute_in_process(partition_key=key, instance=instance, run_config=quiet)
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
            assert result.success
            steps = len({e.step_key for e in result.all_events if e.step_key})
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        findings = con.execute("SELECT signal, entity_id, onset FROM findings ORDER BY ALL").fetchall()
    return {"wall_s": walls, "cpu_s": cpus, "steps": steps, "findings": [list(map(str, f)) for f in findings]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(REPO / "simulator" / "scenarios" / "small.yaml"))
    parser.add_argument("--hours", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out")
    args = parser.parse_args()

    from simulator import load_scenario, simulate

    scenario = load_scenario(Path(args.scenario))
    root = Path(tempfile.mkdtemp(prefix="goodput-bench-steps-"))
    simulate(scenario, root / "template")
    keys = [f"{scenario.start + timedelta(hours=h):%Y-%m-%d-%H:00}" for h in range(args.hours)]
    rows = {"per signal": [], "per asset": []}
    for _ in range(args.repeat):
        for label in rows:
            rows[label].append(run(root / "template", root, label == "per signal", keys))
    assert rows["per signal"][0]["findings"] == rows["per asset"][0]["findings"], "the layouts found different things"
    print(f"# Detect run by check layout: {scenario.name}, hours {keys[0]} .. {keys[-1]}, {args.repeat} repetitions")
    print(f"machine: {os.cpu_count()} cores; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    print("| layout | steps a run | CPU-s per hour (median) | wall s per hour (median) |")
    print("|---|---|---|---|")
    summary = {}
    for label, runs in rows.items():
        cpu = sorted(c for r in runs for c in r["cpu_s"])
        wall = sorted(w for r in runs for w in r["wall_s"])
        summary[label] = {"steps": runs[0]["steps"], "cpu_s_median": cpu[len(cpu) // 2], "wall_s_median": wall[len(wall) // 2]}
        print(f"| {label} | {runs[0]['steps']} | {cpu[len(cpu) // 2]:.2f} | {wall[len(wall) // 2]:.2f} |")
    ratio = summary["per asset"]["cpu_s_median"] / summary["per signal"]["cpu_s_median"]
    print(f"\nCPU per hour, per asset over per signal: {ratio:.2f}; findings identical ({len(rows['per asset'][0]['findings'])})")
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "ratio": ratio, "runs": rows}, indent=1))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
