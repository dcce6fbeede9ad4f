"""Idle cost: `goodput ui` (webserver + daemon) left running on a demo home with no new data.

    python bench/bench_idle.py [--minutes 20] [--home DIR] [--skip-demo] [--out FILE.json]

Runs `goodput demo` into a home (unless --skip-demo on one that has it), starts `goodput ui` on it
and samples the whole process tree (psutil) every 2 s for `--minutes`: CPU-seconds per minute
(user + system of every process of the tree, each counted up to its last sample), peak RSS of the
tree (the sum over its processes at one sample), and the Dagster runs created after start-up
(the raw zone does not change, so the target is 0). Targets (issue 15): 0 runs, <= 1.2 CPU-s per
minute, <= 1 GiB. The first `--warmup` minutes (default 3: the webserver and code server load)
are reported apart from the steady state.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
TARGETS = {"runs": 0, "cpu_s_per_min": 1.2, "peak_rss_gib": 1.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree(root) -> list:
    import psutil

    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def role(proc) -> str:
    """Which part of `goodput ui` a process is, from its command line."""
    try:
        line = " ".join(proc.cmdline())
    except Exception:   # gone, or not ours to read
        return "other"
    for needle, name in (("-m board", "board"), ("dagster-webserver", "webserver"), ("dagster_webserver", "webserver"),
                         ("dagster-daemon", "daemon"), ("_daemon", "daemon"), ("code-server", "code server"),
                         ("code_server", "code server"), ("api grpc", "code server"), ("grpc", "code server"),
                         (" dev ", "dagster dev"), ("orchestration.cli ui", "goodput ui"),
                         ("orchestration.service.ui", "goodput ui")):
        if needle in line + " ":
            return name
    return "other"


def runs_created_after(home: Path, after: float) -> list[dict]:
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(home / "dagster")
    with dg.DagsterInstance.get() as instance:
        records = instance.get_run_records(dg.RunsFilter(created_after=datetime.fromtimestamp(after, tz=timezone.utc)))
        return [{"job": r.dagster_run.job_name, "partition": r.dagster_run.tags.get("dagster/partition"),
                 "status": r.dagster_run.status.value} for r in records]


def main() -> int:
    import psutil

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0, help="minutes of start-up reported apart")
    parser.add_argument("--home", help="the demo home (default: a temporary folder)")
    parser.add_argument("--skip-demo", action="store_true", help="the home already holds a demo")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    home = Path(args.home or tempfile.mkdtemp(prefix="goodput-bench-idle-")).resolve()
    goodput = [sys.executable, "-m", "orchestration.cli"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("DAGSTER_HOME", None)
    if not args.skip_demo:
        t0 = time.monotonic()
        subprocess.run([*goodput, "demo", "--home", str(home)], cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
        print(f"demo home ready in {time.monotonic() - t0:.0f} s: {home}", file=sys.stderr)
    port = free_port()
    log = open(home / "bench_idle_ui.log", "w")
    started = time.time()
    # a free board port too: two benches side by side (before/after) must not share the board's default 3001
    ui = subprocess.Popen([*goodput, "ui", "--home", str(home), "--port", str(port), "--board-port", str(free_port())],
                          cwd=REPO, env=env,
                          stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    root = psutil.Process(ui.pid)
    cpu_last: dict[int, float] = {}       # pid -> its user+system CPU at its last sample
    roles: dict[int, str] = {}
    samples = []
    peak_rss, procs_max = 0, 0
    warm_at = started + args.warmup * 60
    cpu_at_warm = None
    try:
        while time.time() - started < args.minutes * 60:
            rss = 0
            members = tree(root)
            for proc in members:
                try:
                    times = proc.cpu_times()
                    cpu_last[proc.pid] = times.user + times.system
                    if proc.pid not in roles:
                        roles[proc.pid] = role(proc)
                    rss += proc.memory_info().rss
                except psutil.NoSuchProcess:
                    continue
            peak_rss, procs_max = max(peak_rss, rss), max(procs_max, len(members))
            total = sum(cpu_last.values())
            now = time.time()
            if cpu_at_warm is None and now >= warm_at:
                cpu_at_warm = (now, total)
                per_pid_at_warm = dict(cpu_last)
            samples.append({"t": round(now - started, 1), "cpu_s": round(total, 2), "rss_mib": round(rss / 2**20), "procs": len(members)})
            time.sleep(2.0)
    finally:
        os.killpg(ui.pid, signal.SIGTERM)
        try:
            ui.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)
    end, total = samples[-1]["t"] + started, samples[-1]["cpu_s"]
    runs = runs_created_after(home, started)
    steady = ((total - cpu_at_warm[1]) / ((end - cpu_at_warm[0]) / 60)) if cpu_at_warm and end > cpu_at_warm[0] else None
    by_role: dict[str, float] = {}        # steady CPU-s per minute of each part of the tree
    if steady is not None:
        for pid, cpu in cpu_last.items():
            by_role[roles.get(pid, "other")] = by_role.get(roles.get(pid, "other"), 0.0) + (
                cpu - per_pid_at_warm.get(pid, 0.0)) / ((end - cpu_at_warm[0]) / 60)
    result = {
        "minutes": round((end - started) / 60, 1), "runs_after_start": len(runs), "runs": runs,
        "cpu_s_per_min_all": round(total / ((end - started) / 60), 3),
        "cpu_s_per_min_steady": round(steady, 3) if steady is not None else None,
        "peak_rss_gib": round(peak_rss / 2**30, 3), "processes_max": procs_max, "targets": TARGETS,
        "cpu_s_per_min_steady_by_process": {k: round(v, 3) for k, v in sorted(by_role.items())},
        "load_average": os.getloadavg(), "home": str(home), "samples": samples,
    }
    print(f"# Idle cost of `goodput ui` ({result['minutes']} min, no new data)\n")
    print("| runs launched after start-up | CPU-s per minute (whole run) | CPU-s per minute (after warm-up) "
          "| peak RSS of the tree (GiB) | processes (max) |")
    print("|---|---|---|---|---|")
    print(f"| {len(runs)} (target 0) | {result['cpu_s_per_min_all']} | {result['cpu_s_per_min_steady']} (target <= 1.2) "
          f"| {result['peak_rss_gib']} (target <= 1) | {procs_max} |")
    if by_role:
        print("\nAfter warm-up, CPU-s per minute by process: "
              + ", ".join(f"{k} {v:.2f}" for k, v in sorted(by_role.items(), key=lambda kv: -kv[1])))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
