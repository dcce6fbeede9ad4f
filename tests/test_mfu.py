"""Model FLOPs utilization inputs and the mfu_drop detector: the peak FLOPs table (maintained, extended
by a site, validated), the fields the client and the Megatron importer carry into the warehouse, and
the detector on a drop it must flag and look-alikes it must not."""

from __future__ import annotations

import pandas as pd
import pytest

from checks.detectors_efficiency import mfu_drop
from checks.registry import REGISTRY
from orchestration.cli import main
from orchestration.config.peak_flops import PeakFlopsError, as_params, peak_table
from sources.client import GoodputClient
from tests.helpers import MEGATRON_LM, ingest_all, query

THRESHOLDS = dict(REGISTRY.get("mfu_drop").thresholds)


# --------------------------------------------------------------------------- peak FLOPs table

def test_the_maintained_table_covers_the_gpus_the_issue_names():
    table = peak_table()
    for gpu in ("h100", "h200", "b200", "a100", "l40s"):
        assert table[(gpu, "bf16")] > 0
    assert table[("h100", "fp8")] == pytest.approx(2 * table[("h100", "bf16")], rel=1e-3)
    assert table[("h100 pcie", "bf16")] < table[("h100", "bf16")]
    params = as_params(table)
    assert len(params["peak_patterns"]) == len(params["peak_precisions"]) == len(params["peak_flops"]) == len(table)


def test_a_site_extends_and_overrides_the_table(tmp_path):
    (tmp_path / "peak_flops.yaml").write_text(
        "gpus:\n  - {match: 'MI300X', tflops: {bf16: 1307.4, fp8: 2614.9}}\n  - {match: h100, tflops: {bf16: 900}}\n")
    table = peak_table(tmp_path)
    assert table[("mi300x", "bf16")] == pytest.approx(1307.4e12)
    assert table[("h100", "bf16")] == pytest.approx(900e12)       # overridden ...
    assert table[("h100", "fp8")] == pytest.approx(1978.9e12)     # ... precision by precision


@pytest.mark.parametrize("text, where", [
    ("gpus:\n  - {match: h100, tflops: {bf16: -1}}\n", "gpus.0.tflops.bf16"),
    ("gpus:\n  - {match: h100, tflops: {int4: 10}}\n", "gpus.0.tflops.int4"),
    ("gpus:\n  - {name: h100, tflops: {bf16: 10}}\n", "gpus.0"),
    ("gpus: [\n", "not valid YAML"),
])
def test_a_bad_table_is_one_line_naming_the_file_and_the_key(tmp_path, text, where):
    (tmp_path / "peak_flops.yaml").write_text(text)
    with pytest.raises(PeakFlopsError) as error:
        peak_table(tmp_path)
    message = str(error.value)
    assert "\n" not in message and message.startswith(str(tmp_path / "peak_flops.yaml")) and where in message


# --------------------------------------------------------------------------- fields into the warehouse

def test_the_client_and_the_megatron_importer_carry_flops_into_the_warehouse(tmp_path, capsys):
    client = GoodputClient(run_id="mfu-client", rank=0, world_size=1, home=tmp_path, host="h", gpu_index=0)
    client.log_step(1, loss=2.0, time=1_764_460_800.0, step_seconds=2.0, tokens=2048, parameters=64_700_000_000,
                    data_seconds=0.01)
    client.log_step(2, loss=2.0, time=1_764_460_802.0, tokens=2048, model_flops_per_token=4.04e11)
    client.close()
    log = tmp_path / "train.log"
    log.write_text(MEGATRON_LM)
    assert main(["import", "megatron", str(log), "--run-id", "mlm-1", "--home", str(tmp_path)]) == 0
    capsys.readouterr()
    ingest_all(tmp_path, "training_steps")
    rows = query(tmp_path, "SELECT run_id, step, tokens, parameters, model_flops_per_token, tflops "
                           "FROM training_steps ORDER BY run_id, step")
    assert rows == [("mfu-client", 1, 2048, 64_700_000_000, None, None), ("mfu-client", 2, 2048, None, 4.04e11, None),
                    ("mlm-1", 100, None, None, None, None), ("mlm-1", 200, None, None, None, 312.4)]


# --------------------------------------------------------------------------- the detector

