"""Issue 16 item 4: a slow sink and a torn journal line never make a sink act on a transition twice,
and PagerDuty never gets a trigger after its resolve.

Real HTTP servers on loopback play Slack, PagerDuty and a webhook. A "slow" server takes the first
request of each transition (it acts on it) and answers only after the client has given up: it waits
until the client closes the connection, so the answer is late however loaded the machine is (no
sleeps, no race). Like the real services, PagerDuty folds a repeat by dedup_key and the webhook by
Idempotency-Key; Slack has neither, so any second post would be a second message in the channel.
"""

import json
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestration.alerting.config import AlertingConfig
from orchestration.alerting.delivery import deliver, http_client
from orchestration.alerting.journal import AlertJournal, append_jsonl, read_jsonl

pytestmark = pytest.mark.fault_injection


class SinkServer:
    """One loopback sink. `acted`: the transitions it acted on, in order (what a person would see)."""

    def __init__(self, kind: str, slow: bool):
        self.kind, self.slow = kind, slow
        self.requests: list[dict] = []     # every request, in arrival order
        self.acted: list[str] = []         # (dedup) transitions the sink acted on
        self.seen_keys: set[str] = set()
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    key, transition = outer.identify(body, self.headers)
                    first = key not in outer.seen_keys or outer.kind == "slack"   # Slack has no key: every post acts
                    outer.requests.append({"transition": transition, "body": body})
                    if first:
                        outer.seen_keys.add(key)
                        outer.acted.append(transition)
                    late = outer.slow and first
                if late:
                    # acted on; now answer only once the client has timed out and hung up
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                    readable, _, _ = select.select([self.connection], [], [], 60)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        self.close_connection = True
                        return
                self.send_response(202 if outer.kind == "pagerduty" else 200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def identify(self, body: dict, headers) -> tuple[str, str]:
        if self.kind == "pagerduty":
            action = body["event_action"]
            transition = "resolved" if action == "resolve" else body["payload"]["custom_details"]["transition"]
            return f"{body['dedup_key']}:{action}:{transition}", f"{body['dedup_key']}:{transition}"
        if self.kind == "webhook":
            return headers["Idempotency-Key"], body["dedup_key"]
        dedup = body["blocks"][-1]["elements"][0]["text"].split("dedup `")[1].rstrip("`")
        return dedup, dedup

    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{self.kind}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def pagerduty_triggers_after_resolve(self) -> list[str]:
        resolved, wrong = set(), []
        for r in self.requests:
            key, action = r["body"]["dedup_key"], r["body"]["event_action"]
            if action == "resolve":
                resolved.add(key)
            elif key in resolved:
                wrong.append(key)
        return wrong


@pytest.fixture
def sinks(request, monkeypatch):
    slow = getattr(request, "param", True)
    servers = {kind: SinkServer(kind, slow) for kind in ("slack", "pagerduty", "webhook")}
    monkeypatch.setenv("FI_SLACK_URL", servers["slack"].url())
    monkeypatch.setenv("FI_PD_URL", servers["pagerduty"].url())
    monkeypatch.setenv("FI_PD_KEY", "fault-injection-routing-key")
    monkeypatch.setenv("FI_HOOK_URL", servers["webhook"].url())
    yield servers
    for server in servers.values():
        server.close()


CONFIG = AlertingConfig.model_validate({
    "sinks": {"slack": {"type": "slack", "url_env": "FI_SLACK_URL"},
              "pagerduty": {"type": "pagerduty", "routing_key_env": "FI_PD_KEY", "url_env": "FI_PD_URL"},
              "webhook": {"type": "webhook", "url_env": "FI_HOOK_URL"}},
    "routes": [{"sinks": ["slack", "pagerduty", "webhook"]}],
    # the client gives up on an answer after 0.3 s; the slow servers answer only after that
    "retry": {"attempts_per_tick": 3, "initial_wait_seconds": 0, "max_wait_seconds": 0, "tick_backoff_seconds": 0,
              "timeout_seconds": 5, "read_timeout_seconds": 0.3},
})


def alert(incident: str, transition: str, at: str) -> dict:
    return {"incident_id": incident, "transition": transition, "transition_at": at, "tier": "SEV1",
            "title": f"{incident} stalled", "signal": "busy_not_progressing", "family": "training",
            "owner": "platform", "run_id": "run-1", "evidence": {"stall_seconds": 600}}


TRANSITIONS = [alert("inc-a", "opened", "2026-11-30T03:00:00"), alert("inc-b", "opened", "2026-11-30T03:01:00"),
               alert("inc-a", "escalated", "2026-11-30T03:05:00"), alert("inc-a", "resolved", "2026-11-30T03:09:00")]
KEYS = [f"{a['incident_id']}:{a['transition']}" for a in TRANSITIONS]


def tick(journal: AlertJournal, tmp_path: Path, alerts=TRANSITIONS) -> dict:
    return deliver(alerts, CONFIG, journal, tmp_path / "alerts.jsonl")


def test_a_slow_sink_acts_on_each_transition_exactly_once(sinks, tmp_path):
    journal = AlertJournal(tmp_path / "attempts.jsonl")
    first = tick(journal, tmp_path)
    for _ in range(3):   # later ticks send nothing more
        tick(journal, tmp_path)
    for kind, server in sinks.items():
        assert server.acted == KEYS, kind
    assert len(sinks["slack"].requests) == 4             # never a second post: Slack cannot fold one
    assert first["unconfirmed"] == 4 and first["delivered"] == 8   # PagerDuty and webhook confirmed on the repeat
    assert sinks["pagerduty"].pagerduty_triggers_after_resolve() == []
    outcomes = journal.frame().groupby("sink")["outcome"].agg(lambda s: sorted(set(s))).to_dict()
    assert outcomes == {"slack": ["unconfirmed"], "pagerduty": ["delivered", "failed"], "webhook": ["delivered", "failed"]}


@pytest.mark.parametrize("sinks", [False], indirect=True)
def test_a_torn_journal_line_loses_no_record_and_never_reopens_pagerduty(sinks, tmp_path):
    """A deliverer killed while journaling leaves half a line; the next records must survive it, and
    the transitions before it must not be sent again (PagerDuty: no trigger after its resolve)."""
    path = tmp_path / "attempts.jsonl"
    journal = AlertJournal(path)
    tick(journal, tmp_path, TRANSITIONS[:1])
    text = path.read_bytes()
    last = text.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    path.write_bytes(text[: len(text) - len(last) // 2 - 1])   # the last record (webhook's) half written, no newline
    tick(journal, tmp_path)            # inc-a opened again to the webhook (idempotent), then the rest
    tick(journal, tmp_path)
    tick(journal, tmp_path)
    for kind, server in sinks.items():
        assert server.acted == KEYS, kind
    assert len(sinks["slack"].requests) == 4
    assert sinks["pagerduty"].pagerduty_triggers_after_resolve() == []
    assert len([r for r in journal.attempts() if r["outcome"] == "delivered"]) == 12   # every record after the tear survives


@pytest.mark.parametrize("sinks", [False], indirect=True)
def test_a_record_glued_after_a_torn_line_is_recovered_and_bad_lines_are_skipped(sinks, tmp_path):
    path = tmp_path / "attempts.jsonl"
    journal = AlertJournal(path)
    tick(journal, tmp_path)
    records = path.read_text().splitlines()
    # as an older writer left it: a torn fragment with the next record glued on, plus foreign lines
    glued = records[-2][: len(records[-2]) // 2] + records[-1]
    path.write_text("\n".join(records[:-2] + ['{"note": "valid JSON, not an attempt"}', "[1, 2]", "\x00garbage", glued]) + "\n")
    kept = journal.attempts()
    assert json.loads(records[-1]) in kept and len(kept) == len(records) - 1
    tick(journal, tmp_path)
    assert sinks["pagerduty"].pagerduty_triggers_after_resolve() == []
    for kind, server in sinks.items():
        assert server.acted == KEYS, kind
    assert len(sinks["slack"].requests) == 4


@pytest.mark.parametrize("sinks", [False], indirect=True)
def test_a_pagerduty_trigger_whose_resolve_was_delivered_is_superseded(tmp_path, sinks):
    """Even with the trigger's records lost, a trigger is never sent after the sink has the resolve."""
    journal = AlertJournal(tmp_path / "attempts.jsonl")
    tick(journal, tmp_path)
    kept = [r for r in read_jsonl(journal.path) if not (r["sink"] == "pagerduty" and r["dedup_key"] == "inc-a:opened")]
    journal.path.unlink()
    append_jsonl(journal.path, kept)
    assert tick(journal, tmp_path)["superseded"] == 1
    assert sinks["pagerduty"].pagerduty_triggers_after_resolve() == []


def test_one_http_client_with_a_long_read_timeout():
    with http_client(CONFIG.retry) as client:
        assert client.timeout.read == 0.3 and client.timeout.connect == 5
