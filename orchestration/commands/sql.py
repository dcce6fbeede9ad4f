"""`goodput sql "SELECT ..."`: ask the warehouse a question from the terminal, read-only.

The connection is read-only and lives for one query, so the scheduled runs wait for it at most that
long. DuckDB lets one process write a file and no other process open it meanwhile: while a run holds
the write lock this command waits politely (retrying with backoff) up to `--timeout` seconds, then
gives up with one line. Output is a readable table, or `--csv` / `--json` for other tools.
The connection is an analyst's (orchestration/storage/warehouse_open.py: `analyst_for`, no Dagster loaded):
DuckDB's external access is off and its configuration locked, so a query cannot read or write other files
(COPY ... TO, read_csv, INSTALL, ATTACH).
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import math
import sys
import uuid

import duckdb
from tabulate import tabulate

from orchestration.commands.common import CliError, use_home
from orchestration.progress import Ticker

DEFAULT_TIMEOUT_SECONDS = 60.0


def add_parser(sub) -> None:
    p = sub.add_parser("sql", help="run one read-only SQL query on the warehouse (tables and the analyst views)",
                       description="Run one read-only query on the home's warehouse. The analyst views "
                                   "(goodput, run_health, open_incidents, ...) are described in docs/analysts.md.")
    p.add_argument("query", help='the query, e.g. "SELECT * FROM open_incidents"')
    p.add_argument("--home", help="GOODPUT_HOME (default: $GOODPUT_HOME or ./.goodput)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="print CSV (header line first)")
    fmt.add_argument("--json", action="store_true", help="print a JSON array of objects")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS,
                   help=f"seconds to wait while a run holds the write lock (default {DEFAULT_TIMEOUT_SECONDS:.0f})")
    p.add_argument("--max-rows", type=int, default=1000, help="rows shown in the table format (default 1000; 0: all)")
    p.set_defaults(func=cmd_sql)


def cmd_sql(args) -> int:
    from orchestration.config.home import warehouse_path
    from orchestration.storage.warehouse_open import WarehouseBusy

    home = use_home(args.home)
    try:
        columns, rows = _query(home, args.query, 0.0)
    except WarehouseBusy:
        # a run is writing: wait politely, with a live line on a terminal
        with Ticker() as ticker:
            ticker.update(f"waiting for a writing run to release the warehouse (up to {args.timeout:g}s)")
            try:
                columns, rows = _query(home, args.query, max(args.timeout, 0.0))
            except WarehouseBusy as error:   # the holder: its PID and command, when the OS says
                raise CliError(f"the warehouse {warehouse_path(home)} stayed locked by a writing run for {args.timeout:g}s "
                               f"(held by {error.holder}); try again, or pass a longer --timeout") from None
    out = sys.stdout
    if args.csv:
        write_csv(out, columns, rows)
    elif args.json:
        json.dump([dict(zip(columns, (_plain(v) for v in row))) for row in rows], out, indent=1)
        out.write("\n")
    else:
        out.write(format_table(columns, rows, args.max_rows))
    return 0


def _query(home, query: str, wait_seconds: float) -> tuple[list[str], list[tuple]]:
    """(columns, rows) of one query on a short-lived read-only connection (an analyst's: no Dagster imported)."""
    from orchestration.storage.warehouse_open import analyst_for

    with analyst_for(home, wait_seconds) as con:   # no file-system access
        try:
            cursor = con.execute(query)
        except duckdb.Error as error:
            raise CliError(f"query failed: {_one_line(error)}") from None
        if cursor.description is None:
            raise CliError("the statement returned no rows; `goodput sql` runs queries (SELECT, DESCRIBE, SHOW, ...)")
        return [d[0] for d in cursor.description], cursor.fetchall()


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def _plain(value):
    """A JSON-friendly value: ISO times, finite floats (else null), lists and maps kept."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID | bytes):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds" if value.microsecond else "seconds")
    if isinstance(value, list | tuple):
        return ", ".join(_cell(v) for v in value)
    return " ".join(str(value).split())


def write_csv(out, columns: list[str], rows: list[tuple]) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else json.dumps(_plain(v)) if isinstance(v, list | dict) else _plain(v) for v in row])


def format_table(columns: list[str], rows: list[tuple], max_rows: int = 0, max_width: int = 60) -> str:
    """A plain aligned table (numbers right-aligned), long cells cut at `max_width`, and a row count."""
    shown = rows if max_rows <= 0 else rows[:max_rows]
    cells = [[_cut(_cell(v), max_width) for v in row] for row in shown]
    numeric = [all(isinstance(row[i], int | float | decimal.Decimal) or row[i] is None for row in shown) and bool(shown)
               for i in range(len(columns))]
    table = tabulate(cells, headers=columns, tablefmt="simple", disable_numparse=True,
                     colalign=["right" if num else "left" for num in numeric])
    more = f", {len(shown)} shown (--max-rows)" if len(shown) < len(rows) else ""
    return f"{table}\n({len(rows)} row{'s' if len(rows) != 1 else ''}{more})\n"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
