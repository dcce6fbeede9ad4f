"""The incremental incident fold: its cost follows what changed since the last fold, not the history.

A layer around the pure fold of assets/incident_fold.py (`fold_groups`, `fold_group`, `triage`,
`correlation`); the result is the full refold's, row for row (tests/test_fold_incremental.py holds
it to `incident_fold.fold` after every partition, in shuffled orders, over days of history, and
after re-written and backfilled partitions). State: sql/migrations/140_fold_marks.sql. One fold,
in one transaction:

1. What changed (assets/fold_changes.py): the partitions the checks marked, digested per (signal,
   partition, incident group) against what the fold saw; a partition written again with the same
   rows changes nothing. Groups to refold: those whose rows changed, those with an incident whose
   clean window [last_seen, last_seen + gap] reaches a changed evaluation mark (a mark changes
   `evaluated_spans` only within one window of its own stretch; an empty mark also turns evaluated
   when the horizon passes its hour, so the marks the horizon crossed count as changed), and those
   with a finding whose checkpoint lineage changed (a checkpoint of its run saved or audited at or
   before its onset; only the runs whose lineage or audits differ are compared).
2. Each such group is folded again from the first episode a change can reach (`_starts`), reading
   only its findings from there on, the clearings they can take and the evaluation marks near them;
   the earlier episodes stay as stored (`fold_incidents`), and only each member's latest one is read
   (the episode a new one can reopen), so a group's long history is not read at every refold.
3. Only the incidents whose rows changed go on: correlation and triage over those and the stored
   incidents they can reach (assets/fold_reach.py says why that is exact).
4. Storage: the incidents and transitions of those ids are deleted and inserted, not the tables replaced.

With no state, or another settings-and-code digest (`config_digest`), the fold is the full one
(every group, every incident); `goodput refold` clears the state (`clear_state`) to force that.
Serving versions (the `versions` argument) are digested per row: a changed row re-triages the
serving and quality incidents of its endpoint or model version.
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
from assets import fold_changes as changes
from assets import incident_fold as full
from assets.fold_reach import INDEX_COLUMNS, KEY, as_index, query
from checks import frames
from checks.frames import stack
from checks.registry import PLAYBOOKS_DIR, REGISTRY
from orchestration.storage import sql


def config_digest(lifecycle: full.Lifecycle) -> str:
    """Settings and code a group's rows and the stored incidents depend on: another digest refolds all."""
    digest = hashlib.sha1(repr(lifecycle).encode())
    for module in (full, triage, correlation, fold_reach, changes, frames):
        digest.update(inspect.getsource(module).encode())
    digest.update(Path(__file__).read_bytes())
    for signal in sorted(REGISTRY, key=lambda s: s.name):
        digest.update(repr((signal.name, signal.tier, signal.owner, signal.family, signal.title)).encode())
    for path in sorted(PLAYBOOKS_DIR.glob("*")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _findings_sql(name: str) -> str:
    """`name` with sql/incidents/findings.sql filled in at its marker, reading `scope` for `findings` and
    the fold's own saved checkpoints of those findings' runs (saved_in_scope.sql) for the lineage."""
    findings = sql.fragment("incidents/findings")
    assert findings.count("FROM findings f\n") == 1, "sql/incidents/findings.sql reads `findings f` once"
    findings = findings.replace("FROM findings f\n", "FROM scope f\n")
    head, start, rest = findings.partition("/*@saved*/")
    _, end, tail = rest.partition("/*saved@*/")
    assert start and end, "sql/incidents/findings.sql marks its `saved` rows /*@saved*/ ... /*saved@*/"
    saved = sql.fragment("incidents_incremental/saved_in_scope")
    return sql.sql_text(f"incidents_incremental/{name}").replace("/*@findings*/", head + saved + tail)


def _starts(con, dirty: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the stored incidents a refold of the `dirty` groups reads, per group the first stored episode a
    change can reach, `k`, and what the fold from there needs: `since` (that episode's first detection:
    the findings read) and `earlier` (the episodes before it that fold_group can reopen)). A changed
    finding (earliest detection `d`) can only join the episode running at `d` or start a later one; a
    changed clearing (earliest `c`) only changes the incidents whose clearing was none or at or after
    `c`; a changed evaluation mark only the incidents from `pos` (`e`) on; and every episode after a
    refolded one is refolded too (episode numbers chain). sql/incidents_incremental/group_reach.sql
    finds k and reads the episodes from k on and, before k, only the latest episode of each member: a
    group's older history stays in the table."""
    if dirty.empty:
        return as_index(pd.DataFrame()), pd.DataFrame(columns=[*KEY, "k", "since", "earlier"])
    read = query(con, "group_reach", dirty=dirty[[*KEY, *REACH]].astype({"e": "Int64"}))
    stored = as_index(read)
    groups: dict = {}
    for row, k in zip(stored.itertuples(index=False), read["k"]):
        group = groups.setdefault((row.signal, row.entity_type, row.entity_id), {"k": int(k), "since": pd.NaT, "earlier": []})
        if row.pos < k:
            group["earlier"].append((set(row.members), int(row.episode), row.incident_id))
        elif row.pos == k and k:   # from the first episode: every finding, even earlier ones
            group["since"] = row.opened
    empty = {"k": 0, "since": pd.NaT, "earlier": []}
    out = [{**dict(zip(KEY, key)), **groups.get(key, empty)} for key in zip(*(dirty[c] for c in KEY))]
    return stored, pd.DataFrame(out, columns=[*KEY, "k", "since", "earlier"])


def _group_keys(frame: pd.DataFrame) -> list[tuple]:
    return [(s, *full.incident_entity({"entity_type": t, "entity_id": e, "run_id": r}))
            for s, t, e, r in zip(frame["signal"], frame["entity_type"], frame["entity_id"], frame["run_id"])]


def _fold_groups(con, starts: pd.DataFrame, seen: pd.DataFrame, lifecycle, horizon):
    """(findings read, clearings read, incidents, transitions): each refolded group from its start."""
    empty = pd.DataFrame()
    if starts.empty:
        return empty, empty, *full.fold_groups(empty, empty, lifecycle)
    dirty = starts[[*KEY, "since"]].assign(since=pd.to_datetime(starts["since"]))
    parts = query(con, "group_parts", dirty_groups=dirty[KEY])
    now = seen.merge(dirty[KEY], on=KEY)[[*KEY, "partition_start", "kind", "last_at"]]
    parts = stack([parts, now], [*KEY, "partition_start", "kind", "last_at"]).merge(dirty, on=KEY)
    late = parts["since"].isna() | (pd.to_datetime(parts["last_at"]) >= parts["since"])
    found = parts.loc[(parts["kind"] == "f") & late, ["signal", "partition_start"]].drop_duplicates()
    if found.empty:
        return empty, empty, *full.fold_groups(empty, empty, lifecycle)
    for name, frame in (("dirty_groups", dirty), ("parts", found)):
        con.register(name, frame)
    try:
        findings = sql.execute_text(con, _findings_sql("group_findings"), changes.bounds(found)).df()
    finally:
        for name in ("dirty_groups", "parts"):
            con.unregister(name)
    keyed = pd.DataFrame(_group_keys(findings), columns=KEY).assign(last_seen=findings["last_seen"].to_numpy())
    span = keyed.groupby(KEY, as_index=False)["last_seen"].agg(["min", "max"])
    # a refolded incident takes the first clearing at or after its last finding: none before the earliest
    bound = parts[parts["kind"] == "c"].merge(span[[*KEY, "min"]], on=KEY)
    cleared = bound.loc[pd.to_datetime(bound["last_at"]) >= bound["min"], ["signal", "partition_start"]].drop_duplicates()
    clearings = query(con, "clearings_in", changes.bounds(cleared), parts=cleared) if not cleared.empty else empty
    if not clearings.empty:
        first = {tuple(r[:3]): r[3] for r in span[[*KEY, "min"]].itertuples(index=False)}
        keys = [(s, *full.clearing_entity(t, str(e))) for s, t, e in
                zip(clearings["signal"], clearings["entity_type"], clearings["entity_id"])]
        own = [k in first and at >= first[k] for k, at in zip(keys, clearings["cleared_at"])]
        clearings = clearings[np.array(own, dtype=bool)]
    slack = pd.Timedelta(seconds=lifecycle.window_seconds)
    ranges = pd.DataFrame({"signal": span["signal"], "lo": span["min"] - slack - changes.MARGIN,
                           "hi": span["max"] + lifecycle.gap + slack + changes.MARGIN})
    evaluations = query(con, "evaluations_near", fold_reach.span(ranges), ranges=ranges)
    earlier = {tuple(r[:3]): r[3] for r in starts[[*KEY, "earlier"]].itertuples(index=False)}
    return findings, clearings, *full.fold_groups(findings, evaluations, lifecycle, REGISTRY, clearings, horizon=horizon,
                                                  earlier=earlier)


def _plain(v):
    """A value as its content (a missing rank is NaN in one frame and None in another)."""
    if isinstance(v, (list, tuple, np.ndarray)):
        return tuple(_plain(x) for x in v)
    if v is None or v is pd.NaT or (isinstance(v, float) and np.isnan(v)):
        return None
    if isinstance(v, np.generic):
        return _plain(v.item())
    return pd.Timestamp(v).isoformat() if isinstance(v, (pd.Timestamp, np.datetime64)) else v


def _index(incidents: pd.DataFrame, transitions: pd.DataFrame, findings: pd.DataFrame, clearings: pd.DataFrame,
           starts: pd.DataFrame) -> pd.DataFrame:
    """The index rows of freshly folded incidents: place in the group, the last detection of its
    findings (episodes take the group's findings in the fold's order, `findings` each), the clearing
    it took, a digest of its row and transitions, and both pickled."""
    if incidents.empty:
        return as_index(pd.DataFrame())
    out = incidents.reset_index(drop=True)
    first = {tuple(r[:3]): r[3] for r in starts[[*KEY, "k"]].itertuples(index=False)}
    out["pos"] = [first[k] + i for k, i in zip(map(tuple, out[KEY].to_numpy()), out.groupby(KEY, sort=False).cumcount())]
    keyed = findings.assign(**dict(zip(KEY, zip(*_group_keys(findings)))))
    detected = {key: group.sort_values(full.ORDER, kind="stable")["detected_at"].to_numpy()
                for key, group in keyed.groupby(KEY, sort=False)}
    taken: dict = {}
    cleared = {}
    if not clearings.empty:
        ckeys = [(s, *full.clearing_entity(t, str(e))) for s, t, e in
                 zip(clearings["signal"], clearings["entity_type"], clearings["entity_id"])]
        for key, at in zip(ckeys, clearings["cleared_at"]):
            cleared.setdefault(key, []).append(pd.Timestamp(at))
        cleared = {k: np.array(sorted(v), dtype="datetime64[ns]") for k, v in cleared.items()}
    last_detected, cleared_at = [], []
    for key, count, last_seen in zip(map(tuple, out[KEY].to_numpy()), out["findings"], out["last_seen"]):
        at = taken.get(key, 0) + int(count)
        taken[key] = at
        last_detected.append(detected[key][at - 1])
        times = cleared.get(key)
        j = np.searchsorted(times, np.datetime64(pd.Timestamp(last_seen)), side="left") if times is not None else 0
        cleared_at.append(times[j] if times is not None and j < len(times) else pd.NaT)
    out["last_detected"], out["cleared_at"] = pd.to_datetime(last_detected), pd.to_datetime(cleared_at)
    steps: dict = {}
    for row in transitions.itertuples(index=False):
        steps.setdefault(row.incident_id, []).append(row._asdict())
    columns = [c for c in full.INCIDENT_COLUMNS if c != "correlation_id"]
    out["digest"] = [hashlib.sha1(repr((tuple(map(_plain, r)), [tuple(map(_plain, t.values())) for t in steps.get(r[0], [])]))
                                  .encode()).hexdigest()[:16] for r in out[columns].itertuples(index=False)]
    records = out[list(full.INCIDENT_COLUMNS)].to_dict("records")
    out["folded"] = [pickle.dumps((r, steps.get(r["incident_id"], [])), protocol=pickle.HIGHEST_PROTOCOL) for r in records]
    return as_index(out)


def _pretriage(con, rows: pd.DataFrame) -> pd.DataFrame:
    """The stored incidents' rows before correlation and triage, for the ids in `rows`."""
    if rows.empty:
        return pd.DataFrame(columns=list(full.INCIDENT_COLUMNS))
    folded = query(con, "folded_rows", ids=rows[["incident_id"]].drop_duplicates())
    return pd.DataFrame([pickle.loads(bytes(b))[0] for b in folded["folded"]], columns=list(full.INCIDENT_COLUMNS))


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


REACH = {"d": "datetime64[ns]", "c": "datetime64[ns]", "e": "float64"}


def _reach(frame: pd.DataFrame) -> pd.DataFrame:
    """A group's reach (d, c, e: see _starts) with one dtype per column, whichever of them `frame` has."""
    return frame.reindex(columns=[*KEY, *REACH]).astype(REACH)


def _what_changed(con, lifecycle, whole: bool, old_horizon, horizon, old_checkpoints):
    """(marked partitions, their digests now, per refolded group how far back a change reaches
    (d, c, e: see _starts), evaluation marks now, what changed in the checkpoint lineage)."""
    marked = sql.frame(con, "incidents_incremental/marks")
    if whole:
        sql.run(con, "incidents_incremental/clear")
        marked = pd.concat([marked, sql.frame(con, "incidents_incremental/all_partitions")]).drop_duplicates()
    seen = changes.seen_now(con, marked)
    was = query(con, "seen_in", marked=marked) if not marked.empty else pd.DataFrame(columns=[*changes.SEEN, *changes.SEEN_VALUES])
    moved = changes.changed(seen, was, [*changes.SEEN, *changes.SEEN_VALUES])
    moved = moved.assign(d=moved["first_at"].where(moved["kind"] == "f"), c=moved["first_at"].where(moved["kind"] == "c"))
    near, evaluations = changes.near_evaluations(con, marked, horizon, old_horizon, lifecycle)
    lineage = changes.checkpoint_changes(con, old_checkpoints)
    reach = pd.concat([_reach(moved), _reach(near.rename(columns={"pos": "e"})),
                       _reach(lineage.groups.rename(columns={"since": "d"}))], ignore_index=True)
    reach = reach.groupby(KEY, as_index=False, sort=False).agg({"d": "min", "c": "min", "e": "min"})
    return marked, seen, reach, evaluations, lineage


def _fold(con, lifecycle, versions, triage_window_seconds) -> dict:
    config = config_digest(lifecycle)
    meta = con.execute("SELECT config, horizon, checkpoints_digest FROM fold_meta").fetchall()
    whole = not meta or meta[0][0] != config
    horizon = sql.frame(con, "incidents_incremental/horizon")["horizon"].iloc[0]
    marked, seen, dirty, evaluations_now, lineage = _what_changed(con, lifecycle, whole, None if whole else meta[0][1],
                                                                     horizon, None if whole else meta[0][2])
    versions_now = changes.versions_digests(versions)
    was = con.execute("SELECT endpoint, model_version, digest FROM fold_versions").df()
    versions_changed = changes.changed(versions_now, was, ["endpoint", "model_version", "digest"])
    # 1. the groups that changed, folded again from the first episode a change can reach
    stored, starts = _starts(con, dirty)
    findings, clearings, incidents, transitions = _fold_groups(con, starts, seen, lifecycle, horizon)
    after = _index(incidents, transitions, findings, clearings, starts)
    first = dict(zip(map(tuple, starts[KEY].to_numpy()), starts["k"]))
    before = stored[[p >= first[k] for k, p in zip(map(tuple, stored[KEY].to_numpy()), stored["pos"])]] if not stored.empty else stored
    # only the incidents whose rows, transitions or places the refold changed (or that it added or dropped) go on
    ident = ["incident_id", "digest", "pos"]
    same = set(map(tuple, before[ident].to_numpy())) & set(map(tuple, after[ident].to_numpy()))
    old, new = (frame.loc[np.array([tuple(k) not in same for k in frame[ident].to_numpy()], dtype=bool)].reset_index(drop=True)
                for frame in (before, after))
    replaced = set(old["incident_id"])
    incidents = incidents[incidents["incident_id"].isin(set(new["incident_id"]))]
    # 2. correlation and triage where they can change
    reach, correlation_ids = fold_reach.correlation_reach(con, new, old, lifecycle.gap)
    new["correlation_id"] = new["incident_id"].map(correlation_ids)
    retriage = fold_reach.triage_reach(con, pd.concat([old, new], ignore_index=True), versions_changed, replaced)
    fresh = incidents.assign(correlation_id=incidents["incident_id"].map(correlation_ids))
    family = fresh["family"].isin(triage.FAMILIES) if not fresh.empty else pd.Series(dtype=bool)
    pre = _pretriage(con, retriage)
    pre["correlation_id"] = pre["incident_id"].map(correlation_ids).fillna(
        pre["incident_id"].map(dict(zip(retriage["incident_id"], retriage["correlation_id"]))))
    targets = stack([fresh[family], pre], list(full.INCIDENT_COLUMNS))
    context = fold_reach.triage_context(con, as_index(targets), new, replaced, versions,
                                        pd.Timedelta(seconds=triage_window_seconds))
    triaged = triage.apply(targets, versions, triage_window_seconds, context=context) if not targets.empty else targets
    recorrelated = reach[~reach["incident_id"].isin(set(retriage["incident_id"]))]
    kept = con.execute("SELECT * FROM incidents WHERE incident_id IN (SELECT unnest($ids))",
                       {"ids": list(recorrelated["incident_id"])}).df() if not recorrelated.empty else pd.DataFrame()
    if not kept.empty:
        kept["correlation_id"] = kept["incident_id"].map(correlation_ids)
        for column in ("hosts", "gpus", "ranks", "members"):
            kept[column] = [v.tolist() if isinstance(v, np.ndarray) else v for v in kept[column]]
    new_incidents = stack([triaged, fresh[~family], kept], list(full.INCIDENT_COLUMNS))
    # 3. store what changed
    frames = {
        "gone_ids": pd.DataFrame({"incident_id": sorted(replaced | set(new_incidents["incident_id"]))}, dtype=object),
        "new_incidents": new_incidents.reindex(columns=list(full.INCIDENT_COLUMNS)),
        "gone_transitions": pd.DataFrame({"incident_id": sorted(replaced)}, dtype=object),
        "new_transitions": transitions[transitions["incident_id"].isin(set(new["incident_id"]))].reindex(
            columns=list(full.TRANSITION_COLUMNS)),
        "index_gone": pd.DataFrame({"incident_id": sorted(replaced)}, dtype=object),
        "new_index": new.reindex(columns=INDEX_COLUMNS),
        "recorrelated": pd.DataFrame({"incident_id": reach["incident_id"].astype(object),
                                      "correlation_id": reach["incident_id"].map(correlation_ids).astype(object)}),
        "marked": marked, "new_seen": seen, "new_evaluations": evaluations_now,
        "new_versions": versions_now,
        "new_meta": pd.DataFrame({"config": [config], "horizon": [horizon], "checkpoints_digest": [lineage.digest]}),
    }
    if whole:
        sql.run(con, "incidents/replace")
    for name, frame in frames.items():
        con.register(name, frame)
    try:
        sql.run(con, "incidents_incremental/store")
        sql.run(con, "incidents/insert")
    finally:
        for name in frames:
            con.unregister(name)
    return {"whole": whole, "partitions_marked": len(marked), "groups_folded": len(dirty), "findings_folded": len(findings),
            "groups": [tuple(g) for g in dirty[KEY].itertuples(index=False)],
            "episodes_kept": int(starts["k"].sum()) if not starts.empty else 0,
            "incidents_folded": len(after), "incidents_changed": len(new) + len(replaced - set(new["incident_id"])),
            "correlated": len(new) + len(reach), "triaged": len(targets),
            "incidents_written": len(new_incidents), "versions_changed": len(versions_changed),
            "checkpoint_runs_compared": lineage.runs_compared}


def clear_state(con: duckdb.DuckDBPyConnection) -> None:
    """Forget what the fold saw (the next fold is a full refold)."""
    sql.run(con, "incidents_incremental/clear")
