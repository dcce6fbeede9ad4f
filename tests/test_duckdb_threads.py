"""DuckDB's threads per query: `warehouse.threads` in service.yaml, or GOODPUT_DUCKDB_THREADS in the environment
(which decides over the file), reach every connection the warehouse opens: writers, readers and analysts.
DuckDB's own default (one thread per core) where neither says. A bad value is one line naming where it is."""

import duckdb
import pytest

from orchestration.config.service_config import ServiceConfigError
from orchestration.storage.raw_zone import VERSION_TAG
from orchestration.storage.warehouse import THREADS_ENV, WarehouseResource, warehouse_for


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


def _run_threads(home, tags: dict) -> int:
    """The threads of a warehouse connection inside a run with `tags`, as an asset of the detect job opens it."""
    import dagster as dg

    seen = []

    @dg.asset
    def probe(warehouse: WarehouseResource) -> None:
        with warehouse.connect() as con:
            seen.append(int(con.execute("SELECT current_setting('threads')").fetchone()[0]))

    assert dg.materialize([probe], resources={"warehouse": warehouse_for(home)}, tags=tags).success
    return seen[0]


@pytest.mark.parametrize("setting, live, other", [("", 1, 3), ("  live_threads: 2\n", 2, 3), ("  live_threads: 0\n", 3, 3)])
def test_a_live_tick_s_run_uses_live_threads_and_every_other_run_threads(tmp_path, monkeypatch, setting, live, other):
    """The raw-zone sensor's runs (tagged with their hour's data version) query with `warehouse.live_threads` (one by
    default: a minute of new data beside the host's work); a backfill or the demo (no tag) with `warehouse.threads`."""
    monkeypatch.delenv(THREADS_ENV, raising=False)
    (tmp_path / "service.yaml").write_text("warehouse:\n  threads: 3\n" + setting)
    assert _run_threads(tmp_path, {VERSION_TAG: "abc"}) == live
    assert _run_threads(tmp_path, {}) == other
    monkeypatch.setenv(THREADS_ENV, "4")   # the environment decides over both
    assert _run_threads(tmp_path, {VERSION_TAG: "abc"}) == 4
