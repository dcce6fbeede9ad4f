"""`goodput_service`: the one sensor the daemon ticks, doing the work of five (issue 15, idle cost).

Every tick of a sensor has a fixed cost whatever the sensor does: the daemon writes the tick to its
storage and calls the code server, and the code server used to build a Dagster instance and the
sensor's resources before the sensor's first line (~0.5 CPU-s together, against ~0.05 of work).
Five sensors ticking every 30-120 s were most of `goodput ui`'s idle cost. This sensor ticks every
30 s (service.yaml `raw_sensor.interval_seconds`) and does, in one tick:

1. the raw zone: a detect run for each hour that received data (sensors_raw.detect_requests);
2. finished runs since the last tick: a fold run after each successful detect run (run key
   `after-<run id>`, as the former run-status sensor) and after each backfill once it is done (run
   key `after-backfill-<id>`), an alert for each failed run (once: the alert's id is the run's);
3. incident alerts (sensors.alerts_pass), only when a fold run finished since the last tick, the
   warehouse file, the alert journal, the monitor outbox or the routing file changed since the last
   pass, or a delivery still waits (the fold run is what says so on a DuckLake, which has no file);
4. every `MONITOR_EVERY_S`: staleness (sensors.staleness_pass) and the dead runs' pool slots.

It takes no resource arguments, so Dagster builds neither an instance nor resources for a tick; it
uses the home's resources as configured (their methods need no set-up) and one instance per code
server process. The single sensors (raw_zone_detect, incident_alerts, goodput_staleness,
goodput_run_failures, fold_incidents_after_detect) stay importable for tests, the replay and the CLI.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
from dagster._core.execution.backfill import BULK_ACTION_TERMINAL_STATUSES
from dagster._core.storage.tags import BACKFILL_ID_TAG

from orchestration.jobs import detect_job, incidents_job
from orchestration.sensors import alerts as sensors
from orchestration.sensors import raw as sensors_raw
from orchestration.storage.instance import fail_dead_runs, free_dead_run_slots
from orchestration.storage.raw_zone import VERSION_TAG

SENSOR_NAME = "goodput_service"
INTERVAL_S = 30
"""The raw zone's cadence: new data waits at most this long for its detect run (SEV1 budget: minutes)."""
MONITOR_EVERY_S = 120
"""Staleness is judged against thresholds of 15 minutes: every 2 minutes is prompt."""
MAX_REDO = 2
"""A failed detect run (killed with the daemon, a lost machine) is run again this often per data version."""

_INSTANCES: dict[str, dg.DagsterInstance] = {}


def instance_of(context: dg.SensorEvaluationContext) -> dg.DagsterInstance:
    """The tick's instance, opened once per process (Dagster opens one per tick: most of a tick's cost)."""
    ref = context.instance_ref
    if ref is None:
        return context.instance   # a test's context, built with its instance
    key = dg.serialize_value(ref)
    if key not in _INSTANCES:
        _INSTANCES[key] = dg.DagsterInstance.from_ref(ref)
    return _INSTANCES[key]


def _epoch(moment: datetime) -> float:
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def finished_runs(instance: dg.DagsterInstance, mark: dict | None) -> tuple[list[dg.DagsterRun], dict]:
    """Runs that succeeded or failed since the mark, and the new mark: {"at": the newest update seen
    (epoch s), "ids": the runs updated in its last second}. The query looks a second back and drops
    the runs it named, so a run updated in the same instant as the mark is neither lost nor seen twice.
    No mark yet (the first tick): from now on."""
    if mark is None:
        return [], {"at": time.time(), "ids": []}
    records = instance.get_run_records(dg.RunsFilter(
        statuses=[dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE],
        updated_after=datetime.fromtimestamp(mark["at"] - 1.0, tz=timezone.utc)), limit=1000, ascending=True)
    new = [r for r in records if r.dagster_run.run_id not in set(mark["ids"])]
    at = max([mark["at"]] + [_epoch(r.update_timestamp) for r in records])
    ids = [r.dagster_run.run_id for r in records if _epoch(r.update_timestamp) >= at - 1.0]
    return [r.dagster_run for r in new], {"at": at, "ids": ids}


def _failure_message(instance: dg.DagsterInstance, run_id: str) -> str:
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE):
        return record.message or ""
    return ""


def _stat(path: str | Path) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_mtime_ns, info.st_size]


def alert_inputs(warehouse, alerting) -> list:
    """What an alert pass reads, as file stats: unchanged stats and a settled cursor mean nothing to do."""
    return [_stat(p) for p in (warehouse.path, alerting.journal_path, alerting.outbox_path, alerting.routes_path())]


def queue_redo(state: dict, run: dg.DagsterRun) -> None:
    """Remember a failed detect run's hour: its data was taken off the raw cursor when it was requested."""
    key, version = run.tags.get(sensors_raw.PARTITION_TAG), run.tags.get(VERSION_TAG, "")
    if key is not None and state.get("redone", {}).get(f"{key}@{version}", 0) < MAX_REDO:
        state.setdefault("redo", {})[key] = version


def redo_version(state: dict, key: str, version: str) -> str:
    """The data version of the next redo of `key`'s run of `version` (its run key: `<key>@<this>`)."""
    return f"{version}+redo{state.get('redone', {}).get(f'{key}@{version}', 0) + 1}"


