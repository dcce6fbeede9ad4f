"""Delivering transitions to sinks, once: one HTTP client (httpx) with one retry model (tenacity),
every attempt journaled, and a request whose answer never came handled by what the sink allows.

Each attempt ends in one outcome (journaled, and mirrored into `alert_attempts`):
- delivered: the sink answered 2xx.
- rejected: a 4xx other than 408/429; retrying cannot help.
- failed: the request surely did not take effect (no connection, a timeout while sending, a 5xx,
  408 or 429 answer): retried with backoff within the tick and across ticks, in order.
- sent without an answer (a read timeout, a dropped connection): a sink that folds repeats
  (PagerDuty by dedup_key, the webhook by Idempotency-Key, the file by key) is sent it again; Slack,
  which has no idempotency key, is not: the attempt is `unconfirmed`, a warning says so, and the
  read timeout is long (retry.read_timeout_seconds) so that a slow Slack still answers in time.
- superseded: the sink already has a later transition of the incident, so the earlier one is not
  sent (PagerDuty never gets a trigger after its resolve).
"""

import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import tenacity

from orchestration.alerting.config import AlertingConfig, Retry, SinkSpec
from orchestration.alerting.grouping import notifications
from orchestration.alerting.journal import AlertJournal, append_jsonl, backoff_until, finished, latest_sent, read_jsonl
from orchestration.alerting.payloads import TRANSITION_ORDER, dedup_key, pagerduty_event, slack_message, summary, webhook_body
from orchestration.config.env import env_or


class _NoRequestLines(logging.Filter):
    """httpx logs every request with its full URL at INFO, and a Slack or webhook URL is a secret:
    drop those lines whatever level a logging setup gives the `httpx` logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("HTTP Request:")


_httpx_log = logging.getLogger("httpx")
_httpx_log.setLevel(logging.WARNING)
if not any(isinstance(f, _NoRequestLines) for f in _httpx_log.filters):
    _httpx_log.addFilter(_NoRequestLines())

# Errors raised after the request may have reached the sink (its answer did not come back).
_MAYBE_SENT = (httpx.ReadTimeout, httpx.ReadError, httpx.RemoteProtocolError)


class DeliveryError(Exception):
    """One failed attempt. `permanent` (a 4xx other than 408/429): retrying cannot help.
    `maybe_sent`: the request went out and no answer came (the sink may have acted on it)."""

    def __init__(self, message: str, status_code: int | None = None, permanent: bool = False, maybe_sent: bool = False):
        super().__init__(message)
        self.status_code = status_code
        self.permanent = permanent
        self.maybe_sent = maybe_sent


class SinkInactive(Exception):
    """The sink's environment variable is not set."""


class Sink:
    def __init__(self, name: str, spec: SinkSpec, file_path: Path, ui_url: str):
        self.name, self.spec, self.file_path, self.ui_url = name, spec, file_path, ui_url

    def secrets(self) -> list[str]:
        """Values to keep out of every message: the URL (and its path and query alone), the routing key."""
        names = [self.spec.url_env, self.spec.routing_key_env]
        values = [os.environ[n] for n in names if n and os.environ.get(n)]
        for value in list(values):
            parts = urlsplit(value)
            values += [p for p in (parts.path, parts.query) if len(p) > 1]
        return sorted(set(values), key=len, reverse=True)

    def check_active(self) -> None:
        if self.spec.type == "file":
            return
        needed = self.spec.routing_key_env if self.spec.type == "pagerduty" else self.spec.url_env
        if not os.environ.get(needed):
            raise SinkInactive(f"sink {self.name}: ${needed} is not set")
        self._url()

    def _url(self) -> str:
        url = env_or(self.spec.url_env, self.spec.url)
        if not url:
            raise SinkInactive(f"sink {self.name}: ${self.spec.url_env} is not set")
        return url

    def send(self, alert: Mapping, client: httpx.Client) -> int | None:
        """Deliver one alert; returns the HTTP status (None for the file). Raises DeliveryError."""
        kind = self.spec.type
        if kind == "file":
            # the file refuses a key it holds: a crash between this write and the journal's cannot duplicate
            held = {dedup_key(r) for r in read_jsonl(self.file_path, ("incident_id", "transition"))}
            if dedup_key(alert) not in held:
                append_jsonl(self.file_path, [alert])
            return None
        if kind == "slack":
            body, headers = slack_message(alert), {}
        elif kind == "pagerduty":
            body, headers = pagerduty_event(alert, os.environ[self.spec.routing_key_env]), {}
        else:
            body, headers = webhook_body(alert), {"Idempotency-Key": dedup_key(alert)}
        try:
            response = client.post(self._url(), json=body, headers=headers)
        except httpx.HTTPError as error:
            raise DeliveryError(self._redact(f"{type(error).__name__}: {error}"), maybe_sent=isinstance(error, _MAYBE_SENT)) from None
        if response.is_success:
            return response.status_code
        permanent = 400 <= response.status_code < 500 and response.status_code not in (408, 429)
        detail = self._redact(response.text.strip()[:200])
        raise DeliveryError(f"HTTP {response.status_code}" + (f": {detail}" if detail else ""), response.status_code, permanent)

    def _redact(self, text: str) -> str:
        for secret in self.secrets():
            text = text.replace(secret, "***")
        return text


def _utc_iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec="milliseconds")


