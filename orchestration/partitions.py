"""The partitions every time-based asset and check shares: one per UTC hour of the raw zone.

They start where the data starts: `partitions.start` in `GOODPUT_HOME/service.yaml`, else the first
raw hour of the home, else (a home with no data yet, e.g. a process that imports before it
simulates) `FALLBACK_START`. Definitions are built when the code location loads, so raw hours
older than the start (an import of old logs into a running `goodput ui`) need the start set, or the
UI restarted; the raw-zone sensor says so in its tick log rather than requesting an unknown key.
"""

import os
from datetime import datetime
from pathlib import Path

import dagster as dg
import pandas as pd

from orchestration.config.service_config import load_service_settings

HOUR_KEY = "%Y-%m-%d-%H:00"   # strftime format of a partition key
FALLBACK_START = "2025-01-01-00:00"


def first_raw_hour(raw: Path) -> datetime | None:
    """The earliest `<source>/<YYYY-MM-DD>/<HH>` folder under a raw root (folder names only)."""
    first = None
    if not raw.is_dir():
        return None
    for source in raw.iterdir():
        if not source.is_dir():
            continue
        for day in sorted(d.name for d in source.iterdir() if d.is_dir()):
            hours = sorted(h.name for h in (source / day).iterdir() if h.is_dir() and any((source / day / h.name).iterdir()))
            if not hours:
                continue
            try:
                found = datetime.strptime(f"{day} {hours[0]}", "%Y-%m-%d %H")
            except ValueError:
                continue
            first = found if first is None or found < first else first
            break
    return first


def partitions_start(home: Path | None = None) -> str:
    """The first partition key for `home` (default: $GOODPUT_HOME): configured, first raw hour, or fallback."""
    home = Path(home) if home else Path(os.environ.get("GOODPUT_HOME", ".goodput")).resolve()
    configured = load_service_settings(home).partitions.start
    if configured:
        try:
            moment = pd.Timestamp(datetime.strptime(configured, HOUR_KEY.replace(":00", ":%M")))
        except ValueError:
            moment = pd.Timestamp(configured)   # ISO-8601 also accepted
        moment = moment.tz_convert("UTC").tz_localize(None) if moment.tzinfo else moment
        return moment.floor("h").strftime(HOUR_KEY)
    first = first_raw_hour(home / "raw")
    return first.strftime(HOUR_KEY) if first else FALLBACK_START


# end_offset=1: the hour in progress is a partition too, so the sensor can run it as its data
# arrives and a stall is seen within minutes rather than after the hour closes.
hourly = dg.HourlyPartitionsDefinition(start_date=partitions_start(), timezone="UTC", end_offset=1)


def hour_keys(start, end) -> list[str]:
    """Partition keys of every hour that overlaps [start, end)."""
    first = pd.Timestamp(start).tz_convert("UTC").floor("h")
    return [t.strftime(HOUR_KEY) for t in pd.date_range(first, pd.Timestamp(end).tz_convert("UTC"), freq="h", inclusive="left")]


def naive_utc(moment) -> "pd.Timestamp":
    """A moment as the naive UTC datetime DuckDB TIMESTAMP parameters expect."""
    stamp = pd.Timestamp(moment)
    return (stamp.tz_convert("UTC").tz_localize(None) if stamp.tzinfo else stamp).to_pydatetime()


def window_params(window) -> dict:
    """`$start` / `$end` parameters for a partition's time window."""
    return {"start": naive_utc(window.start), "end": naive_utc(window.end)}
