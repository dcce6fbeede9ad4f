"""The DuckLake warehouse backend: the catalog in PostgreSQL, the data as Parquet files under a shared path.

Every worker machine opens an in-memory DuckDB, loads the `postgres` and `ducklake` extensions from
their PyPI wheels (`duckdb-extension-*`, pinned to the DuckDB release: nothing is downloaded at run
time) and attaches the lake as `lake`, its default catalog. From there the same SQL files, migrations
and analyst views run as on the file backend, with these differences, all handled here:

- DuckLake has no indexes, primary keys or UNIQUE constraints (docs/deploy.md, "What the lake lacks").
  `adapt_ddl` rewrites each migration statement before it runs: a `PRIMARY KEY`/`UNIQUE` column
  constraint or table constraint is dropped (Goodput's writes never rely on them: every partition
  write deletes its window and inserts, and the fold deletes its groups' rows first), a `CREATE INDEX`
  is skipped. The schema in the lake is otherwise the file's, column for column.
- Views, table macros, comments, ALTER TABLE ADD COLUMN, NOT NULL, JSON and list columns run as
  they are (DuckLake 1.5 keeps macros in its catalog).
- Writers on different machines commit optimistically: two that touch the same table at once may
  find a commit conflict; orchestration/storage/warehouse_retry.py retries it (docs/deploy.md).
- Small files accumulate (every write adds some): `maintain` merges adjacent files and expires
  snapshots older than the retention, once a day (assets/maintenance.py's lake step).
- The data path may be an S3 bucket (`s3://bucket/prefix/`: AWS S3 or any S3-compatible store): the
  `httpfs` extension is loaded from its wheel too, with a DuckDB secret made from the standard AWS
  environment variables (`object_store_secret`; never from the settings file).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import threading
from pathlib import Path

import duckdb

from orchestration.storage.sql import literal, split_statements

LAKE = "lake"
"""The name the lake is attached as (and made the default catalog: `USE lake`)."""

EXTENSIONS = ("postgres", "ducklake")
OBJECT_STORE = "httpfs"
"""The extension a data path in an object store (`s3://`) needs, loaded from its wheel like the others."""


class LakeUnavailable(RuntimeError):
    """The lake's extensions or catalog cannot be reached: the message names what and how to fix it."""


@functools.cache
def extension_file(name: str) -> str:
    """The `.duckdb_extension` file the PyPI wheel `duckdb-extension-<name>` installed."""
    distribution = f"duckdb-extension-{name}"
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        raise LakeUnavailable(f"the DuckDB extension wheel {distribution} is not installed: "
                              f"pip install '{distribution}=={duckdb.__version__}'") from None
    for entry in files:
        if str(entry).endswith(".duckdb_extension"):
            return str(Path(entry.locate()).resolve())
    raise LakeUnavailable(f"{distribution} holds no .duckdb_extension file: reinstall it for DuckDB {duckdb.__version__}")


def object_store_secret(data_path: str, environ: dict | None = None) -> str | None:
    """The `CREATE SECRET` for a data path in S3 (None for a file path), from the variables every AWS
    client reads: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (or
    AWS_DEFAULT_REGION) and AWS_ENDPOINT_URL for an S3-compatible store (MinIO, Ceph, R2...: reached at
    that host with path-style URLs, over TLS only when it says https). Without keys: anonymous."""
    if not data_path.startswith("s3://"):
        return None
    env = os.environ if environ is None else environ
    options = {"TYPE": "s3"}
    for key, variable in (("KEY_ID", "AWS_ACCESS_KEY_ID"), ("SECRET", "AWS_SECRET_ACCESS_KEY"),
                          ("SESSION_TOKEN", "AWS_SESSION_TOKEN")):
        if env.get(variable):
            options[key] = literal(env[variable])
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        options["REGION"] = literal(region)
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        scheme, _, host = endpoint.rstrip("/").rpartition("://")
        options.update(ENDPOINT=literal(host), URL_STYLE="'path'", USE_SSL="false" if scheme == "http" else "true")
    return f"CREATE OR REPLACE SECRET goodput_lake ({', '.join(f'{k} {v}' for k, v in options.items())})"


