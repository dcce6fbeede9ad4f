"""The raw-zone sensor: requests a `detect` run for each hour that received data, and nothing else.

Replaces the every-minute schedule and the late-data sensor. At each tick it lists the raw files of
the recent days (`raw_sensor.recent_days`, default 3) and compares their sizes with its cursor
(relative path -> size at the last request). Older days are listed when an hour folder appears in
them (an import of old logs) and all of them once per `raw_sensor.full_scan_hours` (late files for
old hours); files the cursor does not hold are compared with the warehouse's ingest log. Each hour
with a new, grown or rewritten file gets one run request, with run key `<hour>@<data version>` (a
digest of its files and sizes), so a tick repeated after a crash asks for the same run and Dagster
launches it once.

At most one detect run per partition is queued or running: an hour whose run is still in flight is
not requested (and its cursor not advanced), so its newer data is requested at the first tick
after that run ends, never beside it (the instance's run queue also limits `dagster/partition` to
one, docs/service.md). Many hours at once (an import): oldest first, `max_hours_per_tick` per tick,
and a past hour whose checks read an earlier hour with new data waits for that hour's run (the hour
in progress never waits: it is detected once more after it). When a past hour receives data after
the hours that follow it were detected, those within the checks' longest lookback are detected
again once its run is done, one after another (`lookback_refresh`).
An idle raw zone costs one listing of a few days' folders per tick and launches nothing.

With shards configured, an hour's changed files are asked of the shards they belong to first, then of
the hour (orchestration/sensors/shards.py).
"""

from __future__ import annotations

import functools
import json
import math
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import duckdb

import checks.signals  # noqa: F401  (registers the signals: their lookbacks)
from checks.registry import REGISTRY
from orchestration.config.service_config import load_service_settings
from orchestration.config.thresholds import ThresholdsResource
from orchestration.jobs import detect_job
from orchestration.partitions import HOUR_KEY, hourly
from orchestration.sensors import shards as sensors_shards
from orchestration.shards import configured
from orchestration.storage import raw_watch, sql
from orchestration.storage.raw_zone import VERSION_TAG, RawZoneResource
from orchestration.storage.warehouse import WarehouseBusy, WarehouseMissing, WarehouseResource
from sources.config_file import ConfigError

IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
PARTITION_TAG = "dagster/partition"
LOOKBACK_UNITS = {"lookback_seconds": 1.0, "lookback_minutes": 60.0, "lookback_hours": 3600.0}


def utcnow() -> datetime:
    """Wall-clock now; tests and the replay replace it to move time."""
    return datetime.now(timezone.utc)


def partitions_in_flight(instance: dg.DagsterInstance | None) -> tuple[set[str], dict[str, str]]:
    """(partitions with a detect run queued or running, those of them whose run reads new raw data -> its data
    version: requested by this sensor, not a backfill or the UI)."""
    if instance is None:
        return set(), {}
    runs = instance.get_run_records(dg.RunsFilter(job_name=detect_job.name, statuses=IN_FLIGHT), limit=1000)
    tags = [r.dagster_run.tags for r in runs if r.dagster_run.tags.get(PARTITION_TAG)]
    return {t[PARTITION_TAG] for t in tags}, {t[PARTITION_TAG]: t[VERSION_TAG] for t in tags if VERSION_TAG in t}


def ingested_sizes(warehouse: WarehouseResource, keys: set[str]) -> dict[str, int]:
    """relative path -> size the warehouse last ingested, for the files of partitions `keys`."""
    if not keys or not Path(warehouse.path).exists():
        return {}
    hours = [datetime.strptime(k, HOUR_KEY) for k in sorted(keys)]
    with warehouse.connect(read_only=True, wait_seconds=2) as con:
        try:
            rows = sql.run(con, "service/ingested_sizes", {"hours": hours}).fetchall()
        except duckdb.CatalogException:
            # the file exists without the ingest log: the first run was killed before its migration committed,
            # so nothing was ingested (the next run migrates it); never an error that stops every later tick
            return {}
    return {raw_watch.relative_key(file): size for file, size in rows}


