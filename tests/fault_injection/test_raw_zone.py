"""Issue 16 item 10: hostile and damaged raw-zone files.

- a dangling `*.jsonl` symlink, or a file gone before it is looked at, is skipped and reported; the
  rest of the source-hour loads;
- a symlink out of the raw zone (`passwd.jsonl -> /etc/passwd`) is never opened (an audit hook
  watches every open) and nothing of it reaches the quarantine;
- a torn last line followed by a producer's append keeps the appended record (the writer starts a
  new line);
- impossible values (`gpu_index: 1.5`, negative counters, power, utilization, a KV-cache ratio of
  7.5) are quarantined with a reason, on the fast path and the full parse alike, while their
  look-alikes (2.0 as GPU 2, ratios of exactly 0 and 1, zero power) load.
"""

import json
from pathlib import Path

import pytest

from assets.ingest import SOURCES, ingest_partition
from orchestration.storage.raw_zone import RawZoneResource
from orchestration.storage.warehouse import WarehouseResource
from sources.client import RawWriter
from tests.fault_injection.harness import END, HOUR
from tests.fault_injection.opens import watch_opens

pytestmark = pytest.mark.fault_injection

GPU = next(s for s in SOURCES if s.table == "gpu_samples")
SERVING = next(s for s in SOURCES if s.table == "serving_metrics")


def sample(**values) -> dict:
    return {"time": "2026-11-30T10:00:00Z", "host": "node-0", "gpu_index": 0, "utilization_ratio": 0.5,
            "power_watts": 300.0, "memory_used_bytes": 1 << 30, "ecc_corrected_errors_total": 0, **values}


