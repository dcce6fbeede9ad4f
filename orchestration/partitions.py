"""The partitions every time-based asset and check shares: one per UTC hour of the raw zone."""

import dagster as dg
import pandas as pd

# end_offset=1: the hour in progress is a partition too, so the schedule can re-run it every few
# minutes and a stall is seen within minutes rather than after the hour closes.
hourly = dg.HourlyPartitionsDefinition(start_date="2025-01-01-00:00", timezone="UTC", end_offset=1)

HOUR_KEY = "%Y-%m-%d-%H:00"   # strftime format of a partition key


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
