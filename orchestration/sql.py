"""Loads the SQL files under `sql/` and runs them with bound parameters.

SQL lives in files, one purpose each; Python only names a file and passes `$name` parameters.
A file may hold several statements separated by `;` at the end of a line; each statement gets
only the parameters it mentions, because DuckDB rejects unused ones.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import duckdb

SQL_ROOT = Path(__file__).resolve().parent.parent / "sql"
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_COMMENT = re.compile(r"--[^\n]*")


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


@functools.cache
def statements(name: str) -> tuple[str, ...]:
    """The statements of one SQL file, comments kept, empty ones dropped."""
    return split_statements(sql_text(name))


def split_statements(text: str) -> tuple[str, ...]:
    """The statements of a SQL text (`;` at the end of a line ends one), comments kept, empty ones dropped."""
    parts = re.split(r";[ \t]*(?:--[^\n]*)?\n", text + "\n")
    return tuple(p for p in (s.strip() for s in parts) if _has_code(p))


def _has_code(statement: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in statement.splitlines())


def run(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any] | None = None):
    """Run every statement of `sql/<name>.sql`; returns the last statement's relation/connection."""
    result = None
    for stmt in statements(name):
        result = _execute(con, stmt, params or {})
    return result


def execute_text(con: duckdb.DuckDBPyConnection, statement: str, params: dict[str, Any] | None = None):
    """Run one statement given as text (a template from `sql/` filled with schema identifiers)."""
    return _execute(con, statement, params or {})


def _execute(con: duckdb.DuckDBPyConnection, stmt: str, params: dict[str, Any]):
    mentioned = set(_PARAM.findall(_COMMENT.sub("", stmt)))
    used = {k: params[k] for k in mentioned if k in params}
    return con.execute(stmt, used) if used else con.execute(stmt)


def bound(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The `params` that `sql/<name>.sql` mentions: the values its result depends on."""
    return {k: params[k] for k in sorted(_mentions(name)) if k in params}


@functools.cache
def _mentions(name: str) -> frozenset[str]:
    return frozenset(p for stmt in statements(name) for p in _PARAM.findall(_COMMENT.sub("", stmt)))


def frame(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any] | None = None):
    """Run `sql/<name>.sql` and return its (last) result as a pandas DataFrame."""
    return run(con, name, params).df()
