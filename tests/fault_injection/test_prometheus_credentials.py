"""Issue 16 item 3: Prometheus credentials never land in Dagster storage, logs or errors.

A REAL Prometheus (the Debian `prometheus` binary) on loopback requires basic auth (its
--web.config.file). The `prometheus_pull` asset pulls with the credentials given (a) in their own
settings and (b) inside GOODPUT_PROMETHEUS_URL; then with a wrong password. Every event Dagster
stored for those runs (materialization metadata, logs, errors), and the definitions' resource
config, must be free of the password.
"""

import os
import shutil
import socket
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import httpx
import pytest

from assets.prometheus_pull import prometheus_pull
from orchestration.partitions import hour_keys
from orchestration.storage.raw_zone import RawZoneResource
from sources.prometheus import PrometheusResource, resource_from_env
from sources.urls import redact_url, split_credentials

pytestmark = pytest.mark.fault_injection

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
USER, PASSWORD = "goodput", "s3cret-pw"
# bcrypt of PASSWORD (Prometheus' web config takes bcrypt hashes only)
PASSWORD_BCRYPT = "$2b$05$abcdefghijklmnopqrstuuzSvhclVSvY9ufOheOOhcPviTPFJlqIC"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def guarded_prometheus(tmp_path_factory):
    if not Path(PROMETHEUS).exists():
        pytest.fail("the `prometheus` binary is missing: apt-get install -y prometheus (.ci/run does this)")
    tmp = tmp_path_factory.mktemp("prom-auth")
    (tmp / "prometheus.yml").write_text("global: {scrape_interval: 15s}\nscrape_configs: []\n")
    (tmp / "web.yml").write_text(f"basic_auth_users:\n  {USER}: '{PASSWORD_BCRYPT}'\n")
    port = free_port()
    log = open(tmp / "prometheus.log", "w")
    process = subprocess.Popen([PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                                f"--web.config.file={tmp / 'web.yml'}", f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp / "prometheus.log").read_text()[-2000:]
            try:
                if httpx.get(f"{url}/-/ready", auth=(USER, PASSWORD), timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "Prometheus did not become ready within 60 s"
            time.sleep(0.2)
        assert httpx.get(f"{url}/-/ready", timeout=2).status_code == 401   # it really wants the password
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _pull(resource: PrometheusResource, tmp_path: Path) -> tuple[dg.ExecuteInProcessResult, str]:
    instance = dg.DagsterInstance.ephemeral()
    key = hour_keys(datetime.now(timezone.utc), datetime.now(timezone.utc))[-1]
    result = dg.materialize([prometheus_pull], partition_key=key, instance=instance,
                            resources={"prometheus": resource, "raw_zone": RawZoneResource(root=str(tmp_path / "raw"))})
    stored = "\n".join(str(record) for record in instance.all_logs(result.run_id))
    stored += str(instance.get_run_by_id(result.run_id))
    return result, stored


def _metadata(result) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node("prometheus_pull")[0].metadata.items()}


def test_credentials_in_their_own_settings_reach_prometheus_and_nothing_else(guarded_prometheus, tmp_path):
    result, stored = _pull(PrometheusResource(url=guarded_prometheus, username=USER, password=PASSWORD), tmp_path)
    meta = _metadata(result)
    assert "error" not in meta and meta["gpu_samples"] == 0   # authenticated: an empty Prometheus answered
    assert PASSWORD not in stored


def test_credentials_inside_the_url_are_taken_out_before_anything_is_shown(guarded_prometheus, tmp_path):
    with_password = guarded_prometheus.replace("http://", f"http://{USER}:{PASSWORD}@")
    result, stored = _pull(PrometheusResource(url=with_password), tmp_path)
    meta = _metadata(result)
    assert "error" not in meta and meta["url"] == guarded_prometheus
    assert PASSWORD not in stored


def test_a_refused_password_is_an_error_without_the_password(guarded_prometheus, tmp_path):
    wrong = "wr0ng-pw-zzz"
    url = guarded_prometheus.replace("http://", f"http://{USER}:{wrong}@")
    result, stored = _pull(PrometheusResource(url=url), tmp_path)
    meta = _metadata(result)
    assert "refused the credentials (HTTP 401)" in meta["error"]
    assert wrong not in stored and f"{USER}:" not in stored


def test_the_definitions_keep_secrets_as_env_var_names(monkeypatch):
    monkeypatch.setenv("GOODPUT_PROMETHEUS_URL", f"http://{USER}:{PASSWORD}@prometheus:9090")
    monkeypatch.setenv("GOODPUT_PROMETHEUS_PASSWORD", PASSWORD)
    resource = resource_from_env(os.environ)
    assert PASSWORD not in repr(resource._get_non_default_public_field_values())
    assert split_credentials(f"http://{USER}:{PASSWORD}@h:1/p?q=1")[1] == (USER, PASSWORD)
    assert redact_url(f"https://{USER}:{PASSWORD}@h:1/p?token=abc") == "https://h:1/p"
