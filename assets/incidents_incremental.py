"""The incremental incident fold: its cost follows what changed since the last fold, not the history.

A layer around the per-group fold of assets/incident_fold.py (`fold_groups`, `finish`), which it does
not change; the result is the full refold's, row for row (tests/test_fold_incremental.py holds it to
`incident_fold.fold` after every partition, in shuffled orders, and after re-written partitions).
State: sql/migrations/140_fold_marks.sql. One fold, in one transaction:

1. What changed. A check that writes a (signal, partition)'s findings, clearings and evaluation mark
   also appends it to `fold_marks` (sql/detect/store_findings.sql; retention too, before it
   deletes). The fold digests only the marked partitions, per (signal, partition, incident group),
   and compares with what it saw last (`fold_seen`, `fold_evaluations`): a partition written again
   with the same rows refolds nothing; a changed one refolds exactly the groups whose rows changed.
2. Groups to refold: those, plus the groups with an incident whose clean window [last_seen,
   last_seen + gap] reaches a changed evaluation mark (a mark changes `evaluated_spans` only within
   one window of its own stretch; an empty mark also turns evaluated when the horizon passes its
   hour, so the marks the horizon crossed count as changed), plus the groups with a finding whose
   checkpoint lineage changed (a checkpoint saved or audited at or before its onset on its run).
   Each is folded from its own partitions' findings and clearings and the evaluation marks near its
   findings only.
3. Correlation and triage only where they can change (assets/fold_reach.py says why that is exact):
   the correlation components the refolded incidents were or are now in, and the serving and
   quality incidents a changed incident or a changed serving version can reach.
4. Storage: the incidents and transitions of those ids are deleted and inserted, not the tables replaced.

With no state, or another settings-and-code digest (`config_digest`), the fold is the full one
(every group, every incident); `goodput refold` clears the state (`clear_state`) to force that.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import pickle
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from assets import correlation, fold_reach, triage
from assets import incident_fold as full
from assets.fold_reach import INDEX_COLUMNS, KEY, as_index, query
from checks.registry import REGISTRY
from orchestration import sql

SEEN = ["signal", "partition_start", "entity_type", "entity_id", "kind"]
MARGIN = pd.Timedelta(minutes=1)   # beyond the exact reach of a change: a little more refolded, never less


def config_digest(lifecycle: full.Lifecycle) -> str:
    """Settings and code a group's rows and the stored incidents depend on: another digest refolds all."""
    digest = hashlib.sha1(repr(lifecycle).encode())
    for module in (full, triage, correlation, fold_reach):
        digest.update(inspect.getsource(module).encode())
    digest.update(Path(__file__).read_bytes())
    for signal in sorted(REGISTRY, key=lambda s: s.name):
        digest.update(repr((signal.name, signal.tier, signal.owner, signal.family, signal.title)).encode())
    for path in sorted((Path(full.__file__).resolve().parent.parent / "checks" / "playbooks").glob("*")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _findings_sql(name: str) -> str:
    findings = sql.sql_text("incidents/findings").strip().rstrip(";")
    findings = "\n".join(line for line in findings.splitlines() if not line.lstrip().startswith("--"))
    assert findings.count("FROM findings f\n") == 1, "sql/incidents/findings.sql reads `findings f` once"
    findings = findings.replace("FROM findings f\n", "FROM scope f\n")
    return sql.sql_text(f"incidents_incremental/{name}").replace("/*@findings*/", findings)


def _bounds(parts: pd.DataFrame) -> dict:
    return {"lo": parts["partition_start"].min(), "hi": parts["partition_start"].max()}


def _clearing_digests(clearings: pd.DataFrame) -> pd.DataFrame:
    if clearings.empty:
        return pd.DataFrame(columns=[*SEEN, "digest", "n"])
    keys = [full.clearing_entity(t, str(e)) for t, e in zip(clearings["entity_type"], clearings["entity_id"])]
    rows = pd.util.hash_pandas_object(clearings.astype(str), index=False).to_numpy(dtype=np.uint64)
    frame = pd.DataFrame({"signal": clearings["signal"].to_numpy(), "partition_start": clearings["partition_start"].to_numpy(),
                          "entity_type": [k[0] for k in keys], "entity_id": [k[1] for k in keys], "kind": "c", "h": rows})
    out = frame.groupby(SEEN, sort=False)["h"].agg([lambda v: np.bitwise_xor.reduce(v.to_numpy()), "size"]).reset_index()
    return out.set_axis([*SEEN, "digest", "n"], axis=1)


def _seen_now(con, marked: pd.DataFrame) -> pd.DataFrame:
    """Per (signal, partition, group, kind) of the marked partitions: a digest and count of its rows."""
    if marked.empty:
        return pd.DataFrame(columns=[*SEEN, "digest", "n"])
    found = query(con, "partition_digests", _bounds(marked), marked=marked)
    cleared = _clearing_digests(query(con, "clearings_in", _bounds(marked), parts=marked))
    seen = pd.concat([found, cleared], ignore_index=True)
    seen["digest"] = seen["digest"].astype(np.uint64)
    return seen


def _value(v):
    if v is None or v is pd.NaT or (isinstance(v, float) and np.isnan(v)):
        return None
    if isinstance(v, (pd.Timestamp, np.datetime64)) or hasattr(v, "isoformat"):
        return pd.Timestamp(v).value
    return int(v) if isinstance(v, np.integer) else v


def _changed(now: pd.DataFrame, was: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The rows of either frame that the other does not hold (compared on `columns`)."""
    def keys(frame):
        return [tuple(_value(v) for v in row) for row in frame[columns].itertuples(index=False)]
    a, b = keys(now), keys(was)
    sa, sb = set(a), set(b)
    parts = [now.loc[np.array([k not in sb for k in a], dtype=bool), columns],
             was.loc[np.array([k not in sa for k in b], dtype=bool), columns]]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def _dirty_from_evaluations(con, marked, horizon, old_horizon, lifecycle) -> pd.DataFrame:
    """Groups with an incident whose clean window a changed evaluation mark can reach."""
    now = query(con, "evaluations_in", _bounds(marked), marked=marked) if not marked.empty else pd.DataFrame()
    was = query(con, "seen_evaluations_in", marked=marked) if not marked.empty else pd.DataFrame()
    cols = ["signal", "partition_start", "evaluated_until"]
    now, was = now.reindex(columns=cols), was.reindex(columns=cols)
    moved = _changed(now, was, cols)   # a mark new, gone or moved: its old and new stretch
    if not (pd.isna(horizon) and pd.isna(old_horizon)) and horizon != old_horizon:
        lo, hi = sorted([pd.Timestamp("1900-01-01") if pd.isna(h) else pd.Timestamp(h) for h in (horizon, old_horizon)])
        moved = pd.concat([moved, sql.frame(con, "incidents_incremental/horizon_marks", {"lo": lo, "hi": hi})], ignore_index=True)
    if moved.empty:
        return pd.DataFrame(columns=KEY), now
    slack = pd.Timedelta(seconds=lifecycle.window_seconds)
    start = pd.to_datetime(moved["partition_start"])
    end = pd.concat([start + full.PARTITION, pd.to_datetime(moved["evaluated_until"])], axis=1).max(axis=1)
    regions = pd.DataFrame({"signal": moved["signal"], "lo": start - slack - lifecycle.gap - MARGIN, "hi": end + slack + MARGIN})
    return query(con, "near_regions", regions=regions), now


def _dirty_from_checkpoints(con) -> tuple[pd.DataFrame, pd.DataFrame]:
    now = sql.frame(con, "incidents_incremental/checkpoints")
    was = con.execute("SELECT * FROM fold_checkpoints").df()
    cols = list(now.columns)
    changed = _changed(now, was.reindex(columns=cols), cols)
    changed = changed[changed["run_id"].notna()]   # a finding without a run has no checkpoint
    if changed.empty:
        return pd.DataFrame(columns=KEY), now
    runs = (changed.assign(since=pd.to_datetime(changed["time"])).groupby("run_id", as_index=False)["since"].min())
    return query(con, "checkpoint_groups", changed_runs=runs), now


def _versions(versions: pd.DataFrame | None) -> pd.DataFrame:
    versions = pd.DataFrame(columns=list(triage.VERSION_COLUMNS)) if versions is None else versions
    return pd.DataFrame({"endpoint": versions["endpoint"].astype(object), "model_version": versions["model_version"].astype(object),
                         "digest": pd.util.hash_pandas_object(versions.astype(str), index=False).to_numpy(dtype=np.uint64)})


def _fold_groups(con, dirty: pd.DataFrame, seen_now: pd.DataFrame, lifecycle, horizon):
    """The refolded groups' findings (read from their partitions only) folded again."""
    parts = query(con, "group_parts", dirty_groups=dirty)
    now = seen_now.merge(dirty, on=KEY)[["signal", "partition_start", "kind"]]
    parts = pd.concat([parts, now], ignore_index=True).drop_duplicates()
    found, cleared = (parts.loc[parts["kind"] == k, ["signal", "partition_start"]] for k in ("f", "c"))
    if found.empty:
        return pd.DataFrame(), *full.fold_groups(pd.DataFrame(), pd.DataFrame(), lifecycle)
    for name, frame in (("dirty_groups", dirty), ("parts", found)):
        con.register(name, frame)
    try:
        findings = sql.execute_text(con, _findings_sql("group_findings"), _bounds(found)).df()
    finally:
        for name in ("dirty_groups", "parts"):
            con.unregister(name)
    clearings = query(con, "clearings_in", _bounds(cleared), parts=cleared) if not cleared.empty else pd.DataFrame()
    if not clearings.empty:
        keys = {tuple(k) for k in dirty[KEY].itertuples(index=False)}
        own = [(s, *full.clearing_entity(t, str(e))) in keys for s, t, e in
               zip(clearings["signal"], clearings["entity_type"], clearings["entity_id"])]
        clearings = clearings[own]
    grouped = [(s, *full.incident_entity({"entity_type": t, "entity_id": e, "run_id": r}))
               for s, t, e, r in zip(findings["signal"], findings["entity_type"], findings["entity_id"], findings["run_id"])]
    last = pd.DataFrame(grouped, columns=KEY).assign(last_seen=findings["last_seen"].to_numpy())
    span = last.groupby(KEY, as_index=False)["last_seen"].agg(["min", "max"])
    slack = pd.Timedelta(seconds=lifecycle.window_seconds)
    ranges = pd.DataFrame({"signal": span["signal"], "lo": span["min"] - slack - MARGIN,
                           "hi": span["max"] + lifecycle.gap + slack + MARGIN})
    evaluations = query(con, "evaluations_near", ranges=ranges)
    return findings, *full.fold_groups(findings, evaluations, lifecycle, REGISTRY, clearings, horizon=horizon)


def _plain(v):
    """A value as its content (a missing rank is NaN in one frame and None in another)."""
    if isinstance(v, (list, tuple, np.ndarray)):
        return tuple(_plain(x) for x in v)
    if v is None or v is pd.NaT or (isinstance(v, float) and np.isnan(v)):
        return None
    if isinstance(v, np.generic):
        return _plain(v.item())
    return pd.Timestamp(v).isoformat() if isinstance(v, (pd.Timestamp, np.datetime64)) else v


def _index(incidents: pd.DataFrame, transitions: pd.DataFrame) -> pd.DataFrame:
    """The index rows of freshly folded incidents, each with a digest of its row and transitions."""
    out = incidents.copy()
    out["pos"] = out.groupby(KEY, sort=False).cumcount()
    steps: dict = {}
    for row in transitions.itertuples(index=False):
        steps.setdefault(row.incident_id, []).append(tuple(map(_plain, row)))
    columns = [c for c in full.INCIDENT_COLUMNS if c != "correlation_id"]
    out["digest"] = [hashlib.sha1(repr((tuple(map(_plain, r)), steps.get(r[0], []))).encode()).hexdigest()[:16]
                     for r in out[columns].itertuples(index=False)]
    return as_index(out)


def _states(incidents: pd.DataFrame, transitions: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for key, group in incidents.groupby(KEY, sort=False):
        own = transitions[transitions["incident_id"].isin(set(group["incident_id"]))]
        rows.append({"signal": key[0], "entity_type": key[1], "entity_id": key[2],
                     "folded": pickle.dumps((group.reset_index(drop=True), own.reset_index(drop=True)),
                                            protocol=pickle.HIGHEST_PROTOCOL)})
    return pd.DataFrame(rows, columns=[*KEY, "folded"])


def _pretriage(con, rows: pd.DataFrame) -> pd.DataFrame:
    """The stored groups' incidents before correlation and triage, for the ids in `rows`."""
    if rows.empty:
        return pd.DataFrame(columns=list(full.INCIDENT_COLUMNS))
    states = query(con, "group_states", groups=rows[KEY].drop_duplicates())
    frames = [pickle.loads(bytes(b))[0] for b in states["folded"]]
    every = pd.concat(frames, ignore_index=True)
    return every[every["incident_id"].isin(set(rows["incident_id"]))].reset_index(drop=True)


def fold_incrementally(con: duckdb.DuckDBPyConnection, lifecycle: full.Lifecycle, versions: pd.DataFrame | None,
                       triage_window_seconds: float) -> dict:
    """Fold what changed since the last fold and store it, in one transaction; returns counts of what it did."""
    con.execute("BEGIN TRANSACTION")
    try:
        counts = _fold(con, lifecycle, versions, triage_window_seconds)
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise
    return counts


def _fold(con, lifecycle, versions, triage_window_seconds) -> dict:
    config = config_digest(lifecycle)
    meta = con.execute("SELECT config, horizon FROM fold_meta").fetchall()
    whole = not meta or meta[0][0] != config
    horizon = sql.frame(con, "incidents_incremental/horizon")["horizon"].iloc[0]
    marked = sql.frame(con, "incidents_incremental/marks")
    if whole:
        sql.run(con, "incidents_incremental/clear")
        marked = pd.concat([marked, sql.frame(con, "incidents_incremental/all_partitions")]).drop_duplicates()
    seen_now = _seen_now(con, marked)
    seen_was = query(con, "seen_in", marked=marked) if not marked.empty else pd.DataFrame(columns=SEEN + ["digest", "n"])
    dirty = [_changed(seen_now, seen_was, [*SEEN, "digest", "n"])[KEY]]
    near, evaluations_now = _dirty_from_evaluations(con, marked, horizon, None if whole else meta[0][1], lifecycle)
    lineage, checkpoints = _dirty_from_checkpoints(con)
    dirty = pd.concat([*dirty, near, lineage], ignore_index=True).astype(str).drop_duplicates().reset_index(drop=True)
    versions_now = _versions(versions)
    was = con.execute("SELECT endpoint, model_version, digest FROM fold_versions").df()
    versions_changed = _changed(versions_now, was, ["endpoint", "model_version", "digest"])
    # 1. the groups that changed, folded again
    findings, incidents, transitions = _fold_groups(con, dirty, seen_now, lifecycle, horizon)
    states = _states(incidents, transitions)
    before = as_index(query(con, "group_incidents", dirty_groups=dirty))
    after = _index(incidents, transitions)
    # only the incidents whose rows or transitions the refold changed (or that it added or dropped) go on
    same = set(zip(before["incident_id"], before["digest"])) & set(zip(after["incident_id"], after["digest"]))
    old, new = (frame.loc[np.array([k not in same for k in zip(frame["incident_id"], frame["digest"])], dtype=bool)]
                .reset_index(drop=True) for frame in (before, after))
    replaced = set(old["incident_id"])
    incidents = incidents[incidents["incident_id"].isin(set(new["incident_id"]))]
    # 2. correlation and triage where they can change
    reach, correlation_ids = fold_reach.correlation_reach(con, new, old, lifecycle.gap)
    new["correlation_id"] = new["incident_id"].map(correlation_ids)
    changed = pd.concat([old, new], ignore_index=True)
    retriage = fold_reach.triage_reach(con, changed, versions_changed, replaced)
    fresh = incidents.assign(correlation_id=incidents["incident_id"].map(correlation_ids))
    family = fresh["family"].isin(triage.FAMILIES) if not fresh.empty else pd.Series(dtype=bool)
    stored = _pretriage(con, retriage)
    stored["correlation_id"] = stored["incident_id"].map(correlation_ids).fillna(
        stored["incident_id"].map(dict(zip(retriage["incident_id"], retriage["correlation_id"]))))
    targets = pd.concat([fresh[family], stored], ignore_index=True)
    context = fold_reach.triage_context(con, as_index(targets), new, replaced)
    triaged = triage.apply(targets, versions, triage_window_seconds, context=context) if not targets.empty else targets
    recorrelated = reach[~reach["incident_id"].isin(set(retriage["incident_id"]))]
    kept = con.execute("SELECT * FROM incidents WHERE incident_id IN (SELECT unnest($ids))",
                       {"ids": list(recorrelated["incident_id"])}).df() if not recorrelated.empty else pd.DataFrame()
    if not kept.empty:
        kept["correlation_id"] = kept["incident_id"].map(correlation_ids)
        for column in ("hosts", "gpus", "ranks", "members"):
            kept[column] = [v.tolist() if isinstance(v, np.ndarray) else v for v in kept[column]]
    written = [f for f in (triaged, fresh[~family], kept) if not f.empty]
    new_incidents = (pd.concat(written, ignore_index=True) if written else pd.DataFrame(columns=list(full.INCIDENT_COLUMNS)))
    # 3. store what changed
    reach = reach.assign(correlation_id=reach["incident_id"].map(correlation_ids))
    gone = sorted(replaced | set(new_incidents["incident_id"]))
    frames = {
        "gone_ids": pd.DataFrame({"incident_id": gone}, dtype=object),
        "new_incidents": new_incidents.reindex(columns=list(full.INCIDENT_COLUMNS)),
        "gone_transitions": pd.DataFrame({"incident_id": sorted(replaced)}, dtype=object),
        "new_transitions": transitions[transitions["incident_id"].isin(set(new["incident_id"]))].reindex(
            columns=list(full.TRANSITION_COLUMNS)),
        "index_gone": pd.DataFrame({"incident_id": sorted(replaced | set(reach["incident_id"]))}, dtype=object),
        "new_index": pd.concat([new, reach], ignore_index=True).reindex(columns=INDEX_COLUMNS),
        "refolded_groups": dirty, "new_states": states,
        "marked": marked, "new_seen": seen_now, "new_evaluations": evaluations_now,
        "new_checkpoints": checkpoints, "new_versions": versions_now,
        "new_meta": pd.DataFrame({"config": [config], "horizon": [horizon]}),
    }
    if whole:
        con.execute("DELETE FROM incidents; DELETE FROM incident_transitions")
    for name, frame in frames.items():
        con.register(name, frame)
    try:
        sql.run(con, "incidents_incremental/store")
    finally:
        for name in frames:
            con.unregister(name)
    return {"whole": whole, "partitions_marked": len(marked), "groups_folded": len(dirty), "findings_folded": len(findings),
            "groups": [tuple(g) for g in dirty[KEY].itertuples(index=False)],
            "incidents_folded": len(after), "incidents_changed": len(new) + len(replaced - set(new["incident_id"])),
            "correlated": len(new) + len(reach), "triaged": len(targets),
            "incidents_written": len(new_incidents), "versions_changed": len(versions_changed)}


def clear_state(con: duckdb.DuckDBPyConnection) -> None:
    """Forget what the fold saw (the next fold is a full refold)."""
    sql.run(con, "incidents_incremental/clear")
