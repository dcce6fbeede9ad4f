"""Live checks by window: a live tick judges a signal from the first minute whose inputs changed, not the hour so far.

A live detect run (the raw-zone sensor's, a minute after the last) used to judge every signal over the hour so
far, so the checks of a tick at minute 55 read and judged eleven times the rows of one at minute 5. A signal
declared `live_window` (checks/registry.py: a per-minute series judged by a causal detector) is judged by a live
run over a window instead: from `since`, the first minute whose inputs changed since its stored results were
computed (`check_windows`, migration 180: ingest marks it), with the signal's own lookback before it, exactly as a
partition is judged from its start. What the window judges is then joined to the partition's stored results:

- findings: the stored ones that ended by `since` stay; the episodes that reach past it are carried into the
  window as open at `since` (sql/detect/open_episodes.sql) unless the window's frame holds them from their
  start (then they are judged again from there, as the whole hour judges them), and the window's findings
  replace them, keeping their onset and first detection; a carried episode the window no longer flags keeps
  its stored finding, seen until `since`. The episodes open when the partition began are carried as the
  whole hour carries them;
- clearings: the stored ones up to `since` stay; the window's, computed over the joined findings, are added
  for the episodes those do not end;
- judgements: the window counts only the ticks after the stored results' last one, added to the stored counts
  (the minutes of the re-judged ticks were counted when they were first judged);
- the evaluation mark: the entities of both, flagged those of the joined findings.

A whole-hour judgement stays the rule everywhere else: a run that is not live (a backfill, the demo, the UI), a
partition without stored results of the same `version` (thresholds, SQL, detector), inputs changed more than
`LATE_MINUTES` before the stored results' last tick (late data: the hour is judged again whole), a shard's step.
Pure functions but `stored`; the check (checks/asset_checks.py) reads and stores.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

import duckdb
import pandas as pd

from checks.judgement import JUDGEMENT_COLUMNS
from checks.registry import Signal
from orchestration.storage import sql

LATE_MINUTES = 2   # inputs changed this far before the last judged tick still window (a minute that was partial)
WINDOW_LOGIC = 1   # bumped when this module's joining changes: stored results of another version are judged again whole
STORED = ("findings", "clearings", "judgements", "evaluations")


def version(signal: Signal, thresholds: dict) -> str:
    """What a signal's stored results were computed with: its thresholds, SQL and detector."""
    parts = [signal.name, json.dumps(thresholds, sort_keys=True, default=str), json.dumps(dict(signal.query_params), sort_keys=True),
             sql.sql_text(signal.query), f"{signal.detector.__module__}.{signal.detector.__qualname__}", str(WINDOW_LOGIC)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _state(state: pd.DataFrame | None, signal: str) -> pd.Series | None:
    """`signal`'s row of sql/detect/check_windows.sql's rows (None: never stored)."""
    rows = state[state["signal"] == signal] if state is not None else None
    return rows.iloc[0] if rows is not None and not rows.empty else None


def since(state: pd.DataFrame, signal: str, current: str, start: datetime) -> datetime | None:
    """Where a live run judges `signal` of the partition at `start` from (`state`: sql/detect/check_windows.sql's
    rows); None: the whole hour."""
    row = _state(state, signal)
    if row is None or row["version"] != current or pd.isna(row["evaluated_until"]):
        return None
    last = pd.Timestamp(row["evaluated_until"])
    first = last if pd.isna(row["dirty_from"]) else min(last, pd.Timestamp(row["dirty_from"]).floor("min"))
    if first < last - pd.Timedelta(minutes=LATE_MINUTES) or first <= pd.Timestamp(start):
        return None
    return first.to_pydatetime()


def until(state: pd.DataFrame, signal: str) -> pd.Timestamp:
    """The last tick `signal`'s stored results judged (NaT: none)."""
    row = _state(state, signal)
    return pd.Timestamp(row["evaluated_until"]) if row is not None else pd.NaT


def dirty_from(state: pd.DataFrame | None, signal: str):
    """The first changed minute the check read for `signal` (NaT: none), which storing it clears unless a
    write lowered it since (sql/detect/store_findings.sql)."""
    row = _state(state, signal)
    return row["dirty_from"] if row is not None else pd.NaT


def stored(con: duckdb.DuckDBPyConnection, signal: str, start: datetime) -> dict[str, pd.DataFrame]:
    """The partition's stored results of `signal`, by table."""
    text = sql.sql_text("detect/stored_results")
    return {table: sql.execute_text(con, text.replace("/*@table*/", table), {"start": start, "signal": signal}).df()
            for table in STORED}


def carried(episodes: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """One open episode per entity for a window (sql/detect/open_episodes.sql's rows): the partition's own where
    the window's frame does not hold it from its start, else the one open when the partition began, which the
    whole hour carries too (an own episode the frame holds whole is judged again from its start, as the whole
    hour judges it)."""
    if episodes.empty:
        return episodes
    first_minute = pd.Timestamp(frame["tick"].min()) - pd.Timedelta(minutes=1) if not frame.empty else pd.NaT
    own = episodes["own"].astype(bool)
    held = own & (pd.to_datetime(episodes["onset"]) >= first_minute) if pd.notna(first_minute) else own & False
    kept = episodes[~held]
    return kept.sort_values("own").drop_duplicates("entity_id", keep="last").sort_values("entity_id").reset_index(drop=True)


def findings(old: pd.DataFrame, new: pd.DataFrame, since_: datetime) -> pd.DataFrame:
    """The partition's findings (rows as stored) after a window from `since_`: the window's, each taking the onset
    and first detection of the stored finding it continues (same entity, overlapping) where those came first;
    the stored ones it does not continue that began by `since_`, seen at most until then."""
    at = pd.Timestamp(since_)
    if old.empty:
        return new
    new = new.copy()
    onsets, detections, lasts = (pd.to_datetime(old[c]) for c in ("onset", "detected_at", "last_seen"))
    continued = pd.Series(False, index=old.index)
    for i, finding in new.iterrows():
        same = (old["entity_id"] == finding["entity_id"]) & (onsets <= pd.Timestamp(finding["last_seen"])) \
            & (pd.Timestamp(finding["onset"]) <= lasts)
        if same.any():
            new.at[i, "onset"] = min(pd.Timestamp(finding["onset"]), onsets[same].min())
            new.at[i, "detected_at"] = min(pd.Timestamp(finding["detected_at"]), detections[same].min())
            continued |= same
    kept = old[~continued & (onsets <= at)].copy()
    kept["last_seen"] = lasts[kept.index].clip(upper=at)
    return pd.concat([kept[[c for c in new.columns if c in kept.columns]], new], ignore_index=True) if not new.empty else kept


def clearings(old: pd.DataFrame, new: pd.DataFrame, since_: datetime) -> pd.DataFrame:
    """The stored clearings up to `since_`, and the window's (computed over the joined findings) of the episodes
    those do not end already; one per entity and time."""
    kept = old[pd.to_datetime(old["cleared_at"]) <= pd.Timestamp(since_)][list(new.columns)] if not old.empty else old
    if kept.empty:
        return new
    ends = kept.groupby("entity_id")["cleared_at"].max()
    ended = pd.to_datetime(new["entity_id"].map(ends)) > pd.to_datetime(new["last_seen"])
    both = pd.concat([f for f in (kept, new[~ended]) if not f.empty], ignore_index=True)
    return both.drop_duplicates(subset=["entity_id", "cleared_at"], keep="first").reset_index(drop=True)


def judgements(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Per entity, the stored minutes and the window's new ones added up; judged when any minute was, else the
    reason of the part that saw it (the window's, where it saw the entity's minutes)."""
    columns = list(JUDGEMENT_COLUMNS)
    if old.empty:
        return new[columns].reset_index(drop=True)
    if new.empty:
        return old[columns].reset_index(drop=True)
    both = old[columns].merge(new[columns], on=["signal", "partition_start", "entity_type", "entity_id"], how="outer",
                              suffixes=("_old", "_new"))
    minutes_new = both["minutes_new"].fillna(0).astype(int)
    minutes = both["minutes_old"].fillna(0).astype(int) + minutes_new
    judged_minutes = both["judged_minutes_old"].fillna(0).astype(int) + both["judged_minutes_new"].fillna(0).astype(int)
    judged = judged_minutes > 0
    reason = both["reason_new"].where(both["reason_old"].isna() | (minutes_new > 0), both["reason_old"])
    return pd.DataFrame({"signal": both["signal"], "partition_start": both["partition_start"], "entity_type": both["entity_type"],
                         "entity_id": both["entity_id"], "minutes": minutes, "judged_minutes": judged_minutes,
                         "judged": judged, "reason": reason.where(~judged, None)}, columns=columns)


def mark(old: pd.DataFrame, new: pd.DataFrame, joined: pd.DataFrame) -> pd.DataFrame:
    """The evaluation mark of the joined results: the entities either part saw, flagged those with a finding."""
    if old.empty:
        return new
    before = old["entity_ids"].iloc[0]
    seen = sorted(set(new["entity_ids"].iloc[0]) | {str(e) for e in (before if before is not None else ())})
    flagged = sorted({str(e) for e in joined["entity_id"].dropna()}) if not joined.empty else []
    last = max((t for t in (pd.Timestamp(old["evaluated_until"].iloc[0]), pd.Timestamp(new["evaluated_until"].iloc[0]))
                if pd.notna(t)), default=pd.NaT)
    return new.assign(evaluated_until=[last], entities=[len(seen)], flagged=[len(flagged)], entity_ids=[seen],
                      flagged_ids=[flagged])

