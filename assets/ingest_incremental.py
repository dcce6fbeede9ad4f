"""Incremental ingest: a tick reads only the bytes that arrived since the last one.

`ingest_offsets` (migration 070) records, per raw file of an hour, how far it has been read: always
just past a newline, with the number of lines before that point and a digest of the 4 KiB before
it. A tick then reads each file from its offset, parses the new lines with the same SQL as the
whole hour (sql/ingest/parse.sql: same rows, same reasons, same line numbers), and in one
transaction forgets what an earlier tick stored from those lines (a last line stored without its
newline is read again with the bytes that complete it), inserts them, and moves the offsets. A
re-run at the same offsets reads nothing; a repeated read is replaced, never duplicated.

The whole hour is read instead (assets/ingest.py, which replaces it) when the hour was never read,
when a file shrank, its bytes before the offset changed, or it was written again at the same size
(rewritten, truncated), when a file that
was read is gone or compressed, or when a file name needs the Python reader; offsets are then
recorded from the sizes seen before that read, so a file that grew during it is read again from
there, not skipped.

Every write marks the baselines that read the written minutes dirty (`mark_changed`), in the same
transaction as the rows (the whole-hour read: before it, as a mark that says too much is harmless),
so a live run recomputes only those minutes (assets/baselines.py).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from assets.ingest_core import _CODE_COMMENT, _GLOB, _READS_RAW, RawSource, ingest_partition, parse_sql, target_fields
from orchestration.partitions import naive_utc
from orchestration.shards import Shard
from orchestration.storage import sql
from orchestration.storage.raw_zone import lines_frame
from orchestration.storage.warehouse import transaction

TAIL = 4096
READ_FILES = "read_text($files::VARCHAR[])"   # the whole-hour reader in sql/ingest/parse.sql


def file_key(path: str | Path) -> str:
    """A raw file's key: its path relative to the raw root (`<source>/<day>/<HH>/<file>`)."""
    return "/".join(Path(path).parts[-4:])


def tail_digest(path: Path, consumed: int) -> str:
    with open(path, "rb") as fh:
        begin = max(0, consumed - TAIL)
        fh.seek(begin)
        return hashlib.sha1(fh.read(consumed - begin)).hexdigest()


def complete_prefix(path: Path, size: int) -> tuple[int, int]:
    """(bytes up to and including the last newline within the first `size` bytes, newlines there)."""
    if size == 0:
        return 0, 0
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        data = np.frombuffer(mapped, dtype=np.uint8, count=min(size, len(mapped)))
        newlines = np.flatnonzero(data == 10)
        result = (int(newlines[-1]) + 1 if len(newlines) else 0, len(newlines))
        del data, newlines
    return result


@dataclass
class Work:
    path: Path
    offset: int
    lines: int
    size: int
    modified_ns: int
    partial: bool = False
    """The last read stored a last line without its newline: it is read again, and what it stored forgotten."""


def plan(con: duckdb.DuckDBPyConnection, source: RawSource, files: list[Path], start: datetime) -> list[Work] | None:
    """What to read of each file, or None when the hour must be read whole."""
    rows = sql.frame(con, "ingest_append/offsets", {"source": source.folder, "start": start})
    if rows.empty and not files:
        return []     # nothing to read, nothing read before
    if rows.empty or (rows["logged"] & rows["consumed_bytes"].isna()).any():
        return None
    known = {r.file_key: r for r in rows.itertuples() if pd.notna(r.consumed_bytes)}
    work, seen = [], set()
    for path in files:
        key = file_key(path)
        if path.name.endswith(".zst") or _GLOB.search(str(path)):
            return None
        stat = path.stat()
        seen.add(key)
        row = known.get(key)
        if row is None:
            work.append(Work(path, 0, 0, stat.st_size, stat.st_mtime_ns))
            continue
        offset = int(row.consumed_bytes)
        if stat.st_size < offset or tail_digest(path, offset) != row.tail_digest:
            return None
        if stat.st_size == int(row.size_bytes) and pd.notna(row.logged_modified_ns) \
                and stat.st_mtime_ns != int(row.logged_modified_ns):
            return None   # written again at the same size: not an append
        if stat.st_size != int(row.size_bytes):
            work.append(Work(path, offset, int(row.line_count), stat.st_size, stat.st_mtime_ns,
                             partial=int(row.size_bytes) > offset))
    if set(known) - seen:
        return None   # a file that was read is gone (or renamed): the hour is read whole
    return work


