"""A real capture from an NVIDIA H200 (tests/fixtures/h200_hang, made by bench/gpu_capture.py on
2026-11-30): the NVML agent sampling every 2 s while a bf16 MLP trained for 2 minutes at ~690 W,
then the trainer stuck for 6.5 minutes with a spin kernel resident (as a rank waiting in a
collective that never completes: utilization 100 %, power ~120 W, no steps).

The real `detect` job must flag the hang from the real records, with the onset at the last step,
and must flag nothing on the same capture cut off a minute into the hang."""

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from bench.baseline import evaluate
from tests.helpers import run_detect

CAPTURE = Path(__file__).parent / "fixtures" / "h200_hang"
TRUTH = json.loads((CAPTURE / "truth.json").read_text())
HOUR = "2026-11-30-16:00"


def _time(iso: str) -> datetime:
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ")


def _home(tmp_path: Path, until: datetime | None = None) -> Path:
    """A Goodput home holding the capture's raw zone, optionally only the records before `until`."""
    shutil.copytree(CAPTURE / "raw", tmp_path / "raw")
    if until is not None:
        for path in (tmp_path / "raw").rglob("*.jsonl"):
            lines = path.read_text().splitlines(keepends=True)
            path.write_text("".join(line for line in lines if _time(json.loads(line)["time"]) < until))
    return tmp_path


def _findings(home: Path) -> list[tuple]:
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM quarantine").fetchone()[0] == 0   # every real record parses
        return con.execute("SELECT signal, run_id, onset, detected_at, gpus FROM findings ORDER BY signal").fetchall()


def test_the_real_hang_is_flagged_at_its_onset_by_both_hang_signals_and_by_no_generic_rule(tmp_path, instance):
    home = _home(tmp_path)
    run_detect(home, HOUR, instance)
    findings = _findings(home)
    assert [(signal, run) for signal, run, *_ in findings] == [
        ("busy_not_progressing", TRUTH["run_id"]), ("gpu_busy_low_power", TRUTH["run_id"])]
    hang_start = _time(TRUTH["hang_start"])
    (busy, low_power) = findings
    # The stall starts at the last completed step (the trainer's clock and the capture's agree).
    assert abs((busy[2] - hang_start).total_seconds()) < 1.0
    # Flagged once the stall passed 5 minutes, at the next minute tick; the spin at low power after 3 minutes.
    assert 300 <= (busy[3] - hang_start).total_seconds() <= 300 + 2 * 60
    assert abs((low_power[2] - hang_start).total_seconds()) <= 60
    assert (low_power[3] - low_power[2]).total_seconds() >= 3 * 60 and (low_power[3] - hang_start).total_seconds() <= 5 * 60
    assert busy[4] == low_power[4] == [f"{TRUTH['host']}:{TRUTH['gpu_index']}"]
    # The rules dashboards ship raise nothing: utilization stays at 100 %, memory at 14 of 141 GiB,
    # 34 degrees C, no XID, and 6.5 minutes of silence is short of the 10-minute no-log rule.
    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        assert evaluate(con).empty


def test_the_same_capture_a_minute_into_the_hang_flags_nothing(tmp_path, instance):
    """Two minutes of real training at full power (a real loss bump and grad-norm jump included),
    then one minute of spinning: below every threshold, so no signal may fire."""
    home = _home(tmp_path, until=_time(TRUTH["hang_start"]) + timedelta(minutes=1))
    run_detect(home, HOUR, instance)
    assert _findings(home) == []
