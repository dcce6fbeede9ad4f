"""The raw-zone sensor requests nothing for an unchanged raw zone and exactly the changed hours
otherwise; one run per partition at a time; repeated ticks (a daemon restarted with the old cursor)
ask for the same run keys, and the late file of an old hour is ingested once."""

import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import pytest

from assets.ingest import ingest_assets
from orchestration.definitions import build_definitions, resources_for
from orchestration.sensors import raw as sensors_raw
from orchestration.storage.raw_zone import VERSION_TAG
from orchestration.storage.warehouse import WarehouseResource

HOUR0, HOUR1 = "2026-11-30-00:00", "2026-11-30-01:00"
NOW = datetime(2026, 11, 30, 1, 59, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    monkeypatch.setattr(sensors_raw, "utcnow", lambda: NOW)


def tick(instance, resources, cursor=None) -> tuple[list[dg.RunRequest], str | None]:
    context = dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor)
    result = sensors_raw.raw_zone_detect(context)
    requests = [] if isinstance(result, dg.SkipReason) else list(result)
    return requests, context.cursor


def ingest(home: Path, key: str, instance) -> None:
    assert dg.materialize(ingest_assets, partition_key=key, instance=instance, resources=resources_for(home)).success


def append(path: Path, records: list[dict]) -> None:
    with open(path, "a") as out:
        out.write("".join(json.dumps(r) + "\n" for r in records))


def steps(home: Path) -> tuple[int, int]:
    with WarehouseResource(path=str(home / "warehouse.duckdb")).connect(read_only=True) as con:
        return con.execute("SELECT count(*), count(DISTINCT (source_file, source_line)) FROM training_steps").fetchone()


def test_sensor_requests_changed_hours_only(small_home, resources, instance):
    assert "goodput_service" in [s.name for s in build_definitions(small_home).sensors]   # runs raw_zone_detect's plan
    # Nothing processed yet: both hours of raw data are new, oldest first.
    requests, cursor = tick(instance, resources)
    assert [r.partition_key for r in requests] == [HOUR0, HOUR1]   # hour 1 is in progress: never held back
    # Hour 1 ran beside hour 0, whose new data its checks read: once more after hour 0's run (none is in flight here).
    refresh, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in refresh] == [HOUR1] and f"+after-{HOUR0}@" in refresh[0].run_key
    # Unchanged raw zone: nothing.
    assert tick(instance, resources, cursor)[0] == []
    # Lines appended to one file of hour 1: exactly hour 1, under a new data version.
    folder = small_home / "raw" / "training_steps" / "2026-11-30" / "01"
    target = sorted(folder.glob("*.jsonl"))[0]
    append(target, [{"time": "2026-11-30T01:59:58Z", "run_id": "late-run", "rank": 0, "step": 1}])
    again, cursor2 = tick(instance, resources, cursor)
    assert [r.partition_key for r in again] == [HOUR1]
    assert again[0].run_key != requests[1].run_key and again[0].run_key.startswith(HOUR1 + "@")
    # A daemon killed before it stored the cursor ticks again from the old one: the same run key.
    assert [r.run_key for r in tick(instance, resources, cursor)[0]] == [again[0].run_key]
    assert tick(instance, resources, cursor2)[0] == []


def test_a_warehouse_left_without_tables_by_a_killed_first_run_is_taken_as_empty(small_home, resources, instance):
    """A first run killed after DuckDB created the file and before its migration committed leaves a file with no
    tables: the sensor requests every hour (nothing was ingested) rather than failing at every tick, and the
    run it requests migrates the file."""
    import duckdb

    duckdb.connect(str(small_home / "warehouse.duckdb")).close()
    requests, cursor = tick(instance, resources)
    assert [r.partition_key for r in requests] == [HOUR0, HOUR1]
    ingest(small_home, HOUR0, instance)
    assert steps(small_home)[0] > 0
    # no new data: only hour 1 once more, after hour 0 (it ran beside it)
    assert ["+after-" in r.run_key for r in tick(instance, resources, cursor)[0]] == [True]


def test_first_tick_takes_the_ingest_log_as_the_record(small_home, resources, instance):
    ingest(small_home, HOUR0, instance)
    requests, cursor = tick(instance, resources)
    assert [r.partition_key for r in requests] == [HOUR1]     # hour 0 is in the warehouse already
    before = steps(small_home)
    # A late file for hour 0 (an agent that was offline): hour 0 is requested, and ingested once.
    folder = small_home / "raw" / "training_steps" / "2026-11-30" / "00"
    append(folder / "late-run.rank-0.jsonl",
           [{"time": f"2026-11-30T00:59:5{i}Z", "run_id": "late-run", "rank": 0, "step": i + 1} for i in range(3)])
    [request], cursor = tick(instance, resources, cursor)
    assert request.partition_key == HOUR0
    ingest(small_home, HOUR0, instance)
    ingest(small_home, HOUR0, instance)     # a repeated run changes nothing
    after = steps(small_home)
    assert after[0] == after[1] == before[0] + 3


