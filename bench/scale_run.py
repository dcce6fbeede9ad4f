"""One measured home for bench/bench_distributed_scale.py, in a fresh process: the same hour's `detect` run
twice (the first ingests the hour, in this fresh process or on fresh workers; the second finds the hour's
files unchanged, ingests nothing and recomputes its baselines and checks), with wall, CPU and what each run
added to the warehouse and the lake's catalog. Prints one JSON line.

    python bench/scale_run.py prepare     HOME [--pg PORT]            # create and migrate the warehouse
    python bench/scale_run.py embedded    HOME KEY [--pg PORT]        # in-process executor; --pg: the lake
    python bench/scale_run.py distributed HOME KEY --pg PORT --redis URL --workers N

`--pg` makes the home's warehouse the DuckLake on that loopback PostgreSQL (orchestration/service/distributed.py's
`prepare_home`: catalog `goodput_lake`, data under HOME/lake/); `distributed` also puts the Dagster
instance there and the steps on N Celery workers started here (`Workers`), run through `run_hours`.

CPU-seconds are user + system from the kernel: embedded, this process's (DuckDB's threads included);
distributed, the process tree (this process, the run's orchestrator, plus every worker and pool process:
psutil's cpu_times of each live process, plus those of reaped children), and beside it PostgreSQL's
(postmaster, backends, reaped backends) and Redis's, from `--services PIDS`. A sampler thread records the
CPU that runs the steps (this process, or the workers) every 0.1 s, so a step's CPU is the growth between
its STEP_START and STEP_SUCCESS; meaningful only where steps run one at a time (embedded, 1 worker).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
CATALOG = """
SELECT (SELECT count(*) FROM ducklake_snapshot) AS snapshots,
       (SELECT count(*) FROM ducklake_data_file) AS data_files,
       (SELECT count(*) FROM ducklake_delete_file) AS delete_files,
       (SELECT coalesce(sum(n_tup_ins), 0) FROM pg_stat_user_tables) AS rows_inserted,
       (SELECT coalesce(sum(n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables) AS rows_changed,
       (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits,
       pg_database_size(current_database()) AS catalog_bytes
"""


def tree_cpu(pids: list[int]) -> float:
    """User + system seconds of these processes, their live descendants and their reaped children."""
    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for proc in [root, *root.children(recursive=True)]:
                t = proc.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            continue
    return total


class Sampler(threading.Thread):
    """(time.time(), CPU-s) every 0.1 s, for attributing CPU to steps that ran one at a time."""

    def __init__(self, cpu):
        super().__init__(daemon=True)
        self.cpu, self.samples, self.stop = cpu, [], threading.Event()

    def run(self):
        while not self.stop.wait(0.1):
            self.samples.append((time.time(), self.cpu()))

    def at(self, when: float) -> float:
        import bisect

        i = min(bisect.bisect_left(self.samples, (when,)), len(self.samples) - 1)
        return self.samples[i][1]


def step_rows(instance, run_id: str, sampler: Sampler | None, groups: dict[str, str]) -> list[dict]:
    """Per step: its wall (STEP_START to STEP_SUCCESS in the event log), its group, its CPU if sampled."""
    import dagster as dg

    start, end = {}, {}
    for entry in instance.all_logs(run_id, of_type={dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS}):
        (start if entry.dagster_event.event_type == dg.DagsterEventType.STEP_START else end)[entry.step_key] = entry.timestamp
    rows = []
    for key in sorted(end, key=start.get):
        row = {"step": key, "group": groups.get(key, "checks"), "wall_s": round(end[key] - start[key], 3)}
        if sampler is not None:
            row["cpu_s"] = round(sampler.at(end[key]) - sampler.at(start[key]), 3)
        rows.append(row)
    return rows


def step_groups(defs) -> dict[str, str]:
    graph = defs.resolve_asset_graph()
    return {"__".join(key.path): graph.get(key).group_name for key in graph.get_all_asset_keys()}


def catalog(pg_port: int | None) -> dict:
    if pg_port is None:
        return {}
    import psycopg2

    from orchestration.service.distributed import LAKE_DB

    time.sleep(2)   # PostgreSQL's backends flush their statistics within a second of going idle
    with psycopg2.connect(host="127.0.0.1", port=pg_port, user="goodput", dbname=LAKE_DB) as con, con.cursor() as cur:
        cur.execute(CATALOG)
        return dict(zip([c.name for c in cur.description], cur.fetchone()))


def stored_bytes(home: Path) -> int:
    """The warehouse's bytes: the lake's data files, or the DuckDB file (and its WAL)."""
    from orchestration.config.home import warehouse_path

    if (home / "lake").is_dir():
        return sum(f.stat().st_size for f in (home / "lake").rglob("*") if f.is_file())
    return sum(p.stat().st_size for p in (warehouse_path(home), Path(f"{warehouse_path(home)}.wal")) if p.exists())


class Probe:
    """Before/after figures of one run: wall, CPU (`cpu`), services' CPU, catalog counters, bytes."""

    def __init__(self, home: Path, args, cpu):
        self.home, self.args, self.cpu = home, args, cpu

    def take(self) -> dict:
        services = [int(p) for p in self.args.services.split(",")] if self.args.services else []
        return {"wall": time.monotonic(), "cpu": self.cpu(), "services_cpu": tree_cpu(services)}

    def measured(self, before: dict, after: dict, run_id: str, catalog_before: dict) -> dict:
        out = {"run_id": run_id, "wall_s": round(after["wall"] - before["wall"], 2),
               "cpu_s": round(after["cpu"] - before["cpu"], 2),
               "services_cpu_s": round(after["services_cpu"] - before["services_cpu"], 2),
               "stored_bytes": stored_bytes(self.home), "load": os.getloadavg()[0]}
        cat = catalog(self.args.pg)
        out["catalog"] = {k: int(cat[k] - catalog_before.get(k, 0)) for k in cat}
        out["catalog_total"] = {k: int(v) for k, v in cat.items()}
        return out


def use_lake(home: Path, args) -> dict[str, str]:
    """The home's lake settings (and the distributed instance); the deployment's environment."""
    from orchestration.service.distributed import Endpoints, prepare_home

    return prepare_home(home, Endpoints("127.0.0.1", args.pg, "goodput", args.redis or "redis://127.0.0.1:1/0"))


def prepare(home: Path, args) -> dict:
    from orchestration.commands.common import use_home
    from orchestration.storage.warehouse import warehouse_for

    if args.pg:
        use_lake(home, args)
    use_home(str(home))
    t0, c0 = time.monotonic(), time.process_time()
    with warehouse_for(home).connect():
        pass
    return {"migrate_wall_s": round(time.monotonic() - t0, 2), "migrate_cpu_s": round(time.process_time() - c0, 2),
            "catalog": catalog(args.pg)}


def embedded(home: Path, args) -> dict:
    from orchestration.commands.common import use_home

    if args.pg:
        use_lake(home, args)   # only service.yaml's warehouse is used: the instance stays the home's SQLite one
    use_home(str(home))
    from orchestration.definitions import build_definitions
    from orchestration.storage.instance import open_instance

    defs = build_definitions(home)
    instance, detect, groups = open_instance(), defs.resolve_job_def("detect"), step_groups(defs)
    sampler = Sampler(time.process_time)
    sampler.start()
    probe, runs = Probe(home, args, time.process_time), []
    for _ in range(2):
        cat, before = catalog(args.pg), probe.take()
        result = detect.execute_in_process(partition_key=args.key, instance=instance, run_config=QUIET)
        after = probe.take()
        assert result.success, f"detect {args.key} failed"
        runs.append({**probe.measured(before, after, result.run_id, cat),
                     "steps": step_rows(instance, result.run_id, sampler, groups)})
    sampler.stop.set()
    return {"runs": runs, "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def distributed(home: Path, args) -> dict:
    env = use_lake(home, args)
    os.environ.update(env)   # before the definitions are imported: the Celery executor, the lake, the instance
    import dagster as dg

    from orchestration.config.home import goodput_home
    from orchestration.definitions import defs
    from orchestration.service.distributed import Workers, run_hours
    from orchestration.storage.instance import open_instance
    from orchestration.storage.warehouse import warehouse_for

    with warehouse_for(goodput_home()).connect():   # attached here once, as run_hours does: a daemon's run
        pass                                        # process only orchestrates, it never opens the lake
    t0 = time.monotonic()
    workers = Workers(env, home / "services" / "workers", count=args.workers).start()
    started_s = time.monotonic() - t0
    sampler = Sampler(lambda: tree_cpu([p.pid for p in workers.processes]))
    sampler.start()
    probe, runs, groups = Probe(home, args, lambda: tree_cpu([os.getpid()])), [], step_groups(defs)
    instance = open_instance()
    try:
        ended: list[dict] = []   # run_hours says a line as each detect run ends, before its fold
        for _ in range(2):
            cat, before = catalog(args.pg), probe.take()
            ended.clear()
            run_hours([args.key], lambda line: ended.append(probe.take()), QUIET)
            detect_id = instance.get_run_records(dg.RunsFilter(job_name="detect"), limit=1)[0].dagster_run.run_id
            runs.append({**probe.measured(before, ended[0], detect_id, cat),
                         "steps": step_rows(instance, detect_id, sampler if args.workers == 1 else None, groups),
                         "step_retries": len(instance.all_logs(detect_id, of_type=dg.DagsterEventType.STEP_UP_FOR_RETRY))})
    finally:
        sampler.stop.set()
        workers.stop()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"runs": runs, "workers_start_s": round(started_s, 2),
            "peak_rss_mib": round(max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, children.ru_maxrss) / 1024)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("prepare", "embedded", "distributed"))
    parser.add_argument("home")
    parser.add_argument("key", nargs="?")
    parser.add_argument("--pg", type=int, help="the loopback PostgreSQL's port: the warehouse is the lake")
    parser.add_argument("--redis", help="the broker's URL (distributed)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--services", help="PostgreSQL's postmaster and Redis's PIDs, comma-separated")
    args = parser.parse_args()
    home = Path(args.home)
    result = {"prepare": prepare, "embedded": embedded, "distributed": distributed}[args.mode](home, args)
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
