"""Entry by cost and exit after sustained health: the two halves of hysteresis for standing faults.

A fault such as a straggler is a standing condition, not a change: it should open once its evidence
has cost enough (a short severe episode as well as a long mild one) and close only once the evidence
has been gone for a sustained time, so a one-minute dip neither resolves it nor makes it reopen as a
new incident. `persisted` is the entry half (duration, or duration and cost); `bridge_dips` the exit
half over flagged stretches; `episodes.clearings(..., clear_minutes=...)` records the clearing only
after the same sustained time. Pure functions over frames sorted by (entity, tick) (`toolkit.prepare`).
"""

from __future__ import annotations

import pandas as pd

from checks.toolkit import MINUTE, stretch_ids


def persisted(f: pd.DataFrame, key: str, entry: pd.Series, cost: pd.Series, min_minutes: float,
              min_short_minutes: float, min_cost: float, max_gap_minutes: float,
              support: pd.Series | None = None, min_support: float = 0.0) -> pd.Series:
    """Rows at which a run of consecutive `entry` rows has lasted `min_minutes`, or has lasted
    `min_short_minutes` (at least 2: one noisy minute never suffices) and accumulated `min_cost`
    of `cost` (e.g. GPU-minutes lost) over at least `min_support` of `support` (e.g. steps: two
    minutes of one slow step each are two samples, not a short episode): severity and duration trade off."""
    entry = entry.fillna(False).astype(bool)
    run = stretch_ids(f, entry, max_gap_minutes, key=key, time="tick")
    count = entry.astype(int).groupby(run).cumsum()
    spent = cost.where(entry, 0.0).fillna(0.0).groupby(run).cumsum()
    seen = (support if support is not None else pd.Series(1.0, index=f.index)).where(entry, 0.0).fillna(0.0)
    short = count.ge(max(2.0, min_short_minutes)) & spent.ge(min_cost) & seen.groupby(run).cumsum().ge(min_support)
    return entry & (count.ge(min_minutes) | short)


def bridge_dips(f: pd.DataFrame, key: str, clear_minutes: float, max_gap_minutes: float) -> pd.DataFrame:
    """`f` (marked by `mark_stretches`: `_active`, `_stretch`) with each entity's flagged stretches
    joined across dips shorter than `clear_minutes`: the rows between two flagged rows at most
    `clear_minutes` + 1 apart count as flagged, and the joined stretches share one id (with the
    unflagged lead-in of the first, so the onset stays where the evidence began)."""
    if f.empty or clear_minutes <= 0:
        return f
    active = f["_active"].astype(bool)
    tick = pd.to_datetime(f["tick"])
    on_ticks = tick.where(active)
    before = on_ticks.groupby(f[key]).ffill()
    after = on_ticks.groupby(f[key]).bfill()
    dip = ~active & before.notna() & after.notna() & (after - before).le((clear_minutes + 1) * MINUTE)
    flagged_stretch = f.groupby("_stretch")["_active"].transform("any").astype(bool) & f["_stretch"].ge(0)
    member = flagged_stretch | dip
    stretch = stretch_ids(f, member, max_gap_minutes, key=key, time="tick")
    return f.assign(_active=(active | dip).to_numpy(), _stretch=stretch.fillna(-1).astype(int).to_numpy())
