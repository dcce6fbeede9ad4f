"""What the `goodput` command (orchestration/cli.py) and its subcommand modules share: the expected
failure (`CliError`), the home (`use_home`), the quiet run config, and the demo's pipeline loop
(`run_pipeline`, also `goodput backfill`'s). The subcommands import these from here, never from
orchestration.cli, which loads them (orchestration/commands/__init__.py): the imports run one way.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from orchestration.progress import Ticker

# Runs keep their full event logs in the instance (the UI shows them); the terminal gets warnings only.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


class CliError(Exception):
    """An expected failure: printed as one line, exit status 2."""


def say(message: str) -> None:
    print(message, flush=True)


def use_home(home: str | None) -> Path:
    """Resolve GOODPUT_HOME (flag, then environment, then ./.goodput) and point Dagster at it."""
    from orchestration.config.home import ensure_instance, goodput_home

    path = Path(home).resolve() if home else goodput_home()
    os.environ["GOODPUT_HOME"] = str(path)
    os.environ["DAGSTER_HOME"] = str(ensure_instance(path))
    return path


def run_pipeline(home: Path, start, end, progress=say, keys: list[str] | None = None, alerts: bool = True) -> dict:
    """Process every hour in [start, end) (or just `keys`, oldest first) through the real Definitions
    on the home's persistent Dagster instance (so the runs show in `goodput ui`), then fold incidents
    and deliver alerts (unless `alerts` is False: `goodput backfill --no-alerts`)."""
    import dagster as dg

    from orchestration.definitions import build_definitions, resources_for
    from orchestration.jobs import execute_detect
    from orchestration.partitions import hour_keys
    from orchestration.sensors.alerts import incident_alerts, mirror_attempts
    from orchestration.shards import configured
    from orchestration.storage.instance import open_instance

    defs = build_definitions(home)
    instance = open_instance()   # a damaged instance database: one line
    shards = configured(home)
    keys = sorted(keys) if keys else hour_keys(start, end)
    with Ticker(total=len(keys)) as ticker:  # on a terminal: a live line with the time left
        for i, key in enumerate(keys, 1):
            ticker.update(f"detect {key}")
            t0 = time.monotonic()
            runs = execute_detect(defs, shards, key, instance, run_config=QUIET)   # with shards: each shard, then the hour
            failed = [c.check_name for result in runs for c in result.get_asset_check_evaluations() if not c.passed]
            ticker.step()
            line = (f"  [{i:>2}/{len(keys)}] detect {key}  {time.monotonic() - t0:4.1f}s"
                    + (f"  FAILED: {', '.join(failed)}" if failed else ""))
            (ticker.say if progress is say else progress)(line)
        ticker.update("folding incidents")
        defs.resolve_job_def("fold_incidents").execute_in_process(instance=instance, run_config=QUIET)
    resources = resources_for(home)
    if not alerts:   # no alert pass to mirror the delivery journal into `alert_attempts`: mirror it here
        mirror_attempts(resources["warehouse"], resources["alerting"])
        return {"partitions": len(keys)}
    with dg.build_sensor_context(instance=instance, resources=resources) as context:
        incident_alerts(context)
    return {"partitions": len(keys)}
