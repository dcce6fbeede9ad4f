"""What changed since the last incident fold, read from the marked partitions only.

The watermark of the incremental fold (assets/incidents_incremental.py). A check appends each
(signal, partition) it writes to `fold_marks` (sql/detect/store_findings.sql, in the same
transaction as its rows; retention too, before it deletes). For the marked partitions only, this
module digests per (signal, partition, incident group) the findings and the clearings, with their
first and last times, and compares them and the evaluation marks with what the fold saw last
(`fold_seen`, `fold_evaluations`), so a partition written again with the same rows changes
nothing. It also finds the incidents whose clean window a changed evaluation mark can reach, the
findings whose checkpoint lineage changed, and the serving versions that changed. Lineage and audits
carry no marks (anything may write them), so one digest of both tells whether any run's lineage
can have changed, and only then are the runs compared whose events or audit statuses differ.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from assets import incident_fold as full
from assets import triage
from assets.fold_reach import KEY, query
from checks.frames import stack
from orchestration.storage import sql

SEEN = ["signal", "partition_start", "entity_type", "entity_id", "kind"]
SEEN_VALUES = ["digest", "n", "first_at", "last_at"]
MARGIN = pd.Timedelta(minutes=1)   # beyond the exact reach of a change: a little more refolded, never less


def bounds(parts: pd.DataFrame) -> dict:
    return {"lo": parts["partition_start"].min(), "hi": parts["partition_start"].max()}


def _clearing_digests(clearings: pd.DataFrame) -> pd.DataFrame:
    if clearings.empty:
        return pd.DataFrame(columns=[*SEEN, *SEEN_VALUES])
    keys = [full.clearing_entity(t, str(e)) for t, e in zip(clearings["entity_type"], clearings["entity_id"])]
    rows = pd.util.hash_pandas_object(clearings.astype(str), index=False).to_numpy(dtype=np.uint64)
    frame = pd.DataFrame({"signal": clearings["signal"].to_numpy(), "partition_start": clearings["partition_start"].to_numpy(),
                          "entity_type": [k[0] for k in keys], "entity_id": [k[1] for k in keys], "kind": "c", "h": rows,
                          "at": clearings["cleared_at"].to_numpy()})
    grouped = frame.groupby(SEEN, sort=False)
    out = grouped["h"].agg([lambda v: np.bitwise_xor.reduce(v.to_numpy()), "size"]).reset_index()
    out = out.set_axis([*SEEN, "digest", "n"], axis=1)
    return out.assign(first_at=grouped["at"].min().to_numpy(), last_at=grouped["at"].max().to_numpy())


def seen_now(con, marked: pd.DataFrame) -> pd.DataFrame:
    """Per (signal, partition, group, kind) of the marked partitions: a digest and count of its rows."""
    if marked.empty:
        return pd.DataFrame(columns=[*SEEN, *SEEN_VALUES])
    found = query(con, "partition_digests", bounds(marked), marked=marked)
    cleared = _clearing_digests(query(con, "clearings_in", bounds(marked), parts=marked))
    seen = stack([found, cleared], [*SEEN, *SEEN_VALUES])
    seen["digest"] = seen["digest"].astype(np.uint64)
    return seen


def _value(v):
    if v is None or v is pd.NaT or (isinstance(v, float) and np.isnan(v)):
        return None
    if isinstance(v, (pd.Timestamp, np.datetime64)) or hasattr(v, "isoformat"):
        return pd.Timestamp(v).value
    return int(v) if isinstance(v, np.integer) else v


def changed(now: pd.DataFrame, was: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The rows of either frame that the other does not hold (compared on `columns`)."""
    def keys(frame):
        return [tuple(_value(v) for v in row) for row in frame[columns].itertuples(index=False)]
    a, b = keys(now), keys(was)
    sa, sb = set(a), set(b)
    parts = [now.loc[np.array([k not in sb for k in a], dtype=bool), columns],
             was.loc[np.array([k not in sa for k in b], dtype=bool), columns]]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def near_evaluations(con, marked, horizon, old_horizon, lifecycle) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per group, the first incident (`pos`) whose clean window a changed evaluation mark can reach;
    the marked partitions' evaluation marks now)."""
    now = query(con, "evaluations_in", bounds(marked), marked=marked) if not marked.empty else pd.DataFrame()
    was = query(con, "seen_evaluations_in", marked=marked) if not marked.empty else pd.DataFrame()
    cols = ["signal", "partition_start", "evaluated_until"]
    now, was = now.reindex(columns=cols), was.reindex(columns=cols)
    moved = changed(now, was, cols)   # a mark new, gone or moved: its old and new stretch
    if not (pd.isna(horizon) and pd.isna(old_horizon)) and horizon != old_horizon:
        lo, hi = sorted([pd.Timestamp("1900-01-01") if pd.isna(h) else pd.Timestamp(h) for h in (horizon, old_horizon)])
        moved = pd.concat([moved, sql.frame(con, "incidents_incremental/horizon_marks", {"lo": lo, "hi": hi})], ignore_index=True)
    if moved.empty:
        return pd.DataFrame(columns=[*KEY, "pos"]), now
    slack = pd.Timedelta(seconds=lifecycle.window_seconds)
    start = pd.to_datetime(moved["partition_start"])
    end = pd.concat([start + full.PARTITION, pd.to_datetime(moved["evaluated_until"])], axis=1).max(axis=1)
    regions = pd.DataFrame({"signal": moved["signal"], "lo": start - slack - lifecycle.gap - MARGIN, "hi": end + slack + MARGIN})
    return query(con, "near_regions", regions=regions), now


