"""Replay: the raw zone grows append-only to exactly the staged one, ingest is the same whether an
hour is read while it grows or whole, and the real schedule's ticks find the hang at the delay a
user would see."""

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

from assets.ingest import SOURCES, ingest_partition
from orchestration.raw_zone import RawZoneResource
from orchestration.replay import GrowingRawZone, fault_type_table, index_file, replay, schedule_ticks, tier_table
from orchestration.warehouse import WarehouseResource
from simulator import load_scenario, simulate

REPO = Path(__file__).resolve().parent.parent
QUICK = REPO / "bench" / "scenarios" / "replay_quick.yaml"
T0 = datetime(2026, 11, 30, tzinfo=timezone.utc)
HOUR = datetime(2026, 11, 30)


@pytest.fixture
def staged(tmp_path) -> Path:
    """The replay_quick scenario simulated into a staging folder."""
    simulate(load_scenario(QUICK), tmp_path / "staging")
    return tmp_path / "staging"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl"))}


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


def test_the_raw_zone_grows_append_only_to_exactly_the_staged_one(staged, tmp_path):
    home_raw = tmp_path / "home" / "raw"
    zone = GrowingRawZone(staged / "raw", home_raw, latency={"gpu_samples": 10.0, "training_steps": 2.0})
    before = _files(staged / "raw")
    previous: dict[str, bytes] = {}
    for minute in (0, 3, 7, 10, 13):
        now = T0 + timedelta(minutes=minute)
        zone.advance(now)
        grown = _files(home_raw)
        for name, data in grown.items():
            assert before[name].startswith(data)                       # a prefix of the staged file
            assert data.startswith(previous.get(name, b""))            # only ever appended to
            assert data == b"" or data.endswith(b"\n")                 # whole lines (these have newlines)
            last_time = pd.Timestamp(data.splitlines()[-1].split(b'"time":"')[1].split(b'"')[0].decode())
            latency = 10 if name.startswith("gpu_samples") else 2
            assert last_time + pd.Timedelta(seconds=latency) <= pd.Timestamp(now)   # arrived by now
        previous = grown
    assert zone.pending() == 0
    assert _files(home_raw) == before


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


def test_replay_under_the_real_schedule_sees_the_hang_after_data_latency_cadence_and_window(staged, tmp_path, instance):
    scenario = load_scenario(QUICK)
    home = tmp_path / "home"
    result = replay(staged, home, scenario.start, scenario.end, instance=instance, tail=timedelta(minutes=1))
    # every tick of the schedule ran its run requests through the real detect job
    assert list(result.ticks["tick"]) == schedule_ticks(result.cron, "UTC", T0, T0 + timedelta(minutes=13))
    assert result.ticks["runs"].min() >= 1 and not any(result.ticks["failed"].map(len))
    (hang,) = result.faults.itertuples()
    assert hang.type == "hang" and hang.tier == "SEV1"
    # seen at a tick, after the detector's window (busy_not_progressing needs minutes of stall) ...
    assert hang.delay_s >= 60
    seen = pd.Timestamp(hang.first_seen)
    assert any(abs((seen - pd.Timestamp(t).tz_convert(None)).total_seconds() - w) < 1e-3
               for t, w in zip(result.ticks["tick"], result.ticks["wall_s"]))
    # ... and no later than one cadence after the data that shows it arrived
    assert (seen - pd.Timestamp(hang.onset)).total_seconds() <= 8 * 60
    assert _files(home / "raw") == _files(staged / "raw")
    tiers = tier_table(result.faults)
    assert list(tiers["tier"]) == ["SEV1"] and tiers.iloc[0]["faults detected"] == 1
    assert list(fault_type_table(result.faults)["fault type"]) == ["hang"]


def test_replay_command_rejects_a_bad_latency_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "orchestration.cli", "replay", "--scenario", str(QUICK),
                           "--home", str(tmp_path / "home"), "--latency", "gpu_samples"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "goodput: --latency 'gpu_samples': expected SOURCE=SECONDS with SECONDS >= 0, e.g. gpu_samples=10"]


def test_the_schedule_does_not_queue_a_second_run_for_an_hour_that_has_one_waiting(tmp_path, instance):
    import dagster as dg

    from orchestration.definitions import build_definitions

    defs = build_definitions(tmp_path)
    schedule = defs.resolve_schedule_def("detect_every_minute")
    at = datetime(2026, 11, 30, 10, 1, tzinfo=timezone.utc)

    def keys() -> list[str]:
        with dg.build_schedule_context(instance=instance, scheduled_execution_time=at,
                                       repository_def=defs.get_repository_def()) as context:
            return [r.partition_key for r in schedule.evaluate_tick(context).run_requests]

    assert keys() == ["2026-11-30-09:00", "2026-11-30-10:00"]   # every minute; the previous hour just after the turn
    # a run created and not started yet (what a run queued behind the warehouse pool looks like)
    instance.create_run_for_job(defs.resolve_job_def("detect"), tags={"dagster/partition": "2026-11-30-10:00"},
                                status=dg.DagsterRunStatus.NOT_STARTED)
    assert keys() == ["2026-11-30-09:00"]                       # the waiting run will read the newest lines
    at = at.replace(minute=17)
    assert keys() == []                                         # nothing to queue: a SkipReason
