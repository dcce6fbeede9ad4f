"""How the board writes values: data time in UTC, 24-hour, with the zone shown; units on every number."""

from __future__ import annotations

import json
import math
from datetime import timedelta

import pandas as pd

TIER_COLOURS = {"SEV1": "#c62828", "SEV2": "#ef6c00", "SEV3": "#f9a825"}

# evidence keys by suffix -> (unit, scale): Prometheus-style base units, shown the way people read them
_UNITS = (
    ("_gpu_hours", "GPU-h", 1.0), ("gpu_hours", "GPU-h", 1.0), ("_seconds", "s", 1.0), ("_ratio", "%", 100.0),
    ("_bytes", "GB", 1e-9), ("_watts", "W", 1.0), ("_celsius", "°C", 1.0), ("_hertz", "MHz", 1e-6),
    ("_minutes", "min", 1.0), ("_pct", "%", 1.0), ("_percent", "%", 1.0), ("_total", "count", 1.0),
    ("_steps", "steps", 1.0), ("_per_second", "/s", 1.0),
)


def utc(value) -> str:
    """`2026-11-30 01:35:00 UTC`, or an em dash for no time."""
    if value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, str):
        try:
            value = pd.Timestamp(value)
        except ValueError:
            return value
    stamp = pd.Timestamp(value)
    if stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    return f"{stamp:%Y-%m-%d %H:%M:%S} UTC"


def hm(value) -> str:
    """`01:35 UTC` (the day is on the page already)."""
    return "—" if value is None or value is pd.NaT else f"{pd.Timestamp(value):%H:%M} UTC"


def duration(value) -> str:
    """A span as `1 h 05 min` / `12 min` / `40 s`."""
    if value is None or value is pd.NaT:
        return "—"
    seconds = value.total_seconds() if isinstance(value, timedelta | pd.Timedelta) else float(value)
    if seconds != seconds:
        return "—"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def gpu_hours(value) -> str:
    return "—" if value is None or value != value else f"{float(value):,.2f} GPU-h"


def number(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—" if value is None else str(value)
    if isinstance(value, int | bool):
        return f"{value:,}"
    v = float(value)
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}g}"


def percent(value) -> str:
    return "—" if value is None or value != value else f"{float(value):.0%}"


def size(value) -> str:
    if value is None or value != value:
        return "—"
    v = float(value)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(v) < 1000 or unit == "TB":
            return f"{v:,.1f} {unit}" if unit != "B" else f"{v:,.0f} B"
        v /= 1000
    return f"{v:.1f} TB"


def evidence_value(key: str, value) -> str:
    """One evidence entry with its unit, read from its key's suffix (`stall_seconds` -> `412 s`)."""
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] in "T ":
        return utc(value)    # an ISO time: UTC, 24-hour, the zone shown
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return "—" if value is None else str(value)
    for suffix, unit, scale in _UNITS:
        if key.endswith(suffix):
            return f"{number(float(value) * scale)} {unit}"
    return number(value)


def unit_of(key: str) -> str:
    for suffix, unit, _ in _UNITS:
        if key.endswith(suffix):
            return unit
    return ""


def evidence_rows(evidence) -> list[tuple[str, str]]:
    data = json.loads(evidence) if isinstance(evidence, str) and evidence else (evidence or {})
    return [(k, evidence_value(k, v)) for k, v in sorted(data.items())]


def tier_colour(tier: str | None) -> str:
    return TIER_COLOURS.get(tier or "", "#607d8b")


def listed(values, limit: int = 12) -> str:
    values = list(values or [])
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f", … (+{len(values) - limit})" if len(values) > limit else "") if values else "—"


FILTERS = {"utc": utc, "hm": hm, "duration": duration, "gpu_hours": gpu_hours, "number": number, "percent": percent,
           "size": size, "tier_colour": tier_colour, "listed": listed}
