"""Late data: a raw file that arrives for an hour already processed gets that hour re-processed
once (the `late_raw_files` sensor), and the warehouse holds no duplicates afterwards."""

import json
from pathlib import Path

import dagster as dg

from assets.ingest import ingest_assets
from orchestration.definitions import build_definitions
from orchestration.sensors_sources import late_raw_files
from orchestration.warehouse import WarehouseResource

HOUR = "2026-11-30-00:00"


def run_detect(home: Path, partition_key: str, instance) -> None:
    """The ingest part of the `detect` job the sensor requests (the checks are other tests' business)."""
    from orchestration.definitions import resources_for

    result = dg.materialize(ingest_assets, partition_key=partition_key, instance=instance, resources=resources_for(home))
    assert result.success


def evaluate(instance, resources) -> list[dg.RunRequest]:
    context = dg.build_sensor_context(instance=instance, resources=resources)
    result = late_raw_files(context)
    if isinstance(result, dg.SkipReason):
        return []
    return list(result)


def counts(home: Path) -> tuple[int, int, int]:
    with WarehouseResource(path=str(home / "warehouse.duckdb")).connect(read_only=True) as con:
        return con.execute(
            "SELECT count(*), count(DISTINCT (source_file, source_line)), count(DISTINCT (run_id, rank, step)) FROM training_steps"
        ).fetchone()


def test_a_late_file_gets_its_hour_reprocessed_once_without_duplicates(small_home, resources, instance):
    assert "late_raw_files" in [s.name for s in build_definitions(small_home).sensors]
    run_detect(small_home, HOUR, instance)
    before = counts(small_home)
    assert before[0] == before[1] == before[2] > 0
    assert evaluate(instance, resources) == []          # nothing changed since the hour was processed

    # A rank's records for 00:xx arrive late, in a new file (e.g. a node's agent that was offline).
    folder = small_home / "raw" / "training_steps" / "2026-11-30" / "00"
    late = [{"time": f"2026-11-30T00:59:5{i}.000Z", "run_id": "late-run", "rank": 0, "step": i + 1, "loss": 3.0}
            for i in range(3)]
    (folder / "late-run.rank-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in late))

    [request] = evaluate(instance, resources)
    assert request.partition_key == HOUR and request.tags["goodput/late_sources"] == "training_steps"
    # A second tick before the re-run asks for the same run key: Dagster launches it once.
    [again] = evaluate(instance, resources)
    assert again.run_key == request.run_key

    run_detect(small_home, request.partition_key, instance)
    after = counts(small_home)
    assert after[0] == before[0] + 3
    assert after[0] == after[1] == after[2]              # no row read twice
    assert evaluate(instance, resources) == []           # processed: nothing more to ask

    # Re-processing the hour again changes nothing (idempotent), and the hour after is untouched.
    run_detect(small_home, HOUR, instance)
    assert counts(small_home) == after


def test_hours_never_processed_are_not_late(small_home, resources, instance):
    run_detect(small_home, HOUR, instance)
    # 01:00 has raw files but was never processed: the schedule's job, not a late arrival.
    assert [r.partition_key for r in evaluate(instance, resources)] == []
