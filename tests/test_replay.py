"""Replay: the raw zone grows append-only to exactly the staged one (and the checkpoints with the
lineage lines that name them), ingest is the same whether an hour is read while it grows or whole,
and the real schedule's ticks find the hang and a damaged checkpoint at the delay a user would see,
with no false alarm for the intact checkpoints."""

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

from assets.ingest import SOURCES, ingest_partition
from orchestration.evaluation.replay import GrowingCheckpoints, GrowingRawZone, index_file, replay, schedule_ticks
from orchestration.storage.raw_zone import RawZoneResource
from orchestration.storage.warehouse import WarehouseResource
from simulator import load_scenario, simulate

REPO = Path(__file__).resolve().parent.parent
QUICK = REPO / "bench" / "scenarios" / "replay_quick.yaml"
CKPTS = REPO / "bench" / "scenarios" / "replay_checkpoints.yaml"
SHORT = REPO / "tests" / "fixtures" / "replay_short.yaml"
T0 = datetime(2026, 11, 30, tzinfo=timezone.utc)
HOUR = datetime(2026, 11, 30)


@pytest.fixture
def staged(tmp_path) -> Path:
    """The replay_quick scenario simulated into a staging folder."""
    simulate(load_scenario(QUICK), tmp_path / "staging")
    return tmp_path / "staging"


@pytest.fixture
def staged_checkpoints(tmp_path) -> Path:
    """The replay_checkpoints scenario (real safetensors checkpoints, one truncated) simulated into staging."""
    simulate(load_scenario(CKPTS), tmp_path / "staging")
    return tmp_path / "staging"


def _files(root: Path, pattern: str = "*.jsonl") -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob(pattern)) if p.is_file()}


def _saved_paths(raw: Path) -> set[str]:
    """The checkpoint paths the raw zone's checkpoint_saved lines name."""
    return {record["checkpoint_path"] for path in raw.glob("lineage/*/*/*.jsonl")
            for record in map(json.loads, path.read_text().splitlines())
            if record.get("event") == "checkpoint_saved"}


def test_a_line_arrives_after_its_latency_and_never_before_the_lines_above_it(tmp_path):
    path = tmp_path / "node-0.jsonl"
    path.write_bytes(b'{"time": "2026-11-30T00:00:05Z", "a": 1}\n'
                     b'{"time": "2026-11-30T00:00:20Z"}\n'
                     b'not json, no time\n'
                     b'{"time": "2026-11-30T00:00:10Z"}\n'      # written after a later one
                     b'{"time": "2026-11-30T00:00:30Z"')         # a writer mid-append: no newline
    staged = index_file(path, Path("gpu_samples/2026-11-30/00/node-0.jsonl"), latency_s=10.0)
    base = T0.timestamp()
    assert staged.available == [base + 15, base + 30, base + 30, base + 30, base + 40]
    assert staged.ends[-1] == len(path.read_bytes())


@pytest.mark.parametrize("scenario", [QUICK, CKPTS], ids=["quick", "checkpoints"])
def test_the_raw_zone_grows_append_only_to_exactly_the_staged_one(scenario, tmp_path):
    staged, home = tmp_path / "staging", tmp_path / "home"
    simulate(load_scenario(scenario), staged)
    home_raw = home / "raw"
    zone = GrowingRawZone(staged / "raw", home_raw, latency={"gpu_samples": 10.0, "training_steps": 2.0})
    checkpoints = GrowingCheckpoints(staged, home, zone)
    if scenario == CKPTS:   # a file under the checkpoint root that no lineage line names: copied at the end
        (staged / "checkpoints" / "stray" / "model.safetensors").parent.mkdir(parents=True)
        (staged / "checkpoints" / "stray" / "model.safetensors").write_bytes(b"not named by lineage")
        assert [c.relative for c in checkpoints.checkpoints] == [
            f"checkpoints/ckpt-run/step-{step:06d}" for step in (60, 120, 180, 240)]
        assert checkpoints.unnamed() == [Path("checkpoints/stray/model.safetensors")]
    staged_checkpoints = _files(staged, "checkpoints/**/*")
    before = _files(staged / "raw")
    previous: dict[str, bytes] = {}
    for minute in (0, 3, 7, 10, 13, 15):
        now = T0 + timedelta(minutes=minute)
        checkpoints.advance(now)
        zone.advance(now)
        # a checkpoint is in the home exactly when a line naming it is, with its staged bytes (damage included)
        named = _saved_paths(home_raw)
        present = {c.relative for c in checkpoints.checkpoints if (home / c.relative).exists()}
        assert present == named
        for name, data in _files(home, "checkpoints/**/*").items():
            assert staged_checkpoints[name] == data
        grown = _files(home_raw)
        for name, data in grown.items():
            assert before[name].startswith(data)                       # a prefix of the staged file
            assert data.startswith(previous.get(name, b""))            # only ever appended to
            assert data == b"" or data.endswith(b"\n")                 # whole lines (these have newlines)
            last_time = pd.Timestamp(data.splitlines()[-1].split(b'"time":"')[1].split(b'"')[0].decode())
            latency = 10 if name.startswith("gpu_samples") else 2
            assert last_time + pd.Timedelta(seconds=latency) <= pd.Timestamp(now)   # arrived by now
        previous = grown
    assert zone.pending() == 0 and checkpoints.pending() == 0
    assert _files(home_raw) == before
    checkpoints.finish()
    assert _files(home, "checkpoints/**/*") == staged_checkpoints        # byte for byte, the stray file too
    assert bool(staged_checkpoints) == (scenario == CKPTS)


