"""Opening the warehouse without Dagster: its errors, its lock waits, its damage checks, analysts' connections.

The writers' resource (orchestration/storage/warehouse.py, a Dagster resource) opens the file through here, and
so do `goodput sql` and the other read-only commands, which import no Dagster and no pandas: an analyst's query
costs the query and DuckDB's import (~0.2 CPU-s), not the pipeline's (~1.5, BENCHMARKS.md section 56).

- A write lock held by another process is waited for (backoff 0.05 s doubling to 1 s, up to the caller's
  seconds), then is `WarehouseBusy` naming the holder (DuckDB's lock error gives its PID, /proc its command);
  a step's writer turns it into a retry of the step instead (`open_file`'s `locked`).
- A missing or damaged file is one line naming it and the way out (`WarehouseMissing`, `WarehouseDamaged`);
  the home's marker beside the file says that it had a warehouse, so none is silently created empty.
- Analyst connections (`analyst`) cannot touch the file system: external access disabled and the configuration
  locked (no COPY ... TO, read_csv of other files, INSTALL, ATTACH), on the file and on the lake alike.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import tenacity

from orchestration import progress
from orchestration.config.home import warehouse_path
from orchestration.config.service_config import load_service_settings
from orchestration.storage import attached, warehouse_lake

THREADS_ENV = "GOODPUT_DUCKDB_THREADS"
ANALYST_CONFIG = {"enable_external_access": False}   # then, once the session is set up: lock_configuration


class WarehouseBusy(RuntimeError):
    """Another process holds the warehouse's write lock; try again later. `holder` says who, as the OS tells it."""

    holder: str = "another process"


class WarehouseMissing(RuntimeError):
    """The warehouse file does not exist yet (nothing has been ingested)."""


class WarehouseDamaged(RuntimeError):
    """The warehouse file is not a readable DuckDB database, or is gone where the home had one."""


def is_lock_error(error: Exception) -> bool:
    text = str(error).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