def http_client(retry: Retry, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """The one client: short connect/write/pool timeouts, a long read timeout (see the module doc)."""
    timeout = httpx.Timeout(retry.timeout_seconds, read=retry.read_timeout_seconds)
    return httpx.Client(timeout=timeout, transport=transport)


def deliver(
    alerts: list[Mapping],
    config: AlertingConfig,
    journal: AlertJournal,
    file_path: Path,
    log: Callable[[str], None] = lambda _m: None,
    clock: Callable[[], float] = time.time,
    warn: Callable[[str], None] | None = None,
    transport: httpx.BaseTransport | None = None,
) -> dict:
    """Send each alert (oldest first) to each sink its routes name, unless the journal says it is done;
    correlated incidents' transitions go to a sink as one notification per event (grouping.py), so
    `alerts` must be every transition, not only the undelivered ones.

    Returns counts: delivered, failed (sinks left with pending alerts), rejected, unconfirmed,
    superseded, skipped (inactive sinks), waiting (alerts left for a later tick)."""
    retry = config.retry
    warn = warn or log
    deadline = time.monotonic() + retry.tick_budget_seconds
    history = journal.attempts()
    done = finished(history)
    sent = latest_sent(history)
    ui = config.ui_url()
    result = {"delivered": 0, "failed": 0, "rejected": 0, "unconfirmed": 0, "superseded": 0, "waiting": 0, "skipped": []}
    with http_client(retry, transport) as client:
        for name, spec in config.sinks.items():
            sink = Sink(name, spec, file_path, ui)
            # one notification per event: the sink's routed transitions grouped by correlation (grouping.py)
            notified = {incident for (s, incident) in sent if s == name}
            grouped, held = notifications([a for a in alerts if name in config.route(a)], config.grouping, clock(), notified)
            mine = [a for a in grouped if (name, dedup_key(a)) not in done]
            result["waiting"] += held
            if not mine:
                continue
            try:
                sink.check_active()
            except SinkInactive as reason:
                result["skipped"].append(str(reason))
                continue
            if clock() < backoff_until(history, name, retry):
                result["waiting"] += len(mine)
                warn(f"sink {name}: backing off after failures until {_utc_iso(backoff_until(history, name, retry))}; "
                     f"{len(mine)} alert(s) wait")
                continue
            for i, alert in enumerate(mine):
                order = TRANSITION_ORDER.get(alert["transition"], -1)
                if sent.get((name, alert["incident_id"]), -1) > order:
                    journal.record({**_attempt(sink, alert, 1, clock), "outcome": "superseded", "status_code": None,
                                    "error": "the sink has a later transition of this incident", "elapsed_seconds": 0.0})
                    result["superseded"] += 1
                    continue
                outcome = _send_with_retries(sink, alert, client, journal, retry, deadline, clock)
                result[outcome] += 1
                if outcome in ("delivered", "unconfirmed"):
                    sent[(name, alert["incident_id"])] = max(sent.get((name, alert["incident_id"]), -1), order)
                if outcome == "delivered":
                    log(f"alert {alert['transition']} -> {name}: {summary(alert)} ({alert['incident_id']})")
                elif outcome == "unconfirmed":
                    warn(f"sink {name} took {dedup_key(alert)} but did not answer in {retry.read_timeout_seconds:g} s; "
                         "it has no idempotency key, so it is not sent again (it may be missing there)")
                elif outcome == "rejected":
                    warn(f"sink {name} rejected {dedup_key(alert)} for good; see alert_attempts")
                else:
                    result["waiting"] += len(mine) - i - 1
                    warn(f"sink {name} failing; {len(mine) - i} alert(s) wait for a later tick, in order")
                    break
    return result


def _attempt(sink: Sink, alert: Mapping, number: int, clock) -> dict:
    record = {"attempt_id": uuid.uuid4().hex, "sink": sink.name, "dedup_key": dedup_key(alert),
              "incident_id": alert["incident_id"], "transition": alert["transition"], "attempt": number,
              "attempted_at": _utc_iso(clock())}
    if alert.get("group_members"):   # a grouped notification: which member transitions it told the sink
        record.update(lead_incident_id=alert.get("lead_incident_id"), group_size=alert.get("group_size"),
                      carried=list(alert.get("carried") or []))
    return record


def _send_with_retries(sink: Sink, alert, client, journal: AlertJournal, retry: Retry, deadline: float, clock) -> str:
    """One transition to one sink, retried with exponential backoff while a retry cannot duplicate
    it; every attempt journaled (an at-most-once sink's before it is sent, too)."""
    outcome = "failed"

    def retriable(error: BaseException) -> bool:
        return isinstance(error, DeliveryError) and not error.permanent and (sink.spec.idempotent or not error.maybe_sent)

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(max(retry.attempts_per_tick, 1)) | (lambda _s: time.monotonic() >= deadline),
        wait=tenacity.wait_exponential(multiplier=retry.initial_wait_seconds, max=retry.max_wait_seconds),
        retry=tenacity.retry_if_exception(retriable),
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                started = time.monotonic()
                record = _attempt(sink, alert, attempt.retry_state.attempt_number, clock)
                if not sink.spec.idempotent:
                    journal.record({**record, "outcome": "sending", "status_code": None, "error": None, "elapsed_seconds": None})
                try:
                    status = sink.send(alert, client)
                except DeliveryError as error:
                    journal.record({**record, "outcome": _failure(sink, error), "status_code": error.status_code,
                                    "error": str(error), "elapsed_seconds": round(time.monotonic() - started, 3)})
                    raise
                journal.record({**record, "outcome": "delivered", "status_code": status, "error": None,
                                "elapsed_seconds": round(time.monotonic() - started, 3)})
                outcome = "delivered"
    except DeliveryError as error:
        outcome = _failure(sink, error)
    return outcome


def _failure(sink: Sink, error: DeliveryError) -> str:
    if error.permanent:
        return "rejected"
    return "unconfirmed" if error.maybe_sent and not sink.spec.idempotent else "failed"
