"""Hour x shard partitions (issue 21, orchestration/shards.py): a home split into two shards finds exactly what
the unsharded home finds (incidents, findings, evaluation marks, judgements, clearings, rows); a shard's re-run
changes nothing and leaves the other shard's rows alone; the raw-zone sensor asks only the shard whose host's
file changed, then the hour; the configuration's errors name the file; and the Python and SQL rule agree."""

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest

from checks.registry import REGISTRY
from orchestration.config.service_config import ServiceConfigError, load_service_settings
from orchestration.definitions import build_definitions, resources_for
from orchestration.partitions import hourly
from orchestration.sensors import raw as sensors_raw
from orchestration.shards import Shard, file_owner, owner, partition_key
from orchestration.storage.warehouse import warehouse_for
from simulator import load_scenario, simulate
from tests.helpers import REPO, SHARDS, SHARDS_HOURS, TWO_SHARDS, detect_and_fold, memory_instance

HOURS = SHARDS_HOURS
LOCAL = tuple(s.name for s in REGISTRY if s.host_local)   # the signals judged per shard
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
# Every table a detect run writes that the comparison reads, in a stable order.
TABLES = {
    "incidents": "SELECT incident_id, signal, tier, status, onset, opened, last_seen, entity_type, entity_id, run_id, "
                 "hosts, gpus FROM incidents",
    "findings": "SELECT * EXCLUDE (evidence), evidence::VARCHAR FROM findings",
    "clearings": "SELECT * EXCLUDE (evidence), evidence::VARCHAR FROM clearings",
    "evaluations": "SELECT * FROM evaluations",
    "judgements": "SELECT * FROM judgements",
    "gpu_samples": "SELECT * EXCLUDE (source_file), regexp_extract(source_file, '[^/]+$') FROM gpu_samples",
    "gpu_minutes": "SELECT * FROM gpu_minutes",
    "quarantine": "SELECT * EXCLUDE (source, file) FROM quarantine",
}


def read(home: Path, query: str) -> list:
    with warehouse_for(home).connect(read_only=True) as con:
        return con.execute(f"SELECT * FROM ({query}) ORDER BY ALL").fetchall()


@pytest.fixture(scope="module")
def sharded_homes(tmp_path_factory, shards_unsharded) -> dict:
    """The scenario detected hour by hour and folded, once unsharded ("plain": the session's shards_unsharded,
    tests/conftest.py) and once in two shards, one host each ("sharded"). Read-only: copy to write."""
    home = tmp_path_factory.mktemp("sharded") / "home"
    simulate(load_scenario(SHARDS), home)
    (home / "service.yaml").write_text(TWO_SHARDS)
    detect_and_fold(home, HOURS)
    return {"plain": shards_unsharded, "sharded": home}


def test_two_shards_find_exactly_what_one_hour_finds(sharded_homes):
    plain, sharded = sharded_homes["plain"], sharded_homes["sharded"]
    found = read(plain, TABLES["incidents"])
    # the scenario's GPU faults on both hosts (per-shard checks), its idle GPU and straggler (hour-level checks)
    assert {(r[1], r[8]) for r in found} >= {("gpu_thermal_throttle", "node-0:1"), ("gpu_xid_error", "node-1:0"),
                                             ("gpu_ecc_error", "node-1:1"), ("gpu_idle_allocated", "node-1:3")}
    assert "straggler_rank" in {r[1] for r in found}
    for table, query in TABLES.items():
        assert read(sharded, query) == read(plain, query), table
    # each shard read its own host's file and logged it under its own source
    assert read(sharded, "SELECT DISTINCT source, regexp_extract(file, '[^/]+$') FROM ingest_files "
                         "WHERE source LIKE 'gpu_samples%'") == [("gpu_samples@a", "node-0.jsonl"),
                                                                 ("gpu_samples@b", "node-1.jsonl")]
    assert {r[0] for r in read(sharded, "SELECT DISTINCT shard FROM shard_evaluations")} == {"a", "b"}


