"""The distributed deployment on one machine: Dagster on PostgreSQL, the detect job's steps on Celery
workers, the warehouse a DuckLake (docs/deploy.md).

`goodput demo --deployment distributed` runs the demo scenario through it, with PostgreSQL, Redis and
two Celery workers started as local services on loopback: stand-ins for the database host, the broker
host and two worker machines. Its parts are the ones a multi-host deployment runs:

- the home's `service.yaml` chooses the `ducklake` warehouse (catalog database `goodput_lake`, data
  under `GOODPUT_HOME/lake/`);
- `DAGSTER_HOME` holds deploy/dagster.yaml: run, event-log and schedule storage in PostgreSQL
  (database `goodput_dagster`), at the URL in `GOODPUT_DAGSTER_PG_URL`;
- `deployment_env` is the environment every process gets (deploy/goodput.env on a real host):
  `GOODPUT_EXECUTOR=celery` makes the detect job hand its steps to Celery (orchestration/jobs.py), and
  `GOODPUT_CELERY_VISIBILITY_TIMEOUT`, when set, is how long a lost worker host's step waits before Redis
  hands it to another worker (orchestration/service/celery_app.py);
- `Workers` starts `celery -A orchestration.service.celery_app worker` processes, each in a session of its own
  (a stand-in host: its process group is the worker and its pool processes, nothing else), and waits,
  by asking them (a bounded number of pings), until all answer.

This process is the run's orchestrator (as a run worker launched by the daemon would be): it executes
each hour's `detect` run with the Celery executor, oldest first (an hour's baselines read the hours
before it), then folds incidents in process. With `shards:` in the home's service.yaml, each hour's
`detect_shard` runs go first, all at once (each orchestrated by a process of its own, their steps on
whichever workers are free), then the hour's `detect` (orchestration/shards.py).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import yaml

from orchestration.config.home import goodput_home
from orchestration.storage.warehouse import POOL, warehouse_for

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = REPO_ROOT / "deploy"
LAKE_DB = "goodput_lake"
DAGSTER_DB = "goodput_dagster"


class DeploymentError(RuntimeError):
    """The distributed stack cannot be set up: the message says what and what to do."""


@dataclass(frozen=True)
class Endpoints:
    """Where the shared services listen (loopback stand-ins, or real hosts)."""

    pg_host: str
    pg_port: int
    pg_user: str
    redis_url: str

    def libpq(self, dbname: str) -> str:
        return f"dbname={dbname} host={self.pg_host} port={self.pg_port} user={self.pg_user}"

    def dagster_url(self) -> str:
        """The instance storage's SQLAlchemy URL (the password from $PGPASSWORD; none for trust on loopback)."""
        password = os.environ.get("PGPASSWORD")
        login = f"{self.pg_user}:{quote(password, safe='')}" if password else self.pg_user
        return f"postgresql+psycopg2://{login}@{self.pg_host}:{self.pg_port}/{DAGSTER_DB}"


def prepare_home(home: Path, endpoints: Endpoints) -> dict[str, str]:
    """Write the home's lake settings and the Dagster instance for the stack; returns the environment
    every process of the deployment runs with."""
    template = DEPLOY / "dagster.yaml"
    if not template.is_file():
        raise DeploymentError(f"no {template}: the distributed demo runs from a Goodput checkout (deploy/ is not in the wheel)")
    data = home / "lake"
    data.mkdir(parents=True, exist_ok=True)
    service = home / "service.yaml"
    settings = yaml.safe_load(service.read_text()) if service.exists() else {}
    settings = settings or {}
    settings["warehouse"] = {"backend": "ducklake", "catalog": endpoints.libpq(LAKE_DB), "data_path": f"{data}/"}
    service.write_text(yaml.safe_dump(settings, sort_keys=False))
    dagster_home = home / "dagster-distributed"
    dagster_home.mkdir(parents=True, exist_ok=True)
    shutil.copy(template, dagster_home / "dagster.yaml")
    return deployment_env(home, dagster_home, endpoints)


def deployment_env(home: Path, dagster_home: Path, endpoints: Endpoints) -> dict[str, str]:
    env = {
        "GOODPUT_HOME": str(home),
        "DAGSTER_HOME": str(dagster_home),
        "GOODPUT_EXECUTOR": "celery",
        "GOODPUT_CELERY_BROKER": endpoints.redis_url,
        "GOODPUT_CELERY_BACKEND": endpoints.redis_url,
        "GOODPUT_DAGSTER_PG_URL": endpoints.dagster_url(),
    }
    timeout = os.environ.get("GOODPUT_CELERY_VISIBILITY_TIMEOUT")
    if timeout:   # the caller's choice, for every worker alike (unset: celery_app.py's default)
        env["GOODPUT_CELERY_VISIBILITY_TIMEOUT"] = timeout
    return env


