"""Incident board page loads: wall time per page as a browser's request sees it, and the server's CPU.

    python bench/bench_board.py --home DIR [--repeats 5] [--after-write] [--out FILE.json]

Serves the board on the home (`python -m board`, its own process, so its CPU time is the server's
alone: /proc/<pid>/stat before and after), then asks each page `--repeats` times after one warm-up
request: Now, the most urgent open incident (else the latest), the run with the most incidents, the
cluster page and the first endpoint. Prints a markdown table: median and worst wall seconds per
page, and the server's CPU seconds per request. `--after-write` makes every measured request the
first after a write: the warehouse file's modification time is bumped before each (what a run's
write does to the board's data version), so no result comes from the cache. The pages must answer within 1 s on the demo
warehouse and 3 s at 1,024 GPUs (docs/board.md).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS   # utime + stime


def pages(home: Path) -> dict[str, str]:
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    try:
        incident = con.execute("SELECT incident_id FROM incidents ORDER BY status = 'open' DESC, tier, last_seen DESC "
                               "LIMIT 1").fetchone()
        run = con.execute("SELECT r.run_id FROM runs r ORDER BY (SELECT count(*) FROM incidents i WHERE i.run_id = r.run_id) "
                          "DESC, r.gpus DESC NULLS LAST, r.run_id LIMIT 1").fetchone()
        endpoint = con.execute("SELECT min(endpoint) FROM serving_versions").fetchone()
    finally:
        con.close()
    found = {"Now": "/"}
    if incident:
        found["Incident"] = f"/incidents/{incident[0]}"
    if run:
        found["Run"] = f"/runs/{run[0]}"
    found["Cluster / goodput"] = "/cluster"
    if endpoint and endpoint[0]:
        found["Endpoint"] = f"/endpoints/{endpoint[0]}"
    return found


def fetch(url: str) -> tuple[int, float, int]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = response.read()
        return response.status, time.perf_counter() - t0, len(body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--after-write", action="store_true",
                        help="bump the warehouse's mtime before each request: every one is a first load after a write")
    parser.add_argument("--out")
    args = parser.parse_args()
    home = Path(args.home).resolve()
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen([sys.executable, "-m", "board", "--home", str(home), "--port", str(port)], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    rows = []
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                fetch(base + "/healthz")
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()
                assert time.monotonic() < deadline, "the board did not start"
                time.sleep(0.5)
        for name, path in pages(home).items():
            status, first, size = fetch(base + path)       # warm-up: imports, first binding of the views
            assert status == 200, (path, status)
            walls, cpu0 = [], cpu_seconds(server.pid)
            for _ in range(args.repeats):
                if args.after_write:    # a new data version: the board's cache no longer answers
                    os.utime(home / "warehouse.duckdb")
                status, wall, size = fetch(base + path)
                assert status == 200, (path, status)
                walls.append(wall)
            cpu = (cpu_seconds(server.pid) - cpu0) / args.repeats
            rows.append({"page": name, "path": path, "first_s": round(first, 3), "median_s": round(statistics.median(walls), 3),
                         "worst_s": round(max(walls), 3), "server_cpu_s": round(cpu, 3), "kilobytes": round(size / 1000)})
    finally:
        server.terminate()
        server.wait(timeout=30)
    mode = ", each the first after a write" if args.after_write else ""
    print(f"board on {home} ({args.repeats} requests per page after one warm-up{mode})\n")
    print("| page | path | first request (s) | median (s) | worst (s) | server CPU per request (s) | page size (kB) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['page']} | `{r['path']}` | {r['first_s']:.2f} | {r['median_s']:.2f} | {r['worst_s']:.2f} | "
              f"{r['server_cpu_s']:.2f} | {r['kilobytes']:,} |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
