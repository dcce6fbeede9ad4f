"""Episodes across partitions: what a check carries in from the previous hour, and when a fault is over.

A detector sees its signal's frame: the partition plus a lookback. A fault longer than the lookback
would, on its own, lose its onset and the healthy baseline it was measured against, and the trailing
baseline would absorb it. So the check hands the detector, per entity, the episode still open at the
partition's start (`open_episodes`: the last flagged tick, the onset and the healthy reference the
episode opened with), as columns of the frame:

- `episode_last_seen`: the entity's last flagged tick before this partition (NaT when none is open);
  `mark_stretches` treats the stretch that holds that tick as already entered, so the fault stays
  flagged while the detector's sustain condition (the fault's own physics) holds;
- `episode_reference`: the healthy reference the episode opened with (`held_reference` in a finding's
  evidence), for detectors whose sustain condition compares against a baseline the fault would drag.

And it records a clearing (table `clearings`) for every entity whose episode ended: the first tick
after its last flagged one at which the entity was evaluated and not flagged, with what that tick
showed (`Signal.clearing` describes it in the signal's own terms), or, when the entity left the
series (the run ended, the GPU was released), that it left. The incidents fold resolves an episode
only on such a record. Pure functions over frames; storage is the check's business.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

EPISODE_COLUMNS = ("episode_last_seen", "episode_onset", "episode_reference")
CLEARING_COLUMNS = ("signal", "entity_type", "entity_id", "partition_start", "last_seen", "cleared_at", "evidence")
GRACE_MINUTES = 10.0    # an episode whose last flagged tick is this close to the partition start is open


def entity_ids(frame: pd.DataFrame, entity: str, column: str) -> pd.Series:
    """The id of the entity each frame row speaks of, as findings name it ("<host>:<gpu>" for a GPU,
    "<run>/rank-<r>" for a rank), whether or not the signal's SQL spells that column out."""
    if frame.empty:
        return pd.Series(dtype="object", index=frame.index)
    if column in frame.columns:
        return frame[column].astype("object").where(frame[column].notna())
    if entity == "gpu" and {"host", "gpu_index"} <= set(frame.columns):
        ok = frame["host"].notna() & frame["gpu_index"].notna()
        return joined_ids(frame["host"], ":", frame["gpu_index"].where(ok, 0).astype(int)).where(ok)
    if entity == "rank" and {"run_id", "rank"} <= set(frame.columns):
        ok = frame["run_id"].notna() & frame["rank"].notna()
        return joined_ids(frame["run_id"], "/rank-", frame["rank"].where(ok, 0).astype(int)).where(ok)
    return pd.Series(None, dtype="object", index=frame.index)


def joined_ids(left: pd.Series, separator: str, right: pd.Series) -> pd.Series:
    """`left.astype(str) + separator + right.astype(str)` row for row, each distinct string built once: a
    frame holds every minute of every entity (74-105 k rows at minute 55 of a live 1,024-GPU hour), and
    building its ids string by string was most of `entity_ids`' and `with_gpu_id`'s time."""
    if left.isna().any() or right.isna().any():   # as pandas spells a missing value
        return left.astype(str) + separator + right.astype(str)
    left_code, lefts = pd.factorize(left)
    right_code, rights = pd.factorize(right)
    code, pairs = pd.factorize(left_code.astype(np.int64) * len(rights) + right_code)
    names = np.array([f"{lefts[p // len(rights)]}{separator}{rights[p % len(rights)]}" for p in pairs], dtype=object)
    return pd.Series(names[code], index=left.index, dtype=object)


def with_open_episodes(frame: pd.DataFrame, ids: pd.Series, carried: pd.DataFrame) -> pd.DataFrame:
    """`frame` with the `EPISODE_COLUMNS` of each row's entity (NaT/NaN where no episode is open)."""
    if frame.empty or carried.empty:
        return frame
    by = carried.set_index("entity_id")
    return frame.assign(
        episode_last_seen=pd.to_datetime(ids.map(by["last_seen"])).astype("datetime64[ns]"),
        episode_onset=pd.to_datetime(ids.map(by["onset"])).astype("datetime64[ns]"),
        episode_reference=ids.map(by["reference"]).astype(float),
    )


def carried_onsets(findings: pd.DataFrame, carried: pd.DataFrame) -> pd.DataFrame:
    """Findings that continue a carried episode keep its onset (the frame may begin after it)."""
    if findings.empty or carried.empty:
        return findings
    by = carried.set_index("entity_id")
    onset = pd.to_datetime(findings["entity_id"].map(by["onset"]))
    last = pd.to_datetime(findings["entity_id"].map(by["last_seen"]))
    continues = onset.notna() & (pd.to_datetime(findings["onset"]) <= last)
    out = findings.copy()
    out.loc[continues, "onset"] = onset[continues].to_numpy()
    return out


def _ticks(frame: pd.DataFrame) -> pd.Series:
    if "tick" not in frame.columns:
        return pd.Series(pd.NaT, index=frame.index)
    return pd.to_datetime(frame["tick"]).astype("datetime64[ns]")