def test_a_shard_rerun_changes_nothing_and_leaves_the_other_shard_alone(sharded_homes, tmp_path):
    home = shutil.copytree(sharded_homes["sharded"], tmp_path / "home")
    before = {table: read(home, query) for table, query in TABLES.items() if table != "incidents"}
    # Mark every row of both shards; a re-run of shard a's hour 01 must restore a's and keep b's marks.
    with warehouse_for(home).connect() as con:
        con.execute("UPDATE gpu_samples SET power_watts = -1 WHERE time >= '2026-11-30 01:00'")
        con.execute("UPDATE gpu_minutes SET power_watts = -1 WHERE minute >= '2026-11-30 01:00'")
        con.execute("UPDATE findings SET value = -1 WHERE partition_start = '2026-11-30 01:00'")
        con.execute("UPDATE judgements SET minutes = -1 WHERE partition_start = '2026-11-30 01:00'")
    with memory_instance() as instance:
        assert build_definitions(home).resolve_job_def("detect_shard").execute_in_process(
            partition_key=partition_key(HOURS[1], "a"), instance=instance, run_config=QUIET).success
    marked = {
        "gpu_samples": "SELECT DISTINCT host FROM gpu_samples WHERE power_watts = -1",
        "gpu_minutes": "SELECT DISTINCT host FROM gpu_minutes WHERE power_watts = -1",
        "findings": f"SELECT DISTINCT split_part(entity_id, ':', 1) FROM findings WHERE value = -1 AND signal IN {LOCAL}",
        "judgements": f"SELECT DISTINCT split_part(entity_id, ':', 1) FROM judgements WHERE minutes = -1 AND signal IN {LOCAL}",
    }
    for table, query in marked.items():   # b's marks stay, a's rows were replaced
        assert read(home, query) == [("node-1",)], table
    detect_and_fold(home, HOURS[1:], fold=False)   # and both shards and the hour again: every row as it was
    for table, rows in before.items():
        assert read(home, TABLES[table]) == rows, table


