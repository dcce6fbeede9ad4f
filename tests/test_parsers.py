"""Exporter-text parsers on real captures (nvidia_gpu_exporter, tests/fixtures with attribution) and on
hand-made broken input: no crash, bad samples quarantined with reasons, good ones kept."""

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from assets.ingest import SOURCES, ingest_partition
from orchestration.storage.warehouse import WarehouseResource
from sources.client import replace_hour_files
from sources.exposition import dcgm_exposition, parse_gpu_page
from sources.mapping import clean_value, is_dcgm_blank

FIXTURES = Path(__file__).parent / "fixtures" / "nvidia_gpu_exporter"
T = "2026-11-30T03:00:05.000Z"
HOUR = datetime(2026, 11, 30, 3)
GPU_SAMPLES = next(s for s in SOURCES if s.table == "gpu_samples")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# (capture, name, total memory bytes, utilization or None under MIG, power W, temperature, SM clock Hz)
CAPTURES = [
    ("linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__load.metrics", "NVIDIA H100 80GB HBM3", 85520809984, 1.0, 631.95, 59, 1.98e9),
    ("linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__idle.metrics", "NVIDIA H100 80GB HBM3", 85520809984, 0.0, 69.85, 41, 3.45e8),
    ("linux-x86_64__nvidia-h100-mig__590.48.01__load.metrics", "NVIDIA H100 80GB HBM3", 85520809984, None, 433.78, 53, 1.98e9),
    ("linux-x86_64__nvidia-h200__590.48.01__load.metrics", "NVIDIA H200", 150754820096, 1.0, 627.4, 52, 1.98e9),
    ("linux-x86_64__nvidia-l40s__595.80__load.metrics", "NVIDIA L40S", 48305799168, 0.09, 110.23, 54, 2.52e9),
]


@pytest.mark.parametrize("capture, name, total, util, power, temp, sm", CAPTURES)
def test_real_nvidia_gpu_exporter_captures(capture, name, total, util, power, temp, sm):
    page = parse_gpu_page(fixture(capture), T, host="gpu-node-1")
    assert page.rejects == []
    assert page.samples > 100 and page.ignored > 50    # the exporter serves much we do not map
    [record] = page.records
    assert record["host"] == "gpu-node-1" and record["gpu_index"] == 0 and record["gpu_name"] == name
    assert record["gpu_uuid"] == "00000000-0000-0000-0000-000000000000"   # masked in the capture
    assert record["memory_total_bytes"] == total
    assert 0 <= record["memory_used_bytes"] <= total
    # Under MIG, nvidia-smi reports utilization as [N/A]: the exporter omits it and the field stays null.
    assert record.get("utilization_ratio") == util
    assert record["power_watts"] == pytest.approx(power) and record["power_limit_watts"] > 0
    assert record["temperature_celsius"] == temp and record["sm_clock_hertz"] == pytest.approx(sm)
    assert record["ecc_corrected_errors_total"] == 0 and record["ecc_uncorrected_errors_total"] == 0


BROKEN = """\
# HELP nvidia_smi_temperature_gpu temperature.gpu
# TYPE nvidia_smi_temperature_gpu gauge
nvidia_smi_temperature_gpu{uuid="GPU-aaaa"} 61
nvidia_smi_index{uuid="GPU-aaaa"} 0
nvidia_smi_power_draw_watts{uuid="GPU-aaaa"} NaN
nvidia_smi_utilization_gpu_ratio{uuid="GPU-aaaa"} 0.93
# TYPE nvidia_smi_ecc_errors_corrected_volatile_total counter
nvidia_smi_ecc_errors_corrected_volatile_total{uuid="GPU-aaaa"} -4
nvidia_smi_memory_used_bytes{card="weird",slot="7"} 1.2e10
nvidia_smi_memory_used_bytes{uuid="GPU-aaaa",rack="r12",unknown_label="x"} 2.5e10
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-bbbb",Hostname="node-b"} 512.5
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="1",UUID="GPU-bbbb",Hostname="node-b"} 9223372036854775794
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-bbbb",Hostname="node-b"} 2147483632
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-bbbb",Hostname="node-b"} 77
something_else_entirely{foo="bar"} 1
nvidia_smi_temperature_gpu{uuid="GPU-aa"""


def test_broken_input_keeps_good_samples_and_gives_reasons():
    page = parse_gpu_page(BROKEN, T, host="node-a")
    reasons = {r["line"]: r["reason"] for r in page.rejects}
    assert set(reasons) == {5, 8, 9, 16}
    assert reasons[5] == "value is NaN"
    assert reasons[8].startswith("negative value -4")
    assert reasons[9].startswith("cannot tell which GPU")
    assert reasons[16].startswith("unparseable exposition line")
    a, b = page.records
    assert (a["host"], a["gpu_uuid"], a["gpu_index"]) == ("node-a", "GPU-aaaa", 0)
    assert a["temperature_celsius"] == 61 and a["utilization_ratio"] == 0.93 and a["memory_used_bytes"] == 25_000_000_000
    assert "power_watts" not in a and "ecc_corrected_errors_total" not in a
    assert (b["host"], b["gpu_uuid"], b["gpu_index"]) == ("node-b", "GPU-bbbb", 1)
    # DCGM sentinels are "no value": null, not a reject, not a number.
    assert b["ecc_uncorrected_errors_total"] is None and b["temperature_celsius"] is None
    assert b["power_watts"] == 512.5 and b["utilization_ratio"] == pytest.approx(0.77)


