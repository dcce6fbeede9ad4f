"""Ingest, raw zone -> DuckDB, without Dagster: the sources and one hour's parse and write
(assets/ingest.py makes one hourly-partitioned asset per source of it).

Each partition run reads its hour's files, parses every line in DuckDB against the target
table's columns, and in one transaction replaces the hour's rows, its quarantined lines (with a
reason) and its ingest log. Running a partition twice leaves identical tables; a crash leaves
the previous state; one bad line never costs the good lines around it.

Two parses, one result: an hour whose lines are all good (the usual hour) goes through DuckDB's
own strict `read_json` (sql/ingest/clean_*.sql, ~1.7x faster); the first line it cannot vouch for
sends the whole hour, with nothing written, to the line-by-line parse (sql/ingest/parse.sql) that
quarantines each bad line with its reason. tests/test_ingest.py holds both to the same tables.

A shard's partition (orchestration/shards.py) parses its files line by line, keeps only its hosts' lines
(sql/shards/keep_lines.sql) and replaces only its hosts' rows of the hour, with an ingest log of its own.
"""


import json
import mmap
import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from assets import ingest_ranges
from orchestration.partitions import naive_utc
from orchestration.shards import Shard
from orchestration.storage import sql
from orchestration.storage.raw_zone import read_lines
from orchestration.storage.warehouse import transaction


@dataclass(frozen=True)
class RawSource:
    """A raw-zone source: the folder its producers write, the table it lands in, required fields."""

    folder: str
    table: str
    required: tuple[str, ...]
    description: str
    producers: tuple[str, ...] = ()   # assets that write this folder (run before the ingest in one job)


SOURCES = (
    RawSource("gpu_samples", "gpu_samples", ("time", "host", "gpu_index"),
              "GPU samples, one per GPU per interval (NVML agent, dcgm-exporter, simulator).", ("prometheus_pull",)),
    RawSource("training_steps", "training_steps", ("time", "run_id", "rank", "step"),
              "Training step records, one per rank per step (training-side client, log importers)."),
    RawSource("lineage", "lineage_events", ("time", "event"),
              "Lineage events: runs started and ended, checkpoints saved, model versions."),
    RawSource("serving_metrics", "serving_metrics", ("time", "endpoint"),
              "Serving metrics per endpoint and model version (Prometheus: vLLM latency quantiles, queue, KV cache).",
              ("prometheus_pull",)),
    RawSource("predictions", "predictions", ("time", "endpoint", "request_id"),
              "Prediction logs: one record per served request (features, prediction, confidence)."),
    RawSource("prediction_outcomes", "prediction_outcomes", ("time", "request_id"),
              "Late-arriving prediction outcomes, joined to predictions by request id."),
)


