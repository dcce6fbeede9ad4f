"""Loads the SQL files under `sql/` and runs them with bound parameters.

SQL lives in files, one purpose each; Python only names a file and passes `$name` parameters.
A file may hold several statements separated by `;`; DuckDB's own parser splits them and names
each one's `$parameters`, and each statement gets only the ones it mentions, because DuckDB
rejects unused ones. Parses are cached: per file, and per text for the filled templates.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb

SQL_ROOT = Path(__file__).resolve().parents[2] / "sql"


@functools.cache
def sql_text(name: str) -> str:
    """The text of `sql/<name>.sql`; raises FileNotFoundError naming the path."""
    path = SQL_ROOT / f"{name}.sql"
    if not path.is_file():
        raise FileNotFoundError(f"no SQL file {path} (looked up as {name!r})")
    return path.read_text()


@functools.cache
def fragment(name: str) -> str:
    """`sql/<name>.sql` as one query to fill into another file's marker: its comment lines and final `;` dropped."""
    text = sql_text(name).strip().rstrip(";")
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def statements(name: str) -> tuple[str, ...]:
    """The statements of one SQL file, comments kept, empty ones dropped."""
    return split_statements(sql_text(name))


def split_statements(text: str) -> tuple[str, ...]:
    """The statements of a SQL text as DuckDB's parser splits it, comments kept, empty ones dropped."""
    return tuple(statement for statement, _ in _parsed(text))


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """Each statement of `text` (stripped, its closing `;` dropped) with the `$parameters` it names."""
    return tuple((s.query.strip().rstrip(";").rstrip(), frozenset(s.named_parameters))
                 for s in duckdb.extract_statements(text))


def run(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any] | None = None):
    """Run every statement of `sql/<name>.sql`; returns the last statement's relation/connection."""
    return execute_text(con, sql_text(name), params)


def execute_text(con: duckdb.DuckDBPyConnection, text: str, params: dict[str, Any] | None = None):
    """Run every statement of a SQL text (a file's, or a template from `sql/` filled with schema identifiers),
    each with the `params` it names; returns the last statement's relation/connection."""
    result = None
    for statement, names in _parsed(text):
        used = {k: params[k] for k in names if k in params} if params else {}
        result = con.execute(statement, used) if used else con.execute(statement)
    return result


def bound(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The `params` that `sql/<name>.sql` mentions: the values its result depends on."""
    return {k: params[k] for k in sorted(_mentions(name)) if k in params}


@functools.cache
def _mentions(name: str) -> frozenset[str]:
    """The `$parameters` the statements of `sql/<name>.sql` name (DuckDB's parser reads them: never in a comment or string)."""
    return frozenset().union(*(names for _, names in _parsed(sql_text(name))))


def frame(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any] | None = None):
    """Run `sql/<name>.sql` and return its (last) result as a pandas DataFrame."""
    return run(con, name, params).df()


def literal(text: str) -> str:
    """`text` as an SQL string literal (for statements that take no parameters: ATTACH, CREATE SECRET)."""
    return "'" + text.replace("'", "''") + "'"


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
        with contextlib.suppress(duckdb.Error):   # a failed COMMIT (a lake conflict) has ended it already
            con.execute("ROLLBACK")
        raise
    finally:
        for name in frames:
            con.unregister(name)