def test_a_file_of_every_host_is_split_between_the_shards(sharded_homes, tmp_path):
    """One file holding every host's samples (a Prometheus pull) is read by both shards, each keeping its own
    hosts' lines; a bad line without a host is quarantined once, by the last shard."""
    home = shutil.copytree(sharded_homes["sharded"], tmp_path / "home")
    folder = home / "raw/gpu_samples/2026-11-30/00"
    lines = [line for name in ("node-0.jsonl", "node-1.jsonl") for line in (folder / name).read_text().splitlines()]
    for name in ("node-0.jsonl", "node-1.jsonl"):
        (folder / name).unlink()
    (folder / "prometheus.jsonl").write_text("\n".join(lines[::2] + ["not json"] + lines[1::2]) + "\n")
    with memory_instance() as instance:
        for shard in ("a", "b"):
            assert build_definitions(home).resolve_job_def("detect_shard").execute_in_process(
                partition_key=partition_key(HOURS[0], shard), instance=instance, run_config=QUIET).success
    rows = "SELECT * EXCLUDE (source_file, source_line) FROM gpu_samples"
    assert read(home, rows) == read(sharded_homes["plain"], rows)
    assert read(home, "SELECT source, reason FROM quarantine") == [("gpu_samples@b", "not valid JSON")]
    assert read(home, "SELECT source, rows_loaded FROM ingest_files WHERE file LIKE '%prometheus.jsonl'") == [
        ("gpu_samples@a", len(lines) // 2), ("gpu_samples@b", len(lines) // 2)]


NOW = datetime(2026, 11, 30, 1, 59, tzinfo=timezone.utc)


def test_sensor_asks_the_changed_shard_then_the_hour(sharded_homes, tmp_path, monkeypatch):
    monkeypatch.setattr(sensors_raw, "utcnow", lambda: NOW)
    home = shutil.copytree(sharded_homes["sharded"], tmp_path / "home")
    resources = resources_for(home)

    def tick(cursor):
        with dg.build_sensor_context(resources=resources, cursor=cursor) as context:
            result = sensors_raw.raw_zone_detect(context)
            return ([] if isinstance(result, dg.SkipReason) else list(result)), context.cursor

    first, cursor = tick(None)
    assert first == []   # everything ingested: the ingest log vouches for every file
    sample = json.loads((home / "raw/gpu_samples/2026-11-30/01/node-1.jsonl").read_text().splitlines()[-1])
    with open(home / "raw/gpu_samples/2026-11-30/01/node-1.jsonl", "a") as out:
        out.write(json.dumps({**sample, "time": "2026-11-30T01:59:59Z"}) + "\n")
    requests, cursor = tick(cursor)
    assert [(r.job_name, r.partition_key) for r in requests] == [("detect_shard", partition_key(HOURS[1], "b"))]
    assert requests[0].run_key.startswith(f"{HOURS[1]}|b@")
    # no shard run in flight any more (none was launched here): the hour's own run, under the same data version
    after, cursor = tick(cursor)
    assert [(r.job_name, r.partition_key) for r in after] == [("detect", HOURS[1])]
    assert after[0].run_key == requests[0].run_key.replace("|b", "")
    assert tick(cursor)[0] == []
    # a file that is no shard's (training steps): the hour at once
    steps = sorted((home / "raw/training_steps/2026-11-30/01").glob("*.jsonl"))[0]
    with open(steps, "a") as out:
        out.write(json.dumps({"time": "2026-11-30T01:59:58Z", "run_id": "late", "rank": 0, "step": 1}) + "\n")
    assert [(r.job_name, r.partition_key) for r in tick(cursor)[0]] == [("detect", HOURS[1])]


def test_unsharded_home_keeps_one_detect_job_of_hours(small_home):
    defs = build_definitions(small_home)
    assert "detect_shard" not in {job.name for job in defs.jobs}
    assert all(defs.resolve_assets_def(k).partitions_def == hourly for k in ("gpu_samples", "gpu_baselines"))
    (small_home / "service.yaml").write_text(TWO_SHARDS)
    sharded = build_definitions(small_home)
    assert isinstance(sharded.resolve_assets_def("gpu_baselines").partitions_def, dg.MultiPartitionsDefinition)
    assert {n.name for n in sharded.resolve_job_def("detect_shard").graph.node_defs} == {
        "gpu_samples", "gpu_baselines", "gpu_baselines_checks"}
    graph = sharded.resolve_asset_graph()   # one check per signal still, every asset described and in the pool
    assert {c.name for c in graph.asset_check_keys} == {c.name for c in defs.resolve_asset_graph().asset_check_keys}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.description and node.pools == (set() if key.to_user_string() == "prometheus_pull" else {"warehouse"})


def test_sharded_definitions_validate_with_dagster(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "service.yaml").write_text(TWO_SHARDS)
    dagster = Path(sys.executable).with_name("dagster")
    done = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "DAGSTER_HOME": str(tmp_path), "GOODPUT_HOME": str(home)})
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("config, says", [
    ('shards:\n  - name: a\n    hosts: ["n*"]\n  - name: a\n    hosts: ["m*"]\n', "names must be unique"),
    ('shards:\n  - name: a\n    hosts: ["node-[0-3]"]\n', "hosts"),
    ('shards:\n  - name: "a|b"\n    hosts: ["n*"]\n', "name"),
    ('shards:\n  - name: a\n    hosts: []\n', "hosts"),
])
def test_a_bad_shard_configuration_is_one_line_naming_the_file(tmp_path, config, says):
    (tmp_path / "service.yaml").write_text(config)
    with pytest.raises(ServiceConfigError) as error:
        load_service_settings(tmp_path)
    assert str(tmp_path / "service.yaml") in str(error.value) and says in str(error.value)
    assert "\n" not in str(error.value)


def test_python_and_sql_place_every_host_in_the_same_shard(tmp_path):
    patterns = (("node-0*", "gpu-?"), ("node-1*",), ("x*",))
    hosts = ["node-0", "node-07", "node-1", "node-10", "gpu-1", "gpu-12", "x", "other", "", None]
    with warehouse_for(tmp_path).connect() as con:
        in_sql = con.execute("SELECT h, shard_of(h, $s::VARCHAR[][]) FROM unnest($h::VARCHAR[]) t(h)",
                             {"s": [list(p) for p in patterns], "h": hosts}).fetchall()
    assert {h: owner(h, patterns) for h in hosts} == dict(in_sql)
    assert [owner(h, patterns) for h in ("node-07", "gpu-12", "other", None)] == [1, 3, 3, 3]   # unnamed: the last


def test_a_file_named_after_a_host_is_its_shards_alone():
    shards = tuple(Shard(n, i, (("node-0",), ("node-1",))) for i, n in enumerate(("a", "b"), start=1))
    assert file_owner("gpu_samples/2026-11-30/01/node-1.jsonl", shards) == "b"
    assert file_owner("gpu_samples/2026-11-30/01/node-0.jsonl.zst", shards) == "a"
    assert file_owner("gpu_samples/2026-11-30/01/prometheus.jsonl", shards) is None   # every shard reads it