def clearings(frame: pd.DataFrame, ids: pd.Series, findings: pd.DataFrame, carried: pd.DataFrame,
              describe: Callable[[pd.DataFrame, pd.DataFrame], dict | None] | None, signal: str, entity_type: str,
              start, clear_minutes: float = 0.0) -> pd.DataFrame:
    """One clearing per entity whose episode (flagged in this partition, or carried in) is over by the
    end of the frame: at the first later tick that shows the entity unflagged (and, when the signal
    has a describer, that it can judge: not a checkpoint pause), or at its last flagged tick when the
    series no longer holds the entity although it runs on (it left: run ended, GPU released). An
    entity flagged up to the frame's last tick is still open: no clearing. With `clear_minutes` (a
    standing fault's hysteresis, at most `GRACE_MINUTES` so that an undecided episode is carried into
    the next partition) the entity must also have stayed unflagged that long after its last flagged
    tick, or have left the series, before its clearing is recorded: a short dip clears nothing."""
    clear = pd.Timedelta(minutes=min(float(clear_minutes or 0.0), GRACE_MINUTES))
    last: dict[str, pd.Timestamp] = {}
    for frame_ in (findings, carried):
        if not frame_.empty:
            for entity, seen in frame_.groupby("entity_id")["last_seen"].max().items():
                seen = pd.Timestamp(seen)
                last[str(entity)] = max(last.get(str(entity), seen), seen)
    if not last:
        return pd.DataFrame(columns=list(CLEARING_COLUMNS))
    ticks = _ticks(frame)
    horizon = ticks.max() if not frame.empty else pd.NaT
    one_off = "tick" not in frame.columns   # events (a checkpoint audit), not a time series
    rows = []
    for entity, seen in sorted(last.items()):
        mine = frame[(ids == entity) & (ticks > seen)] if not frame.empty else frame
        if one_off:
            at, facts = seen, {"why": "a one-off event: nothing after it is flagged"}
        elif not mine.empty:
            at, facts = _first_verdict(mine, ticks, frame, describe)
            if at is None:
                continue   # later ticks say nothing either way (a GPU paused by its run): not over yet
            through = ticks[mine.index].max()
            if clear > pd.Timedelta(0):
                if through - seen < clear and not (pd.notna(horizon) and horizon > through):
                    continue   # in the clear for less than `clear_minutes` so far: the next ticks decide
                facts = {**facts, "clean_minutes": round((through - seen) / pd.Timedelta(minutes=1), 1)}
        elif pd.notna(horizon) and horizon > seen:
            at = seen
            facts = {"why": f"{entity} left the signal's series after {seen:%Y-%m-%d %H:%M} (evaluated "
                            f"through {horizon:%H:%M}): its run ended, or released or stopped reporting it"}
        else:
            continue   # flagged to the end of what was evaluated: still open
        rows.append({"signal": signal, "entity_type": entity_type, "entity_id": entity, "partition_start": start,
                     "last_seen": seen, "cleared_at": at, "evidence": facts})
    return pd.DataFrame(rows, columns=list(CLEARING_COLUMNS))


def _first_verdict(mine: pd.DataFrame, ticks: pd.Series, frame: pd.DataFrame, describe):
    """(tick, facts) of the entity's first later tick that shows its fault over; a describer returns
    None for a tick that cannot tell (the condition is not observable then), and the next one is tried."""
    for at in sorted(ticks[mine.index].unique()):
        if describe is None:
            return at, {"why": f"evaluated at {at:%Y-%m-%d %H:%M} and no longer flagged"}
        facts = describe(mine[ticks[mine.index] == at], frame[ticks == at])
        if facts is not None:
            return at, dict(facts)
    return None, None


def seed(f: pd.DataFrame, sustain: pd.Series, grace_minutes: float = GRACE_MINUTES) -> pd.Series:
    """Rows at which a carried episode is already entered: the entity's rows up to its carried last
    flagged tick (and at most `grace_minutes` before it) where the sustain condition holds."""
    if "episode_last_seen" not in f.columns:
        return pd.Series(False, index=f.index)
    last = pd.to_datetime(f["episode_last_seen"])
    tick = pd.to_datetime(f["tick"])
    near = last.notna() & (tick <= last) & (tick > last - pd.Timedelta(minutes=grace_minutes))
    return (near & sustain.fillna(False).astype(bool)).fillna(False).astype(bool)


def held_reference(f: pd.DataFrame, reference: pd.Series) -> pd.Series:
    """`reference` with each carried episode's healthy reference substituted from its onset on: the
    lower of the two (a reference the fault has dragged up never hides it)."""
    if "episode_reference" not in f.columns:
        return reference
    carried = f["episode_reference"].astype(float)
    since = pd.to_datetime(f["episode_onset"]) if "episode_onset" in f.columns else None
    at = pd.to_datetime(f["minute"]) if "minute" in f.columns else pd.to_datetime(f["tick"]) - pd.Timedelta(minutes=1)
    applies = carried.notna() if since is None else carried.notna() & (at >= since)
    return reference.where(~applies, pd.concat([reference, carried], axis=1).min(axis=1))
