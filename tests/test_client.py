"""The training-side client: records survive a SIGKILL of the trainer, lineage and checkpoint
manifests land in the warehouse, the client never raises into training, torch allocator stats."""

import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from assets.ingest import SOURCES, ingest_partition
from orchestration.storage.warehouse import WarehouseResource
from sources.client import GoodputClient, allocator_figures

REPO = Path(__file__).resolve().parent.parent
TRAIN = textwrap.dedent("""
    import math, sys, time
    from sources.client import GoodputClient
    goodput = GoodputClient(run_id="tiny", rank=1, world_size=2, home=sys.argv[1], host="node-t", gpu_index=1)
    goodput.run_started(job="tiny", dataset="toy")
    w = 5.0
    for step in range(1, 100000):
        loss = (w - 1.0) ** 2
        w -= 0.01 * 2 * (w - 1.0)
        goodput.log_step(step, loss=loss, grad_norm=abs(2 * (w - 1.0)), learning_rate=0.01, tokens=512)
        print(step, flush=True)          # the parent kills us after it has seen enough steps
        time.sleep(0.002)
""")


def read_raw(home: Path, source: str) -> list[str]:
    return [line for f in sorted((home / "raw" / source).glob("*/*/*.jsonl")) for line in f.read_text().split("\n") if line]


