"""Ingest: idempotent partitions, quarantine with reasons, atomic writes."""

import json
from datetime import datetime

import dagster as dg
import pytest

from assets.ingest import SOURCES, ingest_assets, ingest_partition
from orchestration.warehouse import WarehouseResource

TABLES = ("gpu_samples", "training_steps", "lineage_events", "quarantine", "ingest_files")


def snapshot(warehouse: WarehouseResource) -> dict:
    with warehouse.connect(read_only=True) as con:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


def test_materializing_a_partition_twice_leaves_identical_tables(resources, instance):
    key = "2026-11-30-00:00"
    first = dg.materialize(ingest_assets, resources=resources, partition_key=key, instance=instance)
    assert first.success
    before = snapshot(resources["warehouse"])
    assert len(before["gpu_samples"]) == 2 * 360 and len(before["training_steps"]) > 1000
    again = dg.materialize(ingest_assets, resources=resources, partition_key=key, instance=instance)
    assert again.success
    assert snapshot(resources["warehouse"]) == before


def test_partitions_do_not_touch_each_other(resources, instance):
    for key in ("2026-11-30-00:00", "2026-11-30-01:00"):
        dg.materialize(ingest_assets, resources=resources, partition_key=key, instance=instance)
    both = snapshot(resources["warehouse"])
    dg.materialize(ingest_assets, resources=resources, partition_key="2026-11-30-00:00", instance=instance)
    assert snapshot(resources["warehouse"]) == both
    assert len(both["gpu_samples"]) == 2 * 720


def test_corrupt_lines_are_quarantined_and_the_rest_lands(tmp_path):
    hour = tmp_path / "raw" / "gpu_samples" / "2026-11-30" / "10"
    hour.mkdir(parents=True)
    good = {"time": "2026-11-30T10:00:05.000Z", "host": "node-0", "gpu_index": 0, "utilization_ratio": 0.9}
    lines = [
        json.dumps(good),
        '{"time": "2026-11-30T10:00:15.000Z", "host": "node-0", "gpu_index": 0, "utilization_ratio": 0.9',  # cut short
        json.dumps({**good, "time": "2026-11-30T10:00:25.000Z", "utilization_ratio": "busy"}),
        json.dumps({"time": "2026-11-30T10:00:35.000Z", "gpu_index": 1}),
        json.dumps({**good, "time": "2026-11-30T11:00:05.000Z"}),
        json.dumps({**good, "time": "2026-11-30T10:00:45.000Z", "gpu_index": 1}),
    ]
    path = hour / "node-0.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'\xff\xfe{"time"\n' + b'{"time": "2026-11-30T10:00:55')
    warehouse = WarehouseResource(path=str(tmp_path / "w.duckdb"))
    source = next(s for s in SOURCES if s.table == "gpu_samples")
    with warehouse.connect() as con:
        result = ingest_partition(con, source, [path], datetime(2026, 11, 30, 10), datetime(2026, 11, 30, 11))
        kept = con.execute("SELECT source_line, gpu_index FROM gpu_samples ORDER BY source_line").fetchall()
        quarantined = dict(con.execute("SELECT line, reason FROM quarantine ORDER BY line").fetchall())
        files = con.execute("SELECT rows_loaded, rows_quarantined FROM ingest_files").fetchall()
    assert kept == [(1, 0), (6, 1)]
    assert result["rows_loaded"] == 2 and result["rows_quarantined"] == 6
    assert quarantined == {
        2: "not valid JSON",
        3: "wrong type for field(s): utilization_ratio (expected DOUBLE)",
        4: "missing required field(s): host",
        5: "time 2026-11-30T11:00:05 is outside the file's hour bucket",
        7: "not valid UTF-8",
        8: "truncated: last line has no newline and is not valid JSON",
    }
    assert files == [(2, 6)]


def test_a_failed_write_leaves_the_previous_state(resources, instance, monkeypatch):
    key = "2026-11-30-00:00"
    dg.materialize(ingest_assets, resources=resources, partition_key=key, instance=instance)
    before = snapshot(resources["warehouse"])

    import orchestration.sql as sql_module
    real_run = sql_module.run

    def failing(con, name, params=None):
        if name == "ingest/quarantine":   # after the table's rows were replaced, before commit
            raise RuntimeError("disk full")
        return real_run(con, name, params)

    monkeypatch.setattr(sql_module, "run", failing)
    result = dg.materialize(ingest_assets, resources=resources, partition_key=key, instance=instance, raise_on_error=False)
    assert not result.success
    monkeypatch.setattr(sql_module, "run", real_run)
    assert snapshot(resources["warehouse"]) == before
    assert dg.materialize(ingest_assets, resources=resources, partition_key=key, instance=instance).success


def test_missing_warehouse_is_a_clear_error(tmp_path):
    from orchestration.warehouse import WarehouseMissing

    with pytest.raises(WarehouseMissing, match="goodput demo"):
        with WarehouseResource(path=str(tmp_path / "none.duckdb")).connect(read_only=True):
            pass