def test_a_partition_with_a_run_in_flight_waits(small_home, resources, instance):
    requests, cursor = tick(instance, resources)
    job = build_definitions(small_home).resolve_job_def("detect")
    # A run for hour 1 not finished yet (as the daemon would have created it from the request).
    run = instance.create_run_for_job(job, tags={"dagster/partition": HOUR1}, status=dg.DagsterRunStatus.NOT_STARTED)
    folder = small_home / "raw" / "training_steps" / "2026-11-30" / "01"
    append(sorted(folder.glob("*.jsonl"))[0], [{"time": "2026-11-30T01:59:59Z", "run_id": "r", "rank": 0, "step": 9}])
    waiting, cursor2 = tick(instance, resources, cursor)
    assert waiting == []                        # not beside the queued run
    # Once it ended, the next tick asks for the newer data.
    instance.report_run_failed(run)
    assert [r.partition_key for r in tick(instance, resources, cursor2)[0]] == [HOUR1]


def test_many_new_hours_are_requested_oldest_first_and_bounded(small_home, resources, instance):
    (small_home / "service.yaml").write_text("raw_sensor:\n  max_hours_per_tick: 1\n")
    first, cursor = tick(instance, resources)
    second, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in first + second] == [HOUR0, HOUR1]
    assert tick(instance, resources, cursor)[0] == []


def test_a_daemon_killed_mid_stream_loses_and_duplicates_nothing(small_home, tmp_path, instance):
    """The raw zone grows in four appends; at some ticks the daemon dies before it stores the tick
    (the next tick starts from the old cursor). Every run Dagster would launch (a run key once) is
    executed; the warehouse ends as one whole-hour read of the final files leaves it."""
    import random

    from assets.ingest import SOURCES
    from assets.ingest_incremental import ingest_hour
    from orchestration.storage.raw_zone import RawZoneResource

    staged = {p: p.read_bytes() for p in sorted((small_home / "raw").rglob("*.jsonl"))}
    for path in staged:
        path.write_bytes(b"")
    home_resources = resources_for(small_home)
    rng = random.Random(7)
    launched: set[str] = set()
    cursor = None
    for step in range(1, 5):
        for path, data in staged.items():
            cut = len(data) * step // 4 if step < 4 else len(data)
            with open(path, "r+b") as out:   # append the next quarter (a line may be cut in two)
                out.seek(0, 2)
                out.write(data[out.tell():cut])
        requests, new_cursor = tick(instance, home_resources, cursor)
        for request in requests:
            if request.run_key in launched:      # Dagster launches a run key once
                continue
            launched.add(request.run_key)
            ingest(small_home, request.partition_key, instance)
        cursor = cursor if rng.random() < 0.5 and step < 4 else new_cursor   # killed before storing the tick
    requests, cursor = tick(instance, home_resources, cursor)
    for request in requests:
        if request.run_key not in launched:
            launched.add(request.run_key)
            ingest(small_home, request.partition_key, instance)
    assert tick(instance, home_resources, cursor)[0] == []
    whole = WarehouseResource(path=str(tmp_path / "whole.duckdb"))
    zone = RawZoneResource(root=str(small_home / "raw"))
    with whole.connect() as con:
        for key in (HOUR0, HOUR1):
            start = datetime.strptime(key, "%Y-%m-%d-%H:%M")
            for source in SOURCES:
                ingest_hour(con, source, zone.files(source.folder, start), start, start + timedelta(hours=1), False)
    for table in ("gpu_samples", "training_steps", "serving_metrics", "quarantine"):
        order = "source, file, line" if table == "quarantine" else "source_file, source_line"
        with WarehouseResource(path=str(small_home / "warehouse.duckdb")).connect(read_only=True) as con:
            got = con.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
        with whole.connect(read_only=True) as con:
            want = con.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
        assert got == want, table


