"""The Definitions load, validate with Dagster's own command, and hold what the flow needs."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

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
    # one sensor does the raw-zone, fold, alert and monitor work (issue 15, idle cost)
    assert [s.name for s in defs.sensors] == ["goodput_service"]
    # event-driven: the raw-zone sensor, not a clock (issue 15); the one schedule is the daily maintenance
    assert [s.job_name for s in defs.schedules] == ["daily_maintenance"]
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.group_name in {"ingest", "baselines", "checkpoints", "incidents", "maintenance"} and node.description, key
        # Writers of the warehouse share its pool; prometheus_pull writes raw-zone files only.
        assert node.pools == (set() if key.to_user_string() == "prometheus_pull" else {"warehouse"}), key


def test_dagster_definitions_validate_passes(tmp_path):
    dagster = Path(sys.executable).with_name("dagster")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "GOODPUT_HOME": str(tmp_path / "home")}
    done = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
                          cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_board_url_and_the_routes_file_are_read_when_used_not_when_the_code_location_loads(tmp_path, monkeypatch):
    from orchestration.alerting.config import DEFAULT_CONFIG
    from orchestration.definitions import resources_for

    monkeypatch.delenv("GOODPUT_BOARD_URL", raising=False)
    monkeypatch.delenv("GOODPUT_ALERTING", raising=False)
    resources = resources_for(tmp_path)
    board, alerting = resources["board"], resources["alerting"]
    assert board.incident("inc-1") == "http://127.0.0.1:3001/incidents/inc-1"
    assert alerting.config().dagster_url == "http://127.0.0.1:3000"
    # set after the definitions were built, as in a run or a tick started later: the links and routes follow
    monkeypatch.setenv("GOODPUT_BOARD_URL", "https://board.example")
    routes = tmp_path / "routes.yaml"
    routes.write_text(DEFAULT_CONFIG.read_text().replace("dagster_url: http://127.0.0.1:3000",
                                                         "dagster_url: https://dagster.example"))
    monkeypatch.setenv("GOODPUT_ALERTING", str(routes))
    assert board.incident("inc-1") == "https://board.example/incidents/inc-1"
    assert alerting.board_base() == "https://board.example"
    assert alerting.config().dagster_url == "https://dagster.example"
    # what the resources hold (what Dagster's UI shows as their config) is the variables' names, never their values
    held = {**board.model_dump(), **alerting.model_dump()}
    assert {held["url_env"], held["board_url_env"], held["config_path_env"]} == {"GOODPUT_BOARD_URL", "GOODPUT_ALERTING"}
    assert "example" not in repr(held)


@pytest.mark.parametrize("sharded", [False, True], ids=["hours", "hours-x-shards"])
def test_a_fold_lists_none_of_its_inputs_partitions(tmp_path, monkeypatch, sharded):
    """Dagster records the fold's input data versions at each materialization. Mapped to every partition of
    its nine inputs (the default), it listed them all at every fold, a cost that grew with the hours the home
    holds (16,847 keys per input at the fallback start, hours x shards with shards). The fold maps to none of
    them (assets/incidents.py: FOLD_DEPS): no listing, whatever the partitions."""
    from dagster._core.definitions.partitions.definition.multi import MultiPartitionsDefinition
    from dagster._core.definitions.partitions.definition.time_window import TimeWindowPartitionsDefinition

    from assets.incidents import CHECKED_ASSETS
    from orchestration.definitions import build_definitions
    from tests.helpers import TWO_SHARDS, memory_instance

    if sharded:
        (tmp_path / "service.yaml").write_text(TWO_SHARDS)
    defs = build_definitions(tmp_path)
    graph = defs.resolve_asset_graph()
    listed = []
    for kind in (TimeWindowPartitionsDefinition, MultiPartitionsDefinition):
        whole = kind.get_partition_keys

        def counting(self, *args, whole=whole, **kwargs):
            keys = whole(self, *args, **kwargs)
            listed.append(len(keys))
            return keys
        monkeypatch.setattr(kind, "get_partition_keys", counting)
    with memory_instance() as instance:
        for name in CHECKED_ASSETS:   # each input has a materialization, as in a home that has run
            latest = graph.get(dg.AssetKey(name)).partitions_def.get_last_partition_key()
            instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=name, partition=latest))
        listed.clear()
        quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
        assert defs.resolve_job_def("fold_incidents").execute_in_process(instance=instance, run_config=quiet).success
    assert listed == []
