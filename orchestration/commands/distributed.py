"""`goodput demo --deployment distributed`: the demo scenario through PostgreSQL, Redis and Celery workers.

Without `--postgres`/`--redis` it starts both as throwaway local services on loopback
(orchestration/service/local_services.py, under the system temp folder and `GOODPUT_HOME/services/`), stand-ins
for the hosts of docs/deploy.md; with them it uses the servers given. Either way it starts `--workers`
Celery worker processes, runs every hour's `detect` with its steps on them, folds incidents, delivers
alerts, reads the incidents from the lake, and stops what it started.
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from pathlib import Path

from orchestration.service.local_services import LocalPostgres, LocalRedis

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def add_demo_arguments(parser) -> None:
    parser.add_argument("--deployment", choices=("embedded", "distributed"), default="embedded",
                        help="embedded (default: one process, the DuckDB file) or distributed (PostgreSQL, Redis, "
                             "Celery workers, a DuckLake warehouse; docs/deploy.md)")
    parser.add_argument("--workers", type=int, default=2, help="distributed: Celery worker processes (default 2)")
    parser.add_argument("--postgres", metavar="HOST:PORT", help="distributed: use this PostgreSQL (user goodput, trust or "
                        "$PGPASSWORD) instead of starting one")
    parser.add_argument("--redis", metavar="URL", help="distributed: use this Redis broker instead of starting one")
    parser.add_argument("--worker-import", action="append", default=[], metavar="MODULE",
                        help="distributed: a module every worker imports at start (celery -I), e.g. a probe")


@contextlib.contextmanager
def _services(home: Path, args):
    """The endpoints of the shared services: the ones given, or local ones started (and stopped) here."""
    from orchestration.service.distributed import DAGSTER_DB, LAKE_DB, Endpoints

    with contextlib.ExitStack() as stack:
        if args.postgres:
            host, _, port = args.postgres.rpartition(":")
            pg = (host or "127.0.0.1", int(port), "goodput")
            _create_databases(pg)
        else:
            server = stack.enter_context(LocalPostgres(home / "services" / "postgres"))
            for name in (LAKE_DB, DAGSTER_DB):
                server.create_database(name)
            pg = ("127.0.0.1", server.port, server.user)
        redis_url = args.redis or stack.enter_context(LocalRedis(home / "services" / "redis")).url
        yield Endpoints(*pg, redis_url)


def _create_databases(pg: tuple[str, int, str]) -> None:
    import psycopg2

    from orchestration.service.distributed import DAGSTER_DB, LAKE_DB

    con = psycopg2.connect(host=pg[0], port=pg[1], user=pg[2], dbname="postgres", password=os.environ.get("PGPASSWORD"))
    con.autocommit = True
    with con.cursor() as cur:
        for name in (LAKE_DB, DAGSTER_DB):
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{name}"')   # our own constant names
    con.close()


def demo_distributed(home: Path, start: datetime, end: datetime, args, say):
    """Process [start, end) on the distributed stack; returns (opened incidents, ingested row counts)."""
    import dagster as dg

    from orchestration.partitions import hour_keys
    from orchestration.service.distributed import Workers, prepare_home, run_hours

    with _services(home, args) as endpoints:
        env = prepare_home(home, endpoints)
        os.environ.update(env)   # before the definitions are imported: the Celery executor, the lake, the instance
        say(f"2/3 processing {start:%Y-%m-%d %H:%M} .. {end:%H:%M} UTC on the distributed stack: PostgreSQL "
            f"{endpoints.pg_host}:{endpoints.pg_port}, Redis {endpoints.redis_url}, {args.workers} Celery workers")
        workers = Workers(env, home / "services" / "workers", count=args.workers, imports=tuple(args.worker_import))
        try:
            workers.start()
            summary = run_hours(hour_keys(start, end), say, QUIET)
        finally:
            workers.stop()
        say(f"  {summary['partitions']} hours on Celery, {summary['step_retries']} step retries (lake commit conflicts, lost workers)")
        from orchestration.definitions import resources_for
        from orchestration.evaluation.scoring import opened_incidents
        from orchestration.sensors.alerts import incident_alerts
        from orchestration.storage.instance import open_instance

        with dg.build_sensor_context(instance=open_instance(), resources=resources_for(home)) as context:
            incident_alerts(context)
        return opened_incidents(home)