def lock_holder(error: Exception) -> str:
    """Who holds the lock, as the OS tells it: DuckDB's lock error names the PID; /proc its command."""
    found = re.search(r"\(PID (\d+)\)", str(error))
    if not found:
        return "another process (the OS did not say which)"
    pid = found.group(1)
    try:
        command = " ".join(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ").split())
    except OSError:
        command = ""
    return f"PID {pid} ({command[:160]})" if command else f"PID {pid}"


def marker_path(path: Path) -> Path:
    """The home's note that it has a warehouse at `path` (hidden, beside it; not matched by `warehouse.duckdb*`)."""
    return path.with_name(f".{path.name}.created")


def remove_warehouse(path: Path) -> None:
    """Delete the warehouse on purpose (a demo reset, a benchmark from empty): the file, its WAL and the
    marker, so that the next writer starts an empty one."""
    for target in (path, path.with_name(path.name + ".wal"), marker_path(path)):
        target.unlink(missing_ok=True)


def duckdb_threads(configured: int = 0, environ=None) -> dict:
    """DuckDB's `threads` setting for a new database: GOODPUT_DUCKDB_THREADS where the environment sets it, else
    `configured` (service.yaml's `warehouse.threads`), else nothing (DuckDB's default: one thread per core). On a
    busy host a query spread over every core competes with the host's own work, and the extra threads cost CPU
    of their own (BENCHMARKS.md section 35: the test suite on 2 cores used 6-17% less CPU with one)."""
    text = (os.environ if environ is None else environ).get(THREADS_ENV, "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{THREADS_ENV}={text!r}: set a whole number of threads (1 or more), or unset it")
        return {"threads": int(text)}
    return {"threads": configured} if configured > 0 else {}


def check_file(path: Path, read_only: bool) -> None:
    """One line for a warehouse that is a directory, missing (a reader's), or gone where the home had one."""
    if path.is_dir():
        raise WarehouseDamaged(f"{path} is a directory, not a DuckDB warehouse: move it aside "
                               "(the next run creates a new warehouse; re-run its hours from the raw zone)")
    if path.exists():
        return
    if read_only:
        raise WarehouseMissing(f"no warehouse at {path}: run `goodput demo` or materialize the ingest assets first")
    if marker_path(path).exists():
        raise WarehouseDamaged(
            f"{path} is gone, but this home had a warehouse there: restore it from a backup; or, to start an "
            f"empty one and re-run its hours from the raw zone, delete {marker_path(path)}")


def open_file(path: Path, read_only: bool, wait_seconds: float, config: dict | None, analyst: bool = False,
              locked: Callable[[str], BaseException] | None = None) -> attached.Connection | attached.Plain:
    """Connect (attach the file to the process's engine, orchestration/storage/attached.py; an analyst's
    connection is a database of its own, its settings locked), waiting up to `wait_seconds` while another
    process holds the write lock; then `locked(holder)` where given (a step's retry), else `WarehouseBusy`."""
    notice = progress.waiting(f"the warehouse {path}: a Goodput run holds its write lock (up to {wait_seconds:g}s)")
    connect = tenacity.Retrying(
        stop=tenacity.stop_after_delay(wait_seconds), wait=tenacity.wait_exponential(multiplier=0.05, max=1.0),
        retry=tenacity.retry_if_exception(lambda e: isinstance(e, duckdb.IOException) and is_lock_error(e)),
        before_sleep=lambda _: notice.poll(), reraise=True)   # the CLI says what it waits for after 2 s
    try:
        if analyst:
            return attached.Plain(connect(duckdb.connect, str(path), read_only=read_only, config=config or {}))
        return connect(attached.open_file, str(path), read_only, config)
    except duckdb.IOException as error:
        if not is_lock_error(error):
            raise WarehouseDamaged(
                f"{path} is not a readable DuckDB warehouse ({' '.join(str(error).split())[:160]}): restore it "
                "from a backup, or move it aside and delete "
                f"{marker_path(path)}, then re-run its hours from the raw zone") from None
        holder = lock_holder(error)
        if locked is not None:
            raise locked(holder) from error
        busy = WarehouseBusy(f"{path} is locked by {holder}; try again shortly")
        busy.holder = holder
        raise busy from error


@contextlib.contextmanager
def analyst(path: Path, wait_seconds: float, threads: int = 0, backend: str = "duckdb", catalog: str = "",
            data_path: str = "") -> Iterator[duckdb.DuckDBPyConnection]:
    """An analyst's read-only connection to the warehouse file at `path` (or the `ducklake` at `catalog`, data
    under `data_path`): a database of its own with no file-system access and its configuration locked."""
    config = {**ANALYST_CONFIG, **duckdb_threads(threads)}
    if backend == "ducklake":   # lock_configuration is per database: the lake's own in-memory one
        handle = attached.Plain(duckdb.connect(":memory:", config=duckdb_threads(threads)))
        try:
            warehouse_lake.attach(handle.con, catalog, data_path, read_only=True)
        except BaseException:
            handle.close()
            raise
    else:
        check_file(path, read_only=True)
        handle = open_file(path, True, wait_seconds, config, analyst=True)
    try:
        handle.con.execute("SET TimeZone = 'UTC'")
        handle.con.execute("SET lock_configuration = true")   # from here on no setting changes, external access above all
        yield handle.con
    finally:
        handle.close()


def warehouse_fields(home: Path) -> dict:
    """One home's warehouse as its service.yaml's `warehouse:` section chooses: the fields of the writers' resource
    (orchestration/storage/warehouse.py `warehouse_for`), of which an analyst's connection takes its own."""
    settings = load_service_settings(Path(home)).warehouse
    return {"path": str(warehouse_path(Path(home))), "backend": settings.backend, "catalog": settings.catalog or "",
            "data_path": settings.data_path or "", "conflict_retries": settings.conflict_retries,
            "threads": settings.threads or 0, "live_threads": settings.live_threads}


def analyst_for(home: Path, wait_seconds: float) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]:
    """An analyst's connection to one home's warehouse, as its service.yaml's `warehouse:` section chooses."""
    fields = warehouse_fields(home)
    return analyst(Path(fields["path"]), wait_seconds, fields["threads"], fields["backend"], fields["catalog"],
                   fields["data_path"])
