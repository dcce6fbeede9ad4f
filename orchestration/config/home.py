"""Where Goodput keeps things: one root, `GOODPUT_HOME` (default `./.goodput`).

    GOODPUT_HOME/raw/<source>/<YYYY-MM-DD>/<HH>/<producer>.jsonl   the raw zone (append-only)
    GOODPUT_HOME/warehouse.duckdb                                  the warehouse
    GOODPUT_HOME/dagster/                                          the Dagster instance (runs, history)
    GOODPUT_HOME/alerts/                                           the file alert sink
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestration.config.service_config import load_service_settings

DEFAULT_HOME = ".goodput"


class InstanceDamaged(RuntimeError):
    """The home's Dagster instance storage cannot be read (orchestration/storage/instance.py: open_instance)."""


# The instance every Goodput process shares: one pool, `warehouse`, admits one writer at a time.
DAGSTER_YAML = """\
# Written by Goodput. Every asset and check that writes the warehouse runs in the pool
# `warehouse`; DuckDB allows one writer per file, so the pools' default limit is 1.
concurrency:
  pools:
    default_limit: 1
  # issue 15: at most one detect run per hour partition queued or running (the raw-zone sensor
  # also waits for it); a newer request for the same hour waits in the queue, not beside it.
  runs:
    tag_concurrency_limits:
      - key: "dagster/partition"
        value:
          applyLimitPerUniqueValue: true
        limit: 1
# A run killed while it holds the slot (SIGKILL, OOM) must not keep it: the daemon marks dead run
# workers failed and frees a finished run's slots; every Goodput run also frees dead runs' slots
# at start-up (orchestration/storage/instance.py).
run_monitoring:
  enabled: true
  start_timeout_seconds: 180
  poll_interval_seconds: 60
  free_slots_after_run_end_seconds: 30
# issue 15, idle cost: the run queue is polled every 15 s rather than 5 (a run starts <= 15 s after
# its request; detection's budget is minutes), and the daemons Goodput has no use for are off:
# no asset has an automation condition or a freshness policy.
run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 15
auto_materialize:
  enabled: false
  use_sensors: false
freshness:
  enabled: false
telemetry:
  enabled: false
# Dagster's SQLite event log, with each database file's connection kept open instead of opened and
# closed for every event (orchestration/storage/event_log.py); the files and what they hold are Dagster's.
# (Every goodput command writes this file again for the home it runs on: a moved home follows.)
event_log_storage:
  module: orchestration.storage.event_log
  class: PooledSqliteEventLogStorage
  config:
    base_dir: "@EVENT_LOG_DIR@"
# issue 15: the daemon's tick history stays bounded (a sensor ticks every 30 s: ~2,900 ticks a day).
retention:
  schedule:
    purge_after_days: 7
  sensor:
    purge_after_days:
      skipped: 1
      failure: 7
      success: 7
"""


def goodput_home() -> Path:
    return Path(os.environ.get("GOODPUT_HOME", DEFAULT_HOME)).resolve()


def warehouse_path(home: Path) -> Path:
    return home / "warehouse.duckdb"


def raw_root(home: Path) -> Path:
    return home / "raw"


def alerts_path(home: Path) -> Path:
    return home / "alerts" / "alerts.jsonl"


def dagster_home(home: Path) -> Path:
    return home / "dagster"


LAKE_POOL_LIMIT = 64
"""issue 21: on the DuckLake backend writers commit concurrently (conflicts are retried), so the
`warehouse` pool admits this many steps at once instead of 1."""


def instance_yaml(home: Path) -> str:
    """The home's dagster.yaml: the pool limit of 1 belongs to the file backend only; the event log
    where Dagster's default storage keeps it."""
    text = DAGSTER_YAML.replace("@EVENT_LOG_DIR@", str(dagster_home(home.resolve()) / "history" / "runs"))
    if load_service_settings(home).warehouse.backend == "ducklake":
        return text.replace("    default_limit: 1\n", f"    default_limit: {LAKE_POOL_LIMIT}\n", 1)
    return text


def ensure_instance(home: Path) -> Path:
    """Create the Dagster instance directory with Goodput's `dagster.yaml`; returns its path."""
    path = dagster_home(home)
    path.mkdir(parents=True, exist_ok=True)
    config = path / "dagster.yaml"
    text = instance_yaml(home)
    if not config.exists() or config.read_text() != text:
        config.write_text(text)
    return path
