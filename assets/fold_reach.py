"""Which stored incidents a refold of some groups can reach through correlation and triage.

The incremental incident fold (assets/incidents_incremental.py) folds only the (signal, entity)
groups that changed. Correlation and triage look across groups, so it also re-correlates and
re-triages the stored incidents whose ids or triage could change, and only those:

- Correlation (assets/correlation.py) is the connected components of a graph whose edges
  (`linked`) depend on the two incidents only; a component is named after its earliest member.
  With C the changed groups' incidents (old and new), a stored incident's component can change only
  if its old component held an old member of C, or it is now linked to a new one. Every other
  component keeps its members, so its name. The reach is therefore the old components of C's old
  members and of the stored incidents linked to a new member (an edge between two unchanged
  incidents is the same before and after, so it joins nothing new), and `fast_correlate` over C's
  new members and that reach gives exactly the full fold's ids for them.
- Triage (assets/triage.py classify) of a serving or quality incident reads: a GPU incident without
  a run on one of its hosts overlapping it, a capacity incident on its endpoint overlapping it, the
  incidents of its signal on its endpoint of the version a promotion replaced (of which only the
  last in the fold's order matters: whether there is one, and its id), and the endpoint's version
  history. `triage_reach` finds the stored ones a changed incident or a changed version
  row can reach by those rules (a superset: re-triaging one that did not change gives the same
  row), and `triage_context` every incident their rules can look at, in the full fold's order
  (of a replaced version's, the one rule 2 names).

Everything here reads `fold_incidents`, the per-incident index the fold keeps (before triage, which
rewrites run_id), by SQL over the registered frames (sql/incidents_incremental/).
"""

from __future__ import annotations

import duckdb
import pandas as pd

from assets import triage
from assets.correlation import GPU_WINDOW, fast_correlate
from checks.frames import stack
from orchestration.storage import sql

KEY = ["signal", "entity_type", "entity_id"]
INDEX_COLUMNS = ["incident_id", *KEY, "pos", "family", "onset", "last_seen", "run_id", "hosts", "gpus",
                 "endpoint", "model_version", "correlation_id", "digest", "episode", "members", "opened",
                 "last_detected", "cleared_at", "folded"]


def query(con: duckdb.DuckDBPyConnection, name: str, params: dict | None = None, **frames) -> pd.DataFrame:
    """`sql/incidents_incremental/<name>.sql` over the registered `frames`, as a frame."""
    for key, frame in frames.items():
        con.register(key, frame)
    try:
        return sql.frame(con, f"incidents_incremental/{name}", params)
    finally:
        for key in frames:
            con.unregister(key)


def span(ranges: pd.DataFrame) -> dict:
    """{lo, hi}: the least `lo` and the greatest `hi` of `ranges` (a query's scalar bounds before its range join)."""
    lo, hi = ranges["lo"].min(), ranges["hi"].max()
    return {"lo": None if pd.isna(lo) else lo, "hi": None if pd.isna(hi) else hi}   # none: NULL, nothing in reach


def as_index(rows: pd.DataFrame) -> pd.DataFrame:
    """Index rows with Python lists (DuckDB reads lists as arrays; triage's rules test them for truth)."""
    out = rows.reindex(columns=INDEX_COLUMNS).copy()
    for column in ("hosts", "gpus", "members"):
        out[column] = [list(v) if v is not None and not (isinstance(v, float) and pd.isna(v)) else [] for v in out[column]]
    out["run_id"] = [v if isinstance(v, str) else None for v in out["run_id"]]
    for column in ("endpoint", "model_version", "correlation_id"):
        out[column] = [v if isinstance(v, str) else None for v in out[column]]
    return out


def correlation_reach(con: duckdb.DuckDBPyConnection, new: pd.DataFrame, old: pd.DataFrame,
                      gap: pd.Timedelta) -> tuple[pd.DataFrame, dict[str, str]]:
    """(the stored incidents to correlate again, {incident id: correlation id} for them and `new`):
    `new` the refolded groups' incidents, `old` what the index held for those groups."""
    replaced = set(old["incident_id"])
    cor_ids = set(old["correlation_id"].dropna())
    if not new.empty:
        window = max(gap, GPU_WINDOW)
        frontier = pd.DataFrame({"lo": new["onset"] - window, "hi": new["last_seen"] + window, "run_id": new["run_id"],
                                 "gpus": new["gpus"], "hosts": new["hosts"]})
        near = as_index(query(con, "near_in_time", span(frontier), frontier=frontier))
        near = near[~near["incident_id"].isin(replaced)]
        if not near.empty:   # the stored incidents in a component with a new one: one linked to it, or to such
            both = stack([new, near], INDEX_COLUMNS)
            ids = fast_correlate(both, gap)
            with_new = set(ids[:len(new)])
            cor_ids |= {stored for name, stored in zip(ids[len(new):], near["correlation_id"]) if name in with_new}
    reach = as_index(query(con, "correlated", cor_ids=pd.DataFrame({"correlation_id": sorted(cor_ids)}, dtype=object)))
    reach = reach[~reach["incident_id"].isin(replaced)].drop_duplicates("incident_id").reset_index(drop=True)
    every = stack([new, reach], INDEX_COLUMNS)
    ids = fast_correlate(every, gap) if not every.empty else []
    return reach, dict(zip(every["incident_id"], ids))


