"""Ingest assets: one hourly-partitioned asset per raw source, raw zone -> DuckDB. What a run reads
and writes is in assets/ingest_core.py (the whole hour) and assets/ingest_incremental.py (only the
bytes appended since the last run)."""

import dagster as dg

from assets.ingest_core import (  # noqa: F401  (re-exported for callers of this module)
    SOURCES,
    RawSource,
    ingest_partition,
    line_count,
    line_counts,
    parse_sql,
    target_fields,
)
from assets.ingest_incremental import environment_allows_incremental, ingest_hour
from orchestration.partitions import hourly
from orchestration.storage.raw_zone import RawZoneResource
from orchestration.storage.warehouse import POOL, WarehouseResource


def build_ingest_asset(source: RawSource) -> dg.AssetsDefinition:
    @dg.asset(
        name=source.table,
        partitions_def=hourly,
        group_name="ingest",
        kinds={"duckdb"},
        pool=POOL,
        deps=list(source.producers),
        description=source.description + " Replaces the partition's hour atomically; bad lines go to `quarantine`.",
    )
    def _ingest(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource, raw_zone: RawZoneResource
    ) -> dg.MaterializeResult:
        window = context.partition_time_window
        files = raw_zone.files(source.folder, window.start, report=context.log.warning)

        with warehouse.connect() as con:   # only what arrived since the last run (issue 15)
            result = ingest_hour(con, source, files, window.start, window.end, environment_allows_incremental())
        if result["rows_quarantined"]:
            context.log.warning(
                f"{source.folder} {context.partition_key}: {result['rows_quarantined']} line(s) quarantined: "
                + "; ".join(f"{reason} ({n})" for reason, n in result["reasons"])
            )
        return dg.MaterializeResult(
            metadata={
                "files": result["files"],
                "rows_loaded": result["rows_loaded"],
                "rows_quarantined": result["rows_quarantined"],
                "parse": result["parse"],
                "bytes_read": result.get("bytes_read", 0),
                "quarantine_reasons": dg.MetadataValue.md(
                    "\n".join(f"- {reason}: {n}" for reason, n in result["reasons"]) or "none"
                ),
            }
        )

    return _ingest


ingest_assets = [build_ingest_asset(source) for source in SOURCES]