def test_broken_input_lands_good_rows_and_quarantines_the_rest(tmp_path):
    page = parse_gpu_page(BROKEN, T, host="node-a")
    files = replace_hour_files(tmp_path / "raw", "gpu_samples", "node-a.exporter", page.records, page.rejects)
    with WarehouseResource(path=str(tmp_path / "w.duckdb")).connect() as con:
        result = ingest_partition(con, GPU_SAMPLES, files, HOUR, HOUR + timedelta(hours=1))
        rows = con.execute("SELECT host, gpu_uuid, temperature_celsius, ecc_uncorrected_errors_total "
                           "FROM gpu_samples ORDER BY host").fetchall()
        quarantine = con.execute("SELECT reason, raw FROM quarantine ORDER BY line").fetchall()
    assert result["rows_loaded"] == 2 and result["rows_quarantined"] == 4
    assert rows == [("node-a", "GPU-aaaa", 61.0, None), ("node-b", "GPU-bbbb", None, None)]
    assert [r for r, _ in quarantine] == [
        "rejected by producer: value is NaN",
        "rejected by producer: negative value -4 for ecc_corrected_errors_total",
        "rejected by producer: cannot tell which GPU: none of the labels ['UUID', 'uuid', 'gpu', 'index', 'minor_number']",
        "rejected by producer: unparseable exposition line: could not convert string to float: '{uuid=\"GPU-aa'",
    ]
    assert 'card=\\"weird\\"' in quarantine[2][1]     # the original text is kept for the person who looks


def test_empty_and_garbage_pages_do_not_crash():
    assert parse_gpu_page("", T).records == []
    page = parse_gpu_page("\x00\x01 not prometheus at all {{{\n}}} 12 13 14\n", T)
    assert page.records == [] and len(page.rejects) == 2


def test_dcgm_exposition_round_trips_through_the_parser():
    records = [{"time": T, "host": "node-0", "gpu_index": i, "gpu_uuid": f"GPU-{i}", "gpu_name": "NVIDIA H100 80GB HBM3",
                "run_id": "llm-a", "utilization_ratio": 0.5 + i / 10, "memory_used_bytes": (1000 + i) * 2**20,
                "memory_total_bytes": 81559 * 2**20, "power_watts": 400.5, "power_limit_watts": 700.0,
                "temperature_celsius": 60.0, "sm_clock_hertz": 1.98e9, "throttle_reasons": 4, "ecc_corrected_errors_total": 2,
                "ecc_uncorrected_errors_total": None, "last_xid": None, "sm_active_ratio": 0.81, "tensor_active_ratio": 0.4}
               for i in range(2)]
    page = parse_gpu_page(dcgm_exposition(records), T)
    assert page.rejects == []
    for got, want in zip(page.records, records):
        for key in ("host", "gpu_index", "gpu_uuid", "run_id", "memory_used_bytes", "memory_total_bytes", "throttle_reasons",
                    "ecc_corrected_errors_total", "ecc_uncorrected_errors_total", "last_xid"):
            assert got[key] == want[key], key
        for key in ("utilization_ratio", "power_watts", "temperature_celsius", "sm_clock_hertz", "sm_active_ratio", "tensor_active_ratio"):
            assert got[key] == pytest.approx(want[key]), key


@pytest.mark.parametrize("value, blank", [(9223372036854775794, True), (9223372036854775792, True), (2147483632, True),
                                          (140737488355328.0, True), (700.0, False), (0, False), (2**40, False)])
def test_dcgm_sentinels(value, blank):
    assert is_dcgm_blank(value) is blank
    assert (clean_value("power_watts", value)[0] is None) is blank


def test_clean_value_rejects_impossible_values():
    assert clean_value("ecc_corrected_errors_total", -1)[1] == "negative value -1 for ecc_corrected_errors_total"
    assert clean_value("utilization_ratio", float("inf"))[1] == "value is infinite"
    assert clean_value("temperature_celsius", -5) == (-5.0, None)   # a cold GPU is possible
    assert clean_value("memory_used_bytes", 12.0) == (12, None)


def test_scrape_real_exporter_pages_over_http_into_the_warehouse(tmp_path, capsys):
    """`goodput scrape` against exporters on loopback (http.server serving a real capture and the broken
    page): good records land, bad samples are quarantined with reasons, a dead exporter is one line."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from orchestration.cli import main

    pages = {"/h200": fixture("linux-x86_64__nvidia-h200__590.48.01__load.metrics"), "/broken": BROKEN}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = pages[self.path].encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert main(["scrape", f"{base}/h200", f"{base}/broken", "--count", "1", "--home", str(tmp_path)]) == 0
    finally:
        server.shutdown()
        server.server_close()
    assert "3 GPU record(s), 4 rejected sample(s)" in capsys.readouterr().out
    files = sorted((tmp_path / "raw").glob("gpu_samples/*/*/*.jsonl"))
    assert [f.name for f in files] == ["127.0.0.1.scrape.jsonl"]
    day, hour = files[0].parent.parent.name, files[0].parent.name
    start = datetime.strptime(f"{day} {hour}", "%Y-%m-%d %H")
    with WarehouseResource(path=str(tmp_path / "w.duckdb")).connect() as con:
        result = ingest_partition(con, GPU_SAMPLES, files, start, start + timedelta(hours=1))
        names = sorted(n for (n,) in con.execute("SELECT coalesce(gpu_name, '?') FROM gpu_samples").fetchall())
    assert result["rows_loaded"] == 3 and result["rows_quarantined"] == 4
    assert names == ["?", "?", "NVIDIA H200"]

    assert main(["scrape", "http://127.0.0.1:9/metrics", "--count", "1", "--home", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no exporter answered: http://127.0.0.1:9/metrics: ConnectError" in err
