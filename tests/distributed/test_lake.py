"""The DuckLake warehouse backend (issue 21) against a real PostgreSQL on loopback.

- The migrations and analyst views run on the lake, adapted in one place (keys dropped, macros per
  connection): the lake's tables have the file's columns and types, every view binds.
- A commit conflict is retried in place and counted; inside a step it asks Dagster for a retry.
- N writer processes replacing partitions at once: every partition ends with exactly its rows (no
  lost, no duplicated rows), whatever the interleaving; their conflict retries are counted and reported.
- The daily maintenance merges small files and expires snapshots.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import duckdb
import pytest

from orchestration.storage import warehouse_lake
from orchestration.storage.warehouse import WarehouseConflict, WarehouseResource, conflict_retries, migrations, views

WRITERS = 4
ROUNDS = 5
ROWS = 200


def test_adapt_ddl_drops_what_the_lake_lacks():
    table = warehouse_lake.adapt_ddl("CREATE TABLE t (\n    id VARCHAR   PRIMARY KEY,\n    n INTEGER NOT NULL,\n"
                                      "    PRIMARY KEY (id, n),\n    UNIQUE (n)\n)")
    assert "PRIMARY" not in table and "UNIQUE" not in table and "n INTEGER NOT NULL" in table
    assert warehouse_lake.adapt_ddl("CREATE INDEX i ON t (n)") is None
    assert warehouse_lake.adapt_ddl("CREATE MACRO m(a) AS a + 1") == "CREATE MACRO m(a) AS a + 1"   # the lake keeps macros
    assert warehouse_lake.adapt_ddl("ALTER TABLE t ADD COLUMN unique_ids VARCHAR[]") == "ALTER TABLE t ADD COLUMN unique_ids VARCHAR[]"


def _columns(con) -> dict[str, list[tuple[str, str]]]:
    rows = con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                       "WHERE table_catalog = current_database() AND table_schema = 'main' "
                       "AND table_name IN (SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()) "
                       "ORDER BY table_name, ordinal_position").fetchall()
    found: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in rows:
        found.setdefault(table, []).append((column, kind))
    return found


def test_migrations_and_views_run_on_the_lake(lake, tmp_path):
    with lake.connect() as con:
        versions = [v for (v,) in con.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()]
        lake_columns = _columns(con)
        for name, _ in views():
            con.execute(f"SELECT * FROM {name.split('_', 1)[1]} LIMIT 0")   # binds on the lake's tables
        con.execute("SELECT * FROM version_references(5, 60)").fetchall()   # the migrations' table macro
    assert versions == [v for v, _, _ in migrations()]
    with WarehouseResource(path=str(tmp_path / "file.duckdb")).connect() as con:
        file_columns = _columns(con)
    assert lake_columns == file_columns
    with lake.connect() as con:   # a second writer connection: nothing to migrate, nothing fails
        assert con.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(versions)
    with lake.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM incidents").fetchone()[0] == 0


def test_the_threads_setting_reaches_the_lake_s_connections(lake, monkeypatch):
    """`warehouse.threads` (GOODPUT_DUCKDB_THREADS over it) is the lake's too: writers, readers and analysts."""
    monkeypatch.delenv("GOODPUT_DUCKDB_THREADS", raising=False)
    capped = lake.model_copy(update={"threads": 3})
    for kind in ({}, {"read_only": True}, {"analyst": True}):
        with capped.connect(**kind) as con:
            assert con.execute("SELECT current_setting('threads')").fetchone()[0] == 3


def _replace(con, part: int, round_: int) -> None:
    con.execute("DELETE FROM quarantine WHERE line = $p", {"p": part})
    con.execute("INSERT INTO quarantine (source, partition_start, file, line, raw, reason) "
                "SELECT 'test', TIMESTAMP '2026-11-30 00:00:00', 'w' || $p, $p, CAST(range AS VARCHAR), 'round ' || $r "
                "FROM range($n)", {"p": part, "r": round_, "n": ROWS})


def test_a_conflict_is_retried_in_place_and_counted(lake):
    lake.write(lambda con: _replace(con, 1, 0))   # rows to delete: two deletes of one file conflict
    before = conflict_retries()
    attempts = []

    def replace_with_a_rival(con):
        attempts.append(1)
        _replace(con, 1, len(attempts))
        if len(attempts) == 1:   # another writer commits the same partition first: ours must conflict
            lake.write(lambda rival: _replace(rival, 1, 99))

    lake.write(replace_with_a_rival)
    assert len(attempts) == 2 and conflict_retries() == before + 1
    with lake.connect(read_only=True) as con:
        found = con.execute("SELECT count(*), min(reason), max(reason) FROM quarantine WHERE line = 1").fetchone()
    assert found == (ROWS, "round 2", "round 2")


def test_a_conflict_in_a_step_asks_dagster_for_a_retry(lake):
    lake.write(lambda con: _replace(con, 2, 0))
    with pytest.raises(WarehouseConflict) as raised:
        with lake.connect() as con:   # a step's writer (no wait_seconds)
            con.execute("BEGIN TRANSACTION")
            _replace(con, 2, 1)
            lake.write(lambda rival: _replace(rival, 2, 2))
            con.execute("COMMIT")
    assert raised.value.max_retries == lake.conflict_retries and "conflict" in str(raised.value)
    with lake.connect(read_only=True) as con:   # the loser left nothing: the rival's rows, whole
        assert con.execute("SELECT count(*), min(reason) FROM quarantine WHERE line = 2").fetchone() == (ROWS, "round 2")


