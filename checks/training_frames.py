"""The shared machinery of the training detectors: a run's per-minute frame, rolling windows over
it, counters with resets, stretches of flagged minutes and the findings they report.

Conventions (see checks/detectors_training.py): history rows carry `tick` NULL and feed baselines
only; a stretch is a run of flagged observed minutes bridged over gaps up to `bridge_minutes`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from checks.detectors import empty_findings
from checks.registry import FINDING_COLUMNS

MAD_TO_SIGMA = 1.4826   # a normal distribution's sigma per unit of median absolute deviation
GIB = float(2**30)


# --------------------------------------------------------------------------------------------- #
# Shared machinery
# --------------------------------------------------------------------------------------------- #


def _prepare(frame: pd.DataFrame, needed: str | None = None) -> pd.DataFrame:
    """The frame sorted by run and minute with a clean index; rows without `needed` dropped."""
    f = frame
    if needed is not None:
        f = f[f[needed].notna()]
    f = f.sort_values(["run_id", "minute"], kind="stable").reset_index(drop=True)
    # one resolution for every time column (DuckDB hands out microseconds, pandas arithmetic nanoseconds)
    f["minute"] = pd.to_datetime(f["minute"]).astype("datetime64[ns]")
    f["tick"] = pd.to_datetime(f["tick"]).astype("datetime64[ns]")
    return f


def _rolling(f: pd.DataFrame, col: str | pd.Series, minutes: float, how: str, closed: str = "left",
             by: pd.Series | None = None) -> pd.Series:
    """A per-run time-based rolling statistic over the trailing `minutes` (the current minute
    excluded when `closed="left"`), aligned to `f`'s index; NaN where the window is empty.
    `by` splits runs further into contiguous segments (e.g. learning-rate regimes)."""
    values = f[col] if isinstance(col, str) else col
    g = pd.DataFrame({"run_id": f["run_id"] if by is None else by, "minute": f["minute"], "v": values.astype(float)})
    rolled = g.groupby("run_id", sort=False).rolling(f"{int(minutes)}min", on="minute", closed=closed, min_periods=1)["v"]
    out = getattr(rolled, how)()
    # Groups come out in order of appearance and `f` is sorted by run and minute: positions match.
    return pd.Series(out.to_numpy(), index=f.index)


def _rows_rolling(f: pd.DataFrame, values: pd.Series, rows: int, how: str) -> pd.Series:
    """A per-run rolling statistic over the last `rows` observed minutes (current included)."""
    return getattr(values.groupby(f["run_id"], sort=False).rolling(rows, min_periods=1), how)() \
        .reset_index(level=0, drop=True).reindex(f.index)


def _prev(f: pd.DataFrame, values: pd.Series) -> pd.Series:
    return values.groupby(f["run_id"], sort=False).shift(1)


def _jitter(f: pd.DataFrame, values: pd.Series, minutes: float) -> pd.Series:
    """The run's own minute-to-minute noise of `values` as a sigma (MAD of first differences
    over the trailing `minutes`): insensitive to slow trends, unlike a MAD of the levels."""
    v = values.astype(float)
    return MAD_TO_SIGMA * _rolling(f, (v - _prev(f, v)).abs(), minutes, "median") / np.sqrt(2.0)


def _counter_increase(f: pd.DataFrame, col: str) -> pd.Series:
    """Per-minute increase of a cumulative counter; a drop (a restarted process) counts from zero."""
    now = f[col].astype(float)
    before = _prev(f, now)
    delta = now - before
    # no earlier value in the frame (first row, or a gap): unknown, not an increase
    return delta.where((delta >= 0) | before.isna(), now).fillna(0.0).clip(lower=0.0)


def _stretches(f: pd.DataFrame, flagged: pd.Series, bridge_minutes: float, consecutive: bool = True) -> pd.Series:
    """Stretch id per flagged row (NaN elsewhere). A stretch is flagged rows of one run whose
    minutes lie at most `bridge_minutes` apart; with `consecutive`, an unflagged observed row
    between them ends it too."""
    flagged = flagged.fillna(False).astype(bool)
    gap = f["minute"].diff().dt.total_seconds().div(60.0)
    new_run = f["run_id"].ne(f["run_id"].shift())
    if consecutive:
        starts = flagged & (new_run | ~flagged.shift(fill_value=False) | gap.gt(bridge_minutes))
        ids = starts.cumsum().where(flagged)
    else:
        sub = f[flagged]
        sub_gap = sub["minute"].diff().dt.total_seconds().div(60.0)
        starts = sub["run_id"].ne(sub["run_id"].shift()) | sub_gap.gt(bridge_minutes)
        ids = starts.cumsum().reindex(f.index)
    return ids


def _placement(last: pd.Series) -> tuple[list, list]:
    hosts = last.get("hosts")
    gpus = last.get("gpus")
    return (sorted(hosts) if isinstance(hosts, (list, tuple, np.ndarray)) else [],
            sorted(gpus) if isinstance(gpus, (list, tuple, np.ndarray)) else [])


def _report(
    f: pd.DataFrame,
    qualified: pd.Series,
    stretch: pd.Series,
    build: Callable[[pd.DataFrame, pd.DataFrame], dict],
) -> pd.DataFrame:
    """One finding per stretch with qualified rows inside the evaluated partition (`tick` set).

    `build(stretch_rows, reported_rows)` returns value, baseline, threshold, evidence and may
    override onset; onset defaults to the stretch's first minute (possibly in an earlier hour).
    """
    keep = qualified.fillna(False).astype(bool) & f["tick"].notna() & stretch.notna()
    if not keep.any():
        return empty_findings()
    rows = []
    reported = f[keep].assign(_stretch=stretch[keep])
    whole = f.assign(_stretch=stretch)
    for sid, hits in reported.groupby("_stretch", sort=True):
        span = whole[whole["_stretch"] == sid]
        last = hits.iloc[-1]
        hosts, gpus = _placement(last)
        facts = build(span, hits)
        rows.append({
            "entity_id": last["run_id"],
            "onset": facts.pop("onset", span["minute"].min()),
            "detected_at": hits["tick"].min(),
            "last_seen": hits["tick"].max(),
            "run_id": last["run_id"],
            "rank": None,
            "hosts": hosts,
            "gpus": gpus,
            **facts,
        })
    return pd.DataFrame(rows, columns=list(FINDING_COLUMNS))


def _window(rows: pd.DataFrame) -> str:
    return f"{rows['minute'].min():%Y-%m-%d %H:%M} .. {rows['minute'].max() + pd.Timedelta(minutes=1):%H:%M} UTC"


def _num(value, digits: int = 4):
    """A JSON-able number (None for missing; an int when rounded to 0 digits)."""
    if value is None or pd.isna(value):
        return None
    return int(round(float(value))) if digits == 0 else round(float(value), digits)
