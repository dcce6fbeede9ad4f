"""The fixed CPU cost every process and every detect run pays, base commit against this checkout, side by side.

    python bench/bench_fixed_cost.py [--base 84ed88b] [--repeats 3] [--scenario simulator/scenarios/small.yaml] [--out FILE.json]

Three measures, each in a fresh subprocess, alternating base and branch so a busy machine weighs on both alike:
  import  CPU-s (user + sys) of `import orchestration.definitions` (what every CLI command, daemon run
          worker, Celery task and test subprocess pays before it does anything);
  detect  CPU-s of one warm detect hour in process (the scenario's second hour, after a first run in
          the same process; an in-memory Dagster instance), the process's own CPU around the run;
  demo    CPU-s, children included, of `goodput demo --scenario SCENARIO` (a fresh home each time).
The base tree is `git archive BASE` of this repository, unpacked in a temporary folder (nothing in the
repository changes). Prints a table (median and every repeat) and the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

DETECT = """
import json, shutil, sys, time
from pathlib import Path
import dagster as dg
from orchestration.definitions import build_definitions
from orchestration.partitions import hour_keys
from simulator import load_scenario, simulate
scenario = load_scenario(Path(sys.argv[1]))
home = Path(sys.argv[2])
simulate(scenario, home)
job = build_definitions(home).resolve_job_def("detect")
first, second = hour_keys(scenario.start, scenario.end)[:2]
def run(key):
    with dg.DagsterInstance.ephemeral() as instance:
        return job.execute_in_process(partition_key=key, instance=instance, raise_on_error=True,
                                      run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}})
run(first)   # warm: SQL texts, Dagster's caches, DuckDB's first open
cpu, wall = time.process_time(), time.monotonic()
result = run(second)
print(json.dumps({"cpu": time.process_time() - cpu, "wall": time.monotonic() - wall, "events": len(result.all_events)}))
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(tree: Path, args: list[str], cwd: Path) -> tuple[float, float, str]:
    """(children CPU-s, wall s, stdout) of `python ARGS` with `tree` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("GOODPUT_HOME", None)
    before, wall = _children_cpu(), time.monotonic()
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{tree}: python {' '.join(args[:3])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return _children_cpu() - before, time.monotonic() - wall, done.stdout


def measure(name: str, tree: Path, scenario: Path, scratch: Path) -> dict:
    if name == "import":
        cpu, wall, _ = _run(tree, ["-c", "import orchestration.definitions"], tree)
        return {"cpu": cpu, "wall": wall}
    home = Path(tempfile.mkdtemp(dir=scratch, prefix=f"{name}-"))
    if name == "detect":
        _, _, out = _run(tree, ["-c", DETECT, str(scenario), str(home)], tree)
        return json.loads(out.strip().splitlines()[-1])
    cpu, wall, _ = _run(tree, ["-m", "orchestration.cli", "demo", "--scenario", str(scenario), "--home", str(home)], tree)
    return {"cpu": cpu, "wall": wall}


def main() -> int:
    from tabulate import tabulate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="84ed88b", help="the commit to compare against (default: main before issue 14's fast work)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scenario", default=str(REPO / "simulator" / "scenarios" / "small.yaml"))
    parser.add_argument("--measures", default="import,detect,demo")
    parser.add_argument("--out", help="write every measurement as JSON here")
    args = parser.parse_args()
    scenario = Path(args.scenario).resolve()
    measures = args.measures.split(",")
    results: dict = {m: {"base": [], "branch": []} for m in measures}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-fixed-cost-") as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.base], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        trees = {"base": base, "branch": REPO}
        for repeat in range(args.repeats):
            for measure_name in measures:
                for side in ("base", "branch") if repeat % 2 == 0 else ("branch", "base"):
                    got = measure(measure_name, trees[side], scenario, Path(tmp))
                    results[measure_name][side].append(got)
                    print(f"  {repeat + 1}/{args.repeats} {measure_name:<6} {side:<6} {got['cpu']:6.2f} CPU-s "
                          f"{got['wall']:6.2f} s wall", file=sys.stderr, flush=True)
                load.append(os.getloadavg()[0])
    rows = []
    for name, sides in results.items():
        b, n = ([r["cpu"] for r in sides[s]] for s in ("base", "branch"))
        walls = [statistics.median(r["wall"] for r in sides[s]) for s in ("base", "branch")]
        rows.append([name, statistics.median(b), statistics.median(n), statistics.median(n) - statistics.median(b),
                     " ".join(f"{x:.2f}" for x in b), " ".join(f"{x:.2f}" for x in n), f"{walls[0]:.1f} / {walls[1]:.1f}"])
    print(tabulate(rows, headers=["measure", f"base {args.base} CPU-s", "branch CPU-s", "change", "base repeats",
                                  "branch repeats", "wall s (base / branch)"], floatfmt=".2f", tablefmt="github"))
    print(f"\n{os.cpu_count()} CPUs; load average (1 min) during the run: {min(load):.1f} .. {max(load):.1f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"base": args.base, "scenario": str(scenario), "load": load, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
