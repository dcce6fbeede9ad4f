"""The distributed deployment end to end (issue 21): real PostgreSQL and Redis on loopback, two Celery
worker processes, faults.yaml's first hours through `goodput demo --deployment distributed --shards 2`
(hour x shard partitions: each hour's GPU work in one run per host group, then the hour's run), against
the embedded, unsharded run of the same hours (`goodput demo`).

- The incidents are the same: ids, tiers, onsets, entities; and so are the row counts.
- Each hour ran one `detect_shard` run per shard (their partitions' tags) and then one `detect`, all
  successful. How long the two shards' steps of an hour ran at the same time (each worker runs one step at
  a time, so steps of two runs that overlap ran on two workers) is printed, not asserted: it depends on how
  the runs' steps meet on a loaded machine (docs/deploy.md, "Shards").
- One worker process SIGKILLs itself mid-step (tests/distributed/kill_probe.py: its writes done, not
  committed): Celery puts the step back on the queue, another worker process runs it again, and the run
  finishes; nothing of the killed attempt lands (the incidents and row counts equal the embedded run's).
- Later, in another step, a whole worker dies mid-step (the probe SIGKILLs its process group: a lost
  host): nobody puts its step back; Redis hands it to the surviving worker once the visibility timeout
  (VISIBILITY_TIMEOUT_S here, an hour in production) has passed, and the run finishes all the same.

Heavy (two runs of two hours of a 56-GPU scenario, one of them on Celery: ~50 steps an hour and its shard runs):
minutes on a loaded machine. The embedded run is the session's (tests/conftest.py: faults_embedded), built
once for this file and tests/test_fold_incremental.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import psycopg2
import pytest
import yaml

from orchestration.partitions import hour_keys
from orchestration.service.distributed import DAGSTER_DB, LAKE_DB
from orchestration.storage.warehouse import WarehouseResource
from simulator import load_scenario
from tests.helpers import FAULTS, REPO
from tests.helpers import FAULTS_DEMO_HOURS as HOURS  # the first faults begin at 1h: stragglers, idle GPUs, drift ...

INCIDENTS = ("SELECT incident_id, tier, onset, entity_type, entity_id, status FROM incidents ORDER BY incident_id")
COUNTS = ("SELECT (SELECT count(*) FROM gpu_samples), (SELECT count(*) FROM training_steps), "
          "(SELECT count(*) FROM findings), (SELECT count(*) FROM quarantine)")
STEPS = """
SELECT r.partition, e.step_key, e.dagster_event_type, e.timestamp
FROM event_logs e JOIN runs r ON r.run_id = e.run_id
WHERE r.pipeline_name = 'detect_shard' AND e.dagster_event_type IN ('STEP_START', 'STEP_SUCCESS')
"""
SHARDS = 2
# the lost host's step runs again after this; 3x the longest step seen here (~10 s on a loaded machine),
# so that no step still running is handed out a second time
VISIBILITY_TIMEOUT_S = 30


def _demo(home: Path, *extra: str, env: dict | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "orchestration.cli", "demo", "--home", str(home), "--scenario", str(FAULTS),
                           "--hours", str(HOURS), *extra], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def embedded(faults_embedded):
    """`goodput demo` of the same hours, embedded: its warehouse as the demo left it (built once per session,
    tests/conftest.py: faults_embedded, whose later hours feed the fold's test)."""
    with duckdb.connect(str(faults_embedded["demo"]), read_only=True) as con:
        return con.execute(INCIDENTS).fetchall(), con.execute(COUNTS).fetchone()


@pytest.fixture(scope="module")
def distributed(tmp_path_factory, postgres, redis):
    home = tmp_path_factory.mktemp("distributed")
    marker = home.parent / f"{home.name}.killed"
    output = _demo(home, "--deployment", "distributed", "--shards", str(SHARDS), "--postgres", f"127.0.0.1:{postgres.port}",
                   "--redis", redis.url, "--worker-import", "tests.distributed.kill_probe",
                   env={"GOODPUT_FI_KILL_MARKER": str(marker), "GOODPUT_CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT_S)})
    lake = WarehouseResource(path=str(home / "unused.duckdb"), backend="ducklake", catalog=postgres.libpq(LAKE_DB),
                             data_path=f"{home / 'lake'}/")
    with lake.connect(read_only=True) as con:
        found = con.execute(INCIDENTS).fetchall(), con.execute(COUNTS).fetchone()
    with psycopg2.connect(host="127.0.0.1", port=postgres.port, user=postgres.user, dbname=DAGSTER_DB) as pg, pg.cursor() as cur:
        cur.execute("SELECT run_id, step_key, count(*) FROM event_logs WHERE dagster_event_type = 'STEP_START' "
                    "GROUP BY run_id, step_key HAVING count(*) > 1")   # a run's step started more than once
        restarted = {(run, step): starts for run, step, starts in cur.fetchall()}
        cur.execute("SELECT pipeline_name, partition, status FROM runs ORDER BY create_timestamp")
        runs = cur.fetchall()
        cur.execute(STEPS)
        steps = cur.fetchall()
    kills = {name: json.loads(path.read_text()) if path.exists() else None
             for name, path in (("pool process", marker), ("host", Path(f"{marker}.host")))}
    logs = {path.stem: path.read_text(errors="replace") for path in (home / "services" / "workers").glob("worker-*.log")}
    return {"incidents": found[0], "counts": found[1], "output": output, "kills": kills, "restarted": restarted,
            "logs": logs, "runs": runs, "steps": steps, "service": yaml.safe_load((home / "service.yaml").read_text())}


def overlap_seconds(events: list[tuple]) -> float:
    """Seconds during which steps of two different shard partitions were running at once."""
    spans: dict[tuple[str, str], list] = {}
    for partition, step, kind, at in events:
        spans.setdefault((partition, step), [None, None])[kind == "STEP_SUCCESS"] = at
    intervals = [(partition, start, end) for (partition, _), (start, end) in spans.items() if start and end]
    total = 0.0
    for i, (p1, s1, e1) in enumerate(intervals):
        for p2, s2, e2 in intervals[i + 1:]:
            if p1 != p2:
                total += max(0.0, (min(e1, e2) - max(s1, s2)).total_seconds())
    return total


def test_the_distributed_stack_finds_the_embedded_incidents(distributed, embedded):   # its own run first: the other
    # worker's test_fold_incremental.py builds the embedded one meanwhile
    assert embedded[0], "the embedded run found no incident: the comparison would prove nothing"
    assert distributed["incidents"] == embedded[0]
    assert distributed["counts"] == embedded[1]   # every row once: no partial, no duplicated partition
    assert "2 Celery workers" in distributed["output"]


def test_a_worker_killed_mid_step_is_retried_and_the_run_finishes(distributed):
    killed = distributed["kills"]["pool process"]
    assert killed, "the probe never killed a worker process"
    assert f"pid:{killed['pid']} exited" in "".join(distributed["logs"].values())   # its worker saw it die
    assert distributed["restarted"].get((killed["run"], killed["step"]), 0) > 1, "the killed step was not run again"


def test_a_lost_worker_host_s_step_runs_on_the_surviving_worker(distributed):
    lost, first = distributed["kills"]["host"], distributed["kills"]["pool process"]
    assert lost, "the probe never killed a worker host"
    assert (lost["run"], lost["step"]) != (first["run"], first["step"])
    dead = f"worker-{lost['worker'].split('@')[0].removeprefix('goodput-w')}"
    survivor, = set(distributed["logs"]) - {dead}
    ran = f"Task execute_plan[{lost['task']}] succeeded"
    assert f"Task execute_plan[{lost['task']}] received" in distributed["logs"][dead]
    assert ran not in distributed["logs"][dead] and ran in distributed["logs"][survivor]   # redelivered there
    assert f"pid:{lost['pid']} exited" not in distributed["logs"][dead]   # no worker left to see the process die
    assert distributed["restarted"].get((lost["run"], lost["step"]), 0) > 1, "the lost host's step was not run again"


def test_each_hour_ran_one_run_per_shard_then_the_hour_s_run(distributed):
    scenario = load_scenario(FAULTS)
    hours = hour_keys(scenario.start, scenario.end)[:HOURS]
    shards = [group["name"] for group in distributed["service"]["shards"]]
    assert shards == [f"shard-{i}" for i in range(1, SHARDS + 1)]
    assert sorted(host for group in distributed["service"]["shards"] for host in group["hosts"]) == sorted(
        scenario.cluster.host_names)   # every host in one shard
    detect_runs = [(job, partition) for job, partition, _ in distributed["runs"] if job.startswith("detect")]
    assert sorted(detect_runs) == sorted([("detect", h) for h in hours]
                                         + [("detect_shard", f"{h}|{s}") for h in hours for s in shards])
    assert {status for job, _, status in distributed["runs"] if job.startswith("detect")} == {"SUCCESS"}
    steps = distributed["steps"]
    busy = sum((b[3] - a[3]).total_seconds() for a in steps for b in steps
               if a[:2] == b[:2] and a[2] == "STEP_START" and b[2] == "STEP_SUCCESS")
    print(f"\nshard steps running at the same time: {overlap_seconds(steps):.1f} s of {busy:.1f} step-seconds "
          f"({len(steps) // 2} shard steps)\n" + "\n".join(line for line in distributed["output"].splitlines()
                                                        if "on Celery" in line))