def _probes(changed: pd.DataFrame, versions_changed: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for o in changed.itertuples():
        ep = _endpoint(o.endpoint, o.entity_id)
        if o.family == "gpu" and o.run_id is None:
            rows += [{"host": h, "last_seen_lo": o.onset, "onset_hi": o.last_seen + triage.SLACK} for h in o.hosts]
        if o.signal in triage.CAPACITY_SIGNALS:
            rows.append({"ep": ep, "last_seen_lo": o.onset, "onset_hi": o.last_seen + triage.SLACK})
        if o.family in triage.FAMILIES:   # a later incident on its endpoint, after a promotion from its version
            rows.append({"ep": ep, "signal": o.signal, "last_seen_lo": o.onset - triage.SLACK})
    for v in versions_changed.itertuples():
        rows += [{"ep": v.endpoint}, {"mv": v.model_version}]
    probes = pd.DataFrame(rows).reindex(columns=["ep", "host", "signal", "mv", "last_seen_lo", "onset_hi"])
    for column in ("ep", "host", "signal", "mv"):
        probes[column] = probes[column].astype(object).where(probes[column].notna(), None).astype("string")
    for column in ("last_seen_lo", "onset_hi"):
        probes[column] = pd.to_datetime(probes[column])
    return probes


def triage_reach(con: duckdb.DuckDBPyConnection, changed: pd.DataFrame, versions_changed: pd.DataFrame,
                 replaced: set[str]) -> pd.DataFrame:
    """The stored serving and quality incidents (not of the refolded groups, `replaced`) whose triage
    `changed` incidents (old and new rows of the refolded groups) or changed version rows can reach."""
    probes = _probes(changed, versions_changed)
    if probes.empty:
        return as_index(pd.DataFrame(columns=INDEX_COLUMNS))
    reach = as_index(query(con, "triage_reach", probes=probes))
    return reach[~reach["incident_id"].isin(replaced)].drop_duplicates("incident_id").reset_index(drop=True)


def triage_context(con: duckdb.DuckDBPyConnection, targets: pd.DataFrame, new: pd.DataFrame, replaced: set[str],
                   versions: pd.DataFrame | None, window: pd.Timedelta) -> list[dict]:
    """The incidents the triage of `targets` (index rows) can look at (stored ones, less those `replaced`,
    and all of `new`), before triage, in the full fold's order: groups by key, episodes in order.
    `versions` and `window` as triage.apply gets them. Of the incidents of a version a promotion
    replaced (rule 2's `earlier`), only the one classify would name, per promotion that can be a
    target's (sql/incidents_incremental/replaced_version.sql, read only when there is such a
    promotion): the read follows the targets, not the endpoint's history."""
    if targets.empty:
        return []
    xs = pd.DataFrame({"hosts": targets["hosts"], "ep": [_endpoint(e, i) for e, i in zip(targets["endpoint"], targets["entity_id"])],
                       "signal": targets["signal"], "lo": targets["onset"] - triage.SLACK, "hi": targets["last_seen"],
                       # rule 2's promotion: within `window` before the data's onset (onset .. last_seen), or SLACK after
                       "promoted_lo": targets["onset"] - window, "promoted_hi": targets["last_seen"] + triage.SLACK})
    gone = replaced | set(new["incident_id"])
    stored = query(con, "triage_context", span(xs), xs=xs)
    promotions = _promotions(versions, xs)
    if not promotions.empty:
        earlier = query(con, "replaced_version", xs=xs, promotions=promotions,
                        gone=pd.DataFrame({"incident_id": sorted(gone)}, dtype=object))
        stored = stack([stored, earlier], INDEX_COLUMNS)
    stored = as_index(stored)
    stored = stored[~stored["incident_id"].isin(gone)]
    rows = stack([stored, new], INDEX_COLUMNS).drop_duplicates("incident_id")
    records = rows.to_dict("records")
    records.sort(key=lambda r: (r["signal"], r["entity_type"], r["entity_id"], int(r["pos"])))
    return records


def _promotions(versions: pd.DataFrame | None, xs: pd.DataFrame) -> pd.DataFrame:
    """The promotions that replaced a version on an endpoint of `xs` within their span (endpoint,
    previous_version, promoted_at): those rule 2 can pick for some target, and a few more."""
    columns = {"endpoint": "string", "previous_version": "string", "promoted_at": "datetime64[ns]"}
    if versions is None or versions.empty:
        return pd.DataFrame(columns=list(columns)).astype(columns)
    at = pd.to_datetime(versions["promoted_at"])
    near = (at.notna() & versions["previous_version"].notna() & versions["endpoint"].isin(set(xs["ep"]))
            & (at >= xs["promoted_lo"].min()) & (at <= xs["promoted_hi"].max()))
    return versions.loc[near, list(columns)].astype(columns).reset_index(drop=True)


def _endpoint(endpoint, entity_id) -> str:
    return endpoint if isinstance(endpoint, str) and endpoint else entity_id
