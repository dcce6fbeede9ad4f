"""The incremental fold's oracle, for the tests that hold it to the full refold (tests/test_fold_incremental.py,
tests/test_fold_history_reach.py): partitions written as the checks write them, the incremental fold, and the
full refold (`incidents.fold`) over the same rows, stored the same way and compared."""

import numpy as np
import pandas as pd

from assets import incident_fold as full
from assets.incidents_incremental import fold_incrementally
from orchestration.storage import sql

LIFECYCLE = full.Lifecycle()
TABLES = ("findings", "evaluations", "clearings")


def canonical(frame: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    out = frame.sort_values(key).reset_index(drop=True)
    return out.map(lambda v: list(v) if isinstance(v, np.ndarray) else v)


def stored(con) -> tuple[pd.DataFrame, pd.DataFrame]:
    return (canonical(con.execute("SELECT * FROM incidents").df(), ["incident_id"]),
            canonical(con.execute("SELECT * FROM incident_transitions").df(), ["incident_id", "seq"]))


def full_fold_stored(con) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The full refold over what the warehouse holds, stored as the fold stores it (then rolled back)."""
    incidents, transitions = full.fold(sql.frame(con, "incidents/findings"), sql.frame(con, "incidents/evaluations"), LIFECYCLE,
                                       versions=sql.frame(con, "incidents/serving_versions"),
                                       clearings=sql.frame(con, "incidents/clearings"))
    con.register("new_incidents", incidents.reindex(columns=list(full.INCIDENT_COLUMNS)))
    con.register("new_transitions", transitions.reindex(columns=list(full.TRANSITION_COLUMNS)))
    con.execute("BEGIN TRANSACTION")
    try:
        sql.run(con, "incidents/replace")
        sql.run(con, "incidents/insert")
        return stored(con)
    finally:
        con.execute("ROLLBACK")
        con.unregister("new_incidents")
        con.unregister("new_transitions")


def assert_same(con) -> None:
    got, want = stored(con), full_fold_stored(con)
    pd.testing.assert_frame_equal(got[0], want[0], check_dtype=False)
    pd.testing.assert_frame_equal(got[1], want[1], check_dtype=False)


def write(con, hour, rows: bool = True) -> None:
    """As the checks store a partition (sql/detect/store_findings.sql): each signal's rows replaced and
    marked for the fold in one go; `rows` False writes the partition empty (its findings retracted)."""
    for table in TABLES:
        con.execute(f"DELETE FROM {table} WHERE partition_start = $h", {"h": hour})
        if rows:
            con.execute(f"INSERT INTO {table} SELECT * FROM all_{table} WHERE partition_start = $h", {"h": hour})
    con.execute("INSERT INTO fold_marks SELECT DISTINCT signal, partition_start FROM ("
                + " UNION ALL ".join(f"SELECT signal, partition_start FROM all_{t}" for t in TABLES)
                + ") WHERE partition_start = $h", {"h": hour})


def fold(con) -> dict:
    return fold_incrementally(con, LIFECYCLE, sql.frame(con, "incidents/serving_versions"), full.triage.WINDOW_SECONDS)