def _tables(warehouse: WarehouseResource, root: Path) -> dict:
    """Every ingest table with file paths relative to the raw root (the two roots differ)."""
    out = {}
    with warehouse.connect(read_only=True) as con:
        for table in ("gpu_samples", "training_steps", "lineage_events", "quarantine", "ingest_files"):
            frame = con.execute(f"SELECT * FROM {table}").df()
            for col in ("source_file", "file"):
                if col in frame:
                    frame[col] = [str(Path(f).relative_to(root)) for f in frame[col]]
            frame = frame.drop(columns=["modified_ns"], errors="ignore")
            out[table] = sorted(map(tuple, frame.astype(str).itertuples(index=False)))
    return out


def _ingest_hour(warehouse: WarehouseResource, root: Path) -> list[dict]:
    raw = RawZoneResource(root=str(root))
    with warehouse.connect() as con:
        return [ingest_partition(con, source, raw.files(source.folder, HOUR), HOUR, HOUR + timedelta(hours=1))
                for source in SOURCES]


def test_ingesting_an_hour_while_it_grows_ends_with_the_same_tables_as_ingesting_it_whole(staged, tmp_path):
    whole = WarehouseResource(path=str(tmp_path / "whole.duckdb"))
    _ingest_hour(whole, staged / "raw")

    home_raw = tmp_path / "home" / "raw"
    growing = WarehouseResource(path=str(tmp_path / "growing.duckdb"))
    zone = GrowingRawZone(staged / "raw", home_raw)
    zone.advance(T0 + timedelta(minutes=3))   # before the hang: the step files are still growing
    # a writer caught mid-line: the hour's last line is half written when the tick reads it
    steps = sorted((home_raw / "training_steps").rglob("*.jsonl"))[0]
    staged_steps = (staged / "raw" / steps.relative_to(home_raw)).read_bytes()
    written = len(steps.read_bytes())
    rest = staged_steps[written:]
    cut = rest.index(b"\n") // 2
    with open(steps, "ab") as out:
        out.write(rest[:cut])
    partial = _ingest_hour(growing, home_raw)
    assert sum(r["rows_quarantined"] for r in partial) == 1            # the half line, as truncated
    with growing.connect(read_only=True) as con:
        (reason,) = con.execute("SELECT reason FROM quarantine").fetchone()
    assert reason.startswith("truncated")
    with open(steps, "ab") as out:                                    # the writer finishes its line
        out.write(rest[cut:rest.index(b"\n") + 1])
    (grown,) = [f for f in zone.files if f.relative == steps.relative_to(home_raw)]
    grown.written += 1                                                 # that line is in, the zone goes on after it
    _ingest_hour(growing, home_raw)                                    # a tick in the middle
    zone.advance(T0 + timedelta(hours=1))
    assert zone.pending() == 0
    _ingest_hour(growing, home_raw)                                    # the last tick
    _ingest_hour(growing, home_raw)                                    # and once more: exactly once
    assert _tables(growing, home_raw) == _tables(whole, staged / "raw")


def test_schedule_ticks_are_the_cron_ticks():
    ticks = schedule_ticks("*/5 * * * *", "UTC", T0, T0 + timedelta(minutes=20))
    assert ticks == [T0 + timedelta(minutes=m) for m in (5, 10, 15, 20)]


