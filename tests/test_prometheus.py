"""Prometheus as a source, end to end against a REAL Prometheus server (the Debian `prometheus`
package; `.ci/run` installs it): the test starts it on loopback with a temporary config and storage,
scraping a local exporter (http.server on loopback) that serves simulator-made dcgm-exporter and
vLLM pages. The `prometheus_pull` asset pulls the partition's window over query_range, the ingest
assets load it, and the warehouse holds the simulator's values (latency quantiles within 5%)."""

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import dagster as dg
import duckdb
import httpx
import pytest

from assets.ingest import ingest_assets
from assets.prometheus_pull import prometheus_pull
from orchestration.cli import main
from orchestration.partitions import hour_keys
from orchestration.storage.raw_zone import RawZoneResource
from orchestration.storage.warehouse import WarehouseResource
from sources.exposition import LatencyDistribution, SimulatedVllmEndpoint, dcgm_exposition
from sources.mapping import MIB, ConfigError, load_agent_config, load_prometheus_config
from sources.prometheus import PrometheusError, PrometheusResource, pull_window

REPO = Path(__file__).resolve().parent.parent
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def simulated_gpu_records() -> list[dict]:
    """One instant of the small scenario's GPU samples, while its run is busy (simulator output)."""
    import tempfile

    from simulator import load_scenario, simulate
    with tempfile.TemporaryDirectory() as out:
        simulate(load_scenario(REPO / "simulator" / "scenarios" / "small.yaml"), out)
        rows = [json.loads(line) for f in sorted(Path(out, "raw", "gpu_samples").glob("*/*/*.jsonl"))
                for line in f.read_text().splitlines()]
    busy = [r for r in rows if r.get("run_id") and r["utilization_ratio"] and r["utilization_ratio"] > 0.5]
    moment = busy[len(busy) // 2]["time"]
    records = [r for r in rows if r["time"][:19] == moment[:19]]
    assert len(records) >= 2
    records[1]["ecc_uncorrected_errors_total"] = None   # served as DCGM's "not supported" sentinel
    return records


class Exporter:
    """dcgm-exporter at /dcgm and a vLLM server at /vllm, on one loopback port."""

    def __init__(self, gpu_records, endpoint: SimulatedVllmEndpoint):
        # Plus a sample that names no GPU (a mislabelled relabel rule): it must be quarantined, not guessed.
        self.dcgm = dcgm_exposition(gpu_records) + 'DCGM_FI_DEV_GPU_TEMP{Hostname="node-0",device="nvidia9"} 40\n'

        self.vllm = endpoint
        self.lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.startswith("/dcgm"):
                    body = exporter.dcgm
                elif self.path.startswith("/vllm"):
                    with exporter.lock:
                        exporter.vllm.advance()
                        body = exporter.vllm.exposition()
                else:
                    self.send_error(404)
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass   # a scrape Prometheus gave up on (timeout under load) breaks the pipe: not news

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def prometheus_server(tmp_path):
    if not Path(PROMETHEUS).exists():
        # CI must run it for real; elsewhere a machine without root may lack the Debian package.
        missing = "the `prometheus` binary is missing: bash scripts/setup.sh installs it (apt-get install prometheus)"
        pytest.fail(missing) if os.environ.get("CI") else pytest.skip(missing)
    endpoint = SimulatedVllmEndpoint(
        "llama-3-8b-v2",
        ttft=LatencyDistribution(median=0.18, sigma=0.5),
        itl=LatencyDistribution(median=0.021, sigma=0.3),
        e2e=LatencyDistribution(median=2.4, sigma=0.6),
        preemptions_per_scrape=3,
    )
    gpu_records = simulated_gpu_records()
    exporter = Exporter(gpu_records, endpoint)
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""
global: {{scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: dcgm
    metrics_path: /dcgm
    static_configs: [{{targets: ["127.0.0.1:{exporter.port}"]}}]
  - job_name: vllm
    metrics_path: /vllm
    static_configs: [{{targets: ["127.0.0.1:{exporter.port}"], labels: {{endpoint: chat-prod}}}}]
""")
    log = open(tmp_path / "prometheus.log", "w")
    process = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        started = datetime.now(timezone.utc)
        # Bounded waits: ready, then both targets scraped often enough for rate() over 5 s.
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "Prometheus did not become ready within 60 s"
            time.sleep(0.2)
        while endpoint.scrapes < 8 or exporter_scraped_dcgm(url) < 1:
            assert time.monotonic() < deadline, "Prometheus did not scrape the exporter within 60 s"
            time.sleep(0.5)
        yield {"url": url, "endpoint": endpoint, "gpu_records": gpu_records, "started": started}
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        exporter.close()


def rows(con, query) -> list[dict]:
    cursor = con.execute(query)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, values)) for values in cursor.fetchall()]


def exporter_scraped_dcgm(url) -> int:
    try:
        result = httpx.get(f"{url}/api/v1/query", params={"query": "count(DCGM_FI_DEV_GPU_UTIL)"}, timeout=2).json()
        return int(float(result["data"]["result"][0]["value"][1])) if result["data"]["result"] else 0
    except (httpx.HTTPError, KeyError, IndexError, ValueError):
        return 0


def test_pull_window_lands_the_exporters_values_in_the_warehouse(prometheus_server, tmp_path):
    home = tmp_path / "home"
    resources = {
        "warehouse": WarehouseResource(path=str(home / "warehouse.duckdb")),
        "raw_zone": RawZoneResource(root=str(home / "raw")),
        "prometheus": PrometheusResource(url=prometheus_server["url"], step_seconds=1.0, rate_window="5s"),
    }
    ingest = [a for a in ingest_assets if a.key.path[-1] in ("gpu_samples", "serving_metrics")]
    keys = hour_keys(prometheus_server["started"] - timedelta(seconds=5), datetime.now(timezone.utc) + timedelta(seconds=1))
    for key in keys:
        pulled = dg.materialize([prometheus_pull], resources=resources, partition_key=key)
        assert pulled.success
        assert dg.materialize(ingest, resources=resources, partition_key=key).success
    meta = pulled.asset_materializations_for_node("prometheus_pull")[0].metadata
    assert meta["enabled"].value is True

    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    gpu = rows(con, "SELECT * FROM gpu_samples ORDER BY time, gpu_index")
    serving = con.execute("SELECT * FROM serving_metrics WHERE ttft_p50_seconds IS NOT NULL ORDER BY time").df()
    quarantined = con.execute("SELECT DISTINCT source, reason FROM quarantine").fetchall()
    con.close()
    assert quarantined == [("gpu_samples", "rejected by producer: cannot tell which GPU: none of the labels "
                                           "['UUID', 'uuid', 'gpu', 'index', 'minor_number']")]

    # GPU samples: one per GPU per step, the simulator's values in base units; the sentinel is null.
    truth = {r["gpu_index"]: r for r in prometheus_server["gpu_records"]}
    assert {row["gpu_index"] for row in gpu} == set(truth)
    assert len(gpu) >= 3 * len(truth)
    for row in gpu:
        r = truth[row["gpu_index"]]
        assert row["host"] == r["host"] and row["gpu_uuid"] == r["gpu_uuid"] and row["run_id"] == r["run_id"]
        assert row["utilization_ratio"] == pytest.approx(r["utilization_ratio"], abs=1e-9)
        assert row["memory_used_bytes"] == round(r["memory_used_bytes"] / MIB) * MIB
        assert row["memory_total_bytes"] == pytest.approx(r["memory_total_bytes"], abs=2 * MIB)
        assert row["power_watts"] == pytest.approx(r["power_watts"])
        assert row["temperature_celsius"] == pytest.approx(r["temperature_celsius"])
        assert row["sm_clock_hertz"] == pytest.approx(r["sm_clock_hertz"])
        assert row["throttle_reasons"] == r["throttle_reasons"]
        assert row["ecc_uncorrected_errors_total"] == r["ecc_uncorrected_errors_total"]   # the sentinel -> None

    # Serving: latency quantiles within 5% of the simulator's truth, queue / KV cache / counters.
    endpoint = prometheus_server["endpoint"]
    assert len(serving) >= 3
    assert set(serving["endpoint"]) == {"chat-prod"} and set(serving["model_version"]) == {"llama-3-8b-v2"}
    for prefix, dist in (("ttft", endpoint.dists["ttft"]), ("itl", endpoint.dists["itl"]), ("e2e_latency", endpoint.dists["e2e"])):
        for q in (50, 95, 99):
            column = serving[f"{prefix}_p{q}_seconds"]
            expected = dist.quantile(q / 100)
            worst = float(((column - expected).abs() / expected).max())
            print(f"{prefix} p{q}: truth {expected:.4f} s, worst relative error over {len(column)} steps {worst:.3%}")
            assert worst < 0.05, f"{prefix} p{q}: worst relative error {worst:.3%} (expected {expected:.4f})"
    # A scrape that timed out on a loaded machine leaves the gauges stale (absent) at that step while
    # rate() still has its window: compare the values that are there, and ask for most of them.
    gauges = serving.dropna(subset=["requests_waiting", "requests_running", "kv_cache_usage_ratio", "request_failure_total"])
    assert len(gauges) >= max(3, len(serving) // 2)
    assert (gauges["requests_waiting"] == 3).all() and (gauges["requests_running"] == 17).all()
    assert gauges["kv_cache_usage_ratio"].tolist() == pytest.approx([0.42] * len(gauges))
    assert (gauges["request_failure_total"] > 0).all()
    assert (gauges["request_success_total"] == 49 * gauges["request_failure_total"]).all()
    # Preemptions: a counter the engine adds 3 to at every scrape, pulled as it grows (a nonzero rate).
    preempted = serving.dropna(subset=["preemptions_total"])
    assert len(preempted) >= max(3, len(serving) // 2)
    assert (preempted["preemptions_total"] % 3 == 0).all() and preempted["preemptions_total"].is_monotonic_increasing
    span = (preempted["time"].iloc[-1] - preempted["time"].iloc[0]).total_seconds()
    rate = (preempted["preemptions_total"].iloc[-1] - preempted["preemptions_total"].iloc[0]) / span
    print(f"preemptions: {rate:.2f} per second over {span:.0f} s (the exporter: 3 per scrape, one scrape a second)")
    assert rate > 0

    # Pulling the same hour again replaces the raw files: the warehouse has no duplicates.
    for key in keys:
        assert dg.materialize([prometheus_pull], resources=resources, partition_key=key).success
        assert dg.materialize(ingest, resources=resources, partition_key=key).success
    # The same pull from the command line, into another home.
    other = tmp_path / "cli-home"
    window = f"{prometheus_server['started'].isoformat()}/{datetime.now(timezone.utc).isoformat()}"
    sources = tmp_path / "sources.yaml"
    sources.write_text(f"prometheus:\n  url: {prometheus_server['url']}\n  step_seconds: 1\n  rate_window: 5s\n"
                       "  labels: {endpoint: [endpoint]}\n")
    assert main(["pull", "prometheus", "--config", str(sources), "--window", window, "--home", str(other)]) == 0
    assert list((other / "raw" / "gpu_samples").glob("*/*/prometheus.jsonl"))
    assert list((other / "raw" / "serving_metrics").glob("*/*/prometheus.jsonl"))

    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    dupes = con.execute("SELECT count(*) FROM (SELECT time, host, gpu_index FROM gpu_samples "
                        "GROUP BY ALL HAVING count(*) > 1)").fetchone()[0]
    con.close()
    assert dupes == 0


def test_unreachable_prometheus_is_one_clear_error(tmp_path):
    config = load_prometheus_config(None, url=f"http://127.0.0.1:{free_port()}")
    now = datetime.now(timezone.utc)
    with pytest.raises(PrometheusError, match="unreachable"):
        pull_window(config, tmp_path, now - timedelta(minutes=5), now)


def test_unreachable_prometheus_does_not_block_the_hours_ingest(tmp_path):
    from orchestration.definitions import resources_for

    resources = {**resources_for(tmp_path), "prometheus": PrometheusResource(url=f"http://127.0.0.1:{free_port()}")}
    ingest = [a for a in ingest_assets if a.key.path[-1] == "gpu_samples"]
    result = dg.materialize([prometheus_pull, *ingest], resources=resources, partition_key="2026-11-30-03:00")
    assert result.success
    assert "unreachable" in result.asset_materializations_for_node("prometheus_pull")[0].metadata["error"].value
    assert result.asset_materializations_for_node("gpu_samples")


def test_prometheus_off_without_url(tmp_path):
    resources = {"raw_zone": RawZoneResource(root=str(tmp_path / "raw")), "prometheus": PrometheusResource()}
    result = dg.materialize([prometheus_pull], resources=resources, partition_key="2026-11-30-03:00")
    assert result.success
    assert result.asset_materializations_for_node("prometheus_pull")[0].metadata["enabled"].value is False


def test_sources_config_errors_are_one_line(tmp_path):
    bad = tmp_path / "sources.yaml"
    bad.write_text("prometheus:\n  url: http://p:9090\n  step_seconds: -1\n")
    with pytest.raises(ConfigError, match=r"prometheus\.step_seconds"):
        load_prometheus_config(bad)
    bad.write_text("prometheus:\n  gpu_metrics:\n    utilisation: [{metric: X}]\n")
    with pytest.raises(ConfigError, match="unknown field"):
        load_prometheus_config(bad)
    bad.write_text("prometeus:\n  url: http://p:9090\n")
    with pytest.raises(ConfigError, match="prometeus: Extra inputs are not permitted"):
        load_prometheus_config(bad)
    bad.write_text("agent: {interval_seconds: 0}\n")
    with pytest.raises(ConfigError, match=r"agent\.interval_seconds: Input should be greater than 0"):
        load_agent_config(bad)
    good = tmp_path / "ok.yaml"
    good.write_text("prometheus:\n  url: http://p:9090\n  labels: {host: [node], run_id: [slurm_job_id]}\n"
                    "agent: {interval_seconds: 5, job_mapping_dir: /run/jobs}\n")
    config = load_prometheus_config(good)
    assert config.labels.host == ["node"] and config.labels.run_id == ["slurm_job_id"] and config.url == "http://p:9090"
    assert load_prometheus_config(good, url="http://other:9090").url == "http://other:9090"   # flag / env wins
    agent = load_agent_config(good)
    assert agent.interval_seconds == 5 and agent.job_mapping_dir == "/run/jobs"
    assert load_agent_config(None).interval_seconds == 10     # no file: defaults (the simulator stays the source)
