"""Ingest: idempotent partitions, quarantine with reasons, atomic writes."""

import json
from datetime import datetime

import dagster as dg
import pytest

from assets.ingest import SOURCES, ingest_assets, ingest_partition
from orchestration.storage.warehouse import WarehouseResource

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
    monkeypatch.setenv("GOODPUT_INGEST_WHOLE_HOUR", "1")   # re-read the hour whole (incrementally there is nothing new)
    dg.materialize(ingest_assets, resources=resources, partition_key=key, instance=instance)
    before = snapshot(resources["warehouse"])

    import orchestration.storage.sql as sql_module
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
    from orchestration.storage.warehouse import WarehouseMissing

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


# --------------------------------------------------------------------------- fast path vs full parse
# A clean hour goes through DuckDB's own strict read_json (the fast path); any hour with a line the
# full parse would treat specially must fall back to it. Either way the tables must be the same.
GOOD_STEP = {"time": "2026-11-30T10:00:05.000Z", "run_id": "r", "rank": 0, "step": 1, "loss": 2.5}
EDGE_HOURS = {
    "clean": [GOOD_STEP, {**GOOD_STEP, "step": 2, "time": "2026-11-30T10:59:59.999Z", "grad_norm": None}],
    "CRLF line ends": "crlf",
    "blank and whitespace lines": "blank",
    "last line without a newline": "no_final_newline",
    "truncated last line": "truncated",
    "rank as a float": [{**GOOD_STEP, "rank": 1.5}],
    "rank as a whole float": [{**GOOD_STEP, "rank": 3.0}],
    "step as a numeric string": [{**GOOD_STEP, "step": "7"}],
    "loss as a string": [{**GOOD_STEP, "loss": "nan"}],
    "loss as a bool": [{**GOOD_STEP, "loss": True}],
    "run_id as a number": [{**GOOD_STEP, "run_id": 12}],
    "run_id as an object": [{**GOOD_STEP, "run_id": {"a": 1}}],
    "huge integer": [{**GOOD_STEP, "tokens": 2 ** 70}],
    "required field null": [{**GOOD_STEP, "rank": None}],
    "required field absent": [{k: v for k, v in GOOD_STEP.items() if k != "step"}],
    "time outside the hour": [{**GOOD_STEP, "time": "2026-11-30T11:00:00.000Z"}],
    "time with an offset": [{**GOOD_STEP, "time": "2026-11-30T12:30:00+02:00"}],
    "time as epoch seconds": [{**GOOD_STEP, "time": 1764496805}],
    "time not a timestamp": [{**GOOD_STEP, "time": "yesterday"}],
    "producer rejection": [{**GOOD_STEP, "quarantine_reason": "unparseable exposition line"}],
    "JSON null line": "null",
    "array line": "array",
    "two objects on a line": "two_objects",
    "unknown fields": [{**GOOD_STEP, "favourite_colour": "blue", "nested": {"x": [1, 2]}}],
    "duplicate key": 'dup',
}


def _write_edge_hour(path, case) -> None:
    good = json.dumps(GOOD_STEP)
    other = json.dumps({**GOOD_STEP, "step": 2})
    raw = {
        "crlf": f"{good}\r\n{other}\r\n",
        "blank": f"{good}\n\n   \n{other}\n\t\n",
        "no_final_newline": f"{good}\n{other}",
        "truncated": f"{good}\n{other[:-9]}",
        "null": f"{good}\nnull\n{other}\n",
        "array": f"{good}\n[1, 2]\n{other}\n",
        "two_objects": f"{good}{other}\n{other}\n",
        "dup": '{"time": "2026-11-30T10:00:05.000Z", "run_id": "r", "rank": 0, "step": 1, "step": 9}\n',
    }
    text = raw[case] if isinstance(case, str) else "".join(json.dumps(r) + "\n" for r in [GOOD_STEP, *case])
    path.write_bytes(text.encode())


@pytest.mark.parametrize("name", list(EDGE_HOURS))
def test_the_fast_path_and_the_full_parse_land_the_same_rows(tmp_path, name):
    hour = tmp_path / "raw" / "training_steps" / "2026-11-30" / "10"
    hour.mkdir(parents=True)
    files = [hour / "a.rank-0.jsonl", hour / "b.rank-1.jsonl"]
    _write_edge_hour(files[0], EDGE_HOURS[name])
    files[1].write_text(json.dumps({**GOOD_STEP, "rank": 1}) + "\n")
    source = next(s for s in SOURCES if s.table == "training_steps")
    tables = {}
    for fast in (True, False):
        with WarehouseResource(path=str(tmp_path / f"{fast}.duckdb")).connect() as con:
            result = ingest_partition(con, source, files, datetime(2026, 11, 30, 10), datetime(2026, 11, 30, 11), fast=fast)
            tables[fast] = {t: repr(con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall())   # repr: NaN == NaN
                            for t in ("training_steps", "quarantine", "ingest_files")}
            assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name IN ('clean', 'parsed')").fetchone()[0]
        if fast:
            took_fast_path = result["parse"] == "fast"
    assert tables[True] == tables[False]
    # Only an hour with nothing to quarantine and nothing skipped may take the fast path.
    if name in ("clean", "CRLF line ends", "last line without a newline", "unknown fields", "rank as a whole float"):
        assert took_fast_path
    elif tables[False]["quarantine"] != "[]" or name == "blank and whitespace lines":
        assert not took_fast_path


def test_a_file_growing_between_the_count_and_the_read_falls_back_to_the_full_parse(tmp_path, monkeypatch):
    import assets.ingest_core as ingest  # where ingest_partition looks line_counts up

    hour = tmp_path / "raw" / "training_steps" / "2026-11-30" / "10"
    hour.mkdir(parents=True)
    path = hour / "a.rank-0.jsonl"
    path.write_text(json.dumps(GOOD_STEP) + "\n")
    counted = ingest.line_counts

    def count_then_append(files):
        counts = counted(files)
        with open(path, "a") as fh:   # a producer appends after the count
            fh.write(json.dumps({**GOOD_STEP, "step": 2}) + "\n")
        return counts

    monkeypatch.setattr(ingest, "line_counts", count_then_append)
    source = next(s for s in SOURCES if s.table == "training_steps")
    with WarehouseResource(path=str(tmp_path / "w.duckdb")).connect() as con:
        result = ingest_partition(con, source, [path], datetime(2026, 11, 30, 10), datetime(2026, 11, 30, 11))
        rows = con.execute("SELECT step, source_line FROM training_steps ORDER BY source_line").fetchall()
    assert result["parse"] == "full" and rows == [(1, 1), (2, 2)]