@dataclass
class Workers:
    """`count` Celery worker processes (one step at a time each), logging under `logs`. Each starts in a
    session of its own (`start_new_session`): its process group holds the worker and its pool processes
    only, so a signal to the group (stop(), or a test's lost host) reaches no other worker and not us."""

    env: dict[str, str]
    logs: Path
    count: int = 2
    imports: tuple[str, ...] = ()
    processes: list[subprocess.Popen] = field(default_factory=list)

    def start(self, tries: int = 180) -> Workers:
        self.logs.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        for i in range(1, self.count + 1):
            command = [sys.executable, "-m", "celery", "-A", "orchestration.service.celery_app", "worker", "--pool", "prefork",
                       "--concurrency", "1", "-n", f"goodput-w{i}@%h", "-Q", "dagster", "--loglevel", "INFO",
                       "--without-gossip", "--without-mingle"]
            if self.imports:
                command += ["-I", ",".join(self.imports)]
            log = open(self.logs / f"worker-{i}.log", "wb")
            self.processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                                                   start_new_session=True))
        self.wait_ready(tries)
        return self

    def names(self) -> list[str]:
        return [f"goodput-w{i}" for i in range(1, self.count + 1)]

    def wait_ready(self, tries: int) -> None:
        """Ask the workers (a broadcast ping, 1 s for answers) until all answer, at most `tries` times."""
        from celery import Celery

        from orchestration.service.celery_app import broker_transport_options

        app = Celery(broker=self.env["GOODPUT_CELERY_BROKER"])
        # a client that reads replies sweeps overdue steps back onto the queue too: with the workers' timeout
        app.conf.broker_transport_options = broker_transport_options({**os.environ, **self.env})
        for _ in range(tries):
            dead = [p.args for p in self.processes if p.poll() is not None]
            if dead:
                raise DeploymentError(f"a Celery worker exited at start; see {self.logs}")
            answered = {name.split("@")[0] for reply in app.control.ping(timeout=1.0) for name in reply}
            if answered >= set(self.names()):
                return
        raise DeploymentError(f"the Celery workers did not all answer after {tries} pings; see {self.logs}")

    def stop(self) -> None:
        """SIGTERM each live worker's process group (the worker and its pool processes), SIGKILL after 60 s.
        A worker that already died (a lost host) is only reaped: its group is never signalled again."""
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):   # it may die between the poll and the signal
                    os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _quiet_celery() -> None:
    """dagster-celery registers its step task on the app once per submitted step: celery's warning about it is noise."""
    warnings.filterwarnings("ignore", message="Task name 'execute_plan' is already registered")


def _execute(job, instance, tags: dict[str, str], quiet: dict) -> int:
    """One run with its steps on Celery; its steps' retries (lake commit conflicts)."""
    import dagster as dg

    with dg.execute_job(job, instance=instance, tags=tags, run_config=quiet) as result:
        if not result.success:
            failed = [e for e in result.all_events if e.event_type in (dg.DagsterEventType.STEP_FAILURE,
                                                                        dg.DagsterEventType.RUN_FAILURE)]
            why = " ".join(str(getattr(failed[0].event_specific_data, "error", None) or failed[0].message).split())[:500]
            raise DeploymentError(f"{job.job_name} {tags['dagster/partition']} failed (run {result.run_id}): "
                                  f"{why if failed else 'see `goodput ui` or the worker logs'}")
        return len(instance.all_logs(result.run_id, of_type=dg.DagsterEventType.STEP_UP_FOR_RETRY))


def _repository():
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    return ReconstructableRepository.for_module("orchestration.definitions", "defs", working_directory=str(REPO_ROOT))


def _shard_run(hour: str, shard: str, quiet: dict) -> int:
    """One hour x shard run, orchestrated in a process of its own (spawned, with the deployment's environment):
    Dagster configures logging at each run's start, and two runs orchestrated by two threads of one process
    deadlock on the logging locks."""
    from orchestration.jobs import DETECT_SHARD
    from orchestration.shards import run_tags
    from orchestration.storage.instance import open_instance

    _quiet_celery()
    with open_instance() as instance:
        return _execute(_repository().get_reconstructable_job(DETECT_SHARD), instance, run_tags(hour, shard), quiet)


def run_hours(keys: list[str], say: Callable[[str], None], quiet: dict) -> dict:
    """Execute `detect` for each hour (steps on the Celery workers), then fold incidents. The environment
    (`deployment_env`) must be set before orchestration.jobs is first imported."""
    # imported here, not at the top: the executor is chosen when orchestration.jobs is first imported
    from orchestration.definitions import defs
    from orchestration.shards import configured
    from orchestration.storage.instance import open_instance

    _quiet_celery()
    if os.environ.get("GOODPUT_EXECUTOR") != "celery":
        raise DeploymentError("GOODPUT_EXECUTOR=celery must be set before the definitions are imported")
    with warehouse_for(goodput_home()).connect():   # the lake's catalog created and migrated once, before the
        pass                                        # workers' first steps (two creating it at once collide)
    instance = open_instance()
    detect = _repository().get_reconstructable_job("detect")
    shards = configured(goodput_home())
    if shards and POOL not in instance.event_log_storage.get_concurrency_keys():
        # the pool's limit row, made once here: two runs starting at once both insert it, and on PostgreSQL the
        # loser's transaction is aborted by the duplicate key and its run fails (dagster 1.13's
        # initialize_concurrency_limit_to_default updates after a failed insert in one transaction)
        instance.event_log_storage.initialize_concurrency_limit_to_default(POOL)
    orchestrators = (ProcessPoolExecutor(len(shards), mp_context=multiprocessing.get_context("spawn"))
                     if shards else contextlib.nullcontext())
    retried = 0
    with orchestrators as pool:
        for i, key in enumerate(sorted(keys), 1):
            started = time.monotonic()
            retries = 0
            if shards:   # every shard of the hour at once, then the hour
                retries += sum(pool.map(_shard_run, [key] * len(shards), [s.name for s in shards], [quiet] * len(shards)))
            retries += _execute(detect, instance, {"dagster/partition": key}, quiet)
            retried += retries
            say(f"  [{i:>2}/{len(keys)}] detect {key}  {time.monotonic() - started:4.1f}s on Celery"
                + (f" ({len(shards)} shards at once, then the hour)" if shards else "")
                + (f"  ({retries} step retries)" if retries else ""))
    defs.resolve_job_def("fold_incidents").execute_in_process(instance=instance, run_config=quiet)
    return {"partitions": len(keys), "step_retries": retried}
