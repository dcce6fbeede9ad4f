"""Log importers on files the tests make: TensorBoard event files written with the tensorboard
package's own writer, Megatron-LM / Megatron-DeepSpeed / NeMo iteration lines in their real format,
and prediction logs (JSONL, Parquet) with outcomes that arrive hours later."""

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
import tensorboard.summary as tb

from orchestration.cli import main
from sources.importers import ImportErrorForUser, import_predictions, import_tensorboard, megatron_steps
from tests.helpers import MEGATRON_DEEPSPEED, MEGATRON_LM, ingest_all, query

T0 = datetime(2026, 11, 30, 3, 0, tzinfo=timezone.utc)


def write_tensorboard(logdir: Path, steps: int = 30) -> None:
    writer = tb.Writer(str(logdir))
    for step in range(1, steps + 1):
        wall = (T0 + timedelta(seconds=2 * step)).timestamp()
        writer.add_scalar("train/loss", 5.0 / step, step=step, wall_time=wall)
        writer.add_scalar("train/lr", 3e-4, step=step, wall_time=wall)
        writer.add_scalar("grad-norm", 1.5, step=step, wall_time=wall)
        writer.add_scalar("my/custom_tokens", 4096, step=step, wall_time=wall)
        writer.add_scalar("eval/accuracy", 0.5, step=step, wall_time=wall)   # not mapped: ignored
        if step == 7:
            writer.add_scalar("grad-norm", float("inf"), step=step, wall_time=wall)
    writer.flush()
    writer.close()


def test_tensorboard_import_maps_tags_and_lands_in_the_warehouse(tmp_path):
    logdir = tmp_path / "tb"
    write_tensorboard(logdir)
    result = import_tensorboard([logdir], tmp_path / "raw", run_id="tb-run", rank=0, tag_map={"my/custom_tokens": "tokens"})
    assert result["records"] == 30 and result["rejected"] == 1
    totals = ingest_all(tmp_path, "training_steps")
    assert totals == {"rows_loaded": 30, "rows_quarantined": 1}
    rows = query(tmp_path, "SELECT step, time, loss, learning_rate, grad_norm, tokens FROM training_steps ORDER BY step")
    assert [r[0] for r in rows] == list(range(1, 31))
    assert rows[0][1] == datetime(2026, 11, 30, 3, 0, 2)
    assert rows[9][2] == pytest.approx(0.5) and rows[9][3] == pytest.approx(3e-4) and rows[9][4] == pytest.approx(1.5)
    assert rows[9][5] == 4096
    [(reason,)] = query(tmp_path, "SELECT reason FROM quarantine")
    # the reason names the file and the event's position in it
    assert re.fullmatch(r"rejected by producer: events\.out\.tfevents\.[^:]+:\d+: non-finite grad-norm \(inf\) "
                        r"is not a usable grad_norm", reason)

    # Importing the same log again replaces its raw files: no duplicates after ingest.
    import_tensorboard([logdir], tmp_path / "raw", run_id="tb-run", rank=0, tag_map={"my/custom_tokens": "tokens"})
    assert ingest_all(tmp_path, "training_steps")["rows_loaded"] == 30
    assert query(tmp_path, "SELECT count(*) FROM training_steps") == [(30,)]


def test_tensorboard_import_needs_a_run_id_and_files(tmp_path):
    with pytest.raises(ImportErrorForUser, match="--run-id"):
        import_tensorboard([tmp_path], tmp_path / "raw", run_id=None)
    with pytest.raises(ImportErrorForUser, match="no input files"):
        import_tensorboard([tmp_path], tmp_path / "raw", run_id="r")


