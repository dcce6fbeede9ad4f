"""The one entry point: Goodput's Dagster Definitions (workspace.yaml points here)."""

from pathlib import Path

import dagster as dg

import assets
import checks
from assets.sharded import sharded_assets
from checks.asset_checks import signal_checks
from checks.sharded import sharded_checks
from orchestration.alerting.resource import alerting_resource_for
from orchestration.board_resource import BoardResource
from orchestration.config.home import goodput_home, raw_root
from orchestration.config.service_config import load_service_settings
from orchestration.config.thresholds import ThresholdsResource
from orchestration.jobs import detect_job, incidents_job, sharded_jobs
from orchestration.sensors.maintenance import maintenance_daily, maintenance_job
from orchestration.sensors.service import service_sensor
from orchestration.shards import SHARDED_ASSETS, configured
from orchestration.storage.raw_zone import RawZoneResource
from orchestration.storage.warehouse import warehouse_for
from sources.prometheus import resource_from_env as prometheus_resource_from_env


def resources_for(home) -> dict:
    """The resources of one Goodput home (tests and the demo build them for their own home)."""
    return {
        "warehouse": warehouse_for(home),
        "thresholds": ThresholdsResource(path=str(Path(home) / "thresholds.yaml")),
        "raw_zone": RawZoneResource(root=str(raw_root(home))),
        "alerting": alerting_resource_for(home),
        # Off unless a URL (or a sources file naming one) is set: the simulator is the default source.
        "board": BoardResource(),   # links in check metadata open the incident board (GOODPUT_BOARD_URL at run time)
        "prometheus": prometheus_resource_from_env(),   # secrets as dg.EnvVar: names in storage, never values
    }


def build_definitions(home=None) -> dg.Definitions:
    home = home or goodput_home()
    resources = resources_for(home)
    graph = dg.load_assets_from_package_module(assets)
    checked = dg.load_asset_checks_from_package_module(checks)
    detect = [detect_job]
    shards = configured(home)
    if shards:   # the per-host assets and checks per hour x shard (orchestration/shards.py)
        graph = [a for a in graph if not set(a.keys) & {dg.AssetKey(k) for k in SHARDED_ASSETS}] + sharded_assets(shards)
        by_signal = {key for step in signal_checks for key in step.check_keys}
        checked = [c for c in checked if not set(c.check_keys) & by_signal] + sharded_checks(shards)
        detect = sharded_jobs(shards)
    return dg.Definitions(
        assets=graph,
        asset_checks=checked,
        jobs=[*detect, incidents_job, maintenance_job],
        schedules=[maintenance_daily],   # detection is event-driven: sensors_raw.raw_zone_detect
        # one sensor does the raw-zone, fold, alert and monitor work: one tick's fixed cost, not five (issue 15)
        sensors=[service_sensor(resources, load_service_settings(home).raw_sensor.interval_seconds, detect)],
        resources=resources,
    )


defs = build_definitions()