def attach(con: duckdb.DuckDBPyConnection, catalog: str, data_path: str, read_only: bool = False) -> None:
    """Load the extensions from their wheels, attach the lake as `lake` and make it the default."""
    secret = object_store_secret(data_path)
    for name in EXTENSIONS + ((OBJECT_STORE,) if secret else ()):
        con.execute(f"INSTALL {literal(extension_file(name))}")   # a local file: no download
        con.execute(f"LOAD {name}")
    if secret:
        con.execute(secret)
    options = [f"DATA_PATH {literal(data_path)}"] + (["READ_ONLY"] if read_only else [])
    try:
        con.execute(f"ATTACH {literal('ducklake:postgres:' + catalog)} AS {LAKE} ({', '.join(options)})")
    except duckdb.Error as error:
        raise LakeUnavailable(f"cannot attach the DuckLake catalog `{catalog}` (data {data_path}): "
                              f"{' '.join(str(error).split())[:240]} (check `warehouse:` in service.yaml and "
                              "that PostgreSQL accepts the connection)") from None
    con.execute(f"USE {LAKE}")


_INDEX = re.compile(r"^\s*(?:--[^\n]*\n\s*)*CREATE\s+(?:UNIQUE\s+)?INDEX\s", re.IGNORECASE)
_TABLE_KEY = re.compile(r",\s*(?:--[^\n]*\n\s*)*(?:PRIMARY\s+KEY|UNIQUE)\s*\([^)]*\)", re.IGNORECASE)
_COLUMN_KEY = re.compile(r"\s+(?:PRIMARY\s+KEY|UNIQUE)\b(?!\s*\()", re.IGNORECASE)


_databases: dict[tuple[str, str, bool], tuple[int, duckdb.DuckDBPyConnection, dict]] = {}
_databases_lock = threading.Lock()


def open_lake(catalog: str, data_path: str, read_only: bool = False,
              config: dict | None = None) -> tuple[duckdb.DuckDBPyConnection, dict]:
    """A new connection (a cursor) to this process's DuckDB with the lake attached, and that database's
    state (`migrated`). Loading the two extensions costs ~1.7 s of CPU per DuckDB database: one
    database per process and lake, made anew in a forked child (a DuckDB database does not survive a
    fork), shares it among all of the process's connections, each with its own transaction. `config`: DuckDB
    settings of that database when it is made (its threads)."""
    key = (catalog, data_path, read_only, tuple(sorted((config or {}).items())))
    with _databases_lock:
        found = _databases.get(key)
        if found is None or found[0] != os.getpid():
            database = duckdb.connect(":memory:", config=config or {})
            try:
                attach(database, catalog, data_path, read_only=read_only)
            except BaseException:
                database.close()
                raise
            found = (os.getpid(), database, {"migrated": False})
            _databases[key] = found
    cursor = found[1].cursor()
    cursor.execute(f"USE {LAKE}")
    return cursor, found[2]


def adapt_ddl(statement: str) -> str | None:
    """One migration statement as the lake runs it: keys and UNIQUE dropped; None for an index."""
    if _INDEX.match(statement):
        return None
    return _COLUMN_KEY.sub("", _TABLE_KEY.sub("", statement))


def adapt_migration(text: str) -> list[str]:
    """A migration file's statements, each adapted for the lake (skipped ones left out)."""
    return [adapted for adapted in (adapt_ddl(s) for s in split_statements(text)) if adapted]


def maintain(con: duckdb.DuckDBPyConnection, snapshot_days: float) -> dict[str, int]:
    """Merge small adjacent data files, expire snapshots older than `snapshot_days`, delete the files no
    snapshot needs any more; returns what each step did (rows of DuckLake's own functions)."""
    merged = con.execute(f"CALL ducklake_merge_adjacent_files({literal(LAKE)})").fetchall()
    expired = con.execute(f"CALL ducklake_expire_snapshots({literal(LAKE)}, older_than => now() - to_days(CAST($d AS INTEGER)))",
                          {"d": max(int(snapshot_days), 0)}).fetchall()
    deleted = con.execute(f"CALL ducklake_cleanup_old_files({literal(LAKE)}, cleanup_all => true)").fetchall()
    return {"merged": len(merged), "expired_snapshots": len(expired), "deleted_files": len(deleted)}