def plan(root: Path, cursor: dict, now: datetime, settings, warehouse: WarehouseResource | None,
         in_flight: set[str], first_key: str, fresh: dict[str, str] | None = None, reach: int = 0,
         redo: dict[str, str] | None = None) -> tuple[list[tuple[str, str, dict[str, int], list[str]]], dict, list[str]]:
    """(requests [(partition key, data version, files, the files that changed)], the new cursor, notes) for one tick.
    `fresh`: the hours in flight whose runs read new raw data -> its version; `reach`: how many hours after an hour read it
    (`hours_reading`). A past hour that reads an hour with new data waiting (requested this tick, or in
    `fresh`) waits for that hour's run (`waits_for_earlier`). `redo`: hours whose failed run the service sensor
    runs again -> that redo's version; the hours after them wait for it and are refreshed after it."""
    files: dict[str, int] = dict(cursor.get("files", {}))
    days_seen: dict[str, int] = dict(cursor.get("days", {}))
    full_due = now.timestamp() - cursor.get("full_at", 0) >= settings.full_scan_hours * 3600
    days = raw_watch.day_folders(root)
    recent = set(raw_watch.recent_days(days, now, settings.recent_days))
    # the days of the hours a refresh waits for are read again
    waiting_days = {datetime.strptime(key, HOUR_KEY).strftime("%Y-%m-%d") for key in cursor.get("refresh", {})}
    to_scan = sorted(days) if full_due else sorted(recent | {d for d, m in days.items()
                                                             if days_seen.get(d) != m or d.split("/", 1)[1] in waiting_days})
    # every source's folder of a date read: an hour's data version, and the hours a late one refreshes, cover all
    dates = {d.split("/", 1)[1] for d in to_scan}
    to_scan = sorted(d for d in days if d.split("/", 1)[1] in dates)
    scanned = raw_watch.scan_days(root, to_scan)
    hours = raw_watch.by_hour(scanned)
    notes: list[str] = []
    # Files the cursor does not hold (first tick, old days): what the warehouse ingested is the record.
    unknown = {raw_watch.hour_key(r) for r in scanned if r not in files and raw_watch.plain_name(r) not in files}
    known = dict(files)
    if unknown and warehouse is not None:
        try:
            known = {**ingested_sizes(warehouse, unknown - {None}), **files}
        except (WarehouseBusy, WarehouseMissing) as reason:
            if not cursor:
                return [], cursor, [f"waiting for the warehouse before the first look ({reason})"]
            notes.append(f"{reason}: hours new to this sensor are requested as new")
    changed = raw_watch.changed_hours(scanned, known)
    # what the ingest log vouched for joins the cursor: the next tick need not ask the warehouse again
    files.update({r: s for r, s in scanned.items() if r not in files and known.get(r) == s
                  and raw_watch.hour_key(r) not in changed})
    current = now.strftime(HOUR_KEY)
    requests, deferred = [], set()
    pending = {**(redo or {}), **(fresh or {})}   # hours whose new data is not yet in the warehouse -> its version
    unscanned = {d.split("/", 1)[1] for d in days} - dates
    # hours requested at an earlier tick with the data they still have -> its version (kept for days not read)
    asked_before = cursor.get("asked", {})
    asked = {key: version for key, version in asked_before.items() if key[:10] in unscanned}
    for key in sorted(changed):
        version = raw_watch.version(hours[key])
        if asked_before.get(key) == version:
            asked[key] = version
            if key not in in_flight:
                # Dagster launches a run key once: that run is done and left the hour as it was (it failed; the
                # service sensor redoes it), so it is not asked again, and the hours after it do not wait for it
                continue
        if key > current or key < first_key:
            notes.append(f"{key} is outside the partitions ({first_key} .. {current})"
                         + (": set partitions.start in service.yaml and restart the UI" if key < first_key else ""))
            deferred.add(key)
            continue
        if (key in in_flight or len(requests) >= settings.max_hours_per_tick
                or (key != current and waits_for_earlier(key, pending, reach))):
            deferred.add(key)
            pending[key] = version
            continue
        requests.append((key, version, hours[key], changed[key]))
        pending[key] = asked[key] = version
    requested = {request[0] for request in requests}
    redone = [(key, version, {}, []) for key, version in sorted((redo or {}).items()) if key not in requested]
    refreshed, refresh = lookback_refresh(cursor.get("refresh", {}), requests + redone, changed, hours, in_flight, current,
                                          pending, reach, unscanned)
    requests += refreshed
    for _key, _version, hour_files, _changed in requests:
        for relative, size in hour_files.items():
            files[relative] = size
            files.pop(raw_watch.plain_name(relative) if relative.endswith(".zst") else relative + ".zst", None)
    deferred_days = {"/".join(r.split("/")[:2]) for r in scanned if raw_watch.hour_key(r) in deferred}
    for day in to_scan:
        if day in days:
            days_seen[day] = days[day]
    for day in deferred_days:   # read again at the next tick: an old day's waiting hour is not in the cursor's files
        days_seen.pop(day, None)
    new_cursor = {
        # keep the cursor to the recent days: older files are checked against the ingest log
        "files": {r: s for r, s in files.items() if "/".join(r.split("/")[:2]) in recent},
        "days": {d: m for d, m in days_seen.items() if d in days},
        "full_at": now.timestamp() if full_due else cursor.get("full_at", 0),   # waiting hours' days: above
        "refresh": refresh,
        "asked": asked,
    }
    if deferred:
        notes.append(f"{len(deferred)} hour(s) wait: a run in flight, or over {settings.max_hours_per_tick} per tick")
    return requests, new_cursor, notes


