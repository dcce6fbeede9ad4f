"""The daily maintenance asset: retention, zstd raw zone, DuckDB compaction, bounded run history
(orchestration/maintenance.py; settings in `GOODPUT_HOME/service.yaml`, docs/service.md)."""

from datetime import datetime, timezone
from pathlib import Path

import dagster as dg

from orchestration.config.service_config import load_service_settings
from orchestration.maintenance import apply_retention, compact, compress, compressible_hours, trim_runs
from orchestration.storage import warehouse_lake
from orchestration.storage.raw_zone import RawZoneResource
from orchestration.storage.warehouse import POOL, WarehouseResource


@dg.asset(group_name="maintenance", kinds={"duckdb"}, pool=POOL)
def maintenance(context: dg.AssetExecutionContext, warehouse: WarehouseResource, raw_zone: RawZoneResource) -> dg.MaterializeResult:
    """Deletes rows past retention (raw rows after `retention.raw_days`, per-minute series, findings
    and incidents after `retention.minutes_days`), compresses raw-zone hours older than a day to
    `.jsonl.zst`, compacts the DuckDB file when a third of it is free (on the DuckLake backend: merges
    small adjacent data files and expires snapshots older than `warehouse.snapshot_days`), and deletes
    Dagster runs older than `retention.runs_days`."""
    root = Path(raw_zone.root)
    service = load_service_settings(root.parent)
    settings = service.retention
    now = datetime.now(timezone.utc)
    with warehouse.connect() as con:
        deleted = apply_retention(con, now, settings.raw_days, settings.minutes_days)
        files = compressible_hours(root, con, now, settings.compress_after_days)
    saved = sum(compress(path) for path in files)
    runs = trim_runs(context.instance, now, settings.runs_days)
    if warehouse.backend == "ducklake":   # issue 21: the lake's files and snapshots, not a file to compact
        with warehouse.connect() as con:
            lake = warehouse_lake.maintain(con, service.warehouse.snapshot_days)
        context.log.info(f"deleted {sum(deleted.values())} row(s), compressed {len(files)} raw file(s), lake: {lake}")
        return dg.MaterializeResult(metadata={"rows_deleted": sum(deleted.values()), "raw_files_compressed": len(files),
                                              "raw_bytes_saved": saved, "dagster_runs_deleted": runs,
                                              **{f"lake_{k}": v for k, v in lake.items()}})
    compacted = compact(Path(warehouse.path))
    context.log.info(f"deleted {sum(deleted.values())} row(s), compressed {len(files)} raw file(s) ({saved / 2**20:.1f} MiB saved), "
                     f"{'compacted ' + str(compacted) if compacted else 'no compaction'}, {runs} old run(s) deleted")
    return dg.MaterializeResult(metadata={
        "rows_deleted": sum(deleted.values()),
        "rows_deleted_by_table": dg.MetadataValue.json(deleted),
        "raw_files_compressed": len(files),
        "raw_bytes_saved": saved,
        "warehouse_bytes_before": compacted[0] if compacted else Path(warehouse.path).stat().st_size,
        "warehouse_bytes_after": compacted[1] if compacted else Path(warehouse.path).stat().st_size,
        "dagster_runs_deleted": runs,
    })
