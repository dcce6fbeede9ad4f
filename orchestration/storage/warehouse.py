"""The warehouse resource: every read and write of `GOODPUT_HOME/warehouse.duckdb` goes through it.

DuckDB allows one writing process per file. Writers (assets and checks) share the Dagster pool
`warehouse` (limit 1) and hold short connections; readers outside runs (sensors, the CLI) open
read-only and treat a held lock as "try later" (`WarehouseBusy`), never as a crash.
The schema is owned by the numbered migrations in `sql/migrations/`, applied on first write; the
analyst views in `sql/views/` are (re)created after them.

Reliability (docs/reliability.md):
- A lock held by another process (an analyst's session) is waited for without holding the pool
  slot: a step's writer waits `lock_wait_seconds`, then asks Dagster to retry the step
  (`WarehouseLocked`, a `dg.RetryRequested`), which frees the slot until the next try; the message
  names the holder (DuckDB's lock error gives its PID, /proc its command line).
- The home remembers that it had a warehouse (a marker beside the file, written when the file is
  first seen): a writer never silently creates an empty warehouse where one was expected, and a
  damaged file (a directory, zero bytes, a foreign header) is one line naming it and the way out.
- Analyst connections (`analyst=True`) cannot touch the file system: external access disabled and
  the configuration locked (no COPY ... TO, read_csv of other files, INSTALL, ATTACH).
- Every run's set-up frees the pool slots of dead runs (orchestration/storage/instance.py).
Opening the file (the lock waits, the damage checks, analysts' connections) is in
orchestration/storage/warehouse_open.py, which imports no Dagster: the read-only commands use it alone.

Two backends (issue 21; `warehouse:` in service.yaml, docs/deploy.md): `duckdb`, the file above (the
default), and `ducklake`, a DuckLake catalog in PostgreSQL with Parquet data under a shared path
(orchestration/storage/warehouse_lake.py). The same migrations (adapted in one place) and views run on both.
Lake writers on many machines commit optimistically: a commit conflict in a step is a
`WarehouseConflict` (a `dg.RetryRequested` with backoff: the step runs again, the run does not fail);
code that can re-run its own transaction uses `write()`, which retries in place. Both count the
retries (`conflict_retries()`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import duckdb
from pydantic import PrivateAttr

from orchestration.storage import warehouse_lake, warehouse_open
from orchestration.storage.instance import POOL, free_dead_run_slots
from orchestration.storage.raw_zone import is_live_run
from orchestration.storage.sql import SQL_ROOT, transaction
from orchestration.storage.warehouse_open import (
    THREADS_ENV,
    WarehouseBusy,
    WarehouseDamaged,
    WarehouseMissing,
    check_file,
    duckdb_threads,
    marker_path,
    open_file,
    remove_warehouse,
)
from orchestration.storage.warehouse_retry import WarehouseConflict, conflict_retries, is_conflict, retry_conflicts

__all__ = ["POOL", "THREADS_ENV", "WarehouseResource", "WarehouseBusy", "WarehouseLocked", "WarehouseMissing",
           "WarehouseDamaged", "WarehouseConflict", "conflict_retries", "duckdb_threads", "marker_path", "remove_warehouse",
           "transaction"]


class WarehouseLocked(dg.RetryRequested, WarehouseBusy):
    """A step's writer found the file locked: Dagster retries the step later, with the pool slot freed
    meanwhile (code outside a step catches it as `WarehouseBusy`)."""

    def __init__(self, message: str, max_retries: int, seconds_to_wait: float):
        dg.RetryRequested.__init__(self, max_retries=max_retries, seconds_to_wait=seconds_to_wait)
        self.args = (message,)


@functools.cache   # read once per process: every writer's connect checks them (20 connects a detect run)
def migrations() -> tuple[tuple[int, str, str], ...]:
    """(version, name, sql) for every `sql/migrations/NNN_name.sql`, in order."""
    found = []
    for path in sorted((SQL_ROOT / "migrations").glob("*.sql")):
        version = int(path.name.split("_", 1)[0])
        found.append((version, path.stem, path.read_text()))
    return tuple(found)


MIGRATIONS_TABLE = "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL)"


def migrate(con: duckdb.DuckDBPyConnection, lake: bool = False) -> list[str]:
    """Apply the migrations this database has not seen, each in its own transaction (`lake`: each
    statement adapted for DuckLake, warehouse_lake.adapt_ddl)."""
    con.execute(warehouse_lake.adapt_ddl(MIGRATIONS_TABLE) if lake else MIGRATIONS_TABLE)
    done = {v for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()}
    applied = []
    for version, name, text in migrations():
        if version in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            for statement in warehouse_lake.adapt_migration(text) if lake else [text]:
                con.execute(statement)
            con.execute("INSERT INTO schema_migrations VALUES ($v, $n)", {"v": version, "n": name})
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied


VIEWS_COMMENT = "goodput analyst view "


@functools.cache   # read once per process, like the migrations
def views() -> tuple[tuple[str, str], ...]:
    """(name, sql) for every `sql/views/NNN_name.sql`, in order: a view may read the views before it."""
    return tuple((path.stem, path.read_text()) for path in sorted((SQL_ROOT / "views").glob("*.sql")))


@functools.cache
def views_stamp() -> str:
    """The comment every current view carries: a hash of all view files."""
    return VIEWS_COMMENT + hashlib.sha1("\0".join(text for _, text in views()).encode()).hexdigest()[:16]


def create_views(con: duckdb.DuckDBPyConnection, force: bool = False) -> bool:
    """(Re)create the analyst views, unless the same texts are already there; returns whether it ran.

    Views keep stable names for analysts while the tables under them change: they are re-created
    from `sql/views/` after the migrations, so a view always binds to the current tables. Each view
    carries a hash of all view files as its comment; a matching set is left alone (no catalog churn
    on every write connect). A view that no longer binds is logged and skipped, never fatal: the
    runs that write the warehouse must not stop over an analyst view (tests/test_views.py guards them).
    """
    found, stamp = views(), views_stamp()
    current = con.execute("SELECT count(*) FROM duckdb_views() WHERE database_name = current_database() AND comment = $c",
                          {"c": stamp}).fetchone()[0]
    if not force and current == len(found):
        return False
    for name, text in found:
        try:
            con.execute(text)  # CREATE OR REPLACE VIEW: atomic on its own
            con.execute(f"COMMENT ON VIEW {name.split('_', 1)[1]} IS '{stamp}'")  # our own file name; stamp is hex
        except duckdb.Error as error:
            logging.getLogger(__name__).warning("analyst view sql/views/%s.sql skipped: %s", name, " ".join(str(error).split()))
    return True


class WarehouseResource(dg.ConfigurableResource):
    """The warehouse: the DuckDB file, or a DuckLake (`backend`). `connect()` for writers,
    `connect(read_only=True)` for readers."""

    path: str
    backend: str = "duckdb"
    """`duckdb` (the file at `path`) or `ducklake` (`catalog` in PostgreSQL, data under `data_path`)."""
    catalog: str = ""
    """ducklake: the PostgreSQL catalog as a libpq string (the password from $PGPASSWORD, never here)."""
    data_path: str = ""
    """ducklake: where the Parquet files live (a path every worker mounts, or s3://... with httpfs)."""
    conflict_retries: int = 20
    """ducklake: a write that meets a commit conflict is retried this often (backoff) before it fails."""
    lock_wait_seconds: float = 5.0
    """A step's writer waits this long for a lock held by another process, holding the pool slot."""
    lock_retry_seconds: float = 30.0
    """...then Dagster retries the step after this many seconds, with the slot freed meanwhile."""
    lock_retries: int = 60
    """Tries before the step fails (60 x 30 s: half an hour of an analyst's session)."""
    threads: int = 0
    """DuckDB's threads per query (`warehouse.threads`); 0: DuckDB's default, one per core. The environment's
    GOODPUT_DUCKDB_THREADS, where set, decides for every process of a host (a busy host, a test run)."""
    live_threads: int = 1
    """DuckDB's threads per query in a live tick's run (the raw-zone sensor's, tagged VERSION_TAG: a minute of new
    data, beside the host's own work); 0: as `threads`. One by default: a tick's queries are small, and spread over
    two cores a 1,024-GPU replay's ticks cost 13-18% more CPU-seconds for the same work and the same detection
    delays (BENCHMARKS.md section 53); backfills, the demo and analysts keep `threads`. GOODPUT_DUCKDB_THREADS
    decides over it too."""
    _live: bool = PrivateAttr(default=False)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        run = context.dagster_run
        self._live = run is not None and is_live_run(run.tags)
        # Start-up check: a run killed while it held the pool slot must not block this one.
        log = context.log or logging.getLogger(__name__)
        try:
            freed = free_dead_run_slots(context.instance)
        except Exception as error:   # an auxiliary check: never the reason a run fails
            log.warning(f"could not check the `{POOL}` pool for dead runs' slots: {' '.join(str(error).split())[:200]}")
            return
        for slot in freed:
            log.warning(slot.line())

    @property
    def query_threads(self) -> int:
        """This run's DuckDB threads per query: `live_threads` in a live tick's run (when set), else `threads`."""
        return self.live_threads if self._live and self.live_threads > 0 else self.threads

    @contextlib.contextmanager
    def connect(self, read_only: bool = False, wait_seconds: float | None = None,
                analyst: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection: read-write (migrated), or `read_only`; `analyst` connections (read-only) have no
        file-system access. A writer in a step (no `wait_seconds`) that finds the file locked raises
        `WarehouseLocked` (Dagster retries the step); otherwise a held lock is `WarehouseBusy`."""
        wait = self.lock_wait_seconds if wait_seconds is None else wait_seconds
        if analyst:   # a database of its own, its settings locked (orchestration/storage/warehouse_open.py)
            with warehouse_open.analyst(Path(self.path), wait, self.query_threads, self.backend, self.catalog,
                                        self.data_path) as con:
                yield con
            return
        if self.backend == "ducklake":
            with self._connect_lake(read_only, in_step=not read_only and wait_seconds is None) as con:
                yield con
            return
        path = Path(self.path)
        check_file(path, read_only)
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        in_step = not read_only and wait_seconds is None
        handle = open_file(path, read_only, wait, duckdb_threads(self.query_threads),
                           locked=self._locked if in_step else None)
        con = handle.con
        try:
            con.execute("SET TimeZone = 'UTC'")
            if not read_only:
                marker = marker_path(path)
                if not marker.exists():
                    marker.write_text(f"{path}\nThis home has a warehouse; Goodput will not create an empty one here.\n")
                applied = migrate(con)
                create_views(con, force=bool(applied))
            yield con
        finally:
            handle.close()

    def _locked(self, holder: str) -> WarehouseLocked:
        """A step's writer met `holder`'s lock: Dagster retries the step, the pool slot freed meanwhile."""
        return WarehouseLocked(
            f"{self.path} is locked by {holder}; the step waits without the `{POOL}` pool slot and "
            f"retries in {self.lock_retry_seconds:g}s (up to {self.lock_retries} times)",
            max_retries=self.lock_retries, seconds_to_wait=self.lock_retry_seconds)

    @contextlib.contextmanager
    def _connect_lake(self, read_only: bool, in_step: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to the process's DuckDB with the lake attached as its default catalog; no pool, no
        file lock: a commit conflict in a step becomes `WarehouseConflict` (the step is retried with backoff)."""
        con, state = warehouse_lake.open_lake(self.catalog, self.data_path, read_only=read_only,
                                              config=duckdb_threads(self.query_threads))
        try:
            con.execute("SET TimeZone = 'UTC'")
            if not read_only and not state["migrated"]:   # once per process: the schema moves with the code
                retry_conflicts(self.conflict_retries)(self._migrate_lake)(con)
                state["migrated"] = True
            yield con
        except duckdb.Error as error:
            if in_step and is_conflict(error):
                raise WarehouseConflict.after(error, self.conflict_retries) from error
            raise
        finally:
            con.close()

    @staticmethod
    def _migrate_lake(con: duckdb.DuckDBPyConnection) -> None:
        applied = migrate(con, lake=True)
        create_views(con, force=bool(applied))

    def write(self, fn, **frames):
        """Run `fn(con)` in one transaction (with `frames` registered as views) and return its result;
        on the lake a commit conflict re-runs the whole transaction with backoff (counted), up to
        `conflict_retries` times. For writers outside Dagster steps and for ones that can re-run."""
        def attempt():
            with self.connect(wait_seconds=self.lock_wait_seconds) as con, transaction(con, **frames):
                return fn(con)
        return retry_conflicts(self.conflict_retries if self.backend == "ducklake" else 0)(attempt)()


def warehouse_for(home: Path) -> WarehouseResource:
    """The warehouse of one Goodput home, as its service.yaml's `warehouse:` section chooses (default: the file)."""
    return WarehouseResource(**warehouse_open.warehouse_fields(home))
