"""What the incremental fold reads of history, held to the full refold where the bound decides
(tests/test_fold_incremental.py's oracle, `assert_same`, after every fold): a refolded group reads its
episodes from the one a change reaches on and, before that one, only each member's latest episode
(the one fold_group can reopen); triage reads, of the version a promotion replaced, only the incident
it names. Each case builds a history in which a wrong bound gives other rows than the full refold:
the group's latest earlier episode rather than each member's, no step back to an episode that opened
while the one before was still detected, the replaced version's incidents of a recent window only,
or its first incident rather than its last."""

import shutil
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from assets.incidents_incremental import clear_state
from orchestration.storage.warehouse import WarehouseResource
from tests.fold_oracle import TABLES, assert_same, fold, write

STRAGGLER = "signal = 'straggler_rank' AND entity_id = 'dist-e/rank-3'"   # faults.yaml: one on day 0, 01:00-01:40
TIMES = ("partition_start", "onset", "detected_at", "last_seen")


@pytest.fixture(scope="module")
def detected(faults_embedded) -> Path:
    """faults.yaml's first hours through the real detect job (tests/conftest.py: faults_embedded)."""
    return faults_embedded["warehouse"]


@contextmanager
def history(detected: Path, tmp_path: Path, stored: list[tuple], later: list[tuple]):
    """A copy of the warehouse with findings added (`stored`, folded in full first) and `all_<table>`
    holding what later partitions write (`later`): each (where, days later, {column: SQL}) copies the
    warehouse's own findings that `where` picks, every time moved, columns replaced. Yields the connection."""
    work = tmp_path / "w.duckdb"
    shutil.copy(detected, work)
    with WarehouseResource(path=str(work)).connect() as con:
        con.execute("CREATE TEMP TABLE source AS SELECT * FROM findings")
        for where, days, columns in stored:
            add(con, "findings", where, days, columns)
        for table in TABLES:
            con.execute(f"CREATE TEMP TABLE all_{table} AS SELECT * FROM {table}")
        for where, days, columns in later:
            add(con, "all_findings", where, days, columns)
        con.execute("DELETE FROM fold_marks")
        clear_state(con)
        assert fold(con)["whole"]
        assert_same(con)
        yield con


def add(con, table: str, where: str, days: float, columns: dict[str, str]) -> None:
    moved = {c: f"{c} + to_microseconds({int(days * 86_400_000_000)})" for c in TIMES}
    replaced = ", ".join(f"{sql} AS {c}" for c, sql in {**moved, **columns}.items())
    con.execute(f"INSERT INTO {table} SELECT * REPLACE ({replaced}) FROM source WHERE {where}")


def tick(con, where: str) -> dict:
    """Write the later partition of the findings `where` picks, fold, and hold it to the full refold."""
    hour = con.execute(f"SELECT max(partition_start) FROM all_findings WHERE {where}").fetchone()[0]
    write(con, hour)
    counts = fold(con)
    assert_same(con)
    assert not counts["whole"]
    return counts


def test_a_refold_reopens_a_members_episode_from_before_the_groups_latest(detected, tmp_path):
    """straggler_rank on run dist-e: rank 3 on day 0, rank 7 on days 1 and 2, then rank 3 on day 3. The
    refold starts at day 2's episode; rank 3's day-3 episode reopens day 0's (episode 2), which is
    neither the group's latest earlier episode nor refolded."""
    rank7 = {"entity_id": "'dist-e/rank-7'"}
    with history(detected, tmp_path, [(STRAGGLER, 1, rank7), (STRAGGLER, 2, rank7)], [(STRAGGLER, 3, {})]) as con:
        counts = tick(con, STRAGGLER)
        assert counts["episodes_kept"] >= 2
        episodes = con.execute("SELECT onset, episode, incident_id, previous_incident_id FROM incidents "
                               "WHERE signal = 'straggler_rank' AND entity_id = 'dist-e' ORDER BY onset").fetchall()
        assert [e for _, e, *_ in episodes] == [1, 1, 2, 2]
        assert episodes[3][3] == episodes[0][2], "day 3 reopens rank 3's episode of day 0"


def test_a_refold_steps_back_to_an_episode_that_opened_with_the_one_before(detected, tmp_path):
    """Day 1 holds two episodes of rank 3 detected at the same minute (the first found late). A finding
    on day 2 reaches the second; the refold must start at the first, since the findings it reads from
    that minute on are both episodes'."""
    late = {"detected_at": "detected_at + INTERVAL 2 HOUR + INTERVAL 3 MINUTE", "partition_start": "partition_start + INTERVAL 2 HOUR"}
    second = {**late, "onset": "onset + INTERVAL 90 MINUTE", "last_seen": "last_seen + INTERVAL 80 MINUTE"}
    with history(detected, tmp_path, [(STRAGGLER, 1, late), (STRAGGLER, 1, second)], [(STRAGGLER, 2, {})]) as con:
        assert ("straggler_rank", "run", "dist-e") in tick(con, STRAGGLER)["groups"]
        assert con.execute("SELECT count(*) FROM incidents WHERE signal = 'straggler_rank' AND entity_id = 'dist-e'").fetchone()[0] == 4


def test_a_promotion_is_triaged_against_the_replaced_versions_incidents_long_before(detected, tmp_path):
    """chat-faults serves chat-faults-v1 (latency incidents on days 0 and 1), is promoted to v2 on day 30
    and to v3 on day 60. v2's latency regression is undetermined and names v1's last incident, a month
    back; v3's error rate is a regression after the promotion (v2 had none; v1's is another version's)."""
    latency = "signal = 'serving_latency_regression' AND endpoint = 'chat-faults'"
    errors = "signal = 'serving_error_rate' AND endpoint = 'chat-faults'"
    first = f"partition_start = (SELECT min(partition_start) FROM source WHERE {latency})"
    v2, v3 = f"{latency} AND {first}", errors
    later = [(v2, 30, {"model_version": "'chat-faults-v2'"}), (v3, 60, {"model_version": "'chat-faults-v3'"})]
    with history(detected, tmp_path, [(latency, 1, {})], later) as con:
        for version in ("chat-faults-v2", "chat-faults-v3"):
            onset = con.execute("SELECT min(onset) FROM all_findings WHERE model_version = $v", {"v": version}).fetchone()[0]
            con.execute("INSERT INTO lineage_events SELECT * REPLACE ($at AS time, $v AS model_version, 'chat-faults' AS endpoint) "
                        "FROM lineage_events WHERE event = 'model_version_promoted' LIMIT 1",
                        {"at": onset - pd.Timedelta(minutes=10), "v": version})
        assert fold(con)["versions_changed"] > 0
        assert_same(con)
        for version in ("chat-faults-v2", "chat-faults-v3"):
            assert tick(con, f"model_version = '{version}'")["triaged"] >= 1
        triaged = con.execute("SELECT model_version, triage_class, playbook FROM incidents WHERE endpoint = 'chat-faults' "
                              "AND model_version <> 'chat-faults-v1'").fetchall()
        assert {(v, c) for v, c, _ in triaged} == {("chat-faults-v2", "undetermined"), ("chat-faults-v3", "regression_after_promotion")}
        last = con.execute("SELECT incident_id FROM incidents WHERE model_version = 'chat-faults-v1' AND " + latency +
                           " ORDER BY onset DESC LIMIT 1").fetchone()[0]
        assert any(f"incident {last}: the problem predates" in playbook for *_, playbook in triaged)
