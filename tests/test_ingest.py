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


def test_duckdb_reads_the_files_and_every_odd_line_keeps_its_number_and_reason(tmp_path):
    """DuckDB splits UTF-8 files itself; a file it refuses (not UTF-8) or cannot name (a glob
    character) is read in Python: either way every line keeps its number, file and reason."""
    hour = tmp_path / "raw" / "gpu_samples" / "2026-11-30" / "10"
    hour.mkdir(parents=True)
    good = {"time": "2026-11-30T10:00:05Z", "host": "node-0", "gpu_index": 0, "utilization_ratio": 0.9}
    plain = hour / "node-0.jsonl"
    plain.write_bytes(b"\n".join([
        json.dumps(good).encode(),
        b"",                                                             # 2: blank, skipped
        b" \t ",                                                         # 3: whitespace only, skipped
        json.dumps({**good, "gpu_index": 1}).encode() + b"\r",           # 4: CRLF line ending
        b"null",                                                         # 5
        b"[1, 2]",                                                       # 6
        json.dumps({**good, "host": None}).encode(),                     # 7: required field null
        json.dumps({**good, "utilization_ratio": {"busy": 1}}).encode(),  # 8: object for a DOUBLE
        json.dumps({**good, "time": 1764496805}).encode(),               # 9: epoch number, not ISO
        json.dumps({**good, "quarantine_reason": "exposition line 3: bad"}).encode(),  # 10
        json.dumps({**good, "gpu_index": 2, "time": "2026-11-30T12:00:05+02:00"}).encode(),  # 11: offset
        json.dumps({**good, "gpu_index": 3, "extra": [1, {"x": None}]}).encode(),  # 12: unknown field
    ]) + b"\n")
    latin = hour / "node-1.jsonl"
    latin.write_bytes(json.dumps({**good, "host": "node-1"}).encode() + b"\n"
                      + b'{"time": "2026-11-30T10:00:06Z", "host": "n\xe9ud", "gpu_index": 0}\n'
                      + json.dumps({**good, "host": "node-1", "gpu_index": 1}).encode() + b"\n")
    globbed = hour / "node-[2].jsonl"
    globbed.write_bytes(json.dumps({**good, "host": "node-2"}).encode() + b"\n")
    warehouse = WarehouseResource(path=str(tmp_path / "w.duckdb"))
    source = next(s for s in SOURCES if s.table == "gpu_samples")
    files = sorted([plain, latin, globbed])
    with warehouse.connect() as con:
        result = ingest_partition(con, source, files, datetime(2026, 11, 30, 10), datetime(2026, 11, 30, 11))
        kept = con.execute("SELECT source_file, source_line, host, gpu_index, time FROM gpu_samples ORDER BY ALL").fetchall()
        quarantined = con.execute("SELECT file, line, reason FROM quarantine ORDER BY ALL").fetchall()
        per_file = con.execute("SELECT file, rows_loaded, rows_quarantined FROM ingest_files ORDER BY file").fetchall()
    at = datetime(2026, 11, 30, 10, 0, 5)
    assert kept == [
        (str(plain), 1, "node-0", 0, at), (str(plain), 4, "node-0", 1, at),
        (str(plain), 11, "node-0", 2, at), (str(plain), 12, "node-0", 3, at),
        (str(latin), 1, "node-1", 0, at), (str(latin), 3, "node-1", 1, at),
        (str(globbed), 1, "node-2", 0, at),
    ]
    assert quarantined == [
        (str(plain), 5, "not a JSON object"),
        (str(plain), 6, "not a JSON object"),
        (str(plain), 7, "missing required field(s): host"),
        (str(plain), 8, "wrong type for field(s): utilization_ratio (expected DOUBLE)"),
        (str(plain), 9, "time is not an ISO-8601 timestamp"),
        (str(plain), 10, "rejected by producer: exposition line 3: bad"),
        (str(latin), 2, "not valid UTF-8"),
    ]
    assert per_file == [(str(plain), 4, 6), (str(latin), 2, 1), (str(globbed), 1, 0)]
    assert result["rows_loaded"] == 7 and result["rows_quarantined"] == 7
