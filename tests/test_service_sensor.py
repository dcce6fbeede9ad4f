"""`goodput_service`, the one sensor of `goodput ui` (issue 15, idle cost): an idle tick requests
nothing and skips the alert pass; each hour with new raw data gets one detect run; a successful
detect run is folded once, a backfill once when it is done; a failed one is alerted once and its hour run again (bounded)."""

import json
import uuid
from datetime import datetime, timedelta, timezone

import dagster as dg
import pytest

from orchestration.definitions import build_definitions, resources_for
from orchestration.sensors import raw as sensors_raw
from orchestration.sensors import service as sensors_service
from orchestration.storage.raw_zone import VERSION_TAG

NOW = datetime(2026, 11, 30, 1, 59, tzinfo=timezone.utc)


@pytest.fixture
def sensor(small_home):
    """(the home's goodput_service sensor, its repository): the sensor as the code server serves it."""
    with resources_for(small_home)["warehouse"].connect():
        pass   # a migrated, empty warehouse: the alert pass has something to read
    defs = build_definitions(small_home)
    return defs.resolve_sensor_def(sensors_service.SENSOR_NAME), defs.get_repository_def()


def tick(sensor, instance, cursor):
    sensor, repository = sensor
    with dg.build_sensor_context(instance=instance, cursor=cursor, repository_def=repository) as context:
        result = sensor.evaluate_tick(context)
    return list(result.run_requests or []), result.skip_message, result.cursor


def add_run(instance, job: str, status: dg.DagsterRunStatus, partition: str = "2026-11-30-00:00") -> str:
    run_id = str(uuid.uuid4())
    instance.add_run(dg.DagsterRun(job_name=job, run_id=run_id, status=status,
                                   tags={"dagster/partition": partition, VERSION_TAG: "v1"}))
    return run_id


def settled(sensor, instance) -> str:
    """The cursor once the home's raw data was all requested (its two hours: one after the other, the later
    reads the earlier)."""
    cursor, requested = None, True
    while requested:
        requests, _skip, cursor = tick(sensor, instance, cursor)
        requested = any(r.job_name == "detect" for r in requests)
    return cursor


def test_idle_ticks_request_nothing_and_new_data_one_run_per_hour(sensor, instance, small_home, monkeypatch):
    monkeypatch.setattr(sensors_raw, "utcnow", lambda: NOW + timedelta(hours=1))   # both hours past
    requests, _skip, cursor = tick(sensor, instance, None)
    assert [(r.job_name, r.partition_key) for r in requests] == [("detect", "2026-11-30-00:00")]
    # hour 1's checks read hour 0: it waits for hour 0's run (here none is in flight: done)
    requests, _skip, cursor = tick(sensor, instance, cursor)
    assert [(r.job_name, r.partition_key) for r in requests] == [("detect", "2026-11-30-01:00")]
    for _ in range(2):   # nothing changed: no request, and the alert pass is not run
        requests, skip, cursor = tick(sensor, instance, cursor)
        assert requests == [] and skip.startswith("nothing changed"), skip
    path = sorted((small_home / "raw" / "training_steps").rglob("*.jsonl"))[-1]
    with open(path, "a") as out:
        out.write(path.read_text().splitlines()[-1] + "\n")
    requests, _skip, cursor = tick(sensor, instance, cursor)
    assert [r.partition_key for r in requests] == ["2026-11-30-01:00"]
    assert tick(sensor, instance, cursor)[0] == []


def test_a_detect_run_is_folded_once_and_a_failed_one_alerted_once_and_redone(sensor, instance, small_home):
    cursor = settled(sensor, instance)   # the first ticks mark "from now on"
    ok = add_run(instance, "detect", dg.DagsterRunStatus.SUCCESS)
    requests, _skip, cursor = tick(sensor, instance, cursor)
    assert [(r.job_name, r.run_key) for r in requests] == [("fold_incidents", f"after-{ok}")]
    assert tick(sensor, instance, cursor)[0] == []
    bad = add_run(instance, "detect", dg.DagsterRunStatus.FAILURE)
    requests, _skip, cursor = tick(sensor, instance, cursor)
    assert [(r.job_name, r.partition_key, r.run_key) for r in requests] == [
        ("detect", "2026-11-30-00:00", "2026-11-30-00:00@v1+redo1")]
    # the redo is done: hour 1, whose checks read hour 0, once more after it
    requests, _skip, cursor = tick(sensor, instance, cursor)
    assert [r.run_key.split("+after-")[1] for r in requests] == ["2026-11-30-00:00@v1+redo1"]
    assert tick(sensor, instance, cursor)[0] == []
    outbox = [json.loads(line) for line in (small_home / "alerts" / "monitor.jsonl").read_text().splitlines()]
    assert [a["incident_id"] for a in outbox if a["signal"] == "goodput_run_failed"] == [f"run-failed-{bad}"]
    # the redo fails too, and once more: two redos per data version, then the hour waits for new data (and
    # hour 1 is judged once more on what hour 0 holds)
    add_run(instance, "detect", dg.DagsterRunStatus.FAILURE)
    requests, _skip, cursor = tick(sensor, instance, cursor)
    assert [r.run_key for r in requests] == ["2026-11-30-00:00@v1+redo2"]
    add_run(instance, "detect", dg.DagsterRunStatus.FAILURE)
    requests, _skip, cursor = tick(sensor, instance, cursor)
    assert [(r.partition_key, r.run_key.split("+after-")[1]) for r in requests] == [
        ("2026-11-30-01:00", "2026-11-30-00:00@v1+redo2")]
    assert tick(sensor, instance, cursor)[0] == []


