"""The incremental fold == the full refold: faults.yaml's findings arrive partition by partition
in three shuffled orders; after every partition the stored incidents and transitions equal
`incidents.fold` over the same findings, stored the same way, and the fold refolded the groups the
partition touched and no others. A partition written again with the same rows refolds nothing;
the oldest partition retracted and backfilled refolds only what it reaches. Over three days of
history a refold starts after the groups' earlier episodes; a checkpoint audit or save and a
serving promotion recorded late refold or re-triage what they reach, and a lineage change compares only
the runs it touches; retention drops what it deletes."""

import random
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from assets import incident_fold as full
from assets.correlation import fast_correlate
from assets.fold_changes import MARGIN
from assets.incidents_incremental import clear_state
from orchestration.maintenance import apply_retention
from orchestration.storage.warehouse import WarehouseResource
from tests.fold_oracle import LIFECYCLE, TABLES, assert_same, fold, write
from tests.helpers import FAULTS_FOLD_HOURS


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


def groups_of(con, hour, source: str = "all_") -> set:
    """The incident groups with findings or clearings in the partition."""
    found = con.execute(f"""SELECT DISTINCT signal,
        CASE WHEN entity_type = 'rank' AND coalesce(run_id, '') <> '' THEN 'run' ELSE entity_type END,
        CASE WHEN entity_type = 'rank' AND coalesce(run_id, '') <> '' THEN run_id ELSE entity_id END
        FROM {source}findings WHERE partition_start = $h""", {"h": hour}).fetchall()
    cleared = con.execute(f"SELECT signal, entity_type, entity_id FROM {source}clearings WHERE partition_start = $h",
                          {"h": hour}).fetchall()
    return set(found) | {(s, *full.clearing_entity(t, e)) for s, t, e in cleared}


def reachable(con, hour, horizon_was) -> set:
    """The most a write of `hour` may refold: its groups (before and after), and the groups with a stored
    incident whose clean window reaches an evaluation mark that changed (the hour's, or an empty mark
    whose hour the horizon passed), read from the incidents table before the fold."""
    slack = pd.Timedelta(seconds=LIFECYCLE.window_seconds)
    horizon = con.execute("SELECT max(evaluated_until) FROM evaluations").fetchone()[0]
    marks = [(s, hour, None) for (s,) in con.execute("SELECT DISTINCT signal FROM all_evaluations WHERE partition_start = $h",
                                                     {"h": hour}).fetchall()]
    if horizon != horizon_was:
        lo, hi = sorted(pd.Timestamp(h) if h is not None else pd.Timestamp("1900-01-01") for h in (horizon, horizon_was))
        marks += con.execute("SELECT signal, partition_start, NULL FROM evaluations WHERE evaluated_until IS NULL "
                             "AND partition_start + INTERVAL 1 HOUR > $lo AND partition_start + INTERVAL 1 HOUR <= $hi",
                             {"lo": lo, "hi": hi}).fetchall()
    near = set()
    for signal, start, _ in marks:
        until = con.execute("SELECT max(evaluated_until) FROM all_evaluations WHERE signal = $s AND partition_start = $p",
                            {"s": signal, "p": start}).fetchone()[0]
        end = max(pd.Timestamp(start) + full.PARTITION, pd.Timestamp(until) if until is not None else pd.Timestamp(start))
        near |= set(con.execute("SELECT signal, entity_type, entity_id FROM incidents WHERE signal = $s AND last_seen >= $lo "
                                "AND last_seen <= $hi", {"s": signal, "lo": pd.Timestamp(start) - slack - LIFECYCLE.gap - MARGIN,
                                                          "hi": end + slack + MARGIN}).fetchall())
    return groups_of(con, hour) | groups_of(con, hour, "") | near