def _frame(mfu: list[float], steps: list[int] | None = None, report_from: int = 0) -> pd.DataFrame:
    minutes = pd.date_range("2026-11-30 00:00", periods=len(mfu), freq="min")
    steps = steps if steps is not None else [30] * len(mfu)
    return pd.DataFrame({
        "run_id": "r", "minute": minutes,
        "tick": minutes + pd.Timedelta(minutes=1), "in_window": [i >= report_from for i in range(len(minutes))],
        "mfu": mfu, "mfu_from_model_flops": mfu, "mfu_from_reported_tflops": None, "steps_completed": steps,
        "peak_flops_per_gpu": 989.4e12, "gpu_name": "NVIDIA H100 80GB HBM3", "precision": "bf16", "gpu_count": 8,
        "slow_steps_gpu_seconds": 0.0, "data_stall_gpu_seconds": 0.0, "allocated_gpu_seconds": 480.0,
        "hosts": [["node-0"]] * len(mfu), "gpus": [["node-0:0"]] * len(mfu)})


def _noise(n: int, seed: int = 1) -> list[float]:
    import numpy as np
    return list(0.40 * (1 + 0.01 * np.random.default_rng(seed).standard_normal(n)))


def test_a_persistent_drop_while_stepping_is_flagged():
    mfu = _noise(90)
    mfu[40:70] = [m * 0.88 for m in mfu[40:70]]      # a 12 % kernel regression for 30 minutes
    (finding,) = mfu_drop(_frame(mfu), THRESHOLDS).to_dict("records")
    assert finding["onset"] == pd.Timestamp("2026-11-30 00:40")
    assert finding["detected_at"] == pd.Timestamp("2026-11-30 00:45")   # the 5th slow minute's end
    assert finding["evidence"]["drop_pct"] == pytest.approx(12, abs=1.5)


@pytest.mark.parametrize("case", ["short dip", "pauses without steps", "ordinary noise", "slow drift within noise", "no history"])
def test_look_alikes_are_not_flagged(case):
    mfu, steps = _noise(90), None
    if case == "short dip":                  # three slow minutes: a slow batch, a GC pause
        mfu[50:53] = [m * 0.7 for m in mfu[50:53]]
    elif case == "pauses without steps":     # checkpoint saves and evaluations: no steps, MFU of the few steps low
        steps = [30] * 90
        for a in range(30, 90, 10):
            steps[a:a + 3] = [0, 0, 0]
            mfu[a:a + 3] = [0.05, 0.05, 0.05]
    elif case == "ordinary noise":
        mfu = _noise(90, seed=7)
    elif case == "slow drift within noise":  # 3 % lower over an hour: below the 8 % threshold
        mfu = [m * (1 - 0.03 * i / 90) for i, m in enumerate(mfu)]
    elif case == "no history":               # low from the first minute: nothing to compare with
        mfu = [m * 0.8 for m in mfu[:15]] + mfu[15:]
    assert mfu_drop(_frame(mfu, steps), THRESHOLDS).empty


def test_only_the_reported_window_is_reported():
    mfu = _noise(90)
    mfu[40:70] = [m * 0.8 for m in mfu[40:70]]
    assert mfu_drop(_frame(mfu, report_from=75), THRESHOLDS).empty     # over before the partition
    (finding,) = mfu_drop(_frame(mfu, report_from=60), THRESHOLDS).to_dict("records")
    assert finding["onset"] == pd.Timestamp("2026-11-30 00:40") and finding["detected_at"] == pd.Timestamp("2026-11-30 01:01")


def test_the_client_logs_save_and_evaluation_pauses(tmp_path):
    import json

    client = GoodputClient(run_id="pauses", rank=0, world_size=1, home=tmp_path, host="h", gpu_index=0)
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "w.bin").write_bytes(b"x" * 10)
    client.checkpoint_saved(10, tmp_path / "ck", background=False, save_seconds=42.5)
    assert client.evaluation_done(61.25, step=10)
    client.close()
    events = [json.loads(line) for f in sorted((tmp_path / "raw" / "lineage").rglob("*.jsonl")) for line in f.read_text().splitlines()]
    assert [(e["event"], e.get("save_seconds"), e.get("eval_seconds")) for e in events] == [
        ("checkpoint_saved", 42.5, None), ("evaluation", None, 61.25)]
