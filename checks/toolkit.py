"""The one toolkit every detector uses: frames, rolling windows, stretches of flagged minutes,
findings with their evidence, and number formatting.

Conventions (every `sql/detect` frame follows them):
- a frame carries a lookback before the evaluated partition; `in_window` marks the partition's rows.
  Lookback rows feed baselines, persistence and onsets and are never reported, so each flagged
  minute is reported by exactly one partition's check. `tick` is when a row's evidence is complete
  (minute + 1 minute for minute series).
- a *stretch* is a run of flagged rows of one entity whose times lie at most `max_gap_minutes` apart
  (an unflagged observed row between them ends it, unless `consecutive=False`); it is an *episode*
  once it has persisted (`mark_stretches`' `min_minutes`, or a detector's own qualification).
- evidence numbers go through `num`: None for missing, an int at 0 digits, JSON-able always.
- the GPU and distributed detectors compute their entry condition over the whole frame (peer medians over
  every rank), then sort and mark only the entities a stretch can flag (`suspects`): their frames hold every
  minute of every GPU or rank of the hour so far, and a fault touches a few.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

from checks import episodes
from checks.registry import FINDING_COLUMNS

MINUTE = pd.Timedelta(minutes=1)
MAD_TO_SIGMA = 1.4826   # a normal distribution's sigma per unit of median absolute deviation
GIB = float(2**30)
_LISTS = (list, tuple, np.ndarray)


# --------------------------------------------------------------------------------------------- #
# Numbers
# --------------------------------------------------------------------------------------------- #


def missing(value) -> bool:
    """None, NaN or NaT (a list is never missing)."""
    return value is None or (not isinstance(value, _LISTS) and bool(pd.isna(value)))


def num(value, digits: int = 2):
    """A JSON-able evidence number: None for missing; rounded to `digits`; an int at 0 digits."""
    if missing(value):
        return None
    return int(round(float(value))) if digits == 0 else round(float(value), digits)


def present(value):
    """`value` itself, or None when it is missing (for evidence that is not a number: ids, paths)."""
    return None if missing(value) else value


def fixed(value, spec: str = ".0f") -> str:
    """A number in a sentence, in the format `spec` ("?" for missing): "71 °C", "-12.5%"."""
    return "?" if missing(value) else format(float(value), spec)


def figure(value) -> str:
    """A number for a person to read in a table: whole from 100 up, else three significant digits."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def timestamp(value) -> str | None:
    return None if missing(value) else pd.Timestamp(value).isoformat()


# --------------------------------------------------------------------------------------------- #
# Frames and rolling windows
# --------------------------------------------------------------------------------------------- #


def prepare(frame: pd.DataFrame, key: str, time: str = "tick", needed: str | None = None) -> pd.DataFrame:
    """A copy of `frame` sorted by entity `key` and `time` with a clean index, its time columns at one
    resolution (DuckDB hands out microseconds, pandas arithmetic nanoseconds), `in_window` set (all
    rows when the frame has no lookback) and rows without `needed` dropped."""
    f = frame[frame[needed].notna()] if needed is not None else frame
    f = f.sort_values([key, time], kind="stable").reset_index(drop=True)
    for column in ("minute", "tick"):
        if column in f.columns:
            f[column] = nanoseconds(f[column])
    f["in_window"] = f["in_window"].fillna(False).astype(bool) if "in_window" in f.columns else True
    return f


def nanoseconds(times: pd.Series) -> pd.Series:
    """`times` as naive datetime64[ns]: a plain cast when they are datetimes already (DuckDB's are, in
    microseconds; `pd.to_datetime` would inspect them element by element first), else parsed."""
    if pd.api.types.is_datetime64_dtype(times):
        return times.astype("datetime64[ns]")
    return pd.to_datetime(times).astype("datetime64[ns]")


