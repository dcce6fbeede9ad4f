"""Fixtures of the distributed tests (issue 21): a throwaway PostgreSQL and Redis on loopback (one
each per session) and a fresh lake (its own catalog database and data folder) per test. They skip
with the reason when Debian's PostgreSQL or Redis binaries are absent."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from orchestration.service.local_services import LocalPostgres, LocalRedis, postgres_bin, redis_bin
from orchestration.storage.warehouse import WarehouseResource

_databases = itertools.count()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    if postgres_bin() is None:
        pytest.skip("PostgreSQL binaries absent (/usr/lib/postgresql/*/bin/initdb): run scripts/setup.sh")
    server = LocalPostgres(tmp_path_factory.mktemp("postgres")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis(tmp_path_factory):
    if redis_bin() is None:
        pytest.skip("redis-server absent: run scripts/setup.sh")
    server = LocalRedis(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


def new_lake(postgres: LocalPostgres, folder: Path) -> dict:
    """A fresh catalog database and data folder: the `warehouse:` settings of a lake home."""
    dbname = f"lake_{next(_databases)}"
    postgres.create_database(dbname)
    data = folder / "lake-data"
    data.mkdir(parents=True, exist_ok=True)
    return {"backend": "ducklake", "catalog": postgres.libpq(dbname), "data_path": str(data) + "/"}


def write_lake_settings(home: Path, settings: dict) -> None:
    """Make `home` a lake home: its service.yaml's `warehouse:` section."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "service.yaml").write_text(yaml.safe_dump({"warehouse": settings}))


@pytest.fixture(scope="session")
def lake(postgres, tmp_path_factory) -> WarehouseResource:
    """One lake for the session, migrated (the first migration of a lake costs tens of seconds of catalog
    commits): its tests write partitions of their own."""
    folder = tmp_path_factory.mktemp("lake")
    warehouse = WarehouseResource(path=str(folder / "unused.duckdb"), **new_lake(postgres, folder))
    with warehouse.connect():
        pass
    return warehouse
