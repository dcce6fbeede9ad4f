"""Issue 16 item 11: `goodput sql` cannot read or write the file system."""

import duckdb
import pytest

from orchestration.cli import main
from orchestration.config.home import warehouse_path
from orchestration.storage.warehouse import WarehouseResource


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("GOODPUT_HOME", str(tmp_path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    with WarehouseResource(path=str(warehouse_path(tmp_path))).connect() as con:
        con.execute("CREATE TABLE secrets_test AS SELECT 1 AS a")
    return tmp_path


def test_a_plain_read_only_connection_reaches_the_file_system(home):
    # The failing case: read-only protects the database, not the files around it.
    with duckdb.connect(str(warehouse_path(home)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM read_csv('/etc/passwd', header=false, sep='|')").fetchone()[0] > 0


@pytest.mark.parametrize("query", [
    "COPY (SELECT * FROM secrets_test) TO '{out}'",
    "SELECT * FROM read_csv('/etc/passwd', header=false)",
    "SELECT * FROM read_text('/etc/hostname')",
    "INSTALL httpfs",
    "ATTACH '{out}' AS other",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
])
def test_goodput_sql_refuses_file_system_access(home, query, capsys):
    out = home / "exfiltrated.csv"
    assert main(["sql", "--home", str(home), query.format(out=out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ("Permission Error" in err or "configuration has been locked" in err), err
    assert not out.exists()


def test_goodput_sql_still_answers_queries(home, capsys):
    assert main(["sql", "--home", str(home), "--csv", "SELECT a, '{\"k\": 2}'::JSON ->> 'k' AS k FROM secrets_test"]) == 0
    assert capsys.readouterr().out == "a,k\n1,2\n"