def _with_checkpoints(name: str) -> str:
    return sql.sql_text(f"incidents_incremental/{name}").replace("/*@checkpoints*/", sql.fragment("incidents_incremental/checkpoints"))


class LineageChange(NamedTuple):
    """What changed in the checkpoint lineage since the last fold."""
    groups: pd.DataFrame   # per group, the first detection of a finding whose checkpoint may be another now (`since`)
    digest: int            # the lineage and audits digest now (sql/incidents_incremental/checkpoint_digest.sql)
    runs_compared: int     # the runs compared row by row (0 when the digest is the last fold's)


def checkpoint_changes(con, digest_was) -> LineageChange:
    """The groups with a finding whose checkpoint lineage changed (a checkpoint of its run saved, gone
    or audited otherwise at or before its onset), and the lineage digest now.

    The digest of the lineage and audits equal to the last fold's (`digest_was`): nothing changed, and
    nothing per run is read. Otherwise only the runs whose events or audit statuses differ from what
    the fold saw are compared row by row, and only theirs are remembered again (fold_checkpoints)."""
    digest = int(sql.frame(con, "incidents_incremental/checkpoint_digest")["digest"].iloc[0])
    none = pd.DataFrame(columns=[*KEY, "since"])
    if digest_was is not None and not pd.isna(digest_was) and int(digest_was) == digest:
        return LineageChange(none, digest, 0)
    runs = sql.frame(con, "incidents_incremental/checkpoint_runs")
    if runs.empty:
        return LineageChange(none, digest, 0)
    con.register("changed_runs", runs)
    try:
        moved = sql.execute_text(con, _with_checkpoints("checkpoints_changed")).df()
        sql.execute_text(con, _with_checkpoints("checkpoints_store"))
    finally:
        con.unregister("changed_runs")
    if moved.empty:
        return LineageChange(none, digest, len(runs))
    since = moved.assign(since=pd.to_datetime(moved["time"])).groupby("run_id", as_index=False)["since"].min()
    return LineageChange(query(con, "checkpoint_groups", changed_runs=since), digest, len(runs))


def versions_digests(versions: pd.DataFrame | None) -> pd.DataFrame:
    versions = pd.DataFrame(columns=list(triage.VERSION_COLUMNS)) if versions is None else versions
    return pd.DataFrame({"endpoint": versions["endpoint"].astype(object), "model_version": versions["model_version"].astype(object),
                         "digest": pd.util.hash_pandas_object(versions.astype(str), index=False).to_numpy(dtype=np.uint64)})
