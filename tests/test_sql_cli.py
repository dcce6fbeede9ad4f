"""`goodput sql` as an analyst runs it: tables, CSV, JSON, read-only, and polite about the write lock.

A second process holds a real write transaction on the warehouse file (DuckDB allows no other
process to open it meanwhile): the command waits and answers once it is released, or gives up after
its --timeout with one line.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestration.storage.warehouse import WarehouseResource
from tests.helpers import HOLDER, goodput_in_a_fresh_process

REPO = Path(__file__).resolve().parent.parent
GOODPUT = [sys.executable, "-m", "orchestration.cli"]


def goodput(*args, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("GOODPUT_HOME", "DAGSTER_HOME")}
    return subprocess.run([*GOODPUT, *args], cwd=REPO, env=env, capture_output=True, text=True, **kw)


@pytest.fixture
def home(tmp_path) -> Path:
    """A home whose warehouse holds two quarantined lines (and the schema and views)."""
    with WarehouseResource(path=str(tmp_path / "warehouse.duckdb")).connect() as con:
        con.execute("""INSERT INTO quarantine VALUES
            ('gpu_samples', TIMESTAMP '2026-11-30 00:00:00', 'raw/a.jsonl', 3, '{"time": 1}', 'time: not a timestamp'),
            ('training_steps', TIMESTAMP '2026-11-30 01:00:00', 'raw/b.jsonl', 7, 'oops', 'not JSON')""")
    return tmp_path


QUERY = "SELECT source, line, reason, partition_start FROM quarantine ORDER BY line"


def test_prints_a_readable_table(home):
    done = goodput("sql", "--home", str(home), QUERY)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["source", "line", "reason", "partition_start"]
    assert set(lines[1]) <= {"-", " "}
    assert "gpu_samples" in lines[2] and "time: not a timestamp" in lines[2] and "2026-11-30 00:00:00" in lines[2]
    assert lines[-1] == "(2 rows)"


def test_csv_and_json(home):
    as_csv = goodput("sql", "--home", str(home), "--csv", QUERY)
    assert as_csv.returncode == 0, as_csv.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [r["source"] for r in rows] == ["gpu_samples", "training_steps"] and rows[1]["line"] == "7"
    as_json = goodput("sql", "--home", str(home), "--json", QUERY)
    assert as_json.returncode == 0, as_json.stderr
    records = json.loads(as_json.stdout)
    assert records[0] == {"source": "gpu_samples", "line": 3, "reason": "time: not a timestamp",
                          "partition_start": "2026-11-30T00:00:00"}


def test_an_analysts_query_imports_neither_dagster_nor_pandas(home):
    """`goodput sql` opens the warehouse without the pipeline (orchestration/storage/warehouse_open.py): its
    process pays DuckDB's import, not Dagster's and pandas' (~1.4 CPU-s of the 1.65 a query cost before);
    `goodput incidents` reads with the same connection, without Dagster (it tabulates with pandas)."""
    status, table, loaded = goodput_in_a_fresh_process(["sql", "--home", str(home), "--csv", QUERY])
    assert [row["source"] for row in csv.DictReader(io.StringIO("\n".join(table)))] == ["gpu_samples", "training_steps"]
    assert (status, loaded) == (0, [])
    status, listed, loaded = goodput_in_a_fresh_process(["incidents", "--home", str(home), "--status", "all"])
    assert listed[0] == f"no incidents in {home}" and (status, loaded) == (0, ["pandas"])


def test_the_views_answer_from_the_terminal(home):
    done = goodput("sql", "--home", str(home), "--json", "SELECT count(*) AS n FROM open_incidents")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"n": 0}]


def test_waits_while_another_process_holds_a_write_transaction_then_answers(home):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(home / "warehouse.duckdb")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        query = subprocess.Popen([*GOODPUT, "sql", "--home", str(home), "--timeout", "120", "--json",
                                  "SELECT reason FROM quarantine ORDER BY line"],
                                 cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the query cannot get in while the transaction is open ...
        with pytest.raises(subprocess.TimeoutExpired):
            query.wait(timeout=3)
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        out, err = query.communicate()
    finally:
        holder.kill()
        holder.wait()
    # ... and answers after it, seeing the committed row
    assert query.returncode == 0, err
    assert [r["reason"] for r in json.loads(out)] == ["written while locked", "time: not a timestamp", "not JSON"]


def test_gives_up_with_one_clear_line_after_its_timeout(home):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(home / "warehouse.duckdb")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        done = goodput("sql", "--home", str(home), "--timeout", "1.5", QUERY)
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "locked by a writing run for 1.5s" in lines[0] and "--timeout" in lines[0]


@pytest.mark.parametrize("query, says", [
    ("INSERT INTO quarantine VALUES ('x', now(), 'f', 1, 'r', 'r')", "read-only"),
    ("SELECT * FROM no_such_table", "no_such_table"),
    ("SELEC 1", "syntax error"),
])
def test_writes_and_bad_queries_are_one_line_errors(home, query, says):
    done = goodput("sql", "--home", str(home), query)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr, done.stderr
    with WarehouseResource(path=str(home / "warehouse.duckdb")).connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM quarantine").fetchone()[0] == 2


def test_missing_warehouse_says_what_to_do(tmp_path):
    done = goodput("sql", "--home", str(tmp_path), "SELECT 1")
    assert done.returncode == 2 and "goodput demo" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_table_format_aligns_numbers_and_cuts_long_cells():
    from orchestration.commands.sql import format_table

    text = format_table(["name", "value"], [("a", 1.5), ("b" * 100, 22.25)], max_rows=1)
    lines = text.splitlines()
    assert lines[0].endswith("value") and lines[2].endswith("1.5")
    assert lines[-1] == "(2 rows, 1 shown (--max-rows))"
    assert len(format_table(["x"], [("y" * 100,)]).splitlines()[2]) == 60
    assert "nan" in format_table(["x"], [(float("nan"),)])