def hour_folder(raw: Path, source: str = "gpu_samples") -> Path:
    folder = raw / source / "2026-11-30" / "10"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_lines(path: Path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def ingest(tmp_path: Path, source=GPU, fast=True, report=None):
    raw = RawZoneResource(root=str(tmp_path / "raw"))
    files = raw.files(source.folder, HOUR, report=report)
    with WarehouseResource(path=str(tmp_path / "w.duckdb")).connect() as con:
        result = ingest_partition(con, source, files, HOUR, END, fast=fast)
        loaded = con.execute(f"SELECT * FROM {source.table} ORDER BY source_file, source_line").df()
        quarantined = con.execute("SELECT line, raw, reason FROM quarantine ORDER BY file, line").fetchall()
    return result, loaded, quarantined


def test_a_dangling_symlink_is_skipped_and_reported_and_the_hour_loads(tmp_path):
    folder = hour_folder(tmp_path / "raw")
    write_lines(folder / "agent.jsonl", [sample(), sample(gpu_index=1)])
    (folder / "gone.jsonl").symlink_to(tmp_path / "no-such-file.jsonl")
    said = []
    result, loaded, _ = ingest(tmp_path, report=said.append)
    assert result["rows_loaded"] == 2 and len(loaded) == 2
    assert said == [f"raw zone: skipped {folder / 'gone.jsonl'}: vanished or a dangling symlink"]


def test_a_file_deleted_between_the_listing_and_the_read_is_skipped_and_the_hour_loads(tmp_path):
    from assets.ingest_incremental import ingest_hour

    folder = hour_folder(tmp_path / "raw")
    write_lines(folder / "agent.jsonl", [sample(), sample(gpu_index=1)])
    write_lines(folder / "gone.jsonl", [sample(gpu_index=2)])
    files = RawZoneResource(root=str(tmp_path / "raw")).files(GPU.folder, HOUR)
    assert len(files) == 2
    (folder / "gone.jsonl").unlink()   # after the listing, before the read
    with WarehouseResource(path=str(tmp_path / "w.duckdb")).connect() as con:
        result = ingest_hour(con, GPU, files, HOUR, END)
        loaded = con.execute("SELECT gpu_index FROM gpu_samples ORDER BY gpu_index").fetchall()
    assert result["rows_loaded"] == 2 and loaded == [(0,), (1,)]


def test_a_symlink_out_of_the_raw_zone_is_never_read(tmp_path):
    folder = hour_folder(tmp_path / "raw")
    write_lines(folder / "agent.jsonl", [sample()])
    secret = tmp_path / "outside" / "passwd"
    secret.parent.mkdir()
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    (folder / "passwd.jsonl").symlink_to(secret)
    inside = tmp_path / "raw" / "staging" / "late.jsonl"   # the look-alike: a link that stays in the raw zone
    inside.parent.mkdir()
    write_lines(inside, [sample(gpu_index=3)])
    (folder / "late.jsonl").symlink_to(inside)
    said = []
    with watch_opens() as opened:
        result, loaded, quarantined = ingest(tmp_path, fast=False, report=said.append)
    assert secret.resolve() not in opened
    assert quarantined == [] and sorted(loaded["gpu_index"]) == [0, 3]
    assert len(said) == 1 and "passwd.jsonl: a symlink out of the raw zone" in said[0]


def test_a_torn_last_line_followed_by_an_append_keeps_the_appended_record(tmp_path):
    raw = tmp_path / "raw"
    folder = hour_folder(raw)
    whole = json.dumps(sample()) + "\n"
    (folder / "node-0.jsonl").write_text(whole + json.dumps(sample(gpu_index=1))[:40])   # killed mid-line
    writer = RawWriter(raw, "gpu_samples", "node-0")   # the agent restarts and appends
    writer.write(sample(gpu_index=2))
    writer.close()
    result, loaded, quarantined = ingest(tmp_path)
    assert sorted(loaded["gpu_index"]) == [0, 2]
    assert [(line, reason) for line, _raw, reason in quarantined] == [(2, "not valid JSON")]


@pytest.mark.parametrize("fast", [True, False], ids=["fast path first", "full parse"])
def test_values_outside_their_physical_range_are_quarantined_with_a_reason(tmp_path, fast):
    folder = hour_folder(tmp_path / "raw")
    write_lines(folder / "agent.jsonl", [
        sample(gpu_index=1.5),                        # would be stored as GPU 2
        sample(power_watts=-12.5),
        sample(utilization_ratio=-0.1),
        sample(utilization_ratio=1.7),
        sample(ecc_corrected_errors_total=-3),
        sample(memory_used_bytes=2.5),
        sample(gpu_index=2.0, utilization_ratio=1.0, power_watts=0.0),   # look-alikes that are fine
        sample(gpu_index=3, utilization_ratio=0.0),
        sample(gpu_index=4, utilization_ratio="NaN", power_watts="Infinity"),   # the contract's non-finite floats
    ])
    result, loaded, quarantined = ingest(tmp_path, fast=fast)
    assert result["parse"] == "full"
    assert sorted(loaded["gpu_index"]) == [2, 3, 4]
    reasons = {line: reason for line, _raw, reason in quarantined}
    prefix = "value(s) outside their physical range: "
    assert reasons == {1: prefix + "gpu_index 1.5 (not an integer)", 2: prefix + "power_watts -12.5 (negative)",
                       3: prefix + "utilization_ratio -0.1 (not in [0, 1])", 4: prefix + "utilization_ratio 1.7 (not in [0, 1])",
                       5: prefix + "ecc_corrected_errors_total -3.0 (negative)", 6: prefix + "memory_used_bytes 2.5 (not an integer)"}


def test_a_kv_cache_ratio_of_7_5_and_negative_counters_in_serving_metrics(tmp_path):
    folder = hour_folder(tmp_path / "raw", "serving_metrics")
    base = {"time": "2026-11-30T10:00:00Z", "endpoint": "chat", "kv_cache_usage_ratio": 0.4, "request_success_total": 10.0}
    write_lines(folder / "prometheus.jsonl", [{**base, "kv_cache_usage_ratio": 7.5}, {**base, "request_success_total": -1.0},
                                              {**base, "ttft_p99_seconds": -0.2}, base])
    result, loaded, quarantined = ingest(tmp_path, SERVING)
    assert len(loaded) == 1 and result["rows_quarantined"] == 3
    assert [reason.split(": ", 1)[1] for _line, _raw, reason in quarantined] == [
        "kv_cache_usage_ratio 7.5 (not in [0, 1])", "request_success_total -1.0 (negative)", "ttft_p99_seconds -0.2 (negative)"]


def test_a_clean_hour_still_takes_the_fast_path(tmp_path):
    folder = hour_folder(tmp_path / "raw")
    write_lines(folder / "agent.jsonl", [sample(gpu_index=i, memory_used_bytes=(80 << 30) - i) for i in range(8)])
    result, loaded, _ = ingest(tmp_path)
    assert result["parse"] == "fast" and list(loaded["gpu_index"]) == list(range(8))
    assert loaded["memory_used_bytes"].iloc[7] == (80 << 30) - 7 and str(loaded["gpu_index"].dtype) == "int32"