def hours_reading(home: Path) -> int:
    """How many hours after an hour read it: the longest lookback of any check (the registry's defaults with the
    home's thresholds.yaml over them), whole hours, plus the hour before it (a lookback starts inside an hour;
    busy_not_progressing also reads the hour before its lookback for a long stall's onset). A thresholds file
    that does not validate counts as absent here: the checks' own steps report it."""
    path = home / "thresholds.yaml"
    stat = path.stat() if path.exists() else None
    return _hours_reading(str(path), (stat.st_mtime_ns, stat.st_size) if stat else None)


@functools.cache
def _hours_reading(path: str, _version: tuple[int, int] | None) -> int:
    """`hours_reading` for one version of the file, (mtime, size): read again when it changes, not at every tick."""
    try:
        overrides = ThresholdsResource(path=path).overrides()
    except ConfigError:
        overrides = {}
    seconds = max(float({**signal.thresholds, **overrides.get(signal.name, {})}.get(name, 0)) * unit
                  for signal in REGISTRY for name, unit in LOOKBACK_UNITS.items())
    return math.ceil(seconds / 3600) + 1


def earlier_within(key: str, hours, reach: int) -> list[str]:
    """The hours of `hours` (partition keys) in the `reach` hours before `key`: those whose rows `key`'s checks read."""
    start = datetime.strptime(key, HOUR_KEY)
    first = (start - timedelta(hours=reach)).strftime(HOUR_KEY)
    return sorted(h for h in hours if first <= h < key)


def waits_for_earlier(key: str, pending, reach: int) -> bool:
    """Whether `key` reads an hour whose new data is not yet in the warehouse (`pending`)."""
    return bool(earlier_within(key, pending, reach))


def lookback_refresh(pending: dict[str, list], requests: list, changed: dict, hours: dict[str, dict[str, int]],
                     in_flight: set[str], current: str, unsettled: dict[str, str], reach: int,
                     unscanned_days: set[str] = frozenset()) -> tuple[list, dict[str, list]]:
    """Hours to detect again because an earlier hour that their checks read (the lookback) received data after
    they were detected: late lines of a past hour (an agent that flushes after a network outage) would otherwise
    leave the later hours' findings as they were judged without them (a stall "seen" where the data had only not
    yet arrived). Returns (requests, the refreshes still waiting, for the cursor: later hour -> [[earlier hour,
    its data version], ...]). A refresh waits until no earlier hour it follows and not itself is in flight, and
    no hour it reads has new data waiting (`unsettled`: hour -> data version, those requested this tick among
    them), so it reads what they wrote; refreshes of hours that read each other run one after another. It is
    dropped when the hour's own new data is requested by then (that run reads them). Hours already detected with
    their current data (none of their files changed) are refreshed, in the days read this tick or in a day not
    read (`unscanned_days`, YYYY-MM-DD: the next day of a late file in an old day; its hours are read at the
    next tick). The hour in progress, requested beside an earlier hour with new data (it is never held back:
    the first minutes of an hour are live), is refreshed once that hour's run is done unless its own next data
    comes first. An import of many hours detects each for its own data, one after another."""
    requested = {request[0] for request in requests}
    due, waiting, settling = [], {}, dict(unsettled)
    for key, origins in sorted(pending.items()):
        if key not in hours:   # its day is read at every tick a refresh waits: an hour it does not have
            continue
        if (key in in_flight or any(origin in in_flight or origin in requested for origin, _version in origins)
                or waits_for_earlier(key, settling, reach)):
            waiting[key] = origins
        elif key not in requested:
            origin, origin_version = max(origins)
            version = raw_watch.version(hours[key])
            due.append((key, f"{version}+after-{origin}@{origin_version}", hours[key], sorted(hours[key])))
            settling[key] = version
    for key, version, _files, _changed in requests:
        if key == current:   # requested beside the earlier hours it reads: once more after them
            for earlier in earlier_within(key, unsettled, reach):
                if [earlier, unsettled[earlier]] not in waiting.get(key, []):
                    waiting.setdefault(key, []).append([earlier, unsettled[earlier]])
        start = datetime.strptime(key, HOUR_KEY)
        for step in range(1, reach + 1):
            after = (start + timedelta(hours=step)).strftime(HOUR_KEY)
            if after > current:
                break
            readable = (after in hours and after not in changed) or after[:10] in unscanned_days
            if readable and [key, version] not in waiting.get(after, []):
                waiting.setdefault(after, []).append([key, version])
    return due, waiting