def test_sigkill_mid_run_loses_no_written_record(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    last_reported = 0
    deadline = time.monotonic() + 60
    for line in process.stdout:
        last_reported = int(line)
        if last_reported >= 200 or time.monotonic() > deadline:
            break
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert last_reported >= 200

    lines = read_raw(tmp_path, "training_steps")
    records = [json.loads(line) for line in lines]      # every line is whole JSON
    steps = [r["step"] for r in records]
    # Every step logged before the kill is there, in order, once (the step being logged when the
    # signal came may or may not be: it is whole or absent).
    assert steps == list(range(1, len(steps) + 1))
    assert len(steps) >= last_reported
    assert {r["run_id"] for r in records} == {"tiny"} and {r["rank"] for r in records} == {1}
    assert records[1]["step_seconds"] > 0 and records[0]["tokens"] == 512
    assert [json.loads(line)["event"] for line in read_raw(tmp_path, "lineage")] == ["run_started"]


def _ingest(home: Path, table: str, hours: list[datetime]):
    source = next(s for s in SOURCES if s.table == table)
    with WarehouseResource(path=str(home / "w.duckdb")).connect() as con:
        results = []
        for hour in hours:
            folder = home / "raw" / source.folder / hour.strftime("%Y-%m-%d") / hour.strftime("%H")
            files = sorted(folder.glob("*.jsonl"))
            results.append(ingest_partition(con, source, files, hour, hour + timedelta(hours=1)))
        return results


def _hours(home: Path, folder: str) -> list[datetime]:
    return sorted({datetime.strptime(f"{p.parent.parent.name} {p.parent.name}", "%Y-%m-%d %H")
                   for p in (home / "raw" / folder).glob("*/*/*.jsonl")})


def test_steps_and_lineage_land_in_the_warehouse(tmp_path):
    checkpoint = tmp_path / "ckpt" / "step-000100"
    checkpoint.mkdir(parents=True)
    (checkpoint / "model.pt").write_bytes(b"weights" * 1000)
    (checkpoint / "optim.pt").write_bytes(b"adam" * 2000)
    client = GoodputClient(run_id="llm-x", rank=0, world_size=1, home=tmp_path, host="node-c", gpu_index=0)
    client.run_started(job="llm", git_sha="abc123", config_hash="cfg", dataset="web")
    for step in range(1, 6):
        client.log_step(step, loss=float("nan") if step == 5 else 2.0 / step, grad_norm=1.0, learning_rate=3e-4)
    client.checkpoint_saved(100, checkpoint)
    client.model_version_registered("llm-x@100", step=100, checkpoint_path=str(checkpoint))
    client.model_version_promoted("llm-x@100", endpoint="chat-prod")
    client.run_ended("completed")
    client.close()

    manifest = json.loads((checkpoint / "goodput-manifest.json").read_text())
    assert {f["path"]: f["sha256"] for f in manifest["files"]} == {
        "model.pt": hashlib.sha256(b"weights" * 1000).hexdigest(), "optim.pt": hashlib.sha256(b"adam" * 2000).hexdigest()}

    results = _ingest(tmp_path, "training_steps", _hours(tmp_path, "training_steps"))
    assert sum(r["rows_quarantined"] for r in results) == 0
    results = _ingest(tmp_path, "lineage_events", _hours(tmp_path, "lineage"))
    assert sum(r["rows_quarantined"] for r in results) == 0
    with WarehouseResource(path=str(tmp_path / "w.duckdb")).connect(read_only=True) as con:
        losses = [r[0] for r in con.execute("SELECT loss FROM training_steps ORDER BY step").fetchall()]
        events = con.execute("SELECT event, step, checkpoint_path, model_version, endpoint, payload->>'$.checkpoint_bytes' "
                             "FROM lineage_events ORDER BY time, source_line").fetchall()
    assert losses[:4] == pytest.approx([2.0, 1.0, 2 / 3, 0.5]) and losses[4] != losses[4]   # NaN kept, not lost
    names = [e[0] for e in events]
    assert names[0] == "run_started" and names[-1] == "run_ended"
    assert set(names) == {"run_started", "checkpoint_saved", "model_version_registered", "model_version_promoted", "run_ended"}
    saved = next(e for e in events if e[0] == "checkpoint_saved")
    assert saved[1] == 100 and saved[2] == str(checkpoint) and int(saved[5]) == 7000 + 8000
    promoted = next(e for e in events if e[0] == "model_version_promoted")
    assert promoted[3:5] == ("llm-x@100", "chat-prod")


def test_the_client_never_raises_into_training(tmp_path, capsys):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the raw zone should be")
    client = GoodputClient(run_id="r", home=blocker)
    assert client.log_step(1, loss=1.0) is False
    assert client.log_step(2, loss=object()) is False            # unserialisable values are stringified or dropped
    assert client.log_step("not a number") is False
    assert client.steps.dropped == 3
    assert capsys.readouterr().err.count("goodput: could not write") == 1   # one line, not one per step
    client.checkpoint_saved(1, tmp_path / "missing-checkpoint", background=False)   # no crash either


def test_allocator_figures_from_memory_stats_keys():
    stats = {"allocated_bytes.all.current": 123, "reserved_bytes.all.current": 456, "inactive_split_bytes.all.current": 7,
             "num_alloc_retries": 2, "num_ooms": 1, "active.all.current": 99}
    assert allocator_figures(stats) == {"memory_allocated_bytes": 123, "memory_reserved_bytes": 456,
                                        "memory_inactive_split_bytes": 7, "alloc_retries_total": 2, "ooms_total": 1}


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="torch is not installed (optional: the client only reads its allocator when present)")
def test_torch_allocator_stats(tmp_path):
    import torch

    client = GoodputClient(run_id="t", home=tmp_path, torch_memory_stats=True, gpu_index=0)
    x = torch.ones(1024, 1024, device="cuda" if torch.cuda.is_available() else "cpu")
    client.log_step(1, loss=float(x.sum()))
    client.close()
    [record] = [json.loads(line) for line in read_raw(tmp_path, "training_steps")]
    if torch.cuda.is_available():
        assert record["memory_allocated_bytes"] >= 4 * 1024 * 1024 and record["memory_reserved_bytes"] >= record["memory_allocated_bytes"]
        assert record["ooms_total"] == 0
    else:
        # CPU-only torch has no CUDA caching allocator: the fields are absent and training goes on.
        assert "memory_allocated_bytes" not in record and record["loss"] == 1024 * 1024