def groups(con) -> int:
    return con.execute("SELECT count(*) FROM (SELECT DISTINCT signal, entity_type, entity_id FROM fold_incidents)").fetchone()[0]


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_incremental_fold_equals_full_refold_in_shuffled_orders(detected, tmp_path, seed):
    work = tmp_path / "w.duckdb"
    shutil.copy(detected, work)
    warehouse = WarehouseResource(path=str(work))
    with warehouse.connect() as con:
        for table in TABLES:
            con.execute(f"CREATE TEMP TABLE all_{table} AS SELECT * FROM {table}")
        hours = [h for (h,) in con.execute("SELECT DISTINCT partition_start FROM all_evaluations ORDER BY 1").fetchall()]
        con.execute("DELETE FROM findings; DELETE FROM evaluations; DELETE FROM clearings; DELETE FROM incidents; "
                    "DELETE FROM incident_transitions; DELETE FROM fold_marks")
        clear_state(con)
        random.Random(seed).shuffle(hours)
        total = con.execute("SELECT count(*) FROM all_findings").fetchone()[0]
        assert total > 50
        partial = 0
        for i, hour in enumerate(hours):
            horizon_was = con.execute("SELECT max(evaluated_until) FROM evaluations").fetchone()[0]
            write(con, hour)
            most = reachable(con, hour, horizon_was)
            counts = fold(con)
            assert counts["whole"] == (i == 0) and counts["partitions_marked"] >= 1
            assert_same(con)
            folded = set(counts["groups"])
            assert groups_of(con, hour) <= folded, "every group the partition touched is refolded"
            assert i == 0 or folded <= most, f"refolded beyond the partition's reach: {sorted(folded - most)}"
            partial += 0 < len(folded) < groups(con)
        assert con.execute("SELECT count(*) FROM findings").fetchone()[0] == total
        assert con.execute("SELECT count(*) FROM incidents").fetchone()[0] > 10
        assert partial >= len(hours) // 2, "most folds refold a part of the groups"
        # nothing new: nothing folded, the same tables
        counts = fold(con)
        assert counts["groups_folded"] == 0 and counts["findings_folded"] == 0 and counts["incidents_written"] == 0
        assert_same(con)
        # a partition written again with the same rows (a re-run): marked, nothing refolded
        write(con, hours[len(hours) // 2])
        counts = fold(con)
        assert counts["partitions_marked"] > 0 and counts["groups_folded"] == 0 and counts["incidents_written"] == 0
        assert_same(con)
        # the oldest partition retracted, then backfilled: only its groups (and those its marks reach) refold
        oldest = min(hours)
        for rows in (False, True):
            horizon_was = con.execute("SELECT max(evaluated_until) FROM evaluations").fetchone()[0]
            most = reachable(con, oldest, horizon_was)
            write(con, oldest, rows)
            counts = fold(con)
            assert_same(con)
            assert groups_of(con, oldest, "all_") <= set(counts["groups"]) <= most
            assert not counts["whole"] and counts["groups_folded"] < groups(con)


def test_a_group_with_history_refolds_from_the_episode_a_change_reaches(detected, tmp_path):
    """Three days of history (the hours copied a day and two days later: hosts, GPUs, runs and endpoints
    gather an episode a day), then the next day's hours one by one, then the first day's first hour and
    a later one retracted and backfilled: equal to the full refold each time, and the refolds keep the groups' earlier episodes."""
    work = tmp_path / "w.duckdb"
    shutil.copy(detected, work)
    with WarehouseResource(path=str(work)).connect() as con:
        shifted = {"findings": ("partition_start", "onset", "detected_at", "last_seen"),
                   "clearings": ("partition_start", "last_seen", "cleared_at"), "evaluations": ("partition_start", "evaluated_until")}
        first = con.execute("SELECT min(partition_start) FROM evaluations").fetchone()[0]
        for table, columns in shifted.items():
            con.execute(f"CREATE TEMP TABLE day0_{table} AS SELECT * FROM {table}")
            con.execute(f"CREATE TEMP TABLE all_{table} AS SELECT * FROM {table} WHERE false")
            for day in range(4):
                moved = ", ".join(f"{c} + INTERVAL {day} DAY AS {c}" for c in columns)
                con.execute(f"INSERT INTO all_{table} SELECT * REPLACE ({moved}) FROM day0_{table}")
            con.execute(f"DELETE FROM {table}; INSERT INTO {table} SELECT * FROM all_{table} "
                        "WHERE partition_start < $first + INTERVAL 3 DAY", {"first": first})
        con.execute("DELETE FROM incidents; DELETE FROM incident_transitions; DELETE FROM fold_marks")
        clear_state(con)
        assert fold(con)["whole"]
        assert_same(con)
        hours = [h for (h,) in con.execute("SELECT DISTINCT partition_start FROM day0_evaluations ORDER BY 1").fetchall()]
        kept = 0
        for hour in [h + pd.Timedelta(days=3) for h in hours]:
            write(con, hour)
            counts = fold(con)
            assert_same(con)
            assert groups_of(con, hour) <= set(counts["groups"])
            kept += counts["episodes_kept"]
        assert kept > 0, "refolds start after the groups' earlier episodes"
        for hour in (hours[0], hours[2] + pd.Timedelta(days=1)):   # backfills far back and mid-history
            for rows in (False, True):
                write(con, hour, rows)
                counts = fold(con)
                assert_same(con)
                assert not counts["whole"] and counts["groups_folded"] < groups(con)


def test_lineage_and_serving_versions_refold_what_they_reach(detected, tmp_path):
    """A checkpoint audit that now fails (findings of its run after it take another checkpoint), a
    checkpoint saved late, and a promotion recorded late (the serving versions triage reads): each
    refolds or re-triages only what it reaches, and the tables equal the full refold's; so does
    retention deleting the groups whose findings are all old."""
    work = tmp_path / "w.duckdb"
    shutil.copy(detected, work)
    with WarehouseResource(path=str(work)).connect() as con:
        con.execute("DELETE FROM fold_marks")
        clear_state(con)
        fold(con)
        assert_same(con)
        assert fold(con)["groups_folded"] == 0
        con.execute("""UPDATE checkpoint_audits SET status = 'failed'
                       WHERE coalesce(recorded_path, path) = (SELECT min(coalesce(recorded_path, path)) FROM checkpoint_audits
                                                              WHERE status = 'ok')""")
        counts = fold(con)
        assert_same(con)
        assert 0 < counts["groups_folded"] < groups(con)
        con.execute("""INSERT INTO lineage_events SELECT * REPLACE (time - INTERVAL 7 MINUTE AS time, step + 1 AS step,
                           checkpoint_path || '-late' AS checkpoint_path)
                       FROM lineage_events WHERE event = 'checkpoint_saved'
                         AND run_id = (SELECT min(run_id) FROM findings WHERE run_id IS NOT NULL) LIMIT 1""")
        counts = fold(con)
        assert_same(con)
        assert counts["groups_folded"] < groups(con)
        con.execute("""INSERT INTO lineage_events SELECT * REPLACE (time - INTERVAL 150 MINUTE AS time)
                       FROM lineage_events WHERE event = 'model_version_promoted'""")
        counts = fold(con)
        assert_same(con)
        assert counts["versions_changed"] > 0 and counts["groups_folded"] == 0
        # retention (orchestration/maintenance.py) deletes the groups whose newest finding is old: it marks
        # their partitions, and the next fold drops their incidents
        first = con.execute("SELECT min(partition_start) FROM evaluations").fetchone()[0]
        cutoff = (pd.Timestamp(first) + pd.Timedelta(hours=2, minutes=30)).tz_localize("UTC")
        deleted = apply_retention(con, cutoff.to_pydatetime(), raw_days=1000, minutes_days=0)
        assert deleted.get("findings", 0) > 0
        counts = fold(con)
        assert_same(con)
        assert 0 < counts["groups_folded"] < groups(con) + counts["groups_folded"]


SAVED_NOW = """
    WITH audited AS (SELECT coalesce(recorded_path, path) AS checkpoint_path, arg_max(status, partition_start) AS status
                     FROM checkpoint_audits GROUP BY ALL)
    SELECT l.run_id, l.time, l.checkpoint_path, l.step, a.status FROM lineage_events l
    LEFT JOIN audited a ON a.checkpoint_path = l.checkpoint_path
    WHERE l.event = 'checkpoint_saved' AND l.run_id IS NOT NULL"""


def assert_lineage_remembered(con) -> None:
    """What the fold remembers of the checkpoint lineage is every run's saved checkpoints now."""
    def rows(query: str) -> list:
        return sorted(con.execute(query).fetchall(), key=repr)
    assert rows("SELECT * FROM fold_checkpoints") == rows(SAVED_NOW)


def test_checkpoint_lineage_compares_only_the_runs_a_change_touches(detected, tmp_path):
    """The lineage and audits as the last fold saw them: no run compared. An old checkpoint audited
    again and failed, that audit partition dropped, a checkpoint's saved event gone (the lineage
    re-ingested without it): each compares only the runs it touches, the fold remembers every run's
    lineage as it is, and the tables equal the full refold's."""
    work = tmp_path / "w.duckdb"
    shutil.copy(detected, work)
    with WarehouseResource(path=str(work)).connect() as con:
        con.execute("DELETE FROM fold_marks")
        clear_state(con)
        assert fold(con)["checkpoint_runs_compared"] > 1
        assert_lineage_remembered(con)
        counts = fold(con)
        assert counts["checkpoint_runs_compared"] == 0 and counts["groups_folded"] == 0
        runs = con.execute("SELECT count(DISTINCT run_id) FROM lineage_events WHERE event = 'checkpoint_saved'").fetchone()[0]
        audited_run = """(SELECT min(l.run_id) FROM lineage_events l JOIN checkpoint_audits a
                          ON l.checkpoint_path = coalesce(a.recorded_path, a.path)
                          WHERE l.event = 'checkpoint_saved' AND a.status = 'ok'
                            AND l.run_id IN (SELECT run_id FROM findings))"""
        changes = [   # re-audited a month later: the run's first passed checkpoint is damaged now
            f"""INSERT INTO checkpoint_audits SELECT * REPLACE (partition_start + INTERVAL 30 DAY AS partition_start,
                                                                'failed' AS status)
                FROM checkpoint_audits WHERE status = 'ok' AND coalesce(recorded_path, path) = (
                    SELECT min(l.checkpoint_path) FROM lineage_events l JOIN checkpoint_audits a
                    ON l.checkpoint_path = coalesce(a.recorded_path, a.path)
                    WHERE l.event = 'checkpoint_saved' AND a.status = 'ok' AND l.run_id = {audited_run})
                ORDER BY partition_start DESC LIMIT 1""",
            # the re-audit's partition dropped: the earlier status is the latest again
            "DELETE FROM checkpoint_audits WHERE partition_start = (SELECT max(partition_start) FROM checkpoint_audits)",
            # a checkpoint file deleted, the lineage re-ingested without its saved event
            """DELETE FROM lineage_events WHERE event = 'checkpoint_saved' AND (run_id, time) = (
                   SELECT (run_id, min(time)) FROM lineage_events WHERE event = 'checkpoint_saved'
                   AND run_id = (SELECT min(run_id) FROM findings WHERE run_id IS NOT NULL) GROUP BY run_id)""",
        ]
        refolded = []
        for change in changes:
            assert con.execute(change).fetchone()[0] >= 1
            counts = fold(con)
            assert_same(con)
            assert_lineage_remembered(con)
            assert 1 <= counts["checkpoint_runs_compared"] < runs, (change, counts)
            assert counts["groups_folded"] < groups(con)
            refolded.append(counts["groups_folded"])
        assert all(refolded), f"each change refolds the findings it reaches: {refolded}"
        assert fold(con)["checkpoint_runs_compared"] == 0


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
