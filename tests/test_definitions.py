"""The Definitions load, validate with Dagster's own command, and hold what the flow needs."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from orchestration.definitions import defs

REPO = Path(__file__).resolve().parent.parent


def test_definitions_load_with_assets_checks_jobs_and_sensors():
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {"gpu_samples", "training_steps", "lineage_events", "training_baselines", "gpu_baselines", "incidents"} <= keys
    from checks.incident_checks import CHECK_NAME
    from checks.registry import REGISTRY

    # one check per signal, and the incidents asset's own (red while a SEV1 is open)
    assert {c.name for c in graph.asset_check_keys} == {s.name for s in REGISTRY} | {CHECK_NAME}
    assert {"detect", "fold_incidents"} <= {j.name for j in defs.resolve_all_job_defs()}
    assert defs.resolve_sensor_def("incident_alerts") and defs.resolve_schedule_def("detect_every_minute")
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.group_name in {"ingest", "baselines", "checkpoints", "incidents"} and node.description, key
        # Writers of the warehouse share its pool; prometheus_pull writes raw-zone files only.
        assert node.pools == (set() if key.to_user_string() == "prometheus_pull" else {"warehouse"}), key


def test_dagster_definitions_validate_passes(tmp_path):
    dagster = Path(sys.executable).with_name("dagster")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "GOODPUT_HOME": str(tmp_path / "home")}
    done = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_schedule_requests_the_current_hour_and_the_previous_just_after_the_turn():
    from datetime import datetime, timezone

    schedule = defs.resolve_schedule_def("detect_every_minute")
    at = datetime(2026, 11, 30, 10, 5, tzinfo=timezone.utc)
    with dg.build_schedule_context(scheduled_execution_time=at, repository_def=defs.get_repository_def()) as context:
        keys = [r.partition_key for r in schedule.evaluate_tick(context).run_requests]
    assert keys == ["2026-11-30-09:00", "2026-11-30-10:00"]
    with dg.build_schedule_context(scheduled_execution_time=at.replace(minute=35), repository_def=defs.get_repository_def()) as context:
        keys = [r.partition_key for r in schedule.evaluate_tick(context).run_requests]
    assert keys == ["2026-11-30-10:00"]