def _hold_back_half_of(home: Path, day_hour: str) -> dict[Path, bytes]:
    """Cut each raw file of one hour (`YYYY-MM-DD/HH`) to its first half of lines; returns what was cut."""
    held = {}
    for path in sorted((home / "raw").glob(f"*/{day_hour}/*.jsonl")):
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[: len(lines) // 2]))
        held[path] = b"".join(lines[len(lines) // 2:])
    return held


def _land(held: dict[Path, bytes]) -> None:
    for path, rest in held.items():
        with open(path, "ab") as out:
            out.write(rest)


def test_a_past_hour_s_late_data_detects_the_hours_after_it_again_once_its_run_is_done(small_home, resources, instance):
    """Hour 0's second half arrives after hour 1 was detected (an agent flushing late). Hour 1's checks read hour
    0 (their lookback), so it is detected again, after hour 0's run, under a key of its own; never beside it."""
    held = _hold_back_half_of(small_home, "2026-11-30/00")
    requests, cursor = tick(instance, resources)
    assert [r.partition_key for r in requests] == [HOUR0, HOUR1]
    _land(held)
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == [HOUR0]   # hour 1 waits for hour 0's run
    run = dg.DagsterRun(job_name="detect", run_id="late-hour-0", status=dg.DagsterRunStatus.STARTED,
                        tags={sensors_raw.PARTITION_TAG: HOUR0})
    instance.add_run(run)
    requests, cursor = tick(instance, resources, cursor)
    assert requests == []   # hour 0's run is in flight
    instance.delete_run(run.run_id)   # done
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == [HOUR1]
    version = requests[0].tags[VERSION_TAG]
    assert f"+after-{HOUR0}@" in version and requests[0].run_key == f"{HOUR1}@{version}"
    assert json.loads(cursor)["refresh"] == {}
    assert tick(instance, resources, cursor)[0] == []


def test_past_hours_with_new_data_are_requested_one_after_the_hour_they_read(small_home, resources, instance, monkeypatch):
    """An import (every hour new) or late lines of two past hours: hour 1's checks read hour 0, so its run waits
    for hour 0's (never beside it, where it could read hour 0 before its new lines are written), and each hour's
    own run reads what came before it: nothing is detected twice."""
    monkeypatch.setattr(sensors_raw, "utcnow", lambda: NOW + timedelta(hours=1))   # both hours past
    held = _hold_back_half_of(small_home, "2026-11-30/00") | _hold_back_half_of(small_home, "2026-11-30/01")
    requests, cursor = tick(instance, resources)
    assert [r.partition_key for r in requests] == [HOUR0]
    in_flight = add_run(instance, HOUR0)
    requests, cursor = tick(instance, resources, cursor)
    assert requests == []   # hour 0's run is in flight: hour 1 waits
    instance.delete_run(in_flight)   # done
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == [HOUR1]
    _land(held)
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == [HOUR0]
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == [HOUR1] and "+after-" not in requests[0].run_key
    assert json.loads(cursor)["refresh"] == {}
    assert tick(instance, resources, cursor)[0] == []


def test_a_backfill_in_flight_holds_back_no_later_hour(small_home, resources, instance, monkeypatch):
    """A run of hour 0 that reads no new raw data (a backfill, a materialization from the UI) does not hold back
    hour 1's new data."""
    monkeypatch.setattr(sensors_raw, "utcnow", lambda: NOW + timedelta(hours=1))
    ingest(small_home, HOUR0, instance)
    add_run(instance, HOUR0, version=None)
    assert [r.partition_key for r in tick(instance, resources)[0]] == [HOUR1]


def test_the_hour_in_progress_runs_beside_an_earlier_hour_and_once_more_after_it(small_home, resources, instance):
    """The hour in progress is never held back (its first minutes are live): requested beside hour 0's new lines,
    it is detected once more when hour 0's run is done, unless its own next data is requested first."""
    held = _hold_back_half_of(small_home, "2026-11-30/00") | _hold_back_half_of(small_home, "2026-11-30/01")
    requests, cursor = tick(instance, resources)
    assert [r.partition_key for r in requests] == [HOUR0, HOUR1]
    in_flight = add_run(instance, HOUR0)
    requests, cursor = tick(instance, resources, cursor)
    assert requests == []   # the refresh waits for hour 0's run
    _land({path: rest for path, rest in held.items() if "/01/" in str(path)})   # hour 1's next lines
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == [HOUR1]   # its own data, beside hour 0's run still
    instance.delete_run(in_flight)
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == [HOUR1] and f"+after-{HOUR0}@" in requests[0].run_key
    assert json.loads(cursor)["refresh"] == {}
    assert tick(instance, resources, cursor)[0] == []
    # hour 0 and hour 1 new again; hour 1's own data comes again before hour 0's run is done: no refresh
    _land({path: rest for path, rest in held.items() if "/00/" in str(path)})
    append(sorted((small_home / "raw" / "training_steps" / "2026-11-30" / "01").glob("*.jsonl"))[0],
           [{"time": "2026-11-30T01:59:58Z", "run_id": "late-run", "rank": 0, "step": 1}])
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == [HOUR0, HOUR1]
    append(sorted((small_home / "raw" / "training_steps" / "2026-11-30" / "01").glob("*.jsonl"))[0],
           [{"time": "2026-11-30T01:59:59Z", "run_id": "late-run", "rank": 0, "step": 2}])
    requests, cursor = tick(instance, resources, cursor)   # hour 0's run done by now
    assert [r.partition_key for r in requests] == [HOUR1] and "+after-" not in requests[0].run_key
    assert json.loads(cursor)["refresh"] == {}


def test_an_hour_added_to_an_old_day_refreshes_the_next_day_s_hours_it_is_read_by(small_home, resources, instance,
                                                                                    monkeypatch):
    """Days older than `recent_days` are listed only when an hour folder appears in them. Logs of 23:00 imported
    into such a day are read by the next day's first hours (their lookback), whose day is not listed at that
    tick: they are detected again once 23:00's run is done, one after the other (each reads the one before)."""
    for source in (small_home / "raw").iterdir():   # hour 1 becomes the next day's 00:00
        (source / "2026-12-01").mkdir()
        (source / "2026-11-30" / "01").rename(source / "2026-12-01" / "00")
    next_day = "2026-12-01-00:00"
    ingest(small_home, HOUR0, instance)
    ingest(small_home, next_day, instance)
    monkeypatch.setattr(sensors_raw, "utcnow", lambda: datetime(2026, 12, 10, 12, tzinfo=timezone.utc))   # both days old
    requests, cursor = tick(instance, resources)
    assert requests == []   # the ingest log vouches for every file
    late = "2026-11-30-23:00"
    for source in (small_home / "raw").iterdir():
        (source / "2026-11-30" / "23").mkdir()
        for path in (source / "2026-11-30" / "00").iterdir():
            (source / "2026-11-30" / "23" / path.name).write_bytes(path.read_bytes())
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == [late]
    # the next day is not listed at this tick: its hours within the lookback wait (those it lacks are dropped)
    assert next_day in json.loads(cursor)["refresh"]
    requests, cursor = tick(instance, resources, cursor)   # 23:00's run is done: the next day is listed again
    assert [r.partition_key for r in requests] == [next_day] and f"+after-{late}@" in requests[0].run_key
    assert json.loads(cursor)["refresh"] == {}
    assert tick(instance, resources, cursor)[0] == []


def test_an_hour_one_source_adds_to_an_old_day_refreshes_the_hours_other_sources_hold(small_home, resources,
                                                                                       instance, monkeypatch):
    """An import of one source's logs into an old day lists that date in every source: the hours after the new
    one that other sources hold are refreshed, and the new hour's data version covers all its files."""
    raw = small_home / "raw"
    for source in raw.iterdir():   # hour 1 becomes 03:00; 02:00 is empty
        (source / "2026-11-30" / "01").rename(source / "2026-11-30" / "03")
    shutil.rmtree(raw / "lineage" / "2026-11-30" / "03")   # the source the import adds to holds nothing later
    later = "2026-11-30-03:00"
    ingest(small_home, HOUR0, instance)
    ingest(small_home, later, instance)
    monkeypatch.setattr(sensors_raw, "utcnow", lambda: datetime(2026, 12, 10, 12, tzinfo=timezone.utc))
    requests, cursor = tick(instance, resources)
    assert requests == []
    shutil.copytree(raw / "lineage" / "2026-11-30" / "00", raw / "lineage" / "2026-11-30" / "02")
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == ["2026-11-30-02:00"]
    assert later in json.loads(cursor)["refresh"]
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == [later] and "+after-2026-11-30-02:00@" in requests[0].run_key


def test_an_old_hour_whose_run_failed_is_not_asked_again_nor_holds_back_the_hour_after_it(small_home, resources,
                                                                                          instance, monkeypatch):
    """Old days' files are checked against the ingest log, which a failed run leaves without them. Dagster
    launches a run key once, so asking again would launch nothing (the service sensor redoes failed runs): the
    hour is not asked again while its data stays as it was, and hour 1, which waited for hour 0's run, goes on."""
    clock = [datetime(2026, 12, 10, 12, tzinfo=timezone.utc)]   # both hours' day is old
    monkeypatch.setattr(sensors_raw, "utcnow", lambda: clock[0])
    requests, cursor = tick(instance, resources)
    assert [r.partition_key for r in requests] == [HOUR0]
    # hour 1 waits; its day is read again at the next tick, not every day at every tick until it is asked
    assert json.loads(cursor)["full_at"] == clock[0].timestamp() and "lineage/2026-11-30" not in json.loads(cursor)["days"]
    run = add_run(instance, HOUR0)
    requests, cursor = tick(instance, resources, cursor)
    assert requests == []   # hour 1 waits for hour 0's run
    instance.delete_run(run)   # done (failed: nothing ingested)
    requests, cursor = tick(instance, resources, cursor)
    assert [r.partition_key for r in requests] == [HOUR1]
    requests, cursor = tick(instance, resources, cursor)   # the old day is not read: hour 0 stays asked
    assert requests == [] and HOUR0 in json.loads(cursor)["asked"]
    clock[0] += timedelta(days=1)   # the daily full scan
    requests, cursor = tick(instance, resources, cursor)
    assert requests == [] and json.loads(cursor)["full_at"] == clock[0].timestamp()
    append(sorted((small_home / "raw" / "training_steps" / "2026-11-30" / "00").glob("*.jsonl"))[0],
           [{"time": "2026-11-30T00:59:59Z", "run_id": "late-run", "rank": 0, "step": 1}])
    clock[0] += timedelta(days=1)
    requests, cursor = tick(instance, resources, cursor)   # new data: a new run key
    assert [r.partition_key for r in requests] == [HOUR0]


def test_a_site_s_longer_lookback_widens_the_hours_refreshed_after_late_data(small_home):
    """thresholds.yaml setting a check's lookback to 8 hours: hours up to 9 after a late one read it."""
    default = sensors_raw.hours_reading(small_home)
    (small_home / "thresholds.yaml").write_text("busy_not_progressing:\n  lookback_minutes: 480\n")
    assert default < 9 == sensors_raw.hours_reading(small_home)
    (small_home / "thresholds.yaml").write_text("busy_not_progressing: [not a mapping]\n")
    assert sensors_raw.hours_reading(small_home) == default   # the checks' own steps report a bad file


def add_run(instance, partition: str, version: str | None = "v") -> str:
    """A detect run of `partition` in flight, as the daemon creates it from the sensor's request (`version`: the
    data version tag; None: a backfill's run)."""
    run = dg.DagsterRun(job_name="detect", run_id=f"run-{partition}-{version}", status=dg.DagsterRunStatus.STARTED,
                        tags={sensors_raw.PARTITION_TAG: partition, **({VERSION_TAG: version} if version else {})})
    instance.add_run(run)
    return run.run_id


def test_late_data_of_a_past_hour_ends_with_the_incidents_of_data_that_arrived_in_order(small_home, small_demo):
    """End to end in process: hour 1 detected while hour 0 held half its lines judged a stall from hour 0's last
    step seen (what the real daemon stored before the refresh: a SEV1 hang 20 minutes early). Driven by the
    sensor's requests, the late half, hour 0's run and hour 1's refresh end where in-order arrival ends: the
    incidents `goodput demo` folds from the same scenario's hours in order (the session's small_demo)."""
    from tests.helpers import memory_instance

    reference = small_demo["home"]
    assert len(incidents_of(reference)) > 0
    held = _hold_back_half_of(small_home, "2026-11-30/00")
    defs, home_resources = build_definitions(small_home), resources_for(small_home)
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    seen, folded = [], []
    with memory_instance() as instance:
        def drain(cursor):
            while True:
                requests, cursor = tick(instance, home_resources, cursor)
                if not requests:
                    return cursor
                for request in requests:
                    seen.append(request.partition_key)
                    assert defs.resolve_job_def("detect").execute_in_process(
                        partition_key=request.partition_key, tags=request.tags, instance=instance, run_config=quiet).success
                    assert defs.resolve_job_def("fold_incidents").execute_in_process(instance=instance, run_config=quiet).success
                    folded.append(incidents_of(small_home))

        cursor = drain(None)
        _land(held)
        drain(cursor)
    # hour 1 (in progress) once more after hour 0 (here they ran one after the other), then the late half
    assert seen == [HOUR0, HOUR1, HOUR1, HOUR0, HOUR1]
    # without the refresh: hour 0 complete, hour 1 as judged without hour 0's second half
    assert folded[-2] != incidents_of(reference)
    assert folded[-1] == incidents_of(reference)


def incidents_of(home: Path) -> list[tuple]:
    with WarehouseResource(path=str(home / "warehouse.duckdb")).connect(read_only=True) as con:
        return con.execute("SELECT incident_id, signal, tier, status, onset, entity_id FROM incidents ORDER BY 1").fetchall()
