"""Issue 16 items 7 and 12: hostile text in an alert cannot ping a Slack channel or disguise a link;
PagerDuty timestamps carry their UTC offset; httpx never logs a webhook URL (a secret)."""

import json
import logging
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestration.alerting.config import AlertingConfig
from orchestration.alerting.delivery import deliver
from orchestration.alerting.journal import AlertJournal
from orchestration.alerting.payloads import pagerduty_event, slack_message

pytestmark = pytest.mark.fault_injection

HOSTILE = {
    "incident_id": "inc-<!channel>", "transition": "opened", "transition_at": "2026-11-30T03:00:00", "tier": "SEV1",
    "title": "run <!channel> & <https://evil.example|click here> stalled", "signal": "busy_<!here>",
    "owner": "platform", "run_id": "<!channel>", "tier_reason": "<@U123> said so", "onset": "2026-11-30T02:50:00",
    "evidence": {"note": "<https://evil.example|open the dashboard>", "a&b": "x > y"},
    "playbook": "1. see <!subteam^S123>", "hosts": ["<!everyone>"], "gpus": [], "ranks": [],
}


def _texts(node) -> list[str]:
    if isinstance(node, dict):
        return [t for k, v in node.items() for t in ([v] if k == "text" and isinstance(v, str) else _texts(v))]
    if isinstance(node, list):
        return [t for v in node for t in _texts(v)]
    return []


def test_every_slack_text_field_is_escaped():
    message = slack_message(HOSTILE)
    texts = _texts(message)
    assert len(texts) >= 10
    for text in texts:
        assert "<" not in text and ">" not in text, text
        assert "&" not in text.replace("&amp;", "").replace("&lt;", "").replace("&gt;", ""), text
    assert "&lt;!channel&gt;" in message["text"] and "&lt;https://evil.example|click here&gt;" in message["text"]
    assert any("&lt;!everyone&gt;" in t for t in texts) and any("a&amp;b" in t for t in texts)


def test_a_plain_alert_reads_the_same():
    """The look-alike: ordinary text is left alone (Goodput's own markup, `*bold*` and code, stays)."""
    plain = {**HOSTILE, "incident_id": "inc-1", "title": "run r1 stalled", "run_id": "r1", "signal": "busy_not_progressing",
             "tier_reason": "default", "evidence": {"stall_seconds": 600}, "playbook": "1. look", "hosts": ["h1"]}
    message = slack_message(plain)
    assert message["text"] == "[SEV1] opened: run r1 stalled"
    assert "*opened*" in message["blocks"][1]["text"]["text"]


def test_pagerduty_timestamp_has_its_utc_offset():
    event = pagerduty_event(HOSTILE, "key")
    stamp = event["payload"]["timestamp"]
    assert stamp == "2026-11-30T03:00:00+00:00" and datetime.fromisoformat(stamp).utcoffset().total_seconds() == 0
    assert pagerduty_event({**HOSTILE, "transition_at": "2026-11-30T05:00:00+02:00"}, "k")["payload"]["timestamp"] == \
        "2026-11-30T03:00:00+00:00"


def test_httpx_does_not_log_the_webhook_url(monkeypatch, tmp_path, caplog):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    secret_path = "/services/T0/B0/sEcReTtOkEn"
    monkeypatch.setenv("FI_SLACK_URL", f"http://127.0.0.1:{server.server_address[1]}{secret_path}")
    config = AlertingConfig.model_validate({"sinks": {"slack": {"type": "slack", "url_env": "FI_SLACK_URL"}},
                                            "routes": [{"sinks": ["slack"]}]})
    try:
        with caplog.at_level(logging.DEBUG, logger="httpx"), caplog.at_level(logging.INFO):
            result = deliver([HOSTILE], config, AlertJournal(tmp_path / "j.jsonl"), tmp_path / "a.jsonl")
    finally:
        server.shutdown()
        server.server_close()
    assert result["delivered"] == 1
    logged = "\n".join(r.getMessage() for r in caplog.records) + json.dumps([r.args for r in caplog.records], default=str)
    assert "sEcReTtOkEn" not in logged
    assert "sEcReTtOkEn" not in (tmp_path / "j.jsonl").read_text()
