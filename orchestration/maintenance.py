"""Maintenance of a long-running home: retention, compaction of the DuckDB file, zstd raw zone,
and a bounded Dagster run history. The `maintenance` asset (assets/maintenance.py) runs it daily.

- Retention (`retention` in service.yaml): raw per-step and per-sample rows `raw_days` (14),
  per-minute series, findings, evaluations, lineage and incidents `minutes_days` (400)
  (sql/maintenance/*.sql); Dagster runs older than `runs_days` (30) are deleted with their events.
- Compaction: DuckDB reuses freed blocks but never shrinks its file; when over a third of it is
  free, the database is copied into a fresh file (`COPY FROM DATABASE`, holding the write lock)
  that replaces it.
- Compression: raw-zone hours older than `compress_after_days` (1) whose files the warehouse has
  ingested as they are are compressed to `.jsonl.zst` (written beside, then renamed: a reader sees
  one or the other). DuckDB's read_json reads them directly; the raw-zone sensor takes
  `x.jsonl.zst` for the `x.jsonl` it knew; re-reading such an hour parses it whole.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import duckdb
import zstandard

from orchestration.storage import raw_watch, sql
from orchestration.storage.warehouse import duckdb_threads

ZSTD_LEVEL = 6


def apply_retention(con: duckdb.DuckDBPyConnection, now: datetime, raw_days: float, minutes_days: float) -> dict[str, int]:
    """Delete what is past retention, in one transaction; returns rows deleted per table."""
    naive = now.astimezone(timezone.utc).replace(tzinfo=None)
    params = {"raw_before": naive - timedelta(days=raw_days), "minutes_before": naive - timedelta(days=minutes_days)}
    con.execute("BEGIN TRANSACTION")
    try:
        deleted = {}
        sql.run(con, "maintenance/mark_minutes", params)   # the incident fold's marks, before the rows go
        for name in ("maintenance/delete_raw", "maintenance/delete_minutes"):
            for statement in sql.statements(name):
                table = statement.split("DELETE FROM", 1)[1].split()[0]
                result = sql.execute_text(con, statement, params).fetchone()
                deleted[table] = deleted.get(table, 0) + (int(result[0]) if result else 0)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return {t: n for t, n in deleted.items() if n}


def free_fraction(path: Path) -> float:
    with duckdb.connect(str(path), read_only=True, config=duckdb_threads()) as con:
        free, total = con.execute("SELECT free_blocks, total_blocks FROM pragma_database_size()").fetchone()
    return free / total if total else 0.0


def compact(path: Path, threshold: float = 1 / 3) -> tuple[int, int] | None:
    """Copy the database into a fresh file when over `threshold` of it is free; (bytes before, after) or None."""
    if not path.exists() or free_fraction(path) < threshold:
        return None
    size_before = path.stat().st_size
    fresh = path.with_name(path.name + ".compact")
    fresh.unlink(missing_ok=True)
    with duckdb.connect(str(path), config=duckdb_threads()) as con:   # holds the write lock while it copies
        con.execute("CHECKPOINT")
        con.execute(f"ATTACH '{fresh}' AS fresh")
        current = con.execute("SELECT current_database()").fetchone()[0]
        con.execute(f'COPY FROM DATABASE "{current}" TO fresh')
        con.execute("DETACH fresh")
    os.replace(fresh, path)
    wal = path.with_name(path.name + ".wal")
    if wal.exists() and wal.stat().st_size == 0:
        wal.unlink()
    return size_before, path.stat().st_size


def compressible_hours(root: Path, con: duckdb.DuckDBPyConnection, now: datetime, after_days: float) -> list[Path]:
    """Plain raw files of hours that ended over `after_days` ago, as the warehouse ingested them (same size)."""
    cutoff = now - timedelta(days=after_days)
    ingested = {raw_watch.relative_key(f): s for f, s in con.execute("SELECT file, size_bytes FROM ingest_files").fetchall()}
    out = []
    days = [d for d in raw_watch.day_folders(root)]
    for relative, size in raw_watch.scan_days(root, days).items():
        key = raw_watch.hour_key(relative)
        if key is None or relative.endswith(".zst"):
            continue
        hour_end = datetime.strptime(key, raw_watch.HOUR_KEY).replace(tzinfo=timezone.utc) + timedelta(hours=1)
        if hour_end <= cutoff and ingested.get(relative) == size:
            out.append(root / relative)
    return sorted(out)


def compress(path: Path) -> int:
    """`x.jsonl` -> `x.jsonl.zst` (written beside, then renamed, then the original removed); returns bytes saved."""
    target = path.with_name(path.name + ".zst")
    partial = path.with_name(path.name + ".zst.partial")
    data = path.read_bytes()
    partial.write_bytes(zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data))
    stat = path.stat()
    os.replace(partial, target)
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    path.unlink()
    return len(data) - target.stat().st_size


def trim_runs(instance: dg.DagsterInstance, now: datetime, runs_days: float, limit: int = 5000) -> int:
    """Delete Dagster runs (and their event logs) that ended more than `runs_days` ago."""
    cutoff = now - timedelta(days=runs_days)
    records = instance.get_run_records(dg.RunsFilter(updated_before=cutoff, statuses=[
        dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]), limit=limit)
    for record in records:
        instance.delete_run(record.dagster_run.run_id)
    return len(records)
