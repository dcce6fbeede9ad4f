"""The alerting tests' harness: real HTTP sinks on loopback (Slack, PagerDuty, a webhook), a home routed to
them, a settable clock, the alert sensor's tick, and findings stored and folded as detect + fold runs would."""

import json
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml

from assets.incidents import incidents
from orchestration.alerting.resource import alerting_resource_for as alerting_for
from orchestration.sensors import alerts as sensors
from orchestration.sensors.alerts import incident_alerts
from orchestration.storage.warehouse import WarehouseResource
from tests.helpers import _hang, _store, evaluated, finding

REPO = Path(__file__).resolve().parent.parent
SECRET_KEY = "R0UT1NGKEYsecret0000000000000000"
SECRET_PATH = "/services/T000/B000/XXXXsecretXXXX"


class Loopback:
    """A real HTTP server on 127.0.0.1 that records what it accepted; it can fail the first N requests per path."""

    def __init__(self):
        self.requests: list[dict] = []
        self.fail_left: dict[str, int] = {}
        self.status_for_failure = 503
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                path = self.path
                failing = outer.fail_left.get(path, 0) > 0
                if failing:
                    outer.fail_left[path] -= 1
                outer.requests.append({"path": path, "headers": dict(self.headers), "body": body, "accepted": not failing})
                if failing:
                    self.send_response(outer.status_for_failure)
                    self.end_headers()
                    self.wfile.write(b"unavailable")
                    return
                if path.startswith("/pagerduty"):
                    reply = json.dumps({"status": "success", "message": "Event processed", "dedup_key": body["dedup_key"]})
                    self.send_response(202)
                    self.send_header("Content-Type", "application/json")
                else:
                    reply = "ok"
                    self.send_response(200)
                self.end_headers()
                self.wfile.write(reply.encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def accepted(self, prefix: str) -> list[dict]:
        return [r["body"] for r in self.requests if r["accepted"] and r["path"].startswith(prefix)]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def loopback():
    server = Loopback()
    yield server
    server.close()


SINK_PATHS = {"slack": "/slack" + SECRET_PATH, "pagerduty": "/pagerduty/v2/enqueue", "webhook": "/hook"}


@pytest.fixture
def home(tmp_path, loopback, monkeypatch):
    """A home whose routing sends everything to the file sink and to the loopback Slack, PagerDuty and webhook."""
    config = {
        "dagster_url": "http://dagster.test:3000",
        "sinks": {
            "file": {"type": "file"},
            "slack": {"type": "slack", "url_env": "TEST_SLACK_URL"},
            "pagerduty": {"type": "pagerduty", "routing_key_env": "TEST_PD_KEY", "url_env": "TEST_PD_URL"},
            "webhook": {"type": "webhook", "url_env": "TEST_HOOK_URL"},
        },
        "routes": [{"sinks": ["file", "slack", "pagerduty", "webhook"]}],
        "retry": {"attempts_per_tick": 3, "initial_wait_seconds": 0.01, "max_wait_seconds": 0.02,
                  "tick_backoff_seconds": 30, "max_tick_backoff_seconds": 600, "timeout_seconds": 5},
        "monitor": {"tier": "SEV2", "owner": "platform", "stale_detect_after_seconds": 900, "stale_raw_after_seconds": 900,
                    "playbook": ["Check the daemon at {dagster_url}."], "escalation": ["platform on-call"]},
    }
    path = tmp_path / "alerting.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("GOODPUT_ALERTING", str(path))
    monkeypatch.setenv("TEST_SLACK_URL", loopback.url(SINK_PATHS["slack"]))
    monkeypatch.setenv("TEST_PD_URL", loopback.url(SINK_PATHS["pagerduty"]))
    monkeypatch.setenv("TEST_PD_KEY", SECRET_KEY)
    monkeypatch.setenv("TEST_HOOK_URL", loopback.url(SINK_PATHS["webhook"]))
    return tmp_path


class Clock:
    def __init__(self, start="2026-11-30T03:00:00+00:00"):
        self.now = datetime.fromisoformat(start).timestamp()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(sensors, "utcnow", c)
    return c


def resources(home):
    return {"warehouse": WarehouseResource(path=str(home / "warehouse.duckdb")), "alerting": alerting_for(home)}


def fold_hangs(home, instance, found, evaluated_until):
    """Store findings of two hang episodes and fold them (as the detect + fold runs would)."""
    warehouse = resources(home)["warehouse"]
    _store(warehouse, pd.DataFrame(found), evaluated("busy_not_progressing", evaluated_until))
    assert dg.materialize([incidents], resources={"warehouse": warehouse}, instance=instance).success


TWO_EPISODES = [_hang(50, 55, 59), _hang(50, 60, 70), _hang(130, 136, 150)]


def tick(home, instance):
    with dg.build_sensor_context(instance=instance, resources=resources(home)) as context:
        return incident_alerts(context)


def table(home, query):
    with WarehouseResource(path=str(home / "warehouse.duckdb")).connect(read_only=True) as con:
        return con.execute(query).df()


def _xid_event(offset: float, run: str = "llm", host: str = "node-0") -> list[dict]:
    """An XID 79 (GPU fallen off the bus), the rank on it gone, and the run's peers hung: 3 SEV1 findings."""
    gpu = [f"{host}:3"]
    gpus = [f"{host}:{i}" for i in range(8)]
    return [
        finding("gpu_xid_error", "gpu", gpu[0], offset + 0, offset + 1, offset + 20, run_id=run, hosts=[host], gpus=gpu),
        finding("rank_dropout", "rank", f"{run}/rank-3", offset + 1, offset + 2, offset + 20, run_id=run, rank=3,
                hosts=[host], gpus=gpu),
        finding("busy_not_progressing", "run", run, offset + 1, offset + 6, offset + 20, run_id=run, hosts=[host],
                gpus=gpus, value=600.0),
    ]


def _fold(home, instance, found):
    marks = pd.concat([evaluated(s, 179) for s in ("gpu_xid_error", "rank_dropout", "busy_not_progressing")])
    _store(resources(home)["warehouse"], pd.DataFrame(found), marks)
    assert dg.materialize([incidents], resources={"warehouse": resources(home)["warehouse"]}, instance=instance).success