def test_replay_under_the_real_sensor_sees_the_hang_after_data_latency_cadence_and_window(tmp_path):
    """`bench/bench_replay.py --quick` as users run it (the home's persistent instance) on SHORT, `--quick`'s
    scenario cut to the hang (7 ticks rather than 13: each tick is a detect run and a fold): every tick of the
    real sensor runs its requests through the real detect job."""
    keep, out = tmp_path / "replay", tmp_path / "replay.json"
    # the caller's GOODPUT_HOME is another home whose data starts a day later (a CI worker's earlier test
    # left one set): the replay loads the code location for its own home, not that one
    other = tmp_path / "other-home" / "raw" / "gpu_samples" / "2026-12-01" / "05"
    other.mkdir(parents=True)
    (other / "agent.jsonl").write_text("{}\n")
    env = {**os.environ, "GOODPUT_HOME": str(tmp_path / "other-home")}
    done = subprocess.run([sys.executable, str(REPO / "bench" / "bench_replay.py"), "--quick", "--scenario", str(SHORT),
                           "--keep", str(keep), "--out", str(out)], cwd=REPO, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "per tier" in done.stdout and "| hang" in done.stdout and "load average" in done.stdout
    result = json.loads(out.read_text())
    ticks = pd.DataFrame(result["ticks"])
    # data arrives every minute and the sensor ticks every minute, over the scenario and a minute's tail
    assert [pd.Timestamp(t) for t in ticks["tick"]] == schedule_ticks(result["cron"], "UTC", T0, T0 + timedelta(minutes=7))
    assert ticks["runs"].min() >= 1 and not any(ticks["failed"].map(len))
    assert result["schedule"] == "raw_zone_detect"
    (hang,) = result["faults"]
    assert hang["type"] == "hang" and hang["tier"] == "SEV1"
    # seen at a tick, after the detector's window (busy_not_progressing needs minutes of stall) ...
    assert hang["delay_s"] >= 60
    seen = pd.Timestamp(hang["first_seen"]).tz_localize(None)
    assert any(abs((seen - pd.Timestamp(t).tz_convert(None)).total_seconds() - w) < 1e-3
               for t, w in zip(ticks["tick"], ticks["wall_s"]))
    # ... and no later than one cadence after the data that shows it arrived
    assert (seen - pd.Timestamp(hang["onset"]).tz_localize(None)).total_seconds() <= 8 * 60
    assert _files(keep / "replay_short-home" / "raw") == _files(keep / "replay_short-staging" / "raw")
    assert [t["tier"] for t in result["tiers"]] == ["SEV1"] and result["tiers"][0]["faults detected"] == 1
    assert [t["fault type"] for t in result["fault_types"]] == ["hang"]


def test_replay_command_rejects_a_bad_latency_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "orchestration.cli", "replay", "--scenario", str(QUICK),
                           "--home", str(tmp_path / "home"), "--latency", "gpu_samples"],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "goodput: --latency 'gpu_samples': expected SOURCE=SECONDS with SECONDS >= 0, e.g. gpu_samples=10"]


def test_replay_grows_checkpoints_and_sees_the_truncated_one_as_sev1_and_nothing_else(staged_checkpoints, tmp_path,
                                                                                      instance):
    """Saves at 00:05:13, 00:07:34 (truncated on disk), 00:10:06 (and 00:13:00, after the window)."""
    staged, home = staged_checkpoints, tmp_path / "home"
    # four ticks (00:08-00:11): the first copies step 60 and step 120 with the lines that name them
    result = replay(staged, home, T0 + timedelta(minutes=7), T0 + timedelta(minutes=11), instance=instance,
                    tail=timedelta(0))
    assert not any(result.ticks["failed"].map(len))
    assert list(result.ticks["checkpoints_copied"]) == [2, 0, 0, 1]
    (fault,) = result.faults.itertuples()
    assert fault.type == "checkpoint_truncated" and fault.tier == "SEV1"
    assert 0 <= fault.delay_s <= 5 * 60
    assert "checkpoint_truncated" in fault.signals
    # no false alarm: every incident is about the truncated checkpoint, the intact ones pass their audits
    from orchestration.config.home import warehouse_path
    from orchestration.storage.warehouse import WarehouseResource

    with WarehouseResource(path=str(warehouse_path(home))).connect(read_only=True) as con:
        entities = {e for (e,) in con.execute("SELECT DISTINCT entity_type || ':' || entity_id FROM incidents").fetchall()}
        audits = dict(con.execute("SELECT checkpoint, bool_and(status = 'ok') FROM checkpoint_audits "
                                  "GROUP BY checkpoint").fetchall())
        problems = {c for (c,) in con.execute("SELECT DISTINCT checkpoint FROM checkpoint_problems").fetchall()}
    assert entities == {"checkpoint:ckpt-run/step-000120"}
    assert audits == {"ckpt-run/step-000060": True, "ckpt-run/step-000120": False, "ckpt-run/step-000180": True}
    assert problems == {"ckpt-run/step-000120"}
    assert set(result.incidents["tier"]) == {"SEV1"}
    assert not result.incidents["false_alarm"].any()   # every incident is the injected truncation


def test_a_replay_before_the_loaded_partitions_says_so_in_one_line(tmp_path):
    """A code location loaded for a home whose data starts later has no partition for the replay's first
    hours: the sensor would request nothing at every tick, so the replay refuses at once and says why."""
    from orchestration.partitions import hourly

    before = hourly.start.astimezone(timezone.utc) - timedelta(days=1)
    with pytest.raises(ValueError, match="the partitions start at .* after this replay's first hour .* GOODPUT_HOME"):
        replay(tmp_path / "staging", tmp_path / "home", before, before + timedelta(hours=1))
    assert not (tmp_path / "home").exists()
