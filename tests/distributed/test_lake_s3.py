"""A lake whose data lives in an S3 bucket (issue 21): the catalog in PostgreSQL on loopback, the Parquet
files in an S3-compatible store reached through DuckDB's httpfs extension (loaded from its wheel), with
the credentials and endpoint from the standard AWS environment variables. The store is moto's server on
loopback: the S3 API over HTTP, as MinIO or AWS would answer it (an object store is the one part a CI
machine cannot have for real).

- Migrations, an hour's ingest written twice (the second replaces the first) and reads run as on a
  shared path; the rows land once, as Parquet objects in the bucket.
- The daily maintenance deletes the replaced files from the bucket.
- The secret: path-style URLs and TLS as the endpoint says; no keys means anonymous; a file path none."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta

import pytest

from assets.ingest import SOURCES
from assets.ingest_incremental import ingest_hour
from orchestration.service.local_services import free_port
from orchestration.storage import warehouse_lake
from orchestration.storage.raw_zone import RawZoneResource
from orchestration.storage.warehouse import WarehouseResource

BUCKET = "goodput-lake"
HOUR = datetime(2026, 11, 30, 0)


@pytest.fixture
def s3_store():
    """moto's S3 server on a free loopback port, with one empty bucket; its endpoint URL."""
    boto3 = pytest.importorskip("boto3")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):   # until it listens (a few seconds on a loaded machine)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, "moto's S3 server exited at start"
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="goodput", aws_secret_access_key="secret",
                              region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield endpoint, client
    finally:
        server.terminate()
        server.wait(timeout=30)


def _objects(client, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def test_a_lake_in_an_s3_bucket_ingests_replaces_and_cleans_up(postgres, s3_store, small_raw_zone, tmp_path, monkeypatch):
    endpoint, client = s3_store
    for name, value in {"AWS_ACCESS_KEY_ID": "goodput", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "us-east-1",
                        "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(name, value)
    postgres.create_database("lake_s3")
    warehouse = WarehouseResource(path=str(tmp_path / "unused.duckdb"), backend="ducklake",
                                  catalog=postgres.libpq("lake_s3"), data_path=f"s3://{BUCKET}/warehouse/")
    source = next(s for s in SOURCES if s.table == "gpu_samples")
    files = RawZoneResource(root=str(small_raw_zone / "raw")).files(source.folder, HOUR)
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    with warehouse.connect() as con:
        for _ in range(2):   # the second read replaces the first
            result = ingest_hour(con, source, files, HOUR, HOUR + timedelta(hours=1), incremental=False)
            assert result["rows_loaded"] == lines > 0
    written = _objects(client, "warehouse/")
    assert written and all(key.endswith(".parquet") for key in written)
    assert any("/gpu_samples/" in key for key in written)
    with warehouse.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM gpu_samples").fetchone()[0] == lines
    with warehouse.connect() as con:
        done = warehouse_lake.maintain(con, snapshot_days=0)
        assert con.execute("SELECT count(*) FROM gpu_samples").fetchone()[0] == lines
    assert done["deleted_files"] > 0
    left = _objects(client, "warehouse/")
    assert len(left) < len(written) and all(key.endswith(".parquet") for key in left)


def test_the_object_store_secret_follows_the_aws_environment():
    assert warehouse_lake.object_store_secret("/mnt/lake/") is None
    local = warehouse_lake.object_store_secret("s3://b/p/", {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s'x",
                                                             "AWS_DEFAULT_REGION": "eu-west-1",
                                                             "AWS_ENDPOINT_URL": "http://10.0.0.5:9000/"})
    assert "KEY_ID 'k'" in local and "SECRET 's''x'" in local and "REGION 'eu-west-1'" in local
    assert "ENDPOINT '10.0.0.5:9000'" in local and "URL_STYLE 'path'" in local and "USE_SSL false" in local
    tls = warehouse_lake.object_store_secret("s3://b/p/", {"AWS_ENDPOINT_URL": "https://minio.internal"})
    assert "USE_SSL true" in tls and "KEY_ID" not in tls   # no keys: anonymous
    aws = warehouse_lake.object_store_secret("s3://b/p/", {"AWS_REGION": "us-east-2"})
    assert "ENDPOINT" not in aws and "REGION 'us-east-2'" in aws
