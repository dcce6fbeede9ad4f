"""Late data: a sensor that notices raw files which arrived (or changed) for an hour already
processed, and requests exactly those hours again.

It compares each processed hour's raw files (name, size, mtime) with the ingest log
(`ingest_files`: what that partition's last run read). A difference requests the `detect` job for
that partition once: the run key is the hour plus a digest of its files' state, so a second tick
before the re-run finishes asks for nothing new. The re-run replaces the hour (delete + insert in
one transaction), so nothing is read twice into the warehouse. Hours still open (the schedule's
business) are left alone until `GRACE` after they end.
"""

import hashlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg

from assets.ingest import SOURCES
from orchestration.jobs import detect_job
from orchestration.partitions import HOUR_KEY
from orchestration.raw_zone import RawZoneResource
from orchestration.warehouse import WarehouseBusy, WarehouseMissing, WarehouseResource

GRACE = timedelta(minutes=10)


def raw_state(raw_root: Path, folder: str) -> dict[str, dict[str, tuple[int, int]]]:
    """partition key -> {file path: (size, mtime_ns)} for every hour folder of a raw source."""
    state: dict[str, dict[str, tuple[int, int]]] = {}
    for path in sorted((raw_root / folder).glob("*/*/*.jsonl")):
        try:
            hour = datetime.strptime(f"{path.parent.parent.name} {path.parent.name}", "%Y-%m-%d %H")
            stat = path.stat()
        except (ValueError, OSError):
            continue
        state.setdefault(hour.strftime(HOUR_KEY), {})[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return state


def changed_partitions(warehouse: WarehouseResource, raw_zone: RawZoneResource, processed: dict[str, set[str]],
                       now: datetime) -> dict[str, list[str]]:
    """partition key -> the sources whose raw files differ from what that partition's last run read."""
    with warehouse.connect(read_only=True, wait_seconds=0) as con:
        rows = con.execute("SELECT source, strftime(partition_start, '%Y-%m-%d-%H:00'), file, size_bytes, modified_ns "
                           "FROM ingest_files").fetchall()
    seen: dict[tuple[str, str], dict[str, tuple[int, int]]] = {}
    for source, key, file, size, mtime in rows:
        seen.setdefault((source, key), {})[file] = (size, mtime)
    changed: dict[str, list[str]] = {}
    for source in SOURCES:
        for key, files in raw_state(Path(raw_zone.root), source.folder).items():
            hour_end = datetime.strptime(key, HOUR_KEY).replace(tzinfo=timezone.utc) + timedelta(hours=1)
            if key not in processed.get(source.table, set()) or hour_end + GRACE > now:
                continue
            if files != seen.get((source.folder, key), {}):
                changed.setdefault(key, []).append(source.folder)
    return changed


def _digest(raw_root: Path, key: str) -> str:
    digest = hashlib.sha1(key.encode())
    for source in SOURCES:
        for file, (size, mtime) in sorted(raw_state(raw_root, source.folder).get(key, {}).items()):
            digest.update(f"{file}|{size}|{mtime}".encode())
    return digest.hexdigest()[:16]


@dg.sensor(job=detect_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def late_raw_files(context: dg.SensorEvaluationContext, warehouse: WarehouseResource, raw_zone: RawZoneResource):
    """Re-run the hours whose raw files changed after they were processed (late or re-pulled files)."""
    processed = {s.table: context.instance.get_materialized_partitions(dg.AssetKey(s.table)) for s in SOURCES}
    if not any(processed.values()):
        return dg.SkipReason("no hour processed yet")
    try:
        changed = changed_partitions(warehouse, raw_zone, processed, datetime.now(timezone.utc))
    except (WarehouseBusy, WarehouseMissing) as reason:
        return dg.SkipReason(str(reason))
    if not changed:
        return dg.SkipReason("no late raw files")
    requests = []
    for key, folders in sorted(changed.items()):
        context.log.info(f"late raw files for {key} ({', '.join(folders)}): requesting the hour again")
        requests.append(dg.RunRequest(partition_key=key, run_key=f"late:{key}:{_digest(Path(raw_zone.root), key)}",
                                      tags={"goodput/late_sources": ",".join(folders)}))
    return requests
