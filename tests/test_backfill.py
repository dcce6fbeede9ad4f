"""`goodput backfill` end to end on imported history: a Megatron-LM log with a NaN iteration and a
hang, and the nvidia-smi query log of the same job's GPUs, imported with `goodput import`, then
`goodput backfill --hours-with-data`: the NaN and the hang come out as incidents with their onsets.

The Megatron-LM line is the one megatron/training/training.py `training_log` prints (timestamp,
iteration, elapsed time per iteration in ms, loss printed only when its average is positive); the
CSV is `nvidia-smi --query-gpu=timestamp,index,uuid,utilization.gpu,memory.used,memory.total,
power.draw,temperature.gpu --format=csv -l 10`.
"""

import json
from datetime import datetime, timedelta

import dagster as dg
import pytest

from orchestration.cli import main
from orchestration.commands.backfill import hours_with_data
from orchestration.definitions import resources_for
from orchestration.storage.warehouse import WarehouseResource
from tests.helpers import memory_instance

START = datetime(2026, 11, 29, 10, 0, 0)
NAN_AT = START + timedelta(minutes=10)          # the interval ending 10:10:00 printed no lm loss
HANG_FROM = START + timedelta(minutes=20)       # the last iteration line; GPUs keep spinning after it
GPU_END = START + timedelta(minutes=45)


def megatron_log() -> str:
    lines = ["[before the start of training step] datetime: 2026-11-29 10:00:00"]
    t, iteration = START, 0
    while t < HANG_FROM:
        t, iteration = t + timedelta(seconds=10), iteration + 10
        loss = "" if t == NAN_AT else f" lm loss: {5.0 - iteration / 1000:.6E} |"
        lines.append(f" [{t:%Y-%m-%d %H:%M:%S}] iteration {iteration:8d}/   50000 | consumed samples: {iteration * 64:12d} |"
                     f" elapsed time per iteration (ms): 1000.0 | throughput per GPU (TFLOP/s/GPU): 312.4 |"
                     f" learning rate: 3.000000E-04 | global batch size:    64 |{loss} loss scale: 1.0 |"
                     f" grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |")
    return "\n".join(lines) + "\n"


def nvidia_smi_csv() -> str:
    lines = ["timestamp, index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], temperature.gpu"]
    t = START
    while t < GPU_END:
        for gpu in (0, 1):
            lines.append(f"{t:%Y/%m/%d %H:%M:%S}.{gpu:03d}, {gpu}, GPU-0000000{gpu}-e2e, 97 %, 70000 MiB, 81559 MiB, 610.00 W, 65")
        t += timedelta(seconds=10)
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    logs = tmp_path_factory.mktemp("logs")
    (logs / "train.log").write_text(megatron_log())
    (logs / "gpu-node-1.csv").write_text(nvidia_smi_csv())
    assert main(["import", "megatron", str(logs / "train.log"), "--run-id", "mlm-e2e", "--home", str(home)]) == 0
    assert main(["import", "nvidia-smi", str(logs / "gpu-node-1.csv"), "--run-id", "mlm-e2e", "--home", str(home)]) == 0
    assert hours_with_data(home) == [START.replace(tzinfo=hours_with_data(home)[0].tzinfo)]
    assert main(["backfill", "--hours-with-data", "--no-alerts", "--home", str(home)]) == 0
    return home


def incidents(home):
    with WarehouseResource(path=str(home / "warehouse.duckdb")).connect(read_only=True) as con:
        return con.execute("SELECT signal, onset, status FROM incidents ORDER BY onset").fetchall()


def test_nan_and_hang_come_out_as_incidents_with_their_onsets(backfilled):
    found = {signal: onset for signal, onset, _ in incidents(backfilled)}
    # exactly these two (the healthy 20 minutes before raise nothing), with their onsets: the NaN
    # interval's line, and the hang from the last completed step
    assert found == {"non_finite_loss": NAN_AT, "busy_not_progressing": HANG_FROM}, found
    with WarehouseResource(path=str(backfilled / "warehouse.duckdb")).connect(read_only=True) as con:
        [(loss, reason)] = con.execute("SELECT loss, loss_reason FROM training_steps WHERE NOT isfinite(loss)").fetchall()
    assert loss != loss and reason.startswith("no loss printed")


def test_no_alerts_suppresses_history_and_the_sensor_keeps_it_so(backfilled, capsys):
    delivered = backfilled / "alerts" / "alerts.jsonl"
    assert not delivered.exists() or delivered.read_text() == ""
    journal = [json.loads(line) for line in (backfilled / "alerts" / "attempts.jsonl").read_text().splitlines()]
    assert {a["outcome"] for a in journal} == {"suppressed"}
    assert {a["incident_id"] for a in journal} >= {i for i in _incident_ids(backfilled)}
    # the alert sensor that runs later finds nothing pending for the history
    from orchestration.sensors.alerts import incident_alerts

    with memory_instance() as instance, dg.build_sensor_context(instance=instance, resources=resources_for(backfilled)) as ctx:
        assert "no new incident transitions" in str(incident_alerts(ctx).skip_message)
    assert not delivered.exists() or delivered.read_text() == ""


def _incident_ids(home):
    with WarehouseResource(path=str(home / "warehouse.duckdb")).connect(read_only=True) as con:
        return [r[0] for r in con.execute("SELECT incident_id FROM incidents").fetchall()]


def test_backfill_errors_are_one_line(tmp_path, capsys):
    assert main(["backfill", "--hours-with-data", "--home", str(tmp_path)]) == 2
    assert "no raw files" in capsys.readouterr().err
    assert main(["backfill", "--from", "2026-11-29T10:00Z", "--home", str(tmp_path)]) == 2
    assert "--from START --to END" in capsys.readouterr().err
    assert main(["backfill", "--from", "2019-01-01T00:00Z", "--to", "2019-01-01T02:00Z", "--home", str(tmp_path)]) == 2
    assert "outside the partitions" in capsys.readouterr().err