def detect_requests(instance: dg.DagsterInstance | None, cursor: dict, warehouse: WarehouseResource,
                    root: Path, redo: dict[str, str] | None = None,
                    flight: tuple[set[str], dict[str, str]] | None = None) -> tuple[list[dg.RunRequest], dict, list[str]]:
    """One look at the raw zone: (run requests, the new cursor, notes). `redo`: `plan`'s; `flight`: this tick's
    `partitions_in_flight`, where the caller has it already (else read here)."""
    settings = load_service_settings(root.parent).raw_sensor
    shards = configured(root.parent)
    in_flight, fresh = partitions_in_flight(instance) if flight is None else flight
    if not shards:
        requests, new_cursor, notes = plan(root, cursor, utcnow(), settings, warehouse, in_flight,
                                           hourly.start.strftime(HOUR_KEY), fresh, hours_reading(root.parent), redo)
        return ([sensors_shards.detect_request(key, data_version) for key, data_version, _files, _changed in requests],
                new_cursor, notes)
    waiting = dict(cursor.get("after_shards", {}))   # hours whose `detect` waits for their shard runs
    shard_busy = sensors_shards.shard_hours_in_flight(instance, IN_FLIGHT)
    # an hour whose shard runs are in flight or whose `detect` waits for them has new data not yet all written
    unsettled = {**{hour: "shards" for hour in shard_busy}, **waiting, **fresh}
    planned, new_cursor, notes = plan(root, cursor, utcnow(), settings, warehouse, in_flight | shard_busy | set(waiting),
                                      hourly.start.strftime(HOUR_KEY), unsettled, hours_reading(root.parent), redo)
    requests, new_cursor["after_shards"] = sensors_shards.requests(planned, shards, waiting, shard_busy)
    return requests, new_cursor, notes


@dg.sensor(job=detect_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def raw_zone_detect(context: dg.SensorEvaluationContext, warehouse: WarehouseResource, raw_zone: RawZoneResource):
    """Request a detect run for each hour whose raw files changed (new files, appended bytes), one
    run per partition at a time, oldest hours first; an hour without new data launches nothing.
    (`goodput ui` runs this as part of `goodput_service`, orchestration/sensors/service.py.)"""
    started = time.process_time()
    cursor = json.loads(context.cursor) if context.cursor else {}
    instance = context.instance if _has_instance(context) else None
    requests, new_cursor, notes = detect_requests(instance, cursor, warehouse, Path(raw_zone.root))
    for note in notes:
        context.log.info(note)
    context.update_cursor(json.dumps(new_cursor, sort_keys=True, separators=(",", ":")))
    if not requests:
        return dg.SkipReason("no new raw data" + (f" ({'; '.join(notes)})" if notes else "")
                             + f" [{time.process_time() - started:.3f} CPU-s]")
    return requests


def _has_instance(context) -> bool:
    try:
        return context.instance is not None
    except dg.DagsterInvariantViolationError:   # a context built without an instance (tests)
        return False
