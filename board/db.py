"""Warehouse access for the board: one short read-only connection per request, SQL from sql/board/.

A page holds the connection only while it reads; a run that wants the write lock waits at most that
long. While a run holds the lock, `reading()` waits up to `WAIT_SECONDS` and then raises
`WarehouseBusy`, which the app answers with a "warehouse busy, retry" page.

Results are cached per query, parameters and the warehouse's data version (the DuckDB file: size and
modification time of the file and its WAL; a DuckLake: its latest snapshot id, since every commit makes
one): the data only changes when a run writes, so a page asked again before the next
write (the on-call refreshing, a second person opening it) costs no query; the first ask after a
write pays in full.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from orchestration.storage import sql
from orchestration.storage.warehouse import WarehouseResource, warehouse_for

WAIT_SECONDS = 2.0
CACHED_RESULTS = 128
_cache: OrderedDict = OrderedDict()
_cache_lock = threading.Lock()
_stamps: dict[int, tuple] = {}    # id(connection) -> the warehouse's data version when it was opened


def stamp(path: Path) -> tuple:
    """What changes whenever a run writes the warehouse: size and mtime of the file and of its WAL."""
    found = []
    for p in (path, path.with_name(path.name + ".wal")):
        try:
            st = p.stat()
            found.append((st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            found.append(None)
    return (str(path), *found)


def data_version(warehouse: WarehouseResource, con) -> tuple:
    """What changes whenever a run writes: the file's stamp, or the lake's latest snapshot."""
    if warehouse.backend == "ducklake":
        return ("ducklake", warehouse.catalog, sql.run(con, "board/lake_snapshot").fetchone()[0])
    return stamp(Path(warehouse.path))


@contextlib.contextmanager
def reading(home: Path, wait_seconds: float = WAIT_SECONDS) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to `home`'s warehouse (the file or the lake its service.yaml names)."""
    warehouse = warehouse_for(home)
    with warehouse.connect(read_only=True, wait_seconds=wait_seconds) as con:
        _stamps[id(con)] = data_version(warehouse, con)   # taken once open: no writer holds the file now
        try:
            yield con
        finally:
            _stamps.pop(id(con), None)


def cached(con, name: str, params: dict[str, Any] | None) -> pd.DataFrame:
    """`sql/<name>.sql` as a DataFrame, from the cache while the warehouse has not changed."""
    key = (_stamps.get(id(con)), name, json.dumps(params or {}, sort_keys=True, default=str))
    if key[0] is not None:
        with _cache_lock:
            if key in _cache:
                _cache.move_to_end(key)
                return _cache[key].copy()
    result = sql.frame(con, name, params)
    if key[0] is not None:
        with _cache_lock:
            _cache[key] = result
            while len(_cache) > CACHED_RESULTS:
                _cache.popitem(last=False)
        result = result.copy()
    return result


def frame(con, name: str, params: dict[str, Any] | None = None) -> pd.DataFrame:
    """`sql/board/<name>.sql` as a DataFrame."""
    return cached(con, f"board/{name}", params)


def records(con, name: str, params: dict[str, Any] | None = None) -> list[dict]:
    """`sql/board/<name>.sql` as a list of dicts with None for missing values (NaN, NaT)."""
    return [{k: plain(v) for k, v in row.items()} for row in frame(con, name, params).to_dict("records")]


def one(con, name: str, params: dict[str, Any] | None = None) -> dict | None:
    rows = records(con, name, params)
    return rows[0] if rows else None


def plain(value):
    """A cell as the pages want it: None for missing values (NaN, NaT), Python values for numpy ones."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is pd.NaT:
        return None
    if hasattr(value, "tolist") and not isinstance(value, pd.Timestamp):   # numpy arrays and scalars
        return value.tolist()
    return value
