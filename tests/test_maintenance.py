"""The daily maintenance: old raw-zone hours compressed to .jsonl.zst (read back to the same rows,
and not taken for new data by the sensor), rows past retention deleted, the DuckDB file compacted,
and the analyst views still answering."""

from datetime import datetime, timezone

import dagster as dg
import pytest

from assets.ingest import ingest_assets
from assets.maintenance import maintenance
from orchestration.definitions import resources_for
from orchestration.sensors import raw as sensors_raw
from orchestration.storage.warehouse import WarehouseResource

HOUR0, HOUR1 = "2026-11-30-00:00", "2026-11-30-01:00"
COLUMNS = "time, host, gpu_index, utilization_ratio, power_watts, source_line"


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    monkeypatch.setattr(sensors_raw, "utcnow", lambda: datetime(2026, 12, 1, 12, tzinfo=timezone.utc))


def rows(home) -> list[tuple]:
    with WarehouseResource(path=str(home / "warehouse.duckdb")).connect(read_only=True) as con:
        return con.execute(f"SELECT {COLUMNS} FROM gpu_samples ORDER BY host, gpu_index, time").fetchall()


def tick(instance, resources, cursor=None):
    context = dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor)
    result = sensors_raw.raw_zone_detect(context)
    return ([] if isinstance(result, dg.SkipReason) else [r.partition_key for r in result]), context.cursor


def test_maintenance_compresses_deletes_compacts_and_the_views_still_answer(small_home, resources, instance):
    assert dg.materialize(ingest_assets, partition_key=HOUR0, instance=instance, resources=resources).success
    before = rows(small_home)
    assert before
    requested, cursor = tick(instance, resources)
    assert requested == [HOUR1]                      # hour 0 is in the warehouse
    (small_home / "service.yaml").write_text("retention:\n  raw_days: 400\n  minutes_days: 400\n  compress_after_days: 1\n")
    result = dg.materialize([maintenance], instance=instance, resources=resources_for(small_home))
    assert result.success
    hour0 = sorted((small_home / "raw" / "gpu_samples" / "2026-11-30" / "00").iterdir())
    hour1 = sorted((small_home / "raw" / "gpu_samples" / "2026-11-30" / "01").iterdir())
    assert hour0 and all(p.name.endswith(".jsonl.zst") for p in hour0)   # ingested and old: compressed
    assert hour1 and all(p.name.endswith(".jsonl") for p in hour1)       # never ingested: left alone
    assert rows(small_home) == before                                    # nothing past retention
    assert tick(instance, resources, cursor)[0] == []                     # x.jsonl.zst is the x.jsonl it knew
    # A compressed hour read again gives the same rows.
    assert dg.materialize(ingest_assets, partition_key=HOUR0, instance=instance, resources=resources).success
    assert rows(small_home) == before
    # Retention: raw rows older than a day go; the DuckDB file is compacted; the views answer.
    (small_home / "service.yaml").write_text("retention:\n  raw_days: 1\n  minutes_days: 400\n")
    result = dg.materialize([maintenance], instance=instance, resources=resources_for(small_home))
    metadata = result.asset_materializations_for_node("maintenance")[0].metadata
    assert metadata["rows_deleted"].value >= len(before) and rows(small_home) == []
    assert metadata["warehouse_bytes_after"].value <= metadata["warehouse_bytes_before"].value
    with WarehouseResource(path=str(small_home / "warehouse.duckdb")).connect(read_only=True) as con:
        views = [v for (v,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
        assert views
        for view in views:
            con.execute(f'SELECT * FROM "{view}" LIMIT 1').fetchall()
