"""Warehouse access for the board: one short read-only connection per request, SQL from sql/board/.

A page holds the connection only while it reads; a run that wants the write lock waits at most that
long. While a run holds the lock, `reading()` waits up to `WAIT_SECONDS` and then raises
`WarehouseBusy`, which the app answers with a "warehouse busy, retry" page.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from orchestration import sql
from orchestration.home import warehouse_path
from orchestration.warehouse import WarehouseResource

WAIT_SECONDS = 2.0


@contextlib.contextmanager
def reading(home: Path, wait_seconds: float = WAIT_SECONDS) -> Iterator[duckdb.DuckDBPyConnection]:
    with WarehouseResource(path=str(warehouse_path(home))).connect(read_only=True, wait_seconds=wait_seconds) as con:
        yield con


def frame(con, name: str, params: dict[str, Any] | None = None) -> pd.DataFrame:
    """`sql/board/<name>.sql` as a DataFrame."""
    return sql.frame(con, f"board/{name}", params)


def records(con, name: str, params: dict[str, Any] | None = None) -> list[dict]:
    """`sql/board/<name>.sql` as a list of dicts with None for missing values (NaN, NaT)."""
    return [{k: _none(v) for k, v in row.items()} for row in frame(con, name, params).to_dict("records")]


def one(con, name: str, params: dict[str, Any] | None = None) -> dict | None:
    rows = records(con, name, params)
    return rows[0] if rows else None


def _none(value):
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is pd.NaT:
        return None
    if hasattr(value, "tolist") and not isinstance(value, pd.Timestamp):   # numpy arrays and scalars
        return value.tolist()
    return value
