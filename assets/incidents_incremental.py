"""The incremental incident fold: only the (signal, entity) groups whose inputs changed are folded.

A layer around the per-group fold of assets/incidents.py (`fold_groups`), which it does not change.
A group's incidents depend on its own findings and, through resolution, on its clearings (the
evidence that a fault is over) and on whether its signal has evaluated the clean windows after
each incident's last finding. So a fold

1. digests every group's findings in SQL (one columnar pass: sql/incidents_incremental/group_digests.sql);
2. folds again only the groups whose digest or count changed, that are new, whose settings or fold
   code changed, or one of whose incidents would now resolve differently (a cheap recheck of
   `_clean_through` per kept incident); the others keep the rows stored in `fold_state` (migration 071);
3. correlates and triages all incidents (`finish`: both look across groups; correlation by a
   sweep over time per run, GPU and host, `fast_correlate`, the same ids as `correlate`), and
   replaces the incident tables.

The result is the full refold's, row for row (tests/test_fold_incremental.py holds it to
`incidents.fold` over the same inputs in shuffled orders); `goodput refold` clears the state.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import pickle
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from assets import incident_fold as full
from assets.correlation import fast_correlate
from checks.registry import REGISTRY
from orchestration import sql
from orchestration.warehouse import transaction

KEY = ["signal", "entity_type", "entity_id"]


def config_digest(lifecycle: full.Lifecycle) -> str:
    """Settings and code a group's rows depend on: another digest refolds every group."""
    digest = hashlib.sha1(repr(lifecycle).encode())
    digest.update(inspect.getsource(full).encode())
    for signal in sorted(REGISTRY, key=lambda s: s.name):
        digest.update(repr((signal.name, signal.tier, signal.owner, signal.family, signal.title)).encode())
    for path in sorted((Path(full.__file__).resolve().parent.parent / "checks" / "playbooks").glob("*")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _findings_sql(name: str) -> str:
    findings = sql.sql_text("incidents/findings").strip().rstrip(";")
    findings = "\n".join(line for line in findings.splitlines() if not line.lstrip().startswith("--"))
    return sql.sql_text(f"incidents_incremental/{name}").replace("/*@findings*/", findings)


def _resolution(incidents: pd.DataFrame, spans: dict, gap: pd.Timedelta) -> list:
    return [[pd.Timestamp(r.last_seen).isoformat(), bool(full._clean_through(spans.get(r.signal, []), r.last_seen, r.last_seen + gap))]
            for r in incidents.itertuples()]


def _still(resolution: str, signal: str, spans: dict, gap: pd.Timedelta) -> bool:
    """Whether each kept incident of a group would resolve as it did when it was folded."""
    for last_seen, resolved in json.loads(resolution):
        at = pd.Timestamp(last_seen)
        if bool(full._clean_through(spans.get(signal, []), at, at + gap)) != resolved:
            return False
    return True


def with_clearings(digests: pd.DataFrame, clearings: pd.DataFrame) -> pd.DataFrame:
    """Fold each group's clearings (the evidence that resolves its episodes) into its digest: a new
    clearing changes how the group resolves, so it refolds the group like a new finding does."""
    if clearings.empty or digests.empty:
        return digests
    keys = [full.clearing_entity(t, str(e)) for t, e in zip(clearings["entity_type"], clearings["entity_id"])]
    rows = pd.util.hash_pandas_object(clearings.astype(str), index=False).to_numpy(dtype=np.uint64)
    per_group = pd.DataFrame({"signal": clearings["signal"].to_numpy(), "entity_type": [k[0] for k in keys],
                              "entity_id": [k[1] for k in keys], "cleared": rows})
    per_group = per_group.groupby(KEY, sort=False)["cleared"].agg(lambda v: np.bitwise_xor.reduce(v.to_numpy())).reset_index()
    out = digests.merge(per_group, on=KEY, how="left")
    cleared = out["cleared"].fillna(0).astype(np.uint64).to_numpy()
    out["digest"] = np.bitwise_xor(out["digest"].astype(np.uint64).to_numpy(), cleared)
    return out.drop(columns="cleared")


def fold_incrementally(con: duckdb.DuckDBPyConnection, lifecycle: full.Lifecycle, versions: pd.DataFrame | None,
                       triage_window_seconds: float) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(incidents, transitions, counts): fold the changed groups, keep the rest; the caller stores them."""
    config = config_digest(lifecycle)
    gap = lifecycle.gap
    digests = sql.execute_text(con, _findings_sql("group_digests")).df().rename(
        columns={"group_type": "entity_type", "group_id": "entity_id"})
    clearings = sql.frame(con, "incidents/clearings")
    digests = with_clearings(digests, clearings)
    state = sql.frame(con, "incidents_incremental/state_keys")
    evaluations = sql.frame(con, "incidents/evaluations")
    spans = full.evaluated_spans(evaluations, lifecycle.window_seconds)
    merged = digests.merge(state, on=KEY, how="outer", suffixes=("", "_was"), indicator=True)
    status = merged["_merge"].astype(str).to_numpy()
    changed = ((merged["digest"] != merged["digest_was"]) | (merged["n"] != merged["findings"])
               | (merged["config"] != config)).to_numpy(dtype=bool)
    dirty_flags = (status == "left_only") | ((status == "both") & changed)
    for i in np.flatnonzero((status == "both") & ~dirty_flags):   # would an incident resolve differently now?
        row = merged.iloc[i]
        dirty_flags[i] = not _still(row["resolution"], row["signal"], spans, gap)
    dirty = merged.loc[dirty_flags, KEY].reset_index(drop=True)
    dropped = merged.loc[status == "right_only", KEY].reset_index(drop=True)
    kept = merged.loc[(status == "both") & ~dirty_flags, KEY].reset_index(drop=True)
    # 1. the changed groups, folded again
    con.register("dirty_groups", dirty.rename(columns={"entity_type": "group_type", "entity_id": "group_id"}))
    try:
        findings = sql.execute_text(con, _findings_sql("group_findings")).df() if not dirty.empty else pd.DataFrame()
    finally:
        con.unregister("dirty_groups")
    new_incidents, new_transitions = full.fold_groups(findings, evaluations, lifecycle, REGISTRY, clearings)
    parts = {}
    for key, rows in new_incidents.groupby(KEY, sort=False):
        ids = set(rows["incident_id"])
        parts[key] = (rows, new_transitions[new_transitions["incident_id"].isin(ids)])
    # 2. the kept groups, as stored
    con.register("kept", kept)
    try:
        stored = sql.frame(con, "incidents_incremental/state_rows") if not kept.empty else pd.DataFrame(columns=[*KEY, "folded"])
    finally:
        con.unregister("kept")
    for r in stored.itertuples():
        parts[(r.signal, r.entity_type, r.entity_id)] = pickle.loads(bytes(r.folded))
    # the full fold's order: groups sorted by key, episodes in order within each
    ordered = [parts[k] for k in sorted(parts)]
    incidents = (pd.concat([p[0] for p in ordered], ignore_index=True) if ordered
                 else pd.DataFrame(columns=list(full.INCIDENT_COLUMNS)))
    transitions = (pd.concat([p[1] for p in ordered], ignore_index=True) if ordered
                   else pd.DataFrame(columns=list(full.TRANSITION_COLUMNS)))
    folded = full.finish(incidents, lifecycle, versions, triage_window_seconds, correlation=fast_correlate)
    refolded = pd.DataFrame([
        {"signal": k[0], "entity_type": k[1], "entity_id": k[2],
         "digest": int(d.digest), "findings": int(d.n), "resolution": json.dumps(_resolution(parts[k][0], spans, gap)),
         "config": config, "folded": pickle.dumps(parts[k], protocol=pickle.HIGHEST_PROTOCOL)}
        for k, d in ((tuple(r[KEY]), r) for _, r in digests.merge(dirty, on=KEY).iterrows()) if k in parts
    ], columns=[*KEY, "digest", "findings", "resolution", "config", "folded"])
    # a dirty group whose findings now fold to nothing is dropped too
    gone = dirty[[tuple(r) not in parts for r in dirty[KEY].itertuples(index=False)]]
    state_frames = {"refolded": refolded, "dropped": pd.concat([dropped, gone], ignore_index=True)}
    counts = {"groups": len(parts), "groups_folded": len(dirty), "groups_kept": len(kept), "groups_dropped": len(dropped),
              "findings_folded": len(findings), "findings": int(digests["n"].sum()) if not digests.empty else 0}
    return folded, transitions, {**counts, "_state": state_frames}


def store(con: duckdb.DuckDBPyConnection, incidents: pd.DataFrame, transitions: pd.DataFrame, state: dict) -> None:
    """Replace the incident tables and the fold state in one transaction."""
    with transaction(con, new_incidents=incidents, new_transitions=transitions, **state):
        sql.run(con, "incidents/replace")
        sql.run(con, "incidents_incremental/state_replace")


def clear_state(con: duckdb.DuckDBPyConnection) -> None:
    """Forget every group (the next fold is a full refold)."""
    con.execute("DELETE FROM fold_state")
