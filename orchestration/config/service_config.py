"""Service settings of one Goodput home: `GOODPUT_HOME/service.yaml` (every key optional).

    partitions:
      start: "2026-11-01-00:00"   # first hourly partition (default: the first raw hour of the home)
    raw_sensor:
      recent_days: 3              # the raw-zone sensor lists these days' files at every tick
      full_scan_hours: 24         # and every folder once this often (late files for older hours)
      max_hours_per_tick: 24      # hours requested per tick at most (an import of old logs: oldest first)
      interval_seconds: 30        # the daemon's one sensor (raw zone, folds, alerts) ticks this often (5-3600):
                                  # shorter finds new data sooner and costs more idle CPU (docs/service.md)
    retention:
      raw_days: 14                # per-step and per-sample rows
      minutes_days: 400           # per-minute series, findings and incidents
      compress_after_days: 1      # raw-zone hours older than this are compressed to .jsonl.zst
      runs_days: 30               # Dagster runs (and their event logs) kept this long
    warehouse:                    # issue 21: the warehouse backend (docs/deploy.md)
      backend: duckdb             # duckdb: GOODPUT_HOME/warehouse.duckdb (default) | ducklake
      catalog: "dbname=goodput host=db.example port=5432 user=goodput"   # ducklake: PostgreSQL (libpq)
      data_path: /shared/goodput/lake/   # ducklake: the Parquet files, on a path every worker mounts
      conflict_retries: 20        # ducklake: a commit conflict retries the write (backoff) this often
      snapshot_days: 7            # ducklake: the daily maintenance expires snapshots older than this
      threads: 2                  # DuckDB's threads per query (default: one per core; a busy host may want
                                  # fewer); GOODPUT_DUCKDB_THREADS in a process's environment decides over it
      live_threads: 1             # ... in a live tick's run (the raw-zone sensor's; default 1; 0: as threads)
    shards:                       # issue 21: host groups whose per-host work runs as partitions of its own
      - name: rack-a              # (docs/deploy.md); default: none, every partition is one hour
        hosts: ["node-0*", "node-1*"]   # host name patterns (`*`, `?`); a host belongs to the first
      - name: rack-b              # shard that names it, a host no shard names to the last one
        hosts: ["node-2*"]

The catalog's password is never in this file: libpq reads $PGPASSWORD (or ~/.pgpass).
A key that is not one of these is an error naming the file and the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from sources.config_file import ConfigError, load_model


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PartitionSettings(_Strict):
    start: str | None = None


class RawSensorSettings(_Strict):
    recent_days: float = Field(3.0, gt=0)
    full_scan_hours: float = Field(24.0, gt=0)
    max_hours_per_tick: int = Field(24, ge=1)
    interval_seconds: int = Field(30, ge=5, le=3600)   # Dagster's sensor daemon looks every 5 s


class RetentionSettings(_Strict):
    raw_days: float = Field(14.0, gt=0)
    minutes_days: float = Field(400.0, gt=0)
    compress_after_days: float = Field(1.0, ge=0)
    runs_days: float = Field(30.0, gt=0)


class WarehouseSettings(_Strict):
    backend: Literal["duckdb", "ducklake"] = "duckdb"
    catalog: str | None = None
    data_path: str | None = None
    conflict_retries: int = Field(20, ge=0)
    snapshot_days: float = Field(7.0, gt=0)
    threads: int | None = Field(None, ge=1)
    live_threads: int = Field(1, ge=0)

    @model_validator(mode="after")
    def _lake_needs_catalog(self) -> WarehouseSettings:
        if self.backend == "ducklake" and not (self.catalog and self.data_path):
            raise ValueError("warehouse: backend ducklake needs `catalog` (a PostgreSQL libpq string) and `data_path`")
        return self


class ShardSettings(_Strict):
    """One host group: its per-host work (GPU samples, GPU minutes, per-GPU checks) is its own partition."""
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,40}$")   # a partition key: no `|` or `,`
    # `*` and `?` only: the same rule in Python (orchestration/shards.py) and SQL (GLOB, migration 150)
    hosts: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:*?-]+$")]] = Field(min_length=1)


def _unique_names(shards: list[ShardSettings]) -> list[ShardSettings]:
    names = [s.name for s in shards]
    if len(set(names)) != len(names):
        raise ValueError(f"shards: names must be unique, got {', '.join(names)}")
    return shards


class ServiceSettings(_Strict):
    warehouse: WarehouseSettings = WarehouseSettings()
    shards: Annotated[list[ShardSettings], AfterValidator(_unique_names)] = []
    partitions: PartitionSettings = PartitionSettings()
    raw_sensor: RawSensorSettings = RawSensorSettings()
    retention: RetentionSettings = RetentionSettings()


class ServiceConfigError(ConfigError):
    """service.yaml is not valid: the message names the file and the key."""


def service_config_path(home: Path) -> Path:
    return Path(home) / "service.yaml"


def load_service_settings(home: Path) -> ServiceSettings:
    path = service_config_path(home)
    if not path.exists():
        return ServiceSettings()
    try:
        return load_model(path, ServiceSettings, empty={})
    except ConfigError as error:
        raise ServiceConfigError(f"{error} (fix or remove the key; see docs/service.md)") from None
