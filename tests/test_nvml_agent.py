"""The NVML agent against a fake NVML that keeps pynvml's function names, constants and error
classes (the real ones, taken from pynvml), and, marked `gpu`, against the real driver."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pynvml
import pytest

from sources.nvml_agent import AgentError, NvmlAgent, run_agent
from tests.helpers import FakeGpu, goodput_in_a_fresh_process, make_fake_nvml, nvml_error

REPO = Path(__file__).resolve().parent.parent
GOODPUT = str(Path(sys.executable).parent / "goodput")   # the console script, as a user runs it


def read_samples(root: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(root.glob("gpu_samples/*/*/*.jsonl")) for line in f.read_text().splitlines()]


def test_run_agent_in_a_thread_stops_when_told_and_shows_each_sample(tmp_path):
    import threading
    agent = NvmlAgent(make_fake_nvml([FakeGpu(0), FakeGpu(1)]), host="node-a", proc_root=tmp_path / "proc")
    agent.open()
    stop, seen, first = threading.Event(), [], threading.Event()

    def on_sample(records):
        seen.append(len(records))
        first.set()

    worker = threading.Thread(target=run_agent, args=(agent, tmp_path / "raw"),
                              kwargs={"interval": 60.0, "stop": stop, "on_sample": on_sample, "log": lambda m: None})
    worker.start()
    assert first.wait(timeout=300)
    stop.set()                   # from another thread, in the middle of the 60 s wait for the next sample
    worker.join(timeout=300)
    assert not worker.is_alive()
    assert seen == [2] and len(read_samples(tmp_path / "raw")) == 2


def test_records_carry_every_field_in_base_units(tmp_path):
    gpus = [FakeGpu(0, xid_events=True), FakeGpu(1, util=0, reasons=0)]
    agent = NvmlAgent(make_fake_nvml(gpus), host="node-a", proc_root=tmp_path / "proc")
    agent.open()
    stats = run_agent(agent, tmp_path / "raw", interval=0, count=3, log=lambda m: None)
    records = read_samples(tmp_path / "raw")
    assert len(records) == 6 and stats.samples == 3
    first = records[0]
    assert first["host"] == "node-a" and first["gpu_index"] == 0 and first["gpu_uuid"] == gpus[0].uuid
    assert first["utilization_ratio"] == pytest.approx(0.87)
    assert first["memory_used_bytes"] == 40 << 30 and first["memory_total_bytes"] == 80 << 30
    assert first["power_watts"] == pytest.approx(612.345) and first["power_limit_watts"] == pytest.approx(700.0)
    assert first["temperature_celsius"] == 71 and first["sm_clock_hertz"] == pytest.approx(1.98e9)
    assert first["throttle_reasons"] == 4
    assert (first["ecc_corrected_errors_total"], first["ecc_uncorrected_errors_total"]) == (3, 0)
    assert first["xid_errors_total"] == 0 and first["gpu_lost"] is False
    # GPU 1 does not support XID events: the counter is unknown (null), not zero.
    assert records[1]["xid_errors_total"] is None
    assert stats.cpu_ms_per_sample >= 0


def test_unsupported_fields_are_null_not_a_crash(tmp_path):
    gpu = FakeGpu(0, unsupported={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEccErrors",
                                  "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
                                  "nvmlDeviceGetComputeRunningProcesses"})
    agent = NvmlAgent(make_fake_nvml([gpu]), host="node-a", proc_root=tmp_path)
    agent.open()
    record = agent.sample()[0]
    assert record["power_watts"] is None and record["throttle_reasons"] is None
    assert record["ecc_corrected_errors_total"] is None and record["ecc_uncorrected_errors_total"] is None
    assert record["utilization_ratio"] == pytest.approx(0.87) and record["run_id"] is None
    assert agent.stats.unsupported["power_watts"] == 1


def test_older_driver_without_clocks_event_api_falls_back_to_throttle_reasons(tmp_path):
    fake = make_fake_nvml([FakeGpu(0, reasons=0x20)])

    def missing(handle):
        raise nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    fake.nvmlDeviceGetCurrentClocksEventReasons = missing
    agent = NvmlAgent(fake, host="h", proc_root=tmp_path)
    agent.open()
    assert agent.sample()[0]["throttle_reasons"] == 0x20


def test_a_gpu_lost_before_the_agent_starts_is_recorded(tmp_path):
    gpus = [FakeGpu(0), FakeGpu(1)]
    fake = make_fake_nvml(gpus)

    def handle_by_index(i):
        if i == 1:
            raise nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)
        return gpus[i]
    fake.nvmlDeviceGetHandleByIndex = handle_by_index
    messages = []
    agent = NvmlAgent(fake, host="h", proc_root=tmp_path, log=messages.append)
    agent.open()
    first, second = agent.sample()
    assert first["gpu_lost"] is False and first["utilization_ratio"] == pytest.approx(0.87)
    assert second["gpu_lost"] is True and second["gpu_index"] == 1 and second.get("utilization_ratio") is None
    assert "GPU 1 unusable at start" in messages[0]


def test_xid_events_are_counted_with_the_last_code(tmp_path):
    gpus = [FakeGpu(0, xid_events=True), FakeGpu(1, xid_events=True)]
    fake = make_fake_nvml(gpus)
    agent = NvmlAgent(fake, host="node-a", proc_root=tmp_path)
    agent.open()
    fake.pending_events.extend([(gpus[1], 79), (gpus[1], 48)])
    records = agent.sample()
    assert records[0]["xid_errors_total"] == 0 and records[0]["last_xid"] is None
    assert records[1]["xid_errors_total"] == 2 and records[1]["last_xid"] == 48


def test_gpu_falling_off_the_bus_is_recorded_and_the_others_go_on(tmp_path):
    gpus = [FakeGpu(0), FakeGpu(1)]
    messages = []
    agent = NvmlAgent(make_fake_nvml(gpus), host="node-a", proc_root=tmp_path, log=messages.append)
    agent.open()
    assert [r["gpu_lost"] for r in agent.sample()] == [False, False]
    gpus[1].lost = True
    second = agent.sample()
    third = agent.sample()
    assert second[1]["gpu_lost"] is True and second[1]["utilization_ratio"] is None
    assert third[1]["gpu_lost"] is True and third[1]["gpu_uuid"] == gpus[1].uuid
    assert second[0]["gpu_lost"] is False and second[0]["utilization_ratio"] == pytest.approx(0.87)
    assert agent.stats.lost_gpus == [1]
    assert sum("fell off the bus" in m for m in messages) == 1


@pytest.mark.parametrize("code, words", [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver is not loaded"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "NVML could not start"),
])
def test_no_driver_is_one_clear_error(code, words):
    agent = NvmlAgent(make_fake_nvml([FakeGpu(0)], init_error=code), host="h")
    with pytest.raises(AgentError, match=words):
        agent.open()


def test_no_gpu_is_one_clear_error():
    with pytest.raises(AgentError, match="no NVIDIA GPU"):
        NvmlAgent(make_fake_nvml([]), host="h").open()


def test_run_id_from_process_environment_then_job_mapping(tmp_path):
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "environ").write_bytes(b"PATH=/usr/bin\0GOODPUT_RUN_ID=llm-7b-001\0RANK=3\0")
    mapping = tmp_path / "jobs"
    mapping.mkdir()
    (mapping / "1").write_text("slurm-991\n")
    gpus = [FakeGpu(0, pids=[9999, 4242]), FakeGpu(1, pids=[5555]), FakeGpu(2)]
    agent = NvmlAgent(make_fake_nvml(gpus), host="h", proc_root=proc, job_mapping_dir=mapping)
    agent.open()
    assert [r["run_id"] for r in agent.sample()] == ["llm-7b-001", "slurm-991", None]


def test_records_land_in_the_warehouse_with_gpu_lost(tmp_path):
    from assets.ingest import SOURCES, ingest_partition
    from orchestration.storage.warehouse import WarehouseResource

    gpus = [FakeGpu(0), FakeGpu(1)]
    agent = NvmlAgent(make_fake_nvml(gpus), host="node-a", proc_root=tmp_path)
    agent.open()
    run_agent(agent, tmp_path / "raw", interval=0, count=1, log=lambda m: None)
    gpus[1].lost = True
    agent.nvml.nvmlInit()
    time.sleep(0.01)   # samples are stamped to the millisecond; same-stamp samples of one GPU are one record
    run_agent(agent, tmp_path / "raw", interval=0, count=1, log=lambda m: None)
    files = sorted((tmp_path / "raw").glob("gpu_samples/*/*/*.jsonl"))
    from datetime import datetime, timedelta
    day, hour = files[0].parent.parent.name, files[0].parent.name
    start = datetime.strptime(f"{day} {hour}", "%Y-%m-%d %H")
    source = next(s for s in SOURCES if s.table == "gpu_samples")
    with WarehouseResource(path=str(tmp_path / "w.duckdb")).connect() as con:
        result = ingest_partition(con, source, files, start, start + timedelta(hours=1))
        rows = con.execute("SELECT gpu_index, gpu_lost, utilization_ratio FROM gpu_samples ORDER BY time, gpu_index").fetchall()
    assert result["rows_quarantined"] == 0
    assert rows == [(0, False, pytest.approx(0.87)), (1, False, pytest.approx(0.87)),
                    (0, False, pytest.approx(0.87)), (1, True, None)]


def test_cli_without_driver_prints_one_line_and_fails(tmp_path):
    """On a machine without the NVIDIA driver (this CI), the real pynvml fails to load: one line, exit != 0."""
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("this machine has a working NVIDIA driver")
    except pynvml.NVMLError:
        pass
    result = subprocess.run([GOODPUT, "agent", "--home", str(tmp_path), "--count", "1"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "NVIDIA" in lines[0], result.stderr


def test_the_agent_loads_neither_dagster_nor_pandas(tmp_path):
    """The agent runs on every GPU host beside the training job: its process loads the CLI and the NVML sampler, not
    the pipeline (before: 184 MB resident and 1.5 CPU-s to start, now 70 MB and 0.27, BENCHMARKS.md section 56).
    Here NVML has no driver (exit 2, one line); on a GPU host it takes one sample (exit 0): the imports are the same."""
    status, _, loaded = goodput_in_a_fresh_process(["agent", "--home", str(tmp_path), "--count", "1", "--interval", "0"])
    assert status in (0, 2) and loaded == []


def _real_gpu_or_skip():
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as error:
        pytest.skip(f"no NVIDIA driver here ({error})")
    if count == 0:
        pytest.skip("no NVIDIA GPU here")
    return count


@pytest.mark.gpu
def test_agent_against_the_real_driver(tmp_path):
    """`pytest -m gpu tests/test_nvml_agent.py`: three samples through the real NVML via the CLI."""
    count = _real_gpu_or_skip()
    result = subprocess.run([GOODPUT, "agent", "--home", str(tmp_path),
                             "--interval", "0.5", "--count", "3", "--stats"],
                            capture_output=True, text=True, cwd=REPO, env={**os.environ, "GOODPUT_RUN_ID": "gpu-test"})
    print(result.stdout, result.stderr)
    assert result.returncode == 0, result.stderr
    records = read_samples(tmp_path / "raw")
    assert len(records) == 3 * count
    for r in records:
        assert r["gpu_uuid"] and r["gpu_uuid"].startswith(("GPU-", "MIG-"))
        assert r["gpu_lost"] is False
        # Under MIG the driver reports no whole-GPU utilization: null, not a crash.
        assert r["utilization_ratio"] is None or 0.0 <= r["utilization_ratio"] <= 1.0
        assert any(r[k] is not None for k in ("utilization_ratio", "power_watts", "temperature_celsius", "sm_clock_hertz"))
        assert 0 < r["memory_total_bytes"] and 0 <= r["memory_used_bytes"] <= r["memory_total_bytes"]
        assert r["temperature_celsius"] is None or 0 < r["temperature_celsius"] < 120
        assert r["power_watts"] is None or 0 < r["power_watts"] < 2000
    assert "ms per sample" in result.stdout + result.stderr
