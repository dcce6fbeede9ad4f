"""One DuckDB engine per process, to which each warehouse connection attaches the file.

A DuckDB database instance costs 13-25 ms of CPU to start and to tear down (it builds and frees its whole
function catalogue), whatever the file, and a detect run opens the warehouse once per step (20 steps) as do
the sensors and CLI commands: opening a file connects a whole new instance. Here the process keeps one
in-memory engine and each `open_file` ATTACHes the file to it (`USE`d as the connection's default catalog,
so every SQL file, macro and view runs unchanged); when its last user closes, the file is DETACHed, which
checkpoints it and releases its lock exactly as closing a connection did (BENCHMARKS.md section 46).

Connections to the same file at once in one process share the attachment, as DuckDB's own instance cache
shared one database; asking for it with another mode (read-only against read-write) or another
configuration is refused as DuckDB refuses it. A forked child starts with no engine: it meets its parent's
lock as any other process does.
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass

import duckdb

from orchestration.storage.sql import literal


@dataclass
class _Attachment:
    engine: duckdb.DuckDBPyConnection
    alias: str
    read_only: bool
    config: tuple
    users: int = 0


_lock = threading.Lock()
_engines: dict[tuple, duckdb.DuckDBPyConnection] = {}
_attached: dict[str, _Attachment] = {}
_names = itertools.count(1)
_inherited: list = []   # a forked child's copies of its parent's engines: kept, never closed (see below)


def _fresh_in_child() -> None:
    """A forked child inherits the parent's engines, which it must not use: it starts its own (and a lock of
    its own: another thread may have held it at the fork). The copies are kept referenced, never closed:
    closing one would checkpoint a file the parent still holds."""
    global _lock
    _lock = threading.Lock()
    _inherited.append((dict(_engines), dict(_attached)))
    _engines.clear()
    _attached.clear()


os.register_at_fork(after_in_child=_fresh_in_child)


class Connection:
    """`con`, a connection whose default catalog is the attached file; `close()` it (once)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str, entry: _Attachment):
        self.con, self._path, self._entry = con, path, entry

    def close(self) -> None:
        """Close the connection; the last one out detaches the file (checkpoint, lock released)."""
        try:
            self.con.close()
        finally:
            _release(self._path, self._entry)


class Plain:
    """A connection of its own database instance (an analyst's, whose settings are locked), with `close()`."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con, self.close = con, con.close


def open_file(path: str, read_only: bool = False, config: dict | None = None) -> Connection:
    """A connection to the DuckDB file `path` (created if missing, unless `read_only`), as its default
    catalog. Raises what `duckdb.connect(path)` raises: IOException for a held lock or a file that is not
    a DuckDB database."""
    key = tuple(sorted((config or {}).items()))
    path = os.path.realpath(path)   # one file, one attachment, however a caller spells its path
    with _lock:
        entry = _attached.get(path)
        if entry is None:
            engine = _engines.get(key)
            if engine is None:
                engine = _engines[key] = duckdb.connect(":memory:", config=dict(key))
            alias = f"warehouse_{next(_names)}"
            engine.execute(f"ATTACH {literal(path)} AS {alias}" + (" (READ_ONLY)" if read_only else ""))
            entry = _attached[path] = _Attachment(engine, alias, read_only, key)
        elif entry.read_only != read_only or entry.config != key:
            raise duckdb.ConnectionException(
                f"Can't open a connection to same database file with a different configuration than existing "
                f"connections: {path} is open {'read-only' if entry.read_only else 'read-write'} in this process")
        entry.users += 1
        try:
            con = entry.engine.cursor()   # under the lock: the engine's own connection is not thread-safe
        except BaseException:
            _release_locked(path, entry)
            raise
    try:
        con.execute(f"USE {entry.alias}")
    except BaseException:
        con.close()
        _release(path, entry)
        raise
    return Connection(con, path, entry)


def _release(path: str, entry: _Attachment) -> None:
    with _lock:
        _release_locked(path, entry)


def _release_locked(path: str, entry: _Attachment) -> None:
    """One user fewer (the caller holds `_lock`); the last one detaches the file."""
    entry.users -= 1
    if entry.users > 0 or _attached.get(path) is not entry:
        return
    del _attached[path]
    try:
        entry.engine.execute(f"DETACH {entry.alias}")
    except BaseException:
        # never keep a file's lock past its last user: close the whole engine (every file it holds)
        for key, engine in list(_engines.items()):
            if engine is entry.engine:
                del _engines[key]
        for other, attachment in list(_attached.items()):
            if attachment.engine is entry.engine:
                del _attached[other]
        entry.engine.close()
        raise