def redo_requests(state: dict, requested: set[str], in_flight: set[str]) -> list[dg.RunRequest]:
    """Run requests for the failed hours that no newer request covers and no run holds now."""
    out, redone = [], state.setdefault("redone", {})
    for key, version in sorted(state.get("redo", {}).items()):
        if key in in_flight:
            continue   # wait for it (one run per partition)
        del state["redo"][key]
        if key in requested:
            continue   # newer data for the hour: its run covers the failed one
        run_key = f"{key}@{redo_version(state, key, version)}"
        redone[f"{key}@{version}"] = redone.get(f"{key}@{version}", 0) + 1
        out.append(dg.RunRequest(partition_key=key, run_key=run_key, job_name=detect_job.name, tags={VERSION_TAG: version}))
    state["redone"] = dict(sorted(redone.items())[-500:])   # bounded: hours long done drop out
    return out


def backfill_folds(instance: dg.DagsterInstance, state: dict, runs: list[dg.DagsterRun]) -> list[dg.RunRequest]:
    """A fold run for each backfill that is done. A backfill's runs are not `detect` runs, and the fold maps
    to none of its inputs' hours (assets/incidents.py), so nothing else folds after them. A backfill whose
    runs finish is watched (its id in the cursor) until Dagster marks it done, then folded once."""
    pending = set(state.get("backfills", [])) | {r.tags[BACKFILL_ID_TAG] for r in runs if BACKFILL_ID_TAG in r.tags}
    requests = []
    for backfill_id in sorted(pending):
        backfill = instance.get_backfill(backfill_id)
        if backfill is None or backfill.status in BULK_ACTION_TERMINAL_STATUSES:
            pending.discard(backfill_id)
            if backfill is not None:
                requests.append(dg.RunRequest(run_key=f"after-backfill-{backfill_id}", job_name=incidents_job.name))
    state["backfills"] = sorted(pending)
    return requests


def service_sensor(resources: dict, interval_seconds: int = INTERVAL_S, detect_jobs: list | None = None) -> dg.SensorDefinition:
    """The home's `goodput_service` sensor, over its resources (orchestration/definitions.py), ticking every
    `interval_seconds` (service.yaml `raw_sensor.interval_seconds`); `detect_jobs`: the home's detect jobs
    (with shards: `detect_shard` and `detect`, orchestration/jobs.py)."""
    warehouse, alerting, raw_root = resources["warehouse"], resources["alerting"], Path(resources["raw_zone"].root)

    @dg.sensor(name=SENSOR_NAME, jobs=[*(detect_jobs or [detect_job]), incidents_job], minimum_interval_seconds=interval_seconds,
               default_status=dg.DefaultSensorStatus.RUNNING)
    def goodput_service(context: dg.SensorEvaluationContext):
        """Detect each hour that received raw data, fold after each detect run, deliver incident alerts,
        and alert on failed runs and staleness: one tick, every 30 s by default (docs/alerting.md)."""
        started = time.process_time()
        state = json.loads(context.cursor) if context.cursor else {}
        instance = instance_of(context)
        notes: list[str] = fail_dead_runs(instance)   # a run killed with its daemon: failed, so its hour is redone
        runs, state["runs"] = finished_runs(instance, state.get("runs"))
        for run in runs:
            if run.job_name == detect_job.name and run.status == dg.DagsterRunStatus.FAILURE:
                queue_redo(state, run)
        # the hours redone (requested below, or waiting for a run in flight): the raw plan holds the hours after them
        # back and refreshes them after the redo (its run key: the one redo_requests gives it)
        redo = {key: redo_version(state, key, version) for key, version in state.get("redo", {}).items()}
        flight = sensors_raw.partitions_in_flight(instance)   # read once a tick: the raw plan's and the redo's
        requests, state["raw"], raw_notes = sensors_raw.detect_requests(instance, state.get("raw", {}), warehouse, raw_root,
                                                                        redo, flight)
        notes += raw_notes
        failed, folded = 0, False
        for run in runs:
            if run.job_name == detect_job.name and run.status == dg.DagsterRunStatus.SUCCESS:
                requests.append(dg.RunRequest(run_key=f"after-{run.run_id}", job_name=incidents_job.name))
            elif run.job_name == incidents_job.name and run.status == dg.DagsterRunStatus.SUCCESS:
                folded = True   # new incident transitions, whichever backend holds them
            elif run.status == dg.DagsterRunStatus.FAILURE:
                failed += 1
                notes.append(sensors.alert_run_failure(context, instance, run, _failure_message(instance, run.run_id),
                                                       warehouse, alerting))
        requests += backfill_folds(instance, state, runs)
        if state.get("redo"):
            requests += redo_requests(state, {r.partition_key for r in requests}, flight[0])
        alerts = state.setdefault("alerts", {})
        if (failed or folded or alert_inputs(warehouse, alerting) != state.get("alert_inputs") or not alerts.get("settled")
                or not state.get("monitor_settled")):
            notes.append(sensors.alerts_pass(context, lambda: instance, alerts, warehouse, alerting))
            state["alert_inputs"] = alert_inputs(warehouse, alerting)   # after the pass: mirroring writes
            # an alert about Goodput still waiting (a sink's backoff) keeps the pass running every tick
            state["monitor_settled"] = not alerting.pending(alerting.monitor_alerts(), clock=sensors.utcnow)
        if time.time() - state.get("monitor_at", 0) >= MONITOR_EVERY_S:
            stale = state.setdefault("stale", {})
            notes.append(sensors.staleness_pass(context, instance, stale, warehouse, alerting, raw_root))
            notes += [slot.line() for slot in free_dead_run_slots(instance)]
            state["monitor_at"] = time.time()
        cursor = json.dumps(state, sort_keys=True, separators=(",", ":"))
        summary = "; ".join(n for n in notes if n) or "nothing changed"
        if requests:
            context.log.info(summary)
            return dg.SensorResult(run_requests=requests, cursor=cursor)
        return dg.SensorResult(skip_reason=f"{summary} [{time.process_time() - started:.3f} CPU-s]", cursor=cursor)

    return goodput_service
