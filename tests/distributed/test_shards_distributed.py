"""Hour x shard partitions on the distributed stack (issue 21): tests/fixtures/shards.yaml (two hosts, a GPU
fault on each) through `goodput demo --deployment distributed --shards 2` (one host each) and two Celery
workers, against the same scenario detected embedded and unsharded.

- The incidents are the same (ids, tiers, onsets, entities), and so are the findings and row counts.
- Each hour ran one `detect_shard` run per shard (their partitions' tags) and then one `detect`.
- How long the two shards' steps of an hour ran at the same time (each worker runs one step at a time,
  so steps of two runs that overlap ran on two workers) is measured and printed, not asserted: it depends on
  how the two runs' steps meet on a loaded machine (docs/deploy.md, "Shards").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import psycopg2
import pytest
import yaml

from orchestration.service.distributed import DAGSTER_DB, LAKE_DB
from orchestration.storage.warehouse import WarehouseResource
from tests.helpers import REPO, SHARDS, TWO_SHARDS
from tests.helpers import SHARDS_HOURS as HOURS

INCIDENTS = "SELECT incident_id, tier, onset, entity_type, entity_id, status FROM incidents ORDER BY incident_id"
COUNTS = ("SELECT (SELECT count(*) FROM gpu_samples), (SELECT count(*) FROM gpu_minutes), (SELECT count(*) FROM findings), "
          "(SELECT count(*) FROM evaluations), (SELECT count(*) FROM judgements)")
STEPS = """
SELECT r.partition, e.step_key, e.dagster_event_type, e.timestamp
FROM event_logs e JOIN runs r ON r.run_id = e.run_id
WHERE r.pipeline_name = 'detect_shard' AND e.dagster_event_type IN ('STEP_START', 'STEP_SUCCESS')
"""


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


@pytest.fixture(scope="module")
def shards_on_celery(tmp_path_factory, postgres, redis, shards_unsharded) -> dict:
    """`goodput demo --deployment distributed --shards 2` on the scenario, and what it found beside what the
    session's embedded unsharded run found (shards_unsharded, tests/conftest.py)."""
    embedded = shards_unsharded
    home = tmp_path_factory.mktemp("distributed-shards")
    # the demo's databases have fixed names: another module's demo on this session's server left its own
    con = psycopg2.connect(host="127.0.0.1", port=postgres.port, user=postgres.user, dbname="postgres")
    con.autocommit = True
    with con.cursor() as cur:
        for name in (LAKE_DB, DAGSTER_DB):
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')   # our own constant names
    con.close()
    done = subprocess.run([sys.executable, "-m", "orchestration.cli", "demo", "--home", str(home), "--scenario", str(SHARDS),
                           "--hours", str(len(HOURS)), "--shards", "2", "--deployment", "distributed", "--postgres",
                           f"127.0.0.1:{postgres.port}", "--redis", redis.url],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lake = WarehouseResource(path=str(home / "unused.duckdb"), backend="ducklake", catalog=postgres.libpq(LAKE_DB),
                             data_path=f"{home / 'lake'}/")
    with lake.connect(read_only=True) as con:
        found = con.execute(INCIDENTS).fetchall(), con.execute(COUNTS).fetchone()
    with WarehouseResource(path=str(embedded / "warehouse.duckdb")).connect(read_only=True) as con:
        expected = con.execute(INCIDENTS).fetchall(), con.execute(COUNTS).fetchone()
    with psycopg2.connect(host="127.0.0.1", port=postgres.port, user=postgres.user, dbname=DAGSTER_DB) as pg, pg.cursor() as cur:
        cur.execute("SELECT pipeline_name, partition, status FROM runs ORDER BY create_timestamp")
        runs = cur.fetchall()
        cur.execute(STEPS)
        steps = cur.fetchall()
    shutil.rmtree(home / "lake", ignore_errors=True)
    return {"found": found, "expected": expected, "runs": runs, "steps": steps, "output": done.stdout,
            "service": (home / "service.yaml").read_text()}


def test_shards_on_celery_find_the_embedded_unsharded_incidents(shards_on_celery):
    assert shards_on_celery["expected"][0], "the embedded run found no incident: the comparison would prove nothing"
    assert shards_on_celery["found"] == shards_on_celery["expected"]
    detect_runs = [(job, partition) for job, partition, status in shards_on_celery["runs"] if job.startswith("detect")]
    assert sorted(detect_runs) == sorted([("detect", h) for h in HOURS]
                                         + [("detect_shard", f"{h}|{s}") for h in HOURS for s in ("shard-1", "shard-2")])
    assert yaml.safe_load(shards_on_celery["service"])["shards"] == yaml.safe_load(TWO_SHARDS.replace("- name: a", "- name: shard-1")
                                                                                   .replace("- name: b", "- name: shard-2"))["shards"]
    assert {status for job, _, status in shards_on_celery["runs"] if job.startswith("detect")} == {"SUCCESS"}
    steps = shards_on_celery["steps"]
    busy = sum((b[3] - a[3]).total_seconds() for a in steps for b in steps
               if a[:2] == b[:2] and a[2] == "STEP_START" and b[2] == "STEP_SUCCESS")
    print(f"\nshard steps running at the same time: {overlap_seconds(steps):.1f} s of {busy:.1f} step-seconds "
          f"({len(steps) // 2} shard steps)\n" + "\n".join(line for line in shards_on_celery["output"].splitlines()
                                                        if "on Celery" in line))
