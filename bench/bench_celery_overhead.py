"""What a step costs on Celery beyond its work (issue 21: the per-task overhead): `goodput demo --deployment
distributed` on a scenario's first hours, against a PostgreSQL and a Redis started here on loopback, then,
from Dagster's event log in PostgreSQL, per step of every detect run: the dispatch (from the executor's
"Submitting celery task" event to the worker's STEP_START: the broker, a wait for a free worker when
more steps are ready than workers, the worker loading the job and its resources) and the step's own
time (STEP_START to STEP_SUCCESS). The same hours embedded (`goodput demo`,
every step in one process) give the whole runs' wall beside them.

    python bench/bench_celery_overhead.py [--scenario simulator/scenarios/small.yaml] [--hours 1] [--workers 2]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.distributed_common import local_stack, p50_p90_max, step_times  # noqa: E402


def demo(home: Path, scenario: str, hours: int, *extra: str) -> float:
    """`goodput demo` on `home`; its wall seconds."""
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "orchestration.cli", "demo", "--home", str(home), "--scenario", scenario,
                           "--hours", str(hours), *extra], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode:
        sys.exit(f"the demo failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(REPO / "simulator" / "scenarios" / "small.yaml"))
    parser.add_argument("--hours", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="goodput-bench-celery-"))
    embedded = demo(root / "embedded", args.scenario, args.hours)
    with local_stack(root / "services") as (pg, redis):
        distributed = demo(root / "distributed", args.scenario, args.hours, "--deployment", "distributed",
                           "--workers", str(args.workers), "--postgres", f"127.0.0.1:{pg.port}", "--redis", redis.url)
        steps = step_times(pg)
    table = pd.DataFrame({
        "steps on Celery": [len(steps)],
        "dispatch p50 / p90 / max, s": [p50_p90_max(steps["dispatch_s"])],
        "step p50 / p90 / max, s": [p50_p90_max(steps["step_s"])],
        "dispatch total / step total, s": [f"{steps['dispatch_s'].sum():.1f} / {steps['step_s'].sum():.1f}"],
        "demo wall embedded / distributed, s": [f"{embedded:.1f} / {distributed:.1f}"],
    })
    print(f"# Steps on Celery: {Path(args.scenario).name}, {args.hours} hour(s), {args.workers} workers")
    print(table.T.to_markdown(headers=["", "value"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
