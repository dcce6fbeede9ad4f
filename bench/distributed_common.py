"""What the distributed-stack benchmarks share: PostgreSQL and Redis on loopback with the deployment's two
databases, and each Celery step's dispatch and own time from Dagster's event log in PostgreSQL.

Used by bench/bench_celery_overhead.py and bench/bench_distributed_scale.py; not run on its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from orchestration.service.distributed import DAGSTER_DB, LAKE_DB
from orchestration.service.local_services import LocalPostgres, LocalRedis

STEPS = """
SELECT run_id, step_key,
       min(timestamp) FILTER (WHERE dagster_event_type = 'ENGINE_EVENT' AND event LIKE '%Submitting celery task%') AS submitted,
       min(timestamp) FILTER (WHERE dagster_event_type = 'STEP_START') AS started,
       max(timestamp) FILTER (WHERE dagster_event_type = 'STEP_SUCCESS') AS succeeded
FROM event_logs WHERE step_key IS NOT NULL GROUP BY run_id, step_key
"""


@contextlib.contextmanager
def local_stack(root: Path) -> Iterator[tuple[LocalPostgres, LocalRedis]]:
    """A throwaway PostgreSQL (with the lake's and Dagster's databases) and Redis on loopback under `root`."""
    with LocalPostgres(root / "postgres") as pg, LocalRedis(root / "redis") as redis:
        for name in (LAKE_DB, DAGSTER_DB):
            pg.create_database(name)
        yield pg, redis


def pg_query(pg: LocalPostgres, dbname: str, sql: str) -> pd.DataFrame:
    import psycopg2

    with psycopg2.connect(host="127.0.0.1", port=pg.port, user=pg.user, dbname=dbname) as con, con.cursor() as cur:
        cur.execute(sql)
        return pd.DataFrame(cur.fetchall(), columns=[c.name for c in cur.description])


def step_times(pg: LocalPostgres) -> pd.DataFrame:
    """One row per (run, step) that succeeded on Celery: `dispatch_s` (the executor's "Submitting celery
    task" to the worker's STEP_START) and `step_s` (STEP_START to STEP_SUCCESS)."""
    steps = pg_query(pg, DAGSTER_DB, STEPS).dropna(subset=["submitted", "started", "succeeded"])
    steps["dispatch_s"] = (steps["started"] - steps["submitted"]).dt.total_seconds()
    steps["step_s"] = (steps["succeeded"] - steps["started"]).dt.total_seconds()
    return steps


def p50_p90_max(values: pd.Series) -> str:
    return f"{values.median():.2f} / {values.quantile(0.9):.2f} / {values.max():.2f}"
