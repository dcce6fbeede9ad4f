"""Importers on samples written from each tool's documented output format (the source of each
format is named at its test). Each sample holds the awkward cases real logs hold: a NaN
iteration, a resumed run, a log without timestamps, a mid-run driver reload, an XID 79."""

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import pytest

from orchestration.cli import main
from sources.importers import (
    ImportErrorForUser,
    import_dcgmi,
    import_hf_trainer,
    import_kernel_xids,
    import_megatron,
    import_nvidia_smi,
)
from sources.importers.common import MIB

SAMPLES = Path(__file__).parent / "fixtures" / "importers"
T = datetime(2026, 11, 29, 10, 0, tzinfo=timezone.utc)


def raw_records(raw: Path, source: str) -> list[dict]:
    out = []
    for path in sorted((raw / source).rglob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


# -- Megatron: the log line of Megatron-LM's megatron/training/training.py `training_log` (and
#    Megatron-DeepSpeed's copy of it, which adds `consumed tokens` and prints no timestamp); the
#    loss is printed only `if avg > 0.0`, the skipped / nan counts are per log interval.
def test_megatron_nan_skipped_counters_tokens_and_resumed_runs(tmp_path):
    result = import_megatron([SAMPLES / "megatron_deepspeed_nan_resume.log"], tmp_path, run_id="mds", rank=0)
    steps = {r["step"]: r for r in raw_records(tmp_path, "training_steps") if "step" in r}
    assert result["records"] == len(steps) == 11 and result["rejected"] == 0
    # the fp16 NaN interval: no `lm loss` printed -> a non-finite loss, with the reason
    assert math.isnan(steps[30]["loss"]) and "nan iteration" in steps[30]["loss_reason"]
    # every iteration skipped by a loss-scale overflow: no loss, and not a NaN either
    assert "loss" not in steps[40] and "skipped (loss-scale overflow)" in steps[40]["loss_reason"]
    # bf16: no skip, yet no loss printed: its average was NaN
    assert math.isnan(steps[50]["loss"])
    assert steps[20]["loss"] == pytest.approx(4.8) and "loss_reason" not in steps[20]
    # per-interval counts summed into the table's counters
    assert [steps[s]["nan_iterations_total"] for s in (20, 30, 40, 60)] == [0, 1, 1, 1]
    assert [steps[s]["skipped_iterations_total"] for s in (20, 30, 40, 60)] == [0, 1, 11, 11]
    # per-step tokens, not the cumulative consumed tokens (64 x 2048 a step)
    assert {r["tokens"] for r in steps.values()} == {131072}
    # times: 1 s per iteration from the datetime line ...
    assert steps[10]["time"] == "2024-05-01T12:00:10.000Z" and steps[60]["time"] == "2024-05-01T12:01:00.000Z"
    # ... and a resumed run counts from the checkpoint it loaded (iteration 31000), not from 0
    assert steps[31010]["time"] == "2024-05-03T08:00:20.000Z" and steps[31030]["time"] == "2024-05-03T08:01:00.000Z"
    # a resume whose log names no checkpoint: one log interval (10 iterations) after its datetime line
    assert steps[45010]["time"] == "2024-05-04T09:00:30.000Z"
    [report] = result["reports"]
    assert report.first.startswith("2024-05-01T12:00:10") and report.last.startswith("2024-05-04T09:01:00")
    assert any("read as NaN" in note for note in report.notes)


def test_megatron_log_without_timestamps_needs_and_takes_a_start_time(tmp_path, capsys):
    log = SAMPLES / "megatron_no_timestamps.log"
    home = tmp_path / "home"
    # without an anchor: every line rejected with a reason that names the real flag
    assert main(["import", "megatron", str(log), "--run-id", "nots", "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "0 record(s)" in out and "3 no timestamp on or before this iteration line" in out
    reject = raw_records(home / "raw", "training_steps")[0]["quarantine_reason"]
    assert reject.startswith("megatron_no_timestamps.log:1: no timestamp") and "--start-time" in reject
    # with --start-time (here as the per-file anchor FILE=TIME): placed 10 iterations x 2.5 s apart
    assert main(["import", "megatron", str(log), "--run-id", "nots", "--home", str(home),
                 "--start-time", f"{log}=2026-11-29T10:00:00Z"]) == 0
    assert "3 record(s), 2026-11-29 10:00:25 .. 2026-11-29 10:01:15 UTC" in capsys.readouterr().out
    times = [r["time"] for r in raw_records(home / "raw", "training_steps")]
    assert times == ["2026-11-29T10:00:25.000Z", "2026-11-29T10:00:50.000Z", "2026-11-29T10:01:15.000Z"]


def test_megatron_impossible_date_is_one_rejected_line(tmp_path):
    log = tmp_path / "bad.log"
    good = (SAMPLES / "megatron_no_timestamps.log").read_text().splitlines()[0]
    log.write_text(f" [2024-13-45 10:00:00]{good}\n [2024-05-01 10:00:00]{good.replace('      10/', '      20/')}\n")
    result = import_megatron([log], tmp_path / "raw", run_id="x")
    assert result["records"] == 1 and result["rejected"] == 1
    assert "bad.log:1: malformed iteration line: timestamp '2024-13-45 10:00:00' is not a date" in \
        raw_records(tmp_path / "raw", "training_steps")[-1]["quarantine_reason"]


# -- nvidia-smi --query-gpu CSV: `nvidia-smi --help-query-gpu` (field names, `[unit]` header
#    suffixes, `[N/A]` / `[Unknown Error]` values) and nvidia-smi's own error messages.
def test_nvidia_smi_query_csv_with_a_driver_reload(tmp_path):
    result = import_nvidia_smi([SAMPLES / "nvidia_smi_query.csv"], tmp_path, host="gpu-node-7", run_id="job-1")
    rows = [r for r in raw_records(tmp_path, "gpu_samples") if "gpu_index" in r]
    assert len(rows) == result["records"] == 6
    first = rows[0]
    assert first == {**first, "host": "gpu-node-7", "gpu_index": 0, "run_id": "job-1", "utilization_ratio": 0.97,
                     "memory_used_bytes": 71234 * MIB, "memory_total_bytes": 81559 * MIB, "power_watts": 612.34,
                     "power_limit_watts": 700.0, "temperature_celsius": 64.0, "sm_clock_hertz": 1.98e9,
                     "throttle_reasons": 0, "ecc_corrected_errors_total": 3, "gpu_lost": False,
                     "time": "2026-11-29T10:00:00.012Z", "gpu_uuid": "GPU-6f1c2a3b-0000-1111-2222-333344445555"}
    assert rows[1]["throttle_reasons"] == 4 and rows[2]["power_watts"] is None   # [N/A] is null, never 0
    lost = rows[3]   # the GPU the driver lost: a record that says so, every value null
    assert lost["gpu_lost"] is True and lost["utilization_ratio"] is None and lost["memory_used_bytes"] is None
    # after the reload: the new header's column order is used, the counters restarted
    after = rows[4]
    assert after["gpu_uuid"].startswith("GPU-") and after["gpu_name"] == "NVIDIA H100 80GB HBM3"
    assert after["ecc_corrected_errors_total"] == 0 and after["power_limit_watts"] == 700.0
    [report] = result["reports"]
    assert report.skipped == {"nvidia-smi error": 2} and "restarted 1 time(s)" in report.line()


# -- nvidia-smi -q: the NVSMI LOG text (sections and `Key : value` lines as nvidia-smi prints them;
#    older drivers say `Power Readings`, `Clocks Throttle Reasons`, `Single Bit` / `Double Bit`).
def test_nvidia_smi_q_text_with_a_driver_reload(tmp_path):
    result = import_nvidia_smi([SAMPLES / "nvidia_smi_q.txt"], tmp_path, host="gpu-node-7")
    rows = raw_records(tmp_path, "gpu_samples")
    rows = [r for r in rows if "gpu_index" in r]
    assert [(r["time"][11:19], r["gpu_index"]) for r in rows] == [("10:00:00", 0), ("10:00:00", 1), ("10:05:00", 0), ("10:05:00", 1)]
    a, b, c, _ = rows
    assert a["utilization_ratio"] == 0.97 and a["memory_used_bytes"] == 71234 * MIB and a["power_watts"] == 612.34
    assert a["power_limit_watts"] == 700.0 and a["sm_clock_hertz"] == 1.98e9 and a["temperature_celsius"] == 64.0
    assert a["throttle_reasons"] == 0x4 and a["ecc_corrected_errors_total"] == 2 and a["ecc_uncorrected_errors_total"] == 0
    assert b["utilization_ratio"] is None and b["power_watts"] is None and b["gpu_lost"] is True
    assert c["throttle_reasons"] == 0x1 and c["ecc_corrected_errors_total"] == 0 and c["power_watts"] == 70.12
    [report] = result["reports"]
    assert report.skipped == {"nvidia-smi error": 1} and "driver changed mid-log: 550.54.15 -> 550.90.07" in report.notes


@pytest.mark.parametrize("stray", ["NVSMI LOG", "==NVSMI LOG=="])
def test_a_csv_line_naming_the_q_banner_keeps_the_file_a_csv(tmp_path, stray):
    # found by tests/fault_injection/test_fuzz_importers.py: the file's form was told by "NVSMI LOG" anywhere in
    # its head, so this CSV went to the -q parser and failed whole ("not an `nvidia-smi -q` log")
    lines = (SAMPLES / "nvidia_smi_query.csv").read_text().splitlines()
    log = tmp_path / "node.csv"
    log.write_text("\n".join([lines[0], stray, *lines[1:]]) + "\n")
    result = import_nvidia_smi([log], tmp_path / "raw", host="gpu-node-7")
    # every record of the sample, and the stray line quarantined beside the sample's own two error lines
    assert result["records"] == 6 and result["rejected"] == 3 and result["reports"][0].skipped == {"nvidia-smi error": 3}
    # and a -q log with a stray line before its first banner is still read as -q
    q = (SAMPLES / "nvidia_smi_q.txt").read_text()
    log = tmp_path / "node.txt"
    log.write_text("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n" + q)
    assert import_nvidia_smi([log], tmp_path / "raw-q", host="gpu-node-7")["records"] == 4


# -- dcgmi dmon: DCGM's command-line reference (dcgmi dmon): `#Entity` header of field short names,
#    an `ID` line, one `GPU n` row per entity per sample, `N/A` for a value it has not.
def test_dcgmi_dmon(tmp_path):
    with pytest.raises(ImportErrorForUser, match="--start-time"):
        import_dcgmi([SAMPLES / "dcgmi_dmon.txt"], tmp_path, host="n7")
    result = import_dcgmi([SAMPLES / "dcgmi_dmon.txt"], tmp_path, host="n7", start_time=T, interval=5)
    rows = [r for r in raw_records(tmp_path, "gpu_samples") if "gpu_index" in r]
    assert [(r["time"][11:19], r["gpu_index"]) for r in rows] == [
        ("10:00:00", 0), ("10:00:00", 1), ("10:00:05", 0), ("10:00:05", 1), ("10:00:10", 0), ("10:00:10", 1)]
    assert rows[0]["utilization_ratio"] == 0.97 and rows[0]["memory_used_bytes"] == 71234 * MIB
    assert rows[0]["sm_active_ratio"] == 0.912 and rows[0]["tensor_active_ratio"] == 0.487 and rows[0]["sm_clock_hertz"] == 1.98e9
    assert rows[1]["utilization_ratio"] is None
    assert rows[3]["last_xid"] == 79 and rows[3]["xid_errors_total"] == 1 and rows[5]["xid_errors_total"] == 1
    [report] = result["reports"]
    assert report.skipped == {"dcgmi error": 1} and "fields not mapped: PCITX" in report.notes


# -- kernel log: NVIDIA's Xid guide (`NVRM: Xid (PCI:0000:19:00): 79, pid=..., GPU has fallen off
#    the bus.`), as journalctl -k -o short-iso and dmesg -T print it.
def test_kernel_log_xid_79(tmp_path):
    result = import_kernel_xids([SAMPLES / "kern_journalctl.log"], tmp_path, gpu_map_items=[str(SAMPLES / "gpu_map.csv")])
    rows = [r for r in raw_records(tmp_path, "gpu_samples") if "gpu_index" in r]
    xid79 = [r for r in rows if r.get("last_xid") == 79]
    assert xid79 == [{"time": "2026-11-29T10:30:12.000Z", "host": "gpu-node-7", "gpu_index": 1, "xid_errors_total": 1,
                      "last_xid": 79}]
    # the reading just before it, so the counter's rise is seen in any window
    assert {"time": "2026-11-29T10:30:11.999Z", "host": "gpu-node-7", "gpu_index": 1, "xid_errors_total": 0} in rows
    assert [r for r in rows if r.get("last_xid") == 13][0]["gpu_index"] == 0
    [report] = result["reports"]
    reasons = {r["quarantine_reason"] for r in raw_records(tmp_path, "gpu_samples") if "quarantine_reason" in r}
    assert any("PCI 0000:3b:00 has no GPU index: pass --gpu-map" in r for r in reasons)   # a bus id the map lacks
    assert any("kern_journalctl.log:7: XID line without a usable time" in r for r in reasons)   # month 13
    assert sum(report.skipped.values()) == 2
    dmesg = import_kernel_xids([SAMPLES / "dmesg_T.log"], tmp_path / "d", host="gpu-node-7", gpu_map_items=["0000:19:00=1"])
    assert dmesg["records"] == 2 and dmesg["rejected"] == 0


# -- Hugging Face Trainer: transformers' TrainerState, saved as trainer_state.json (log_history
#    entries per logging step, per evaluation, and the train summary).
def test_hf_trainer_state(tmp_path):
    with pytest.raises(ImportErrorForUser, match="--start-time"):
        import_hf_trainer([SAMPLES / "trainer_state.json"], tmp_path, run_id="ft")
    result = import_hf_trainer([SAMPLES / "trainer_state.json"], tmp_path, run_id="ft", start_time=T)
    rows = {r["step"]: r for r in raw_records(tmp_path, "training_steps") if "step" in r}
    assert sorted(rows) == [10, 20, 30]   # the eval entry and summary are not steps; step 40's loss is "bogus"
    assert rows[10]["loss"] == 2.3456 and rows[10]["grad_norm"] == 3.41 and rows[10]["time"] == "2026-11-29T10:00:20.000Z"
    assert rows[10]["step_seconds"] == 2.0   # train_runtime 80 s / 40 steps
    assert math.isnan(rows[30]["loss"]) and "grad_norm" not in rows[30]
    assert result["rejected"] == 1


@pytest.mark.parametrize("kind, extra", [
    ("megatron", ["--run-id", "r"]), ("nvidia-smi", []), ("dcgmi", ["--start-time", "2026-11-29T10:00Z"]),
    ("kernel-xid", []), ("hf-trainer", ["--run-id", "r", "--start-time", "2026-11-29T10:00Z"]),
    ("tensorboard", ["--run-id", "r"]), ("predictions", []),
])
def test_a_file_of_the_wrong_kind_is_one_line_and_exit_2(tmp_path, capsys, kind, extra):
    wrong = tmp_path / ("events.out.tfevents.1" if kind == "tensorboard" else "wrong.parquet" if kind == "predictions" else "x.log")
    wrong.write_bytes(b"\x89PNG\r\n\x1a\n not what you think \x00\x01" if kind != "hf-trainer" else b'{"a": 1}')
    assert main(["import", kind, str(wrong), "--home", str(tmp_path / "home"), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(wrong) in err, err
    assert not (tmp_path / "home" / "raw").exists() or not any((tmp_path / "home" / "raw").rglob("*.jsonl"))
