"""Dagster's SQLite event log with its connections kept open: the embedded instance's event storage.

Dagster's `SqliteEventLogStorage` creates an SQLAlchemy engine, opens the SQLite file and disposes
of both for every read and write of an event (a detect run stores ~200 events through ~1,400 such
opens: about a fifth of a small detect run's CPU, BENCHMARKS.md section 32). This subclass keeps one
open connection per database file (the index and the few most recent runs' files), reused under the
storage's own lock, so an event costs its statements, not a file open. Everything else (schema,
files, watchers, what is stored) is Dagster's. The home's dagster.yaml names it
(orchestration/config/home.py); a home written before keeps working with either class.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from dagster import StringSource
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sql import create_engine
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy.pool import StaticPool

OPEN_FILES = 8
"""Database files kept open per process: the index and the recent runs' (a run writes only its own)."""


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """`SqliteEventLogStorage` that reuses one connection per database file in `base_dir` (the
    home's dagster.yaml names `<instance>/history/runs`, where Dagster's default storage keeps them)."""

    def __init__(self, base_dir: str, inst_data=None):
        self._engines: OrderedDict[str, object] = OrderedDict()
        super().__init__(base_dir, inst_data)

    @classmethod
    def config_type(cls):
        return {"base_dir": StringSource}

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str):
        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        engine = create_engine(self.conn_string_for_shard(shard), poolclass=StaticPool,
                               connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False})
        if shard not in self._initialized_dbs:
            self._initdb(engine)
            self._initialized_dbs.add(shard)
        self._engines[shard] = engine
        while len(self._engines) > OPEN_FILES:
            self._engines.popitem(last=False)[1].dispose()
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator:
        with self._db_lock:
            with self._engine(shard).connect() as conn, conn.begin():
                yield conn

    def _close_all(self) -> None:
        with self._db_lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()

    def wipe(self) -> None:
        self._close_all()
        super().wipe()

    def dispose(self) -> None:
        self._close_all()
        super().dispose()