def _writer(args) -> int:
    settings, part = args
    warehouse = WarehouseResource(**settings)
    for round_ in range(1, ROUNDS + 1):
        warehouse.write(lambda con, r=round_: _replace(con, part, r))
    return conflict_retries()


def test_concurrent_writers_lose_and_duplicate_nothing(lake):
    settings = lake.model_dump()
    # concurrent.futures, not multiprocessing.Pool: a writer that raises or dies fails the test; Pool's
    # terminate() on the way out of its `with` could wait forever on a worker it spawned meanwhile (seen in CI)
    with ProcessPoolExecutor(WRITERS, mp_context=multiprocessing.get_context("spawn")) as pool:
        retries = list(pool.map(_writer, [(settings, part) for part in range(10, 10 + WRITERS)]))
    print(f"\n{WRITERS} writers x {ROUNDS} rounds: conflict retries per writer {retries} (total {sum(retries)})")
    with lake.connect(read_only=True) as con:
        rows = con.execute("SELECT line, count(*), count(DISTINCT raw), min(reason), max(reason) FROM quarantine "
                           "WHERE line >= 10 GROUP BY line ORDER BY line").fetchall()
    assert rows == [(part, ROWS, ROWS, f"round {ROUNDS}", f"round {ROUNDS}") for part in range(10, 10 + WRITERS)]


def test_maintenance_merges_files_and_expires_snapshots(lake):
    for round_ in range(1, 4):
        lake.write(lambda con, r=round_: _replace(con, 3, r))
    with lake.connect() as con:
        files_before = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 'quarantine')").fetchone()[0]
        snapshots_before = con.execute("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()[0]
        done = warehouse_lake.maintain(con, snapshot_days=0)
        files_after = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 'quarantine')").fetchone()[0]
        snapshots_after = con.execute("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()[0]
        assert con.execute("SELECT count(*) FROM quarantine WHERE line = 3").fetchone()[0] == ROWS
    assert files_after <= files_before and snapshots_after < snapshots_before and done["expired_snapshots"] > 0


def test_a_lake_that_cannot_be_reached_is_one_line(tmp_path):
    warehouse = WarehouseResource(path=str(tmp_path / "x.duckdb"), backend="ducklake",
                                  catalog="dbname=none host=127.0.0.1 port=1 user=none", data_path=str(tmp_path) + "/")
    with pytest.raises(warehouse_lake.LakeUnavailable, match="cannot attach the DuckLake catalog"):
        with warehouse.connect():
            pass


def test_the_extensions_come_from_the_wheels():
    con = duckdb.connect()
    for name in warehouse_lake.EXTENSIONS:
        con.execute(f"INSTALL '{warehouse_lake.extension_file(name)}'")
        con.execute(f"LOAD {name}")
    loaded = {n for (n,) in con.execute("SELECT extension_name FROM duckdb_extensions() WHERE loaded").fetchall()}
    assert {"ducklake", "postgres_scanner"} <= loaded   # the postgres extension names itself postgres_scanner


def test_the_board_reads_a_lake_home_and_sees_each_new_commit(lake, tmp_path):
    """The board opens the lake its home's service.yaml names; its result cache keys on the lake's latest
    snapshot, so a page asked again before a write is served from the cache and the first ask after a
    commit sees the new rows (a file stamp would never change in lake mode, and the board would go stale)."""
    from board import db
    from tests.distributed.conftest import write_lake_settings

    home = tmp_path / "lake-home"
    write_lake_settings(home, {"backend": "ducklake", "catalog": lake.catalog, "data_path": lake.data_path})

    def quarantined() -> tuple[int, tuple]:
        with db.reading(home) as con:
            counts = dict(db.cached(con, "ingest/row_counts", None).itertuples(index=False))
            return counts["quarantined"], db._stamps[id(con)]

    before, version = quarantined()
    again, same = quarantined()
    assert (again, same) == (before, version) and version[0] == "ducklake"
    with lake.connect() as con:
        con.execute("INSERT INTO quarantine (source, partition_start, file, line, raw, reason) "
                    "VALUES ('board', TIMESTAMP '2026-11-30 00:00:00', 'b', 1, 'x', 'board test')")
    after, newer = quarantined()
    assert after == before + 1 and newer[2] > version[2]


def test_a_conflict_in_a_check_step_retries_the_step(lake, tmp_path, monkeypatch):
    """A check step whose findings' commit meets a lake conflict is not a signal that "could not be evaluated"
    (which failed the step, and the run): the conflict reaches the step's connection and the step is
    retried. Seen with 2 Celery workers, two check steps committing findings at once (BENCHMARKS.md 34).
    The step commits its signals' findings together (asset_checks.store): that commit meets the conflict."""
    import dagster as dg

    from assets.baselines import training_baselines
    from assets.ingest import ingest_assets
    from checks import asset_checks
    from checks.registry import REGISTRY
    from orchestration.definitions import resources_for

    store, calls = asset_checks.store, []

    def first_commit_conflicts(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise duckdb.TransactionException("Failed to commit: Failed to commit DuckLake transaction. Transaction "
                                              "conflict - another transaction has deleted inlined data from it")
        return store(*args, **kwargs)

    monkeypatch.setattr(asset_checks, "store", first_commit_conflicts)
    (tmp_path / "raw").mkdir()
    resources = {**resources_for(tmp_path), "warehouse": lake}
    result = dg.materialize([*ingest_assets, training_baselines, asset_checks.build_check(REGISTRY.get("busy_not_progressing"))],
                            resources=resources, partition_key="2026-11-30-05:00", raise_on_error=False)
    assert result.success and len(calls) == 2
    retried = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert [e.step_key for e in retried] == ["busy_not_progressing"] and "conflict" in str(retried[0].event_specific_data)
