"""The fold job's CPU against the number of hourly partitions the home has: two trees side by side.

    python bench/bench_fold_job.py HOME [--starts first,30d,365d,2025-01-01-00:00] [--base REV] [--folds 4]
        [--out FILE.json]

HOME: a processed home (its warehouse.duckdb, dagster/ instance and raw/ zone), e.g. a `goodput demo` or
`bench/bench_service.py --keep` home; a `goodput demo --shards N` home keeps its shards. For each
partitions start (`partitions.start` in service.yaml: `first`, the home's first raw hour; `Nd`, N days
before it; or a partition key) and each tree (the base commit's, a `git worktree` of it on PYTHONPATH,
and this tree's), in turn: a fresh process on a copy of the home runs the `fold_incidents` job (as the
service sensor launches it after each detect run) `--folds` times on the home's own Dagster instance,
and reports each fold's CPU-seconds. Nothing changed in the warehouse between folds, so each fold is
what an idle tick's fold costs: Dagster's run and the fold's fixed work. A fold whose cost follows the
partitions the home has grows with the months a service runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from orchestration.partitions import HOUR_KEY, first_raw_hour  # noqa: E402

CHILD = """
import json, sys, time
from pathlib import Path
from orchestration.commands.common import use_home
home = use_home(sys.argv[1])
import dagster as dg
from orchestration.definitions import build_definitions
from orchestration.evaluation.replay import QUIET
from orchestration.partitions import hourly
fold = build_definitions(home).resolve_job_def("fold_incidents")
instance = dg.DagsterInstance.get()
cpu = []
for _ in range(int(sys.argv[2])):
    t = time.process_time()
    assert fold.execute_in_process(instance=instance, run_config=QUIET).success
    cpu.append(time.process_time() - t)
print(json.dumps({"partitions": len(hourly.get_partition_keys()), "cpu_s": cpu}))
"""


def start_key(spec: str, home: Path) -> str:
    """`first`, `Nd` (days before the home's first raw hour) or a partition key as it stands."""
    if spec != "first" and not spec.endswith("d"):
        return spec
    first = first_raw_hour(home / "raw")
    if first is None:
        raise SystemExit(f"{home / 'raw'} holds no raw hour: give a processed home (goodput demo --home DIR)")
    days = 0 if spec == "first" else int(spec[:-1])
    return (first - timedelta(days=days)).strftime(HOUR_KEY)


def measure(tree: Path, home: Path, start: str, folds: int) -> dict:
    """The fold job `folds` times in a fresh process of `tree` on a copy of `home` whose partitions begin at `start`."""
    work = Path(tempfile.mkdtemp(prefix="goodput-bench-fold-job-")) / "home"
    try:
        work.mkdir()
        shutil.copytree(home / "dagster", work / "dagster")
        shutil.copy(home / "warehouse.duckdb", work / "warehouse.duckdb")
        os.symlink((home / "raw").resolve(), work / "raw")
        settings = yaml.safe_load((home / "service.yaml").read_text()) if (home / "service.yaml").exists() else None
        settings = settings or {}   # the home's own settings (its shards) with the partitions' start replaced
        settings["partitions"] = {**settings.get("partitions", {}), "start": start}
        (work / "service.yaml").write_text(yaml.safe_dump(settings))
        done = subprocess.run([sys.executable, "-c", CHILD, str(work), str(folds)], cwd=tree, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(tree), "GOODPUT_DUCKDB_THREADS": "1"})
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home")
    parser.add_argument("--starts", default="first,30d,365d,2025-01-01-00:00")
    parser.add_argument("--base", help="a commit to compare with (a git worktree of it)")
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--out")
    args = parser.parse_args()
    home = Path(args.home).resolve()
    trees = {"this tree": REPO}
    if args.base:
        base = Path(tempfile.mkdtemp(prefix="goodput-bench-base-")) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.base], cwd=REPO, check=True, capture_output=True)
        trees = {args.base: base, **trees}
    rows = []
    try:
        for spec in args.starts.split(","):
            start = start_key(spec, home)
            for name, tree in trees.items():   # the codes in turn, per start: a shared host's drift hits both
                got = measure(tree, home, start, args.folds)
                rows.append({"start": start, "tree": name, "partitions": got["partitions"], "cpu_s": got["cpu_s"],
                             "median_after_first": statistics.median(got["cpu_s"][1:] or got["cpu_s"])})
                print(f"{start}  {name:>12}  {got['partitions']:>6} partitions  fold CPU-s "
                      f"{' '.join(f'{c:.2f}' for c in got['cpu_s'])}", flush=True)
    finally:
        if args.base:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, capture_output=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"home": str(home), "at": datetime.now().isoformat(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