def with_gpu_id(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with `entity_id` = "<host>:<gpu_index>", prepared per GPU and tick."""
    f = frame.assign(entity_id=episodes.joined_ids(frame["host"], ":", frame["gpu_index"].astype(int)))
    return prepare(f, "entity_id")


def suspects(frame: pd.DataFrame, entry: pd.Series, keys: list[str]) -> pd.DataFrame:
    """The rows of the entities (`keys`' values) a stretch can flag, with `entry` as column `_entry`: those
    with an `entry` row or an episode carried in (`episode_last_seen`), since `mark_stretches` opens a stretch
    on nothing else and marks each entity's rows apart. The others are dropped before they are sorted and
    marked: a 1,024-GPU frame holds every minute of every GPU, most ticks none of them near a fault, and
    preparing them all was most of a GPU check's cost and of its growth over the hour."""
    entry = entry.fillna(False).astype(bool)
    keep = entry | frame["episode_last_seen"].notna() if "episode_last_seen" in frame.columns else entry
    if keep.any() and not keep.all():
        keep = keep.groupby([frame[k] for k in keys], sort=False, dropna=False).transform("any").astype(bool)
    return frame[keep].assign(_entry=entry[keep]) if keep.any() else frame.iloc[:0].assign(_entry=entry.iloc[:0])


def gpu_suspects(frame: pd.DataFrame, entry: pd.Series) -> pd.DataFrame:
    """`with_gpu_id` of the GPUs a stretch can flag (`suspects`): `_entry` holds `entry`; empty when none can."""
    f = suspects(frame, entry, ["host", "gpu_index"])
    return with_gpu_id(f) if not f.empty else f


def rolling(f: pd.DataFrame, values: str | pd.Series, minutes: float, how: str, *, key: str = "run_id",
            time: str = "minute", closed: str = "left", by: pd.Series | None = None, **how_args) -> pd.Series:
    """Per entity (`key`, or the finer groups `by`), `how` (a pandas rolling method, called with
    `how_args`: quantile's q) over the trailing `minutes` of rows (the current one excluded when
    `closed="left"`), aligned to `f`'s index; NaN where the window is empty. `f` must be sorted by
    entity and time (`prepare`)."""
    v = f[values] if isinstance(values, str) else values
    g = pd.DataFrame({"k": f[key] if by is None else by, "t": f[time], "v": v.astype(float)})
    rolled = g.groupby("k", sort=False).rolling(f"{int(minutes)}min", on="t", closed=closed, min_periods=1)["v"]
    # Groups come out in order of appearance and `f` is sorted by entity and time: positions match.
    return pd.Series(getattr(rolled, how)(**how_args).to_numpy(), index=f.index)


def rows_rolling(f: pd.DataFrame, values: pd.Series, rows: int, how: str, key: str = "run_id") -> pd.Series:
    """Per entity, `how` over its last `rows` observed rows (the current one included)."""
    return getattr(values.groupby(f[key], sort=False).rolling(rows, min_periods=1), how)() \
        .reset_index(level=0, drop=True).reindex(f.index)


def previous(f: pd.DataFrame, values: pd.Series, key: str = "run_id") -> pd.Series:
    return values.groupby(f[key], sort=False).shift(1)


def jitter(f: pd.DataFrame, values: pd.Series, minutes: float, key: str = "run_id") -> pd.Series:
    """The entity's own minute-to-minute noise of `values` as a sigma (MAD of first differences over
    the trailing `minutes`): insensitive to slow trends, unlike a MAD of the levels."""
    v = values.astype(float)
    return MAD_TO_SIGMA * rolling(f, (v - previous(f, v, key)).abs(), minutes, "median", key=key) / np.sqrt(2.0)


def counter_increase(f: pd.DataFrame, col: str, key: str = "run_id") -> pd.Series:
    """Per-row increase of a cumulative counter; a drop (a restarted process) counts from zero."""
    now = f[col].astype(float)
    before = previous(f, now, key)
    delta = now - before
    # no earlier value in the frame (first row, or a gap): unknown, not an increase
    return delta.where((delta >= 0) | before.isna(), now).fillna(0.0).clip(lower=0.0)


# --------------------------------------------------------------------------------------------- #
# Stretches of flagged rows -> episodes
# --------------------------------------------------------------------------------------------- #


def _continues(f: pd.DataFrame, key: str, time: str, max_gap_minutes: float) -> pd.Series:
    """Whether each row follows the previous one of the same entity within `max_gap_minutes`."""
    same = f[key].eq(f[key].shift())
    return same if np.isinf(max_gap_minutes) else same & (f[time] - f[time].shift()).le(max_gap_minutes * MINUTE)


def stretch_ids(f: pd.DataFrame, flagged: pd.Series, max_gap_minutes: float, *, key: str = "run_id",
                time: str = "minute", consecutive: bool = True) -> pd.Series:
    """Stretch id per flagged row (NaN elsewhere): flagged rows of one entity at most
    `max_gap_minutes` apart; with `consecutive`, an unflagged observed row between them ends it too."""
    flagged = flagged.fillna(False).astype(bool)
    if consecutive:
        starts = flagged & ~(flagged.shift(fill_value=False) & _continues(f, key, time, max_gap_minutes))
        return starts.cumsum().where(flagged)
    sub = f[flagged]
    return (~_continues(sub, key, time, max_gap_minutes)).cumsum().reindex(f.index)


def stretch_total(values: pd.Series, stretch: pd.Series) -> pd.Series:
    """The running total of `values` within each stretch (`stretch_ids`), NaN outside: of flags, the
    stretch's flagged rows so far."""
    return values.astype(float).where(stretch.notna()).groupby(stretch).cumsum()


def mark_stretches(f: pd.DataFrame, key: str, entry: pd.Series, sustain: pd.Series | None = None,
                   min_minutes: float = 1, max_gap_minutes: float = 1, time: str = "tick",
                   unobservable: pd.Series | None = None) -> pd.DataFrame:
    """Mark contiguous flagged stretches per entity, with persistence and hysteresis.

    `f` must be sorted by (`key`, `time`) with at most one row per entity and minute. A stretch opens
    once `entry` has held for `min_minutes` consecutive rows and stays open while `sustain` (a
    looser condition, e.g. one that does not lean on a baseline the fault itself drags along) keeps
    holding. Rows more than `max_gap_minutes` apart are not consecutive (a rank's series has no rows
    in minutes without a step, e.g. during an evaluation pause). An episode carried in open from the
    previous partition (`episode_last_seen`, checks/episodes.py) counts as entered at its last flagged
    tick: it goes on while `sustain` holds, however long ago `entry` was true. Rows marked
    `unobservable` (the evidence cannot tell that minute, e.g. a GPU's peers paused for a checkpoint
    save) neither count toward `entry`'s persistence nor break it. Adds `_stretch` (an id per run of
    sustain rows, -1 elsewhere) and `_active` (flagged).
    """
    entry = entry.fillna(False).astype(bool)
    sustain = entry if sustain is None else (sustain.fillna(False).astype(bool) | entry)
    entry_run = _persistence_runs(f, entry, unobservable, key, time, max_gap_minutes)
    entered = entry & (entry.astype(int).groupby(entry_run).cumsum() >= min_minutes)
    entered = entered | episodes.seed(f, sustain)
    stretch = stretch_ids(f, sustain, max_gap_minutes, key=key, time=time)
    active = sustain & entered.astype(float).groupby(stretch).cummax().fillna(0.0).astype(bool)
    return f.assign(_stretch=stretch.fillna(-1).astype(int).to_numpy(), _active=active.to_numpy())


def _persistence_runs(f: pd.DataFrame, entry: pd.Series, unobservable: pd.Series | None, key: str, time: str,
                      max_gap_minutes: float) -> pd.Series:
    """Ids of consecutive `entry` rows, bridged over `unobservable` rows (which take no id)."""
    if unobservable is None:
        return stretch_ids(f, entry, max_gap_minutes, key=key, time=time)
    hidden = unobservable.fillna(False).astype(bool) & ~entry
    # each hidden row is a minute the gap between its neighbours need not account for
    seen = f.assign(**{time: f[time] - hidden.astype(int).cumsum() * MINUTE})[~hidden]
    return stretch_ids(seen, entry[~hidden], max_gap_minutes, key=key, time=time).reindex(f.index)


def active_stretches(f: pd.DataFrame) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """(stretch rows, active rows) per stretch `mark_stretches` flagged that reaches into the window."""
    hits = f[f["_active"]]
    if hits.empty:
        return
    keep = hits["in_window"].astype(bool).groupby(hits["_stretch"]).transform("any")
    hits = hits[keep.astype(bool)]
    stretches = dict(tuple(f[f["_stretch"].isin(hits["_stretch"].unique())].groupby("_stretch", sort=True)))
    for sid, active in hits.groupby("_stretch", sort=True):
        yield stretches[sid], active


def window_stretches(f: pd.DataFrame, qualified: pd.Series, stretch: pd.Series) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """(stretch rows, qualified rows inside the window) per stretch with such rows: a stretch that
    began in an earlier hour reports only what this partition adds."""
    keep = qualified.fillna(False).astype(bool) & f["in_window"].astype(bool) & stretch.notna()
    if not keep.any():
        return
    whole = f.assign(_stretch=stretch)
    for sid, hits in f[keep].assign(_stretch=stretch[keep]).groupby("_stretch", sort=True):
        yield whole[whole["_stretch"] == sid], hits


# --------------------------------------------------------------------------------------------- #
# Findings and their evidence
# --------------------------------------------------------------------------------------------- #


def finding(*, entity_id, onset, detected_at, last_seen, value, baseline, threshold, evidence: dict,
            run_id=None, rank=None, hosts=(), gpus=(), **lineage) -> dict:
    """One finding row (`registry.FINDING_COLUMNS`, plus lineage columns given by name); a missing
    baseline is None."""
    return {
        "entity_id": entity_id, "onset": onset, "detected_at": detected_at, "last_seen": last_seen,
        "run_id": run_id, "rank": rank, "hosts": list(hosts), "gpus": list(gpus),
        "value": float(value), "baseline": None if missing(baseline) else float(baseline),
        "threshold": float(threshold), "evidence": evidence, **lineage,
    }


def empty_findings(columns=FINDING_COLUMNS) -> pd.DataFrame:
    """No findings: a fresh copy of one empty frame per column list (most signals find nothing most ticks,
    and building the frame column by column cost 4 ms of a small hour's every signal)."""
    return _empty(tuple(columns)).copy()


@functools.cache
def _empty(columns: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})


def findings_frame(rows: list[dict], columns=FINDING_COLUMNS) -> pd.DataFrame:
    """The findings as a frame with exactly `columns` (empty, with object columns, when none)."""
    return pd.DataFrame(rows, columns=list(columns)) if rows else empty_findings(columns)


def placement(row: pd.Series) -> tuple[list, list]:
    """(hosts, gpus) a row names, sorted; empty where it names none."""
    hosts, gpus = row.get("hosts"), row.get("gpus")
    return (sorted(hosts) if isinstance(hosts, _LISTS) else [], sorted(gpus) if isinstance(gpus, _LISTS) else [])


def run_findings(f: pd.DataFrame, qualified: pd.Series, stretch: pd.Series,
                 build: Callable[[pd.DataFrame, pd.DataFrame], dict]) -> pd.DataFrame:
    """One run-level finding per stretch with qualified rows in the window (`window_stretches`).

    `build(stretch_rows, reported_rows)` returns value, baseline, threshold, evidence and may
    override onset; onset defaults to the stretch's first minute (possibly in an earlier hour).
    """
    rows = []
    for span, hits in window_stretches(f, qualified, stretch):
        last = hits.iloc[-1]
        hosts, gpus = placement(last)
        facts = build(span, hits)
        rows.append(finding(
            entity_id=last["run_id"], onset=facts.pop("onset", span["minute"].min()), detected_at=hits["tick"].min(),
            last_seen=hits["tick"].max(), run_id=last["run_id"], hosts=hosts, gpus=gpus, **facts,
        ))
    return findings_frame(rows)


def window_text(rows: pd.DataFrame, time: str = "minute") -> str:
    """The minutes `rows` span, as evidence says it ("2026-11-30 10:04 .. 10:17 UTC")."""
    return f"{rows[time].min():%Y-%m-%d %H:%M} .. {rows[time].max() + MINUTE:%H:%M} UTC"
