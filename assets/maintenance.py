"""The daily maintenance asset: retention, zstd raw zone, DuckDB compaction, bounded run history
(orchestration/maintenance.py; settings in `GOODPUT_HOME/service.yaml`, docs/service.md)."""

from datetime import datetime, timezone
from pathlib import Path

import dagster as dg

from orchestration.maintenance import apply_retention, compact, compress, compressible_hours, trim_runs
from orchestration.raw_zone import RawZoneResource
from orchestration.service_config import load_service_settings
from orchestration.warehouse import POOL, WarehouseResource


@dg.asset(group_name="maintenance", kinds={"duckdb"}, pool=POOL)
def maintenance(context: dg.AssetExecutionContext, warehouse: WarehouseResource, raw_zone: RawZoneResource) -> dg.MaterializeResult:
    """Deletes rows past retention (raw rows after `retention.raw_days`, per-minute series, findings
    and incidents after `retention.minutes_days`), compresses raw-zone hours older than a day to
    `.jsonl.zst`, compacts the DuckDB file when a third of it is free, and deletes Dagster runs
    older than `retention.runs_days`."""
    root = Path(raw_zone.root)
    settings = load_service_settings(root.parent).retention
    now = datetime.now(timezone.utc)
    with warehouse.connect() as con:
        deleted = apply_retention(con, now, settings.raw_days, settings.minutes_days)
        files = compressible_hours(root, con, now, settings.compress_after_days)
    saved = sum(compress(path) for path in files)
    compacted = compact(Path(warehouse.path))
    runs = trim_runs(context.instance, now, settings.runs_days)
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