def read_appended(work: list[Work]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(raw_lines, appended): the new lines as sql/ingest/parse.sql's `raw_lines` takes them, and
    each file's first line number read this tick."""
    def parts():
        for item in work:
            with open(item.path, "rb") as fh:
                fh.seek(item.offset)
                yield str(item.path), fh.read(item.size - item.offset), item.lines

    lines = lines_frame(parts())
    appended = pd.DataFrame({"file": pd.Series([str(item.path) for item in work], dtype="object"),
                             "first_line": pd.Series([item.lines + 1 for item in work], dtype="int64")})
    return lines, appended


def offsets_frame(work: list[Work]) -> pd.DataFrame:
    """The offsets after reading `work` to each item's size: just past its last complete line."""
    rows = []
    for item in work:
        consumed, newlines = complete_prefix(item.path, item.size)
        rows.append({"file_key": file_key(item.path), "size_bytes": item.size, "consumed_bytes": consumed,
                     "line_count": newlines, "tail_digest": tail_digest(item.path, consumed)})
    return pd.DataFrame(rows, columns=["file_key", "size_bytes", "consumed_bytes", "line_count", "tail_digest"])


def mark_changed(con: duckdb.DuckDBPyConnection, table: str, first, last) -> None:
    """The per-minute series read from `table` are dirty from `first`'s minute, and as far as their
    trailing baselines read `last` (sql/baselines/mark_dirty.sql; a no-op for a table none reads)."""
    if first is not None and not pd.isna(first):
        sql.run(con, "baselines/mark_dirty", {"source": table, "first": first, "last": last})


def _template(name: str, table: str, payload: bool) -> str:
    text = sql.sql_text(name)
    return text.replace("/*@table*/", table).replace("/*@payload*/", "raw::JSON AS payload," if payload else "")


def ingest_appended(con: duckdb.DuckDBPyConnection, source: RawSource, work: list[Work], start: datetime, end: datetime) -> dict:
    """Read `work` (files from their offsets) into `source.table`, in one transaction."""
    lines, appended = read_appended(work)
    fields = target_fields(con, source.table)
    required = [f for f in source.required if f != "time"]
    statement, shape = parse_sql(fields, required)
    keep_raw = bool(_READS_RAW.search(_CODE_COMMENT.sub("", sql.sql_text(f"ingest/{source.table}"))))
    params = {"shape": json.dumps(shape), "start": start, "end": end, "source": source.folder, "keep_raw": keep_raw}
    # every new line comes from Python (`raw_lines`): DuckDB's own file reader reads no file here
    if READ_FILES not in statement:
        raise RuntimeError(f"sql/ingest/parse.sql no longer reads {READ_FILES}: update assets/ingest_incremental.py")
    con.register("raw_lines", lines)
    try:
        sql.execute_text(con, statement.replace(READ_FILES, "read_text([]::VARCHAR[]) LIMIT 0"), params)
    finally:
        con.unregister("raw_lines")
    touched = pd.DataFrame({"file": pd.Series([str(w.path) for w in work], dtype="object"),
                            "size_bytes": pd.Series([w.size for w in work], dtype="int64"),
                            "modified_ns": pd.Series([w.modified_ns for w in work], dtype="int64")})
    offsets = offsets_frame(work)
    # Forgetting and recounting scan the hour's rows: only when a file's last read ended inside a line
    # (rare: a writer caught mid-line); otherwise the new lines are added and the log's counts grow.
    steps = (("ingest_append/forget_lines", "ingest_append/insert_rows", "ingest_append/file_log")
             if any(w.partial for w in work) else ("ingest_append/insert_rows", "ingest_append/file_log_added"))
    with transaction(con, appended=appended, touched=touched, offsets=offsets):
        for name in steps:
            sql.execute_text(con, _template(name, source.table, keep_raw), params)
        sql.run(con, "ingest_append/offsets_replace", {"source": source.folder, "start": start, "whole": False})
        mark_changed(con, source.table, *con.execute("SELECT min(time), max(time) FROM parsed WHERE reason IS NULL").fetchone())
        loaded, quarantined = con.execute(
            "SELECT count(*) FILTER (WHERE reason IS NULL), count(*) FILTER (WHERE reason IS NOT NULL) FROM parsed").fetchone()
        reasons = con.execute("SELECT reason, count(*) AS n FROM parsed WHERE reason IS NOT NULL "
                              "GROUP BY reason ORDER BY n DESC, reason LIMIT 10").fetchall()
    con.execute("DROP TABLE IF EXISTS parsed")
    return {"files": len(work), "rows_loaded": loaded, "rows_quarantined": quarantined, "reasons": reasons,
            "parse": "appended", "bytes_read": int(sum(w.size - w.offset for w in work)),
            "forgot": any(w.partial for w in work)}


def still_there(files: list[Path]) -> list[Path]:
    """The listed files that still exist: one deleted since the listing is skipped, as the next
    listing would skip it, instead of failing the whole source-hour."""
    kept = []
    for path in files:
        try:
            path.stat()
        except FileNotFoundError:
            continue
        kept.append(path)
    return kept


def ingest_hour(con: duckdb.DuckDBPyConnection, source: RawSource, files: list[Path], start: datetime, end: datetime,
                incremental: bool = True, shard: Shard | None = None) -> dict:
    """Ingest one hour of one source: only what arrived since the last read when that is known,
    else the whole hour (replaced) with its offsets recorded. A `shard`'s hour is read whole: the
    appended-bytes path keeps no per-shard offsets yet."""
    start, end = naive_utc(start), naive_utc(end)
    files = still_there(files)
    work = plan(con, source, files, start) if incremental and shard is None else None
    if work is not None:
        if not work:
            return {"files": 0, "rows_loaded": 0, "rows_quarantined": 0, "reasons": [], "parse": "nothing new",
                    "bytes_read": 0}
        return ingest_appended(con, source, work, start, end)
    # Sizes before the read: a file that grows during it is read again from there next time.
    before = [Work(p, 0, 0, (s := p.stat()).st_size, s.st_mtime_ns) for p in files]
    with transaction(con):   # the whole hour may change (rows deleted too): its baselines are dirty first
        mark_changed(con, source.table, start, end)
    result = ingest_partition(con, source, files, start, end, shard=shard)
    plain = [w for w in before if not w.path.name.endswith(".zst") and not _GLOB.search(str(w.path))]
    offsets = offsets_frame(plain) if len(plain) == len(before) else offsets_frame([])
    logged = shard.log_source(source.folder) if shard else source.folder
    with transaction(con, offsets=offsets):
        sql.run(con, "ingest_append/offsets_replace", {"source": logged, "start": start, "whole": True})
    return {**result, "bytes_read": int(sum(w.size for w in before))}


def environment_allows_incremental() -> bool:
    """`GOODPUT_INGEST_WHOLE_HOUR=1` reads every hour whole (the former behaviour, for comparison)."""
    return os.environ.get("GOODPUT_INGEST_WHOLE_HOUR", "") not in ("1", "true", "yes")