def target_fields(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    rows = sql.run(con, "ingest/target_fields", {"table": table}).fetchall()
    return {name: kind for name, kind in rows}


_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


def parse_sql(fields: dict[str, str], required: list[str]) -> tuple[str, dict[str, str]]:
    """sql/ingest/parse.sql filled in for a target table, and the `$shape` its one JSON parse uses.

    Per field, columnar and only where the parse left a doubt (a NULL): a required field that is
    absent or null is "missing"; a field present with a non-null value that did not convert to the
    column's type is "wrong type". (A per-row JSON lookup of every field costs several parses.)"""
    names = list(dict.fromkeys([*fields, *required]))
    bad = [n for n in names if not _IDENTIFIER.match(n)]
    if bad:
        raise ValueError(f"column names that are not plain identifiers: {bad}")
    shape = {**{n: ingest_ranges.parsed_type(t) for n, t in fields.items()}, "time": "VARCHAR", "quarantine_reason": "JSON"}
    # j.<n> is NULL when the field is absent, null or not convertible; json_type tells which.
    present = {n: f"coalesce(json_type(raw, '$.{n}'), 'NULL') <> 'NULL'" for n in names}
    missing = [f"CASE WHEN j.{n} IS NULL AND NOT ({present[n]}) THEN '{n}' END" for n in required]
    mistyped = [f"CASE WHEN j.{n} IS NULL AND {present[n]} THEN '{n} (expected {t.replace(chr(39), '')})' END"
                for n, t in fields.items()]
    text = sql.sql_text("ingest/parse")
    for marker, value in (
        ("/*@missing*/", ", ".join(missing) or "NULL"),
        ("/*@mistyped*/", ", ".join(mistyped) or "NULL"),
        ("/*@required_null*/", "".join(f" OR j.{n} IS NULL" for n in required)),
        ("/*@out_of_range*/", ingest_ranges.reasons_sql("j", fields)),
        ("/*@fields*/", ", ".join(f"{n} := {ingest_ranges.value('j', n, t)}" for n, t in fields.items())),
    ):
        text = text.replace(marker, value)
    return text, shape


# read_text takes each path as a glob pattern: a file whose name holds a glob character is read in Python.
_GLOB = re.compile(r"[*?\[\]{}]")
_READS_RAW = re.compile(r"\braw\b")
_CODE_COMMENT = re.compile(r"--[^\n]*")


def _parse(con: duckdb.DuckDBPyConnection, statement: str, params: dict, in_duckdb: list[str], by_python: list[Path]) -> None:
    """Fill the temporary table `parsed`: DuckDB reads `in_duckdb`, Python reads `by_python`."""
    con.register("raw_lines", read_lines(by_python))
    try:
        sql.execute_text(con, statement, {**params, "files": in_duckdb})
    finally:
        con.unregister("raw_lines")


def line_count(name: str, chunk: int = 64 << 20) -> int:
    """Lines in a file as the full parse numbers them: its newlines, plus a last line that has none.
    The file is mapped, not read, and counted by numpy a chunk at a time (2x faster than bytes.count)."""
    with open(name, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return 0
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            data = np.frombuffer(mapped, dtype=np.uint8)
            newlines = sum(int(np.count_nonzero(data[i:i + chunk] == 10)) for i in range(0, len(data), chunk))
            unterminated = int(data[-1] != 10)
            del data   # the map cannot close while an array still points into it
    return newlines + unterminated


def line_counts(files: list[str]) -> list[int]:
    return [line_count(name) for name in files]


_NEEDS_FULL_PARSE = "goodput-needs-full-parse"   # the error() text of sql/ingest/clean_write.sql


def _ingest_clean(con: duckdb.DuckDBPyConnection, table: str, fields: dict[str, str], required: list[str],
                  files: list[str], file_stats: pd.DataFrame, params: dict) -> dict | None:
    """The fast path: the hour through DuckDB's own strict `read_json`, written only if every line is
    good. Returns None, having written nothing, when any line needs the full parse (a bad line, a
    blank line, a file that grew while it was read): the full parse then finds and quarantines it."""
    typed = {name: kind for name, kind in fields.items() if name not in ("source_file", "source_line")}
    shape = {name: ingest_ranges.parsed_type(kind) for name, kind in typed.items()}
    shape.update(time="VARCHAR", quarantine_reason="JSON")
    write = sql.sql_text("ingest/clean_write")
    for marker, value in (("/*@table*/", table),
                          ("/*@fields*/", ", ".join(f"{ingest_ranges.value('c', n, t)} AS {n}" for n, t in typed.items())),
                          ("/*@required_present*/", "".join(f" AND c.{n} IS NOT NULL" for n in required)),
                          ("/*@in_range*/", f" AND {ingest_ranges.all_in_range_sql('c', typed)}")):
        write = write.replace(marker, value)
    try:
        # Count first, then parse: a line appended in between makes the parse see more lines than
        # counted, which sends the hour to the full parse (never a race between two readers).
        counts = line_counts(files)
        try:
            sql.run(con, "ingest/clean_read", {"files": files, "shape": shape})
        except duckdb.Error:
            return None
        lines = pd.Series(counts, dtype="int64")
        con.register("file_lines", pd.DataFrame({"file": pd.Series(files, dtype="object"),
                                                 "first_row": lines.cumsum() - lines, "lines": lines}))
        if sql.run(con, "ingest/clean_lines").fetchone()[0]:
            return None
        try:
            with transaction(con, file_stats=file_stats):
                sql.execute_text(con, write, params)
        except duckdb.Error as error:
            if _NEEDS_FULL_PARSE in str(error):
                return None
            raise
    except UnicodeDecodeError:   # DuckDB's error about a bad line cut a character of its text in two, and the
        return None              # binding could not decode it: the full parse finds and quarantines the line
    finally:
        con.execute("DROP TABLE IF EXISTS clean")
        con.unregister("file_lines")
    return {"files": len(files), "rows_loaded": int(lines.sum()), "rows_quarantined": 0, "reasons": [], "parse": "fast"}


def ingest_partition(
    con: duckdb.DuckDBPyConnection, source: RawSource, files: list[Path], start: datetime, end: datetime,
    fast: bool = True, shard: Shard | None = None,
) -> dict:
    """Replace [start, end) of `source.table` from `files`, atomically. Returns counts and reasons.

    An hour whose lines are all good takes the fast path (DuckDB's `read_json`); any other hour, or
    `fast=False`, is parsed line by line so that each bad line is quarantined with its reason.
    With `shard`: that shard's hosts' lines and rows only (parsed line by line)."""
    start, end = naive_utc(start), naive_utc(end)
    stats = [f.stat() for f in files]
    file_stats = pd.DataFrame(
        {
            "file": pd.Series([str(f) for f in files], dtype="object"),
            "size_bytes": pd.Series([s.st_size for s in stats], dtype="int64"),
            "modified_ns": pd.Series([s.st_mtime_ns for s in stats], dtype="int64"),
        }
    )
    fields = target_fields(con, source.table)
    required = [f for f in source.required if f != "time"]
    statement, shape = parse_sql(fields, required)
    params = {
        "shape": json.dumps(shape),
        "start": start,
        "end": end,
        "source": shard.log_source(source.folder) if shard else source.folder,
        **(shard.params() if shard else {}),
        # the good lines' text is kept only for a table whose write statement stores it
        "keep_raw": bool(_READS_RAW.search(_CODE_COMMENT.sub("", sql.sql_text(f"ingest/{source.table}")))),
    }
    # The parse fills a temporary table before the transaction (it writes nothing durable), so that a
    # file read_text refuses (not UTF-8) can be retried without aborting the transaction.
    # a compressed hour (.jsonl.zst) is read in Python too: read_text does not decompress
    in_duckdb = [str(f) for f in files if not _GLOB.search(str(f)) and not f.name.endswith(".zst")]
    by_python = [f for f in files if _GLOB.search(str(f)) or f.name.endswith(".zst")]
    if fast and in_duckdb and not by_python and not params["keep_raw"] and shard is None:
        clean = _ingest_clean(con, source.table, fields, required, in_duckdb, file_stats, params)
        if clean is not None:
            return clean
    try:
        _parse(con, statement, params, in_duckdb, by_python)
    except duckdb.InvalidInputException as error:
        if "UTF-8" not in str(error):
            raise
        not_utf8 = {f for (f,) in sql.run(con, "ingest/not_utf8", {"files": in_duckdb}).fetchall()}
        _parse(con, statement, params, [f for f in in_duckdb if f not in not_utf8],
               by_python + [Path(f) for f in in_duckdb if f in not_utf8])
    if shard is not None:
        sql.run(con, "shards/keep_lines", params)
    with transaction(con, file_stats=file_stats):
        sql.run(con, f"shards/{source.table}" if shard else f"ingest/{source.table}", params)
        sql.run(con, "ingest/quarantine", params)
        loaded, quarantined = con.execute(
            "SELECT count(*) FILTER (WHERE reason IS NULL), count(*) FILTER (WHERE reason IS NOT NULL) FROM parsed"
        ).fetchone()
        reasons = con.execute(
            "SELECT reason, count(*) AS n FROM parsed WHERE reason IS NOT NULL GROUP BY reason ORDER BY n DESC, reason LIMIT 10"
        ).fetchall()
        con.execute("DROP TABLE parsed")
    return {"files": len(files), "rows_loaded": loaded, "rows_quarantined": quarantined, "reasons": reasons, "parse": "full"}
