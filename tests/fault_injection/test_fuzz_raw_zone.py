"""Property-based fuzzing (hypothesis) of the raw-zone parser: `ingest_partition` on generated
hours of GPU-sample lines, good and mangled, with a torn last line that a producer then appends to.

For every generated hour: no exception escapes; every good record lands, once, with its values and
its line number; every bad line is in the quarantine with a reason; nothing else is loaded.
"""

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from assets.ingest import SOURCES, ingest_partition
from orchestration.storage.warehouse import WarehouseResource
from sources.client import RawWriter
from tests.fault_injection.harness import END, HOUR

pytestmark = pytest.mark.fault_injection

GPU = next(s for s in SOURCES if s.table == "gpu_samples")

times = st.builds(lambda m, s, ms: f"2026-11-30T10:{m:02d}:{s:02d}.{ms:03d}Z",
                  st.integers(0, 59), st.integers(0, 59), st.integers(0, 999))
good_records = st.fixed_dictionaries(
    {"time": times, "host": st.text(min_size=1, max_size=16), "gpu_index": st.integers(0, 4096)},
    optional={
        "utilization_ratio": st.floats(0, 1),
        "power_watts": st.floats(0, 5000),
        "memory_used_bytes": st.integers(0, 1 << 44),
        "ecc_corrected_errors_total": st.integers(0, 1 << 40),
        "temperature_celsius": st.floats(-40, 130),
        "run_id": st.none() | st.text(max_size=24),
        "extra_field_nobody_knows": st.text(max_size=8),
    },
)


def _spoil(record: dict, how: str, draw) -> str | bytes:
    if how == "gpu_index not whole":
        return json.dumps({**record, "gpu_index": record["gpu_index"] + draw(st.sampled_from([0.5, 0.25, 0.999]))})
    if how == "negative power":
        return json.dumps({**record, "power_watts": -draw(st.floats(0.001, 1e4))})
    if how == "ratio above 1":
        return json.dumps({**record, "utilization_ratio": draw(st.floats(1.0001, 100))})
    if how == "negative counter":
        return json.dumps({**record, "ecc_corrected_errors_total": -draw(st.integers(1, 1000))})
    if how == "wrong type":
        # (a JSON true/false in a number field is read as 1/0 by DuckDB's JSON cast: a known gap, see
        # the notes; it is not generated here)
        return json.dumps({**record, "gpu_index": draw(st.sampled_from(["two", [1], {"i": 1}]))})
    if how == "missing host":
        return json.dumps({k: v for k, v in record.items() if k != "host"})
    if how == "null gpu":
        return json.dumps({**record, "gpu_index": None})
    if how == "outside the hour":
        return json.dumps({**record, "time": "2026-11-30T11:00:00Z"})
    if how == "not a time":
        return json.dumps({**record, "time": draw(st.sampled_from(["yesterday", "2026-13-45T99:00:00Z", ""]))})
    if how == "truncated":
        text = json.dumps(record)
        return text[: draw(st.integers(1, len(text) - 1))]
    if how == "not an object":
        return json.dumps(draw(st.sampled_from([[record], 5, "a string", None, True])))
    if how == "not UTF-8":
        return b"\xff\xfe" + json.dumps(record).encode()
    # garbage text: anything on one line that is not blank
    return draw(st.text(min_size=1, max_size=60).filter(lambda t: "\n" not in t and t.strip(" \t\r\x0b\x0c")))


SPOILS = ["gpu_index not whole", "negative power", "ratio above 1", "negative counter", "wrong type", "missing host",
          "null gpu", "outside the hour", "not a time", "truncated", "not an object", "not UTF-8", "garbage"]


@st.composite
def hours(draw):
    """(lines as bytes, {line number: good record}, {line numbers of bad lines}, torn tail?, appended record)"""
    lines, good, bad = [], {}, set()
    for number in range(1, draw(st.integers(1, 25)) + 1):
        record = draw(good_records)
        if draw(st.booleans()):
            good[number] = record
            lines.append(json.dumps(record).encode())
        else:
            spoiled = _spoil(record, draw(st.sampled_from(SPOILS)), draw)
            bad.add(number)
            lines.append(spoiled if isinstance(spoiled, bytes) else spoiled.encode())
    torn = draw(st.booleans())
    appended = draw(good_records) if torn else None
    return lines, good, bad, torn, appended


@pytest.fixture(scope="module")
def connection(tmp_path_factory):
    with WarehouseResource(path=str(tmp_path_factory.mktemp("fuzz") / "w.duckdb")).connect() as con:
        yield con


# 25 generated hours by default (~20 s); GOODPUT_FUZZ_EXAMPLES=500 for a longer hunt
@settings(max_examples=int(os.environ.get("GOODPUT_FUZZ_EXAMPLES", "25")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(hour=hours())
# found by this test (a run here, 2026-12-02): a line that is not an object, with a non-ASCII character. DuckDB's error about it
# cut the character in two, the binding raised UnicodeDecodeError, and the fast path did not fall back to the full parse
@example(hour=([b'[{"utilization_ratio": 0.0, "gpu_index": 0, "host": "\\u0800", "time": "2026-11-30T10:00:00.000Z"}]'],
               {}, {1}, False, None))
def test_no_exception_every_bad_line_has_a_reason_no_good_record_is_lost(connection, hour):
    lines, good, bad, torn, appended = hour
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw"
        folder = raw / "gpu_samples" / "2026-11-30" / "10"
        folder.mkdir(parents=True)
        path = folder / "node-0.jsonl"
        data = b"\n".join(lines) + b"\n"
        if torn:   # a producer killed mid-line, then restarted: it appends one more record
            tail = json.dumps(appended).encode()
            data += tail[: len(tail) // 2]
            bad.add(len(lines) + 1)
        path.write_bytes(data)
        if torn:
            writer = RawWriter(raw, "gpu_samples", "node-0")
            writer.write(appended)
            writer.close()
            good[len(lines) + 2] = appended
        result = ingest_partition(connection, GPU, [path], HOUR, END)
        loaded = connection.execute("SELECT * FROM gpu_samples ORDER BY source_line").df()
        quarantined = connection.execute("SELECT line, reason FROM quarantine WHERE source = 'gpu_samples' ORDER BY line").fetchall()
    assert sorted(loaded["source_line"]) == sorted(good), "good records lost or bad ones loaded"
    for row in loaded.itertuples():
        record = good[row.source_line]
        assert row.host == record["host"] and row.gpu_index == record["gpu_index"]
        for field in ("utilization_ratio", "power_watts", "memory_used_bytes", "ecc_corrected_errors_total"):
            if field in record:
                assert getattr(row, field) == pytest.approx(record[field], rel=1e-12)
    assert [line for line, _ in quarantined] == sorted(bad)
    assert all(reason for _, reason in quarantined)
    assert result["rows_loaded"] == len(good) and result["rows_quarantined"] == len(bad)
