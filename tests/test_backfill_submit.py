"""`goodput backfill --submit`: a Dagster asset backfill on the home's instance (what the UI lists under
Backfills), which the daemon runs in the order of the asset graph: one iteration of the real backfill
daemon, against the real workspace, requests every hour's ingest and no baseline yet (an hour's
baselines wait for its own and the previous hour's ingest). The fold is not part of it: the `goodput_service`
sensor folds once the backfill is done (tests/test_service_sensor.py)."""

import logging
from pathlib import Path

import dagster as dg
from dagster._core.test_utils import create_test_daemon_workspace_context
from dagster._core.workspace.load_target import ModuleTarget
from dagster._daemon.backfill import execute_backfill_iteration

from orchestration.cli import main

REPO = Path(__file__).resolve().parent.parent


def test_submit_records_a_backfill_the_daemon_runs_oldest_hour_first(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    for hour in ("10", "11", "12"):
        folder = home / "raw" / "gpu_samples" / "2026-11-29" / hour
        folder.mkdir(parents=True)
        (folder / "n.jsonl").write_text(f'{{"time":"2026-11-29T{hour}:00:00.000Z","host":"n","gpu_index":0}}\n')
    monkeypatch.setenv("GOODPUT_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    assert main(["backfill", "--hours-with-data", "--submit", "--home", str(home)]) == 0
    assert "submitted Dagster backfill" in capsys.readouterr().out
    # queue runs instead of launching them: the test looks at what the daemon asks for
    (home / "dagster" / "dagster.yaml").write_text((home / "dagster" / "dagster.yaml").read_text()
                                                   + "run_coordinator:\n  module: dagster._core.run_coordinator\n"
                                                   "  class: QueuedRunCoordinator\n")
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        [backfill] = instance.get_backfills()
        assert backfill.title.startswith("goodput backfill 2026-11-29-10:00")
        keys = {k.to_user_string() for k in backfill.asset_selection}
        assert {"gpu_samples", "training_steps"} <= keys and "incidents" not in keys
        target = ModuleTarget(module_name="orchestration.definitions", attribute="defs",
                              working_directory=str(REPO), location_name="goodput")
        with create_test_daemon_workspace_context(target, instance) as context:
            list(execute_backfill_iteration(context, logging.getLogger("test")))
        runs = {r.tags.get("dagster/partition"): {k.to_user_string() for k in r.asset_selection or []}
                for r in instance.get_runs()}
        # every hour's ingest is requested at once (they depend on nothing); no baseline yet: an hour's
        # baselines wait for its ingest and the previous hour's (the lookback); no fold before the hours
        assert set(runs) == {"2026-11-29-10:00", "2026-11-29-11:00", "2026-11-29-12:00"}
        for assets in runs.values():
            assert {"gpu_samples", "training_steps"} <= assets
            assert not assets & {"training_baselines", "gpu_baselines", "incidents"}, assets
