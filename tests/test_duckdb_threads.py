"""DuckDB's threads per query: `warehouse.threads` in service.yaml, or GOODPUT_DUCKDB_THREADS in the environment
(which decides over the file), reach every connection the warehouse opens: writers, readers and analysts.
DuckDB's own default (one thread per core) where neither says. A bad value is one line naming where it is."""

import duckdb
import pytest

from orchestration.config.service_config import ServiceConfigError
from orchestration.storage.warehouse import THREADS_ENV, warehouse_for


def _threads(home) -> list[int]:
    warehouse = warehouse_for(home)
    found = []
    for kind in ({}, {"read_only": True}, {"analyst": True}):
        with warehouse.connect(**kind) as con:
            found.append(int(con.execute("SELECT current_setting('threads')").fetchone()[0]))
    return found


def test_duckdb_s_default_where_nothing_says(tmp_path, monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    with duckdb.connect() as con:
        default = int(con.execute("SELECT current_setting('threads')").fetchone()[0])
    assert _threads(tmp_path) == [default] * 3


def test_the_home_s_setting_and_the_environment_over_it(tmp_path, monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    (tmp_path / "service.yaml").write_text("warehouse:\n  threads: 1\n")
    assert _threads(tmp_path) == [1, 1, 1]
    monkeypatch.setenv(THREADS_ENV, "3")
    assert _threads(tmp_path) == [3, 3, 3]


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_environment_value_names_the_variable(tmp_path, monkeypatch, value):
    monkeypatch.setenv(THREADS_ENV, value)
    with pytest.raises(ValueError, match=f"{THREADS_ENV}='{value}': set a whole number"):
        _threads(tmp_path)


def test_a_bad_setting_names_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    (tmp_path / "service.yaml").write_text("warehouse:\n  threads: 0\n")
    with pytest.raises(ServiceConfigError, match="service.yaml.*threads"):
        warehouse_for(tmp_path)
