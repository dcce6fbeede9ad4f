"""One 4,096-GPU hour on the distributed stack (issue 21): 1 against 2 Celery workers, the DuckLake against
the DuckDB file, and the per-shard costs that project it to 16,384 and 100,000 GPUs.

    python bench/bench_distributed_scale.py [--root DIR] [--repeats 1] [--parts workers,lake] [--out FILE.json]
    python bench/bench_distributed_scale.py --from-json FILE.json [MORE.json]     # the tables again

Simulates `bench/scenarios/scale_4096.yaml` (512 hosts x 8 GPUs, one hour, ~4.4 GB of JSONL) once into
ROOT/template (kept and reused when it is there: a folder on disk, not /dev/shm), then measures its hour in
fresh homes whose raw zone is a hard-linked copy of the template's, each home in fresh processes
(bench/scale_run.py: a `prepare` process creates and migrates the warehouse, a second one runs the hour's
`detect` twice: the first run ingests the hour; the second finds its files unchanged, ingests nothing and
recomputes its baselines and checks, as a live re-run of an hour with no new data does):

- `workers`: the distributed stack (Dagster and the DuckLake catalog in PostgreSQL, data under the home,
  steps on Celery workers through Redis; a fresh PostgreSQL and Redis on loopback per home) with 1 and
  with 2 workers, side by side, the order alternated between repeats;
- `lake`: the embedded deployment (in-process executor) with the default `duckdb` file warehouse and with
  the `ducklake` warehouse (PostgreSQL catalog on loopback), side by side, alternated likewise.

Prints markdown tables (bench/scale_report.py): per run its wall, the CPU-seconds of the process tree
(kernel user + system: scale_run.py says how), PostgreSQL's and Redis's, the steps' dispatch and own time
from Dagster's event log; the 2-worker/1-worker and lake/file ratios; the per-1,024-GPU costs; and the
projection to 16,384 and 100,000 GPUs computed from them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.distributed_common import local_stack, pg_query, step_times  # noqa: E402
from bench.scale_report import report  # noqa: E402
from orchestration.service.distributed import DAGSTER_DB  # noqa: E402

SCENARIO = REPO / "bench" / "scenarios" / "scale_4096.yaml"
EVENTS = "SELECT run_id, count(*) AS events FROM event_logs GROUP BY run_id"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def scale_run(*args: str) -> tuple[dict, float, float]:
    """bench/scale_run.py in a fresh process: its JSON, wall seconds and the CPU-s of its whole tree
    (getrusage of reaped children: the process, its workers and their pool processes)."""
    cpu0, t0 = children_cpu(), time.monotonic()
    done = subprocess.run([sys.executable, str(REPO / "bench" / "scale_run.py"), *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    if done.returncode:
        raise RuntimeError(f"scale_run.py {' '.join(args[:2])} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), round(wall, 1), round(cpu, 1)


def simulate_once(scenario: Path, template: Path) -> dict:
    """The scenario's raw zone, simulated once (reused if present); its size and the simulation's cost."""
    cost = {}
    if not (template / "raw").is_dir():
        cpu0, t0 = children_cpu(), time.monotonic()
        subprocess.run([sys.executable, "-m", "orchestration.cli", "simulate", "--scenario", str(scenario), "--out",
                        str(template)], cwd=REPO, check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
        cost = {"simulate_wall_s": round(time.monotonic() - t0, 1), "simulate_cpu_s": round(children_cpu() - cpu0, 1)}
    files = [f for f in (template / "raw").rglob("*") if f.is_file()]
    by_source: dict[str, int] = {}
    for f in files:
        source = f.relative_to(template / "raw").parts[0]
        by_source[source] = by_source.get(source, 0) + f.stat().st_size
    return {**cost, "raw_files": len(files), "raw_bytes": sum(by_source.values()), "raw_bytes_by_source": by_source}


def fresh_home(root: Path, template: Path, label: str) -> Path:
    home = root / label
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    subprocess.run(["cp", "-al", str(template / "raw"), str(home / "raw")], check=True)   # hard links: no copy
    return home


def measure(root: Path, template: Path, key: str, kind: str, label: str, workers: int = 0) -> dict:
    """One home: `distributed` (with `workers`), `file` or `lake` (embedded)."""
    home = fresh_home(root, template, label)
    print(f"... {label} ({time.strftime('%H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.2f})",
          file=sys.stderr, flush=True)
    try:
        if kind == "file":
            prepared, *_ = scale_run("prepare", str(home))
            result, wall, cpu = scale_run("embedded", str(home), key)
            return {"label": label, "kind": kind, "prepare": prepared, "process_wall_s": wall, "tree_cpu_s": cpu, **result}
        with local_stack(home / "services") as (pg, redis):
            pids = f"{(pg.data / 'postmaster.pid').read_text().split()[0]},{redis.process.pid}"
            common = ["--pg", str(pg.port), "--redis", redis.url, "--services", pids]
            prepared, *_ = scale_run("prepare", str(home), "--pg", str(pg.port), "--redis", redis.url)
            if kind == "lake":
                result, wall, cpu = scale_run("embedded", str(home), key, *common)
            else:
                result, wall, cpu = scale_run("distributed", str(home), key, "--workers", str(workers), *common)
                steps = step_times(pg)
                events = pg_query(pg, DAGSTER_DB, EVENTS).set_index("run_id")["events"]
                for run in result["runs"]:
                    mine = steps[steps["run_id"] == run["run_id"]]
                    run["celery"] = mine[["step_key", "dispatch_s", "step_s"]].to_dict("records")
                    run["events"] = int(events.get(run["run_id"], 0))
        return {"label": label, "kind": kind, "workers": workers, "prepare": prepared, "process_wall_s": wall,
                "tree_cpu_s": cpu, **result}
    finally:
        for name in ("lake", "warehouse.duckdb", "warehouse.duckdb.wal", "raw"):
            target = home / name
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
            elif target.exists():
                target.unlink()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(SCENARIO))
    parser.add_argument("--root", help="the folder for the template and the homes (default: a new one under /var/tmp)")
    parser.add_argument("--repeats", type=int, default=1, help="side-by-side pairs of each part, order alternated")
    parser.add_argument("--first-repeat", type=int, default=0, help="number the repeats from here (a later invocation)")
    parser.add_argument("--parts", default="workers,lake", help="workers (1 vs 2 Celery workers), lake (lake vs file)")
    parser.add_argument("--out", help="also write every measurement as JSON here")
    parser.add_argument("--from-json", nargs="+", help="print the tables of earlier --out files (their homes together) and exit")
    args = parser.parse_args()
    if args.from_json:
        data = [json.loads(Path(f).read_text()) for f in args.from_json]
        data[0]["homes"] = [h for d in data for h in d["homes"]]
        data[0]["finished"], data[0]["load_end"] = data[-1].get("finished"), data[-1].get("load_end")
        print(report(data[0]))
        return 0
    from orchestration.partitions import hour_keys
    from simulator import load_scenario

    scenario = load_scenario(Path(args.scenario))
    key = hour_keys(scenario.start, scenario.start + timedelta(hours=1))[0]
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="goodput-bench-4096-", dir="/var/tmp"))
    hosts = scenario.cluster.hosts if isinstance(scenario.cluster.hosts, int) else len(scenario.cluster.hosts)
    data = {"scenario": Path(args.scenario).name, "gpus": hosts * scenario.cluster.gpus_per_host,
            "hour": key, "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": os.getloadavg(),
            "raw": simulate_once(Path(args.scenario), root / "template"), "homes": []}
    parts = args.parts.split(",")
    for repeat in range(args.first_repeat, args.first_repeat + args.repeats):
        flip = repeat % 2 == 1
        if "workers" in parts:
            for workers in ((2, 1) if flip else (1, 2)):
                data["homes"].append(measure(root, root / "template", key, "distributed", f"w{workers}-r{repeat}", workers))
                save(data, args.out)
        if "lake" in parts:
            for kind in (("lake", "file") if flip else ("file", "lake")):
                data["homes"].append(measure(root, root / "template", key, kind, f"{kind}-r{repeat}"))
                save(data, args.out)
    data["finished"], data["load_end"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()
    save(data, args.out)
    print(report(data))
    return 0


def save(data: dict, out: str | None) -> None:
    if out:   # after every home, so that a run cut short keeps what it measured
        Path(out).write_text(json.dumps(data, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