def test_the_hours_after_a_failed_hour_are_detected_again_after_its_redo(sensor, instance, small_home, monkeypatch):
    """Hour 0's run failed after hour 1 was detected: hour 1's checks read hour 0, so hour 1 is detected again
    once hour 0's redo is done, under a key of its own (never beside the redo)."""
    monkeypatch.setattr(sensors_raw, "utcnow", lambda: NOW + timedelta(hours=1))   # both hours past
    cursor = settled(sensor, instance)
    add_run(instance, "detect", dg.DagsterRunStatus.FAILURE)   # hour 0, data version v1
    requests, _skip, cursor = tick(sensor, instance, cursor)
    assert [(r.partition_key, r.run_key) for r in requests if r.job_name == "detect"] == [
        ("2026-11-30-00:00", "2026-11-30-00:00@v1+redo1")]
    redo = dg.DagsterRun(job_name="detect", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED,
                         tags={"dagster/partition": "2026-11-30-00:00", VERSION_TAG: "v1"})
    instance.add_run(redo)
    requests, _skip, cursor = tick(sensor, instance, cursor)
    assert [r for r in requests if r.job_name == "detect"] == []   # hour 1 waits for the redo
    instance.delete_run(redo.run_id)   # done
    requests, _skip, cursor = tick(sensor, instance, cursor)
    detect = [r for r in requests if r.job_name == "detect"]
    assert [r.partition_key for r in detect] == ["2026-11-30-01:00"]
    assert detect[0].run_key.endswith("+after-2026-11-30-00:00@v1+redo1")
    assert [r for r in tick(sensor, instance, cursor)[0] if r.job_name == "detect"] == []


def test_a_backfill_is_folded_once_when_it_is_done_not_at_each_of_its_runs(sensor, instance):
    """A backfill's runs are not `detect` runs, and the fold maps to none of its inputs' hours, so Dagster
    does not order a fold after a backfill's hours: the sensor folds once the backfill is done."""
    from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
    from dagster._core.storage.tags import BACKFILL_ID_TAG

    cursor = settled(sensor, instance)
    backfill = PartitionBackfill("history", BulkActionStatus.REQUESTED, from_failure=False, tags={}, backfill_timestamp=0.0)
    instance.add_backfill(backfill)
    for hour in ("2026-11-29-10:00", "2026-11-29-11:00"):
        run_id = add_run(instance, "__ASSET_JOB", dg.DagsterRunStatus.SUCCESS, hour)
        instance.add_run_tags(run_id, {BACKFILL_ID_TAG: backfill.backfill_id})
        requests, _skip, cursor = tick(sensor, instance, cursor)
        assert requests == []   # the backfill still runs: its hours are not all done
    assert tick(sensor, instance, cursor)[0] == []
    instance.update_backfill(backfill.with_status(BulkActionStatus.COMPLETED_SUCCESS))
    requests, _skip, cursor = tick(sensor, instance, cursor)
    assert [(r.job_name, r.run_key) for r in requests] == [("fold_incidents", "after-backfill-history")]
    assert tick(sensor, instance, cursor)[0] == []
    assert json.loads(cursor)["backfills"] == []


def test_a_finished_fold_runs_the_alert_pass_though_no_file_changed(sensor, instance, monkeypatch):
    """On a DuckLake no warehouse file changes when the fold commits new incidents: the fold run's end
    is what starts the alert pass, so the lake's incidents are paged as promptly as the file's."""
    passes = []
    real = sensors_service.sensors.alerts_pass
    monkeypatch.setattr(sensors_service.sensors, "alerts_pass", lambda *a, **k: passes.append(1) or real(*a, **k))
    _requests, _skip, cursor = tick(sensor, instance, None)
    while passes:   # the first ticks settle the alert cursor; then an idle tick runs no pass
        passes.clear()
        _requests, _skip, cursor = tick(sensor, instance, cursor)
    add_run(instance, "fold_incidents", dg.DagsterRunStatus.SUCCESS)
    _requests, _skip, cursor = tick(sensor, instance, cursor)
    assert passes == [1]
    passes.clear()
    tick(sensor, instance, cursor)
    assert passes == []


def test_the_tick_interval_is_the_home_s_setting_and_a_bad_one_names_the_file(small_home):
    from orchestration.config.service_config import ServiceConfigError

    assert build_definitions(small_home).resolve_sensor_def(sensors_service.SENSOR_NAME).minimum_interval_seconds == 30
    (small_home / "service.yaml").write_text("raw_sensor:\n  interval_seconds: 5\n")
    assert build_definitions(small_home).resolve_sensor_def(sensors_service.SENSOR_NAME).minimum_interval_seconds == 5
    (small_home / "service.yaml").write_text("raw_sensor:\n  interval_seconds: 1\n")   # under the daemon's 5 s loop
    with pytest.raises(ServiceConfigError, match=r"service\.yaml.*interval_seconds"):
        build_definitions(small_home)
