"""The incremental fold == the full refold: faults.yaml's findings arrive partition by partition
in three shuffled orders; after every partition the incremental fold's incidents and transitions
equal `incidents.fold` over the same findings, and it folds only the groups that changed."""

import random
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from assets import incident_fold as full
from assets.incidents_incremental import clear_state, fast_correlate, fold_incrementally, store
from orchestration import sql
from orchestration.warehouse import WarehouseResource
from tests.helpers import FAULTS_FOLD_HOURS

LIFECYCLE = full.Lifecycle()


@pytest.fixture(scope="module")
def detected(faults_embedded) -> Path:
    """faults.yaml (7 hosts x 8 GPUs) through the real detect job, hour by hour, its first FAULTS_FOLD_HOURS
    (tests/helpers.py; the detect job over all ten takes minutes on a busy machine, the fold's cases are all in
    these): its warehouse, built once per session (tests/conftest.py: faults_embedded, shared with the
    distributed stack's embedded run)."""
    with duckdb.connect(str(faults_embedded["warehouse"]), read_only=True) as con:
        hours = con.execute("SELECT count(DISTINCT partition_start) FROM evaluations").fetchone()[0]
    assert hours == FAULTS_FOLD_HOURS
    return faults_embedded["warehouse"]


def full_fold(con) -> tuple[pd.DataFrame, pd.DataFrame]:
    findings = sql.frame(con, "incidents/findings")
    evaluations = sql.frame(con, "incidents/evaluations")
    versions = sql.frame(con, "incidents/serving_versions")
    return full.fold(findings, evaluations, LIFECYCLE, versions=versions, clearings=sql.frame(con, "incidents/clearings"))


def canonical(frame: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    out = frame.sort_values(key).reset_index(drop=True)
    return out.map(lambda v: list(v) if isinstance(v, np.ndarray) else v)


def assert_same(a, b) -> None:
    pd.testing.assert_frame_equal(canonical(a[0], ["incident_id"]), canonical(b[0], ["incident_id"]), check_dtype=False)
    pd.testing.assert_frame_equal(canonical(a[1], ["incident_id", "seq"]), canonical(b[1], ["incident_id", "seq"]),
                                  check_dtype=False)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_incremental_fold_equals_full_refold_in_shuffled_orders(detected, tmp_path, seed):
    work = tmp_path / "w.duckdb"
    shutil.copy(detected, work)
    warehouse = WarehouseResource(path=str(work))
    with warehouse.connect() as con:
        con.execute("CREATE TEMP TABLE all_findings AS SELECT * FROM findings")
        con.execute("CREATE TEMP TABLE all_evaluations AS SELECT * FROM evaluations")
        con.execute("CREATE TEMP TABLE all_clearings AS SELECT * FROM clearings")
        hours = [h for (h,) in con.execute("SELECT DISTINCT partition_start FROM all_evaluations ORDER BY 1").fetchall()]
        con.execute("DELETE FROM findings; DELETE FROM evaluations; DELETE FROM clearings; DELETE FROM incidents; "
                    "DELETE FROM incident_transitions")
        clear_state(con)
        random.Random(seed).shuffle(hours)
        total = con.execute("SELECT count(*) FROM all_findings").fetchone()[0]
        assert total > 50
        for i, hour in enumerate(hours):
            con.execute("INSERT INTO findings SELECT * FROM all_findings WHERE partition_start = $h", {"h": hour})
            con.execute("INSERT INTO evaluations SELECT * FROM all_evaluations WHERE partition_start = $h", {"h": hour})
            con.execute("INSERT INTO clearings SELECT * FROM all_clearings WHERE partition_start = $h", {"h": hour})
            versions = sql.frame(con, "incidents/serving_versions")
            incidents, transitions, counts = fold_incrementally(con, LIFECYCLE, versions, full.triage.WINDOW_SECONDS)
            store(con, incidents, transitions, counts.pop("_state"))
            assert_same((incidents, transitions), full_fold(con))
            # and as stored: the tables hold what a full refold stores
            if i == len(hours) - 1:
                assert counts["findings"] == total and len(incidents) > 10
        # nothing new: nothing folded, same result
        incidents, transitions, counts = fold_incrementally(con, LIFECYCLE, sql.frame(con, "incidents/serving_versions"),
                                                            full.triage.WINDOW_SECONDS)
        assert counts["groups_folded"] == 0 and counts["findings_folded"] == 0
        assert_same((incidents, transitions), full_fold(con))


def test_fast_correlate_gives_correlate_ids_on_random_incidents():
    rng = random.Random(5)
    t0 = pd.Timestamp("2026-11-30")
    rows = []
    for i in range(300):
        onset = t0 + pd.Timedelta(minutes=rng.randrange(0, 600))
        gpus = rng.sample([f"h{h}:{g}" for h in range(3) for g in range(4)], k=rng.choice([0, 0, 1, 2]))
        hosts = sorted({g.split(":")[0] for g in gpus}) or [f"h{rng.randrange(3)}"]
        rows.append({"incident_id": f"inc-{i:04d}", "onset": onset, "last_seen": onset + pd.Timedelta(minutes=rng.randrange(0, 40)),
                     "run_id": rng.choice([None, "r1", "r2", "r3"]), "gpus": gpus, "hosts": hosts})
    frame = pd.DataFrame(rows)
    gap = pd.Timedelta(minutes=10)
    assert fast_correlate(frame, gap) == full.correlate(frame, gap)