def test_megatron_lm_lines():
    records, rejects = megatron_steps(MEGATRON_LM.splitlines(), "mlm", 0)
    assert [r["step"] for r in records] == [100, 200]
    first, second = records
    assert first["time"] == "2024-05-01T10:00:00.000Z" and first["step_seconds"] == pytest.approx(1.2345)
    assert first["loss"] == pytest.approx(7.123456) and first["learning_rate"] == pytest.approx(3e-4)
    assert first["loss_scale"] == 65536.0 and first["grad_norm"] == pytest.approx(1.234)
    # per-interval counts become the table's counters; cumulative consumed samples are not a column
    assert first["skipped_iterations_total"] == 0 and first["nan_iterations_total"] == 0 and "consumed_samples" not in first
    assert second["step_seconds"] == pytest.approx(1.2301)
    [bad] = rejects
    assert bad["line"] == 6 and bad["reason"].startswith("malformed iteration line")


def test_megatron_deepspeed_lines_without_timestamps():
    records, rejects = megatron_steps(MEGATRON_DEEPSPEED.splitlines(), "mds", 3)
    assert rejects == []
    assert [(r["step"], r["time"]) for r in records] == [(10, "2024-05-01T12:00:25.000Z"), (20, "2024-05-01T12:00:49.000Z")]
    # per-step tokens: global batch 64 x (1310720 consumed tokens / 640 consumed samples) = 64 x 2048,
    # never the cumulative consumed tokens
    assert records[0]["step_seconds"] == 2.5 and records[0]["tokens"] == records[1]["tokens"] == 131072
    assert records[0]["rank"] == 3


def test_megatron_without_any_time_is_rejected_with_a_reason():
    line = " iteration       10/    1000 | elapsed time per iteration (s): 2.50 | lm loss: 1.0E+01 |"
    records, [reject] = megatron_steps([line], "x", 0)
    assert records == [] and "no timestamp" in reject["reason"]


def test_megatron_import_through_the_cli_lands_in_the_warehouse(tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_text(MEGATRON_LM)
    assert main(["import", "megatron", str(log), "--run-id", "mlm-1", "--home", str(tmp_path)]) == 0
    assert "imported 2 record(s)" in capsys.readouterr().out
    assert ingest_all(tmp_path, "training_steps") == {"rows_loaded": 2, "rows_quarantined": 1}
    assert query(tmp_path, "SELECT run_id, step, loss_scale FROM training_steps ORDER BY step") == [
        ("mlm-1", 100, 65536.0), ("mlm-1", 200, 65536.0)]
    assert main(["import", "megatron", str(tmp_path / "nope.log"), "--run-id", "x", "--home", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().endswith("nope.log: no such file or folder")


def test_predictions_jsonl_and_parquet_with_late_outcomes(tmp_path):
    preds = [{"time": (T0 + timedelta(minutes=i)).isoformat(), "endpoint": "fraud-v1", "model_version": "fraud@12",
              "request_id": f"req-{i}", "features": {"amount": 10.5 * i, "country": "DE"}, "prediction": i % 2,
              "confidence": 0.9 - i / 100} for i in range(10)]
    (tmp_path / "preds.jsonl").write_text("\n".join(json.dumps(p) for p in preds) + "\n{not json\n")
    # Outcomes arrive three hours later, in Parquet, keyed by request id only.
    outcomes = pd.DataFrame({"time": [T0 + timedelta(hours=3, minutes=i) for i in range(5)],
                             "request_id": [f"req-{i}" for i in range(5)], "outcome": ["fraud", "ok", "ok", "fraud", "ok"]})
    outcomes.to_parquet(tmp_path / "outcomes.parquet")
    result = import_predictions([tmp_path / "preds.jsonl", tmp_path / "outcomes.parquet"], tmp_path / "raw")
    assert result["records"] == 15 and result["rejected"] == 1
    assert ingest_all(tmp_path, "predictions") == {"rows_loaded": 10, "rows_quarantined": 1}
    assert ingest_all(tmp_path, "prediction_outcomes") == {"rows_loaded": 5, "rows_quarantined": 0}
    rows = query(tmp_path, "SELECT request_id, prediction, confidence, features->>'$.country', outcome, outcome_time "
                           "FROM predictions_with_outcomes ORDER BY time")
    assert rows[0][:5] == ("req-0", "0", 0.9, "DE", "fraud") and rows[0][5] == datetime(2026, 11, 30, 6, 0)
    assert rows[3][4] == "fraud" and rows[9][4] is None
