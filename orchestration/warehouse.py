"""The warehouse resource: every read and write of `GOODPUT_HOME/warehouse.duckdb` goes through it.

DuckDB allows one writing process per file. Writers (assets and checks) share the Dagster pool
`warehouse` (limit 1) and hold short connections; readers outside runs (sensors, the CLI) open
read-only and treat a held lock as "try later" (`WarehouseBusy`), never as a crash.
The schema is owned by the numbered migrations in `sql/migrations/`, applied on first write; the
analyst views in `sql/views/` are (re)created after them.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import duckdb

from orchestration import progress
from orchestration.sql import SQL_ROOT

POOL = "warehouse"


class WarehouseBusy(RuntimeError):
    """Another process holds the warehouse's write lock; try again later."""


class WarehouseMissing(RuntimeError):
    """The warehouse file does not exist yet (nothing has been ingested)."""


def _is_lock_error(error: Exception) -> bool:
    text = str(error).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every `sql/migrations/NNN_name.sql`, in order."""
    found = []
    for path in sorted((SQL_ROOT / "migrations").glob("*.sql")):
        version = int(path.name.split("_", 1)[0])
        found.append((version, path.stem, path.read_text()))
    return found


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply the migrations this database has not seen, each in its own transaction."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL)"
    )
    done = {v for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()}
    applied = []
    for version, name, text in migrations():
        if version in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(text)
            con.execute("INSERT INTO schema_migrations VALUES ($v, $n)", {"v": version, "n": name})
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied


VIEWS_COMMENT = "goodput analyst view "


def views() -> list[tuple[str, str]]:
    """(name, sql) for every `sql/views/NNN_name.sql`, in order: a view may read the views before it."""
    return [(path.stem, path.read_text()) for path in sorted((SQL_ROOT / "views").glob("*.sql"))]


def create_views(con: duckdb.DuckDBPyConnection, force: bool = False) -> bool:
    """(Re)create the analyst views, unless the same texts are already there; returns whether it ran.

    Views keep stable names for analysts while the tables under them change: they are re-created
    from `sql/views/` after the migrations, so a view always binds to the current tables. Each view
    carries a hash of all view files as its comment; a matching set is left alone (no catalog churn
    on every write connect). A view that no longer binds is logged and skipped, never fatal: the
    runs that write the warehouse must not stop over an analyst view (tests/test_views.py guards them).
    """
    found = views()
    stamp = VIEWS_COMMENT + hashlib.sha1("\0".join(text for _, text in found).encode()).hexdigest()[:16]
    current = con.execute("SELECT count(*) FROM duckdb_views() WHERE comment = $c", {"c": stamp}).fetchone()[0]
    if not force and current == len(found):
        return False
    for name, text in found:
        try:
            con.execute(text)  # CREATE OR REPLACE VIEW: atomic on its own
            con.execute(f"COMMENT ON VIEW {name.split('_', 1)[1]} IS '{stamp}'")  # our own file name; stamp is hex
        except duckdb.Error as error:
            logging.getLogger(__name__).warning("analyst view sql/views/%s.sql skipped: %s", name, " ".join(str(error).split()))
    return True


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection, **frames) -> Iterator[duckdb.DuckDBPyConnection]:
    """Register `frames` as views and run the block in one transaction: all of it lands, or none."""
    for name, frame in frames.items():
        con.register(name, frame)
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        for name in frames:
            con.unregister(name)


class WarehouseResource(dg.ConfigurableResource):
    """The DuckDB warehouse file. `connect()` for writers, `connect(read_only=True)` for readers."""

    path: str
    lock_wait_seconds: float = 120.0

    @contextlib.contextmanager
    def connect(self, read_only: bool = False, wait_seconds: float | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        path = Path(self.path)
        if read_only and not path.exists():
            raise WarehouseMissing(f"no warehouse at {path}: run `goodput demo` or materialize the ingest assets first")
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        con = self._open(path, read_only, self.lock_wait_seconds if wait_seconds is None else wait_seconds)
        try:
            con.execute("SET TimeZone = 'UTC'")
            if not read_only:
                applied = migrate(con)
                create_views(con, force=bool(applied))
            yield con
        finally:
            con.close()

    @staticmethod
    def _open(path: Path, read_only: bool, wait_seconds: float) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + wait_seconds
        delay = 0.05
        notice = progress.waiting(f"the warehouse {path}: a Goodput run holds its write lock (up to {wait_seconds:g}s)")
        while True:
            try:
                return duckdb.connect(str(path), read_only=read_only)
            except duckdb.IOException as error:
                if not _is_lock_error(error):
                    raise
                notice.poll()   # the CLI says what it waits for after 2 s, piped or not
                if time.monotonic() >= deadline:
                    raise WarehouseBusy(
                        f"{path} is locked by another process (a Goodput run is writing); try again shortly"
                    ) from error
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
