"""Alert sinks and dependable delivery: Slack, PagerDuty Events API v2, a generic JSON webhook and a file.

An alert is one incident transition (opened, escalated, resolved) as a JSON-safe dict; its dedup key
is `<incident_id>:<transition>`. Routing (which sinks hear which alert, by tier, owner, family,
signal, transition) and the sinks themselves come from a YAML file (`orchestration/alerting.yaml`,
or `$GOODPUT_ALERTING`); secrets (webhook URLs, routing keys) only from the environment variables it
names, and never into logs, metadata or the attempt log.

Delivery is once per transition and sink: every HTTP attempt is first appended to a journal
(`GOODPUT_HOME/alerts/attempts.jsonl`, fsynced, under a file lock), and what the journal records as
delivered is never sent again. The journal is mirrored into the warehouse table `alert_attempts`
whenever a short write connection is free (see docs/alerting.md for why). A failing sink is retried
with exponential backoff within a tick and across ticks; later transitions wait behind the first
undelivered one, so a sink that comes back after an hour gets everything, in order, once.
"""

import fcntl
import json
import math
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import dagster as dg
import httpx
import pandas as pd
import tenacity
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from orchestration.board_links import DEFAULT_BOARD_URL, board_url_from_env

DEFAULT_CONFIG = Path(__file__).with_name("alerting.yaml")
PAGERDUTY_SEVERITY = {"SEV1": "critical", "SEV2": "error", "SEV3": "warning"}   # anything else: info
TRANSITION_EMOJI = {"opened": ":rotating_light:", "escalated": ":arrow_double_up:", "resolved": ":white_check_mark:"}


def dedup_key(alert: Mapping) -> str:
    return f"{alert['incident_id']}:{alert['transition']}"


def journal_path(home) -> Path:
    return Path(home) / "alerts" / "attempts.jsonl"


# ---------------------------------------------------------------------------------------------- config


class AlertingConfigError(ValueError):
    """The routing file is missing or invalid (one line: where and what)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SinkSpec(_Strict):
    type: Literal["file", "slack", "pagerduty", "webhook"]
    url: str | None = None              # a non-secret default (PagerDuty's public endpoint)
    url_env: str | None = None          # the variable holding the URL (a secret for Slack and webhooks)
    routing_key_env: str | None = None  # PagerDuty integration key

    @model_validator(mode="after")
    def _needs(self):
        if self.type in ("slack", "webhook") and not self.url_env:
            raise ValueError(f"a {self.type} sink needs url_env (the variable holding its URL)")
        if self.type == "pagerduty" and not self.routing_key_env:
            raise ValueError("a pagerduty sink needs routing_key_env (the variable holding its routing key)")
        return self


class Match(_Strict):
    tier: list[str] | None = None
    owner: list[str] | None = None
    family: list[str] | None = None
    signal: list[str] | None = None
    transition: list[str] | None = None

    def fits(self, alert: Mapping) -> bool:
        return all(allowed is None or alert.get(key) in allowed for key, allowed in self.model_dump().items())


class Route(_Strict):
    match: Match = Match()
    sinks: list[str]


class Retry(_Strict):
    attempts_per_tick: int = 3
    initial_wait_seconds: float = 0.5
    max_wait_seconds: float = 4.0
    tick_backoff_seconds: float = 30.0
    max_tick_backoff_seconds: float = 600.0
    timeout_seconds: float = 10.0
    tick_budget_seconds: float = 40.0


class Monitor(_Strict):
    tier: str = "SEV2"
    owner: str = "platform"
    stale_detect_after_seconds: float = 900.0
    stale_raw_after_seconds: float = 900.0
    playbook: list[str] = []
    escalation: list[str] = []


class AlertingConfig(_Strict):
    dagster_url: str = "http://127.0.0.1:3000"
    dagster_url_env: str | None = None
    sinks: dict[str, SinkSpec]
    routes: list[Route]
    retry: Retry = Retry()
    monitor: Monitor = Monitor()

    @model_validator(mode="after")
    def _known_sinks(self):
        for i, route in enumerate(self.routes):
            unknown = [s for s in route.sinks if s not in self.sinks]
            if unknown:
                raise ValueError(f"routes[{i}] names unknown sink(s) {', '.join(unknown)}; known: {', '.join(self.sinks)}")
        return self

    def ui_url(self) -> str:
        return (os.environ.get(self.dagster_url_env) if self.dagster_url_env else None) or self.dagster_url

    def route(self, alert: Mapping) -> list[str]:
        """The sinks an alert goes to, in the order the routes name them, each once."""
        names: list[str] = []
        for route in self.routes:
            if route.match.fits(alert):
                names.extend(s for s in route.sinks if s not in names)
        return names


def load_config(path: str | Path) -> AlertingConfig:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise AlertingConfigError(f"no alerting config at {path}: set GOODPUT_ALERTING or restore orchestration/alerting.yaml") from None
    except yaml.YAMLError as error:
        raise AlertingConfigError(f"{path}: not valid YAML ({str(error).splitlines()[0]})") from None
    try:
        return AlertingConfig.model_validate(raw or {})
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise AlertingConfigError(f"{path}: {where}: {first['msg']}") from None


# ---------------------------------------------------------------------------------------------- payloads


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _evidence_lines(alert: Mapping, limit: int = 12) -> list[str]:
    evidence = alert.get("evidence") or {}
    lines = [f"{k}: {json.dumps(v, default=str) if isinstance(v, dict | list) else v}" for k, v in sorted(evidence.items())]
    return lines[:limit] + ([f"… {len(lines) - limit} more"] if len(lines) > limit else [])


def _lineage_lines(alert: Mapping) -> list[str]:
    pairs = [
        ("run", alert.get("run_id")), ("ranks", ", ".join(str(r) for r in alert.get("ranks") or []) or None),
        ("hosts", ", ".join(alert.get("hosts") or []) or None), ("GPUs", ", ".join(alert.get("gpus") or []) or None),
        ("last checkpoint", alert.get("checkpoint")), ("model version", alert.get("model_version")),
        ("endpoint", alert.get("endpoint")), ("correlation", alert.get("correlation_id")),
    ]
    return [f"{name}: {value}" for name, value in pairs if value not in (None, "")]


def summary(alert: Mapping) -> str:
    return f"[{alert['tier']}] {alert['transition']}: {alert['title']}"


def slack_message(alert: Mapping) -> dict:
    """A Slack incoming-webhook message: a text fallback plus Block Kit blocks (header, fields,
    evidence, lineage, playbook, a button to the Dagster run, and the incident id)."""
    emoji = TRANSITION_EMOJI.get(alert["transition"], ":bell:")
    run_url = alert.get("dagster_run_url")
    fields = [
        f"*Tier*\n{alert['tier']}", f"*Transition*\n{alert['transition']} at {alert.get('transition_at')}",
        f"*Owner*\n{alert.get('owner')}", f"*Signal*\n`{alert.get('signal')}`",
        f"*Onset*\n{alert.get('onset')}", f"*GPU-hours at risk*\n{alert.get('gpu_hours_at_risk')}",
    ]
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": _short(f"[{alert['tier']}] {alert['title']}", 150), "emoji": True}},
        {"type": "section",
         "text": {"type": "mrkdwn", "text": _short(f"{emoji} *{alert['transition']}* · {alert.get('tier_reason') or ''}", 3000)},
         "fields": [{"type": "mrkdwn", "text": _short(f, 2000)} for f in fields]},
        {"type": "section", "text": {"type": "mrkdwn", "text": _short("*Evidence*\n" + "\n".join(_evidence_lines(alert)), 3000)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _short("*Lineage*\n" + ("\n".join(_lineage_lines(alert)) or "none"), 3000)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _short(f"*Playbook*\n```{alert.get('playbook') or 'none'}```", 3000)}},
    ]
    if alert.get("board_url"):
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"<{alert['board_url']}|Open the incident on the board>"}})
    if run_url:
        blocks.append({"type": "actions", "elements": [
            {"type": "button", "text": {"type": "plain_text", "text": "Open the Dagster run"}, "url": run_url},
        ]})
    blocks.append({"type": "context", "elements": [
        {"type": "mrkdwn", "text": f"incident `{alert['incident_id']}` · dedup `{dedup_key(alert)}`"},
    ]})
    return {"text": _short(summary(alert), 3000), "blocks": blocks}


def pagerduty_event(alert: Mapping, routing_key: str) -> dict:
    """A PagerDuty Events API v2 event: trigger (opened, escalated) or resolve, dedup_key = incident id."""
    run_url = alert.get("dagster_run_url")
    if alert["transition"] == "resolved":
        return {"routing_key": routing_key, "event_action": "resolve", "dedup_key": alert["incident_id"]}
    event = {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": alert["incident_id"],
        "payload": {
            "summary": _short(summary(alert), 1024),
            "source": alert.get("run_id") or alert.get("entity_id") or "goodput",
            "severity": PAGERDUTY_SEVERITY.get(alert["tier"], "info"),
            "timestamp": alert.get("transition_at"),
            "component": alert.get("entity_id"),
            "group": alert.get("family"),
            "class": alert.get("signal"),
            "custom_details": {
                "tier": alert["tier"], "tier_reason": alert.get("tier_reason"), "owner": alert.get("owner"),
                "transition": alert["transition"], "gpu_hours_at_risk": alert.get("gpu_hours_at_risk"),
                "evidence": alert.get("evidence") or {}, "lineage": _lineage_lines(alert),
                "playbook": alert.get("playbook"),
            },
        },
        "client": "Goodput",
    }
    links = [{"href": run_url, "text": "Dagster run"}] if run_url else []
    if alert.get("board_url"):
        links.append({"href": alert["board_url"], "text": "Incident on the Goodput board"})
    if links:
        event["client_url"] = links[0]["href"]
        event["links"] = links
    return event


def webhook_body(alert: Mapping) -> dict:
    """The generic webhook's JSON: a versioned envelope around the whole alert."""
    return {"version": 1, "type": f"goodput.incident.{alert['transition']}", "dedup_key": dedup_key(alert),
            "run_url": alert.get("dagster_run_url"), "alert": dict(alert)}


# ---------------------------------------------------------------------------------------------- sinks


class DeliveryError(Exception):
    """One failed attempt. `permanent` (a 4xx other than 408/429): retrying cannot help."""

    def __init__(self, message: str, status_code: int | None = None, permanent: bool = False):
        super().__init__(message)
        self.status_code = status_code
        self.permanent = permanent


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
        url = (os.environ.get(self.spec.url_env) if self.spec.url_env else None) or self.spec.url
        if not url:
            raise SinkInactive(f"sink {self.name}: ${self.spec.url_env} is not set")
        return url

    def send(self, alert: Mapping, client: httpx.Client) -> int | None:
        """Deliver one alert; returns the HTTP status (None for the file). Raises DeliveryError."""
        kind = self.spec.type
        if kind == "file":
            # the file refuses a key it holds: a crash between this write and the journal's cannot duplicate
            if dedup_key(alert) not in {dedup_key(r) for r in _read_jsonl(self.file_path) if "transition" in r}:
                _append_jsonl(self.file_path, [alert])
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
            raise DeliveryError(self._redact(f"{type(error).__name__}: {error}")) from None
        if response.is_success:
            return response.status_code
        permanent = 400 <= response.status_code < 500 and response.status_code not in (408, 429)
        detail = self._redact(response.text.strip()[:200])
        raise DeliveryError(f"HTTP {response.status_code}" + (f": {detail}" if detail else ""), response.status_code, permanent)

    def _redact(self, text: str) -> str:
        for secret in self.secrets():
            text = text.replace(secret, "***")
        return text


def _append_jsonl(path: Path, records: Iterable[Mapping]) -> None:
    """Append records as JSON lines in one fsynced write, under an exclusive lock."""
    payload = "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in records)
    if not payload:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    with open(path, encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            text = handle.read()
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue   # a torn last line from a crash: that attempt's outcome is unknown, so it is retried
    return out


# ---------------------------------------------------------------------------------------------- journal


class AlertJournal:
    """The append-only log of delivery attempts, the source of truth for what was delivered."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def record(self, attempt: Mapping) -> None:
        _append_jsonl(self.path, [attempt])

    def attempts(self) -> list[dict]:
        return _read_jsonl(self.path)

    def frame(self) -> pd.DataFrame:
        columns = ["attempt_id", "sink", "dedup_key", "incident_id", "transition", "attempt", "attempted_at",
                   "outcome", "status_code", "error", "elapsed_seconds"]
        frame = pd.DataFrame(self.attempts(), columns=columns)
        frame["attempted_at"] = pd.to_datetime(frame["attempted_at"], utc=True).dt.tz_localize(None)
        return frame


def finished(attempts: Iterable[Mapping]) -> set[tuple[str, str]]:
    """(sink, dedup key) pairs that need no more attempts: delivered, or rejected as permanently bad."""
    return {(a["sink"], a["dedup_key"]) for a in attempts if a["outcome"] in ("delivered", "rejected")}


def backoff_until(attempts: list[Mapping], sink: str, retry: Retry) -> float:
    """Epoch seconds before which a sink that kept failing is left alone (0 when it is healthy)."""
    failures, last = 0, None
    for a in attempts:
        if a["sink"] != sink:
            continue
        if a["outcome"] == "failed":
            failures += 1
            last = a["attempted_at"]
        else:
            failures = 0
    if not failures or retry.tick_backoff_seconds <= 0:
        return 0.0
    ticks = math.ceil(failures / max(retry.attempts_per_tick, 1))
    wait = min(retry.tick_backoff_seconds * 2 ** min(ticks - 1, 30), retry.max_tick_backoff_seconds)   # a sink down for days
    return datetime.fromisoformat(last).timestamp() + wait


# ---------------------------------------------------------------------------------------------- delivery


def _utc_iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec="milliseconds")


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
    """Send each alert (oldest first) to each sink its routes name, unless the journal says it is done.

    Returns counts: delivered, failed (sinks left with pending alerts), rejected, skipped (inactive
    sinks), waiting (alerts left for a later tick)."""
    retry = config.retry
    warn = warn or log
    deadline = time.monotonic() + retry.tick_budget_seconds
    history = journal.attempts()
    done = finished(history)
    ui = config.ui_url()
    result = {"delivered": 0, "failed": 0, "rejected": 0, "waiting": 0, "skipped": []}
    with httpx.Client(timeout=retry.timeout_seconds, transport=transport) as client:
        for name, spec in config.sinks.items():
            sink = Sink(name, spec, file_path, ui)
            mine = [a for a in alerts if name in config.route(a) and (name, dedup_key(a)) not in done]
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
                outcome = _send_with_retries(sink, alert, client, journal, retry, deadline, clock)
                result[outcome] += 1
                if outcome == "delivered":
                    log(f"alert {alert['transition']} -> {name}: {summary(alert)} ({alert['incident_id']})")
                elif outcome == "rejected":
                    warn(f"sink {name} rejected {dedup_key(alert)} for good; see alert_attempts")
                else:
                    result["waiting"] += len(mine) - i - 1
                    warn(f"sink {name} failing; {len(mine) - i} alert(s) wait for a later tick, in order")
                    break
    return result


def _send_with_retries(sink: Sink, alert, client, journal: AlertJournal, retry: Retry, deadline: float, clock) -> str:
    """One transition to one sink, retried with exponential backoff; every attempt journaled."""
    outcome = "failed"
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(max(retry.attempts_per_tick, 1)) | (lambda _s: time.monotonic() >= deadline),
        wait=tenacity.wait_exponential(multiplier=retry.initial_wait_seconds, max=retry.max_wait_seconds),
        retry=tenacity.retry_if_exception(lambda e: isinstance(e, DeliveryError) and not e.permanent),
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                number = attempt.retry_state.attempt_number
                started = time.monotonic()
                record = {"attempt_id": uuid.uuid4().hex, "sink": sink.name, "dedup_key": dedup_key(alert),
                          "incident_id": alert["incident_id"], "transition": alert["transition"], "attempt": number,
                          "attempted_at": _utc_iso(clock())}
                try:
                    status = sink.send(alert, client)
                except DeliveryError as error:
                    journal.record({**record, "outcome": "rejected" if error.permanent else "failed",
                                    "status_code": error.status_code, "error": str(error),
                                    "elapsed_seconds": round(time.monotonic() - started, 3)})
                    raise
                journal.record({**record, "outcome": "delivered", "status_code": status, "error": None,
                                "elapsed_seconds": round(time.monotonic() - started, 3)})
                outcome = "delivered"
    except DeliveryError as error:
        outcome = "rejected" if error.permanent else "failed"
    return outcome


def mirror_journal(con, journal: AlertJournal) -> int:
    """Insert the journal's attempts the warehouse lacks (inside a write connection); returns rows added."""
    from orchestration import sql
    from orchestration.warehouse import transaction

    frame = journal.frame()
    if frame.empty:
        return 0
    before = con.execute("SELECT count(*) FROM alert_attempts").fetchone()[0]
    with transaction(con, new_attempts=frame):
        sql.run(con, "alerts/store_attempts")
    return con.execute("SELECT count(*) FROM alert_attempts").fetchone()[0] - before


# ---------------------------------------------------------------------------------------------- resource


class AlertingResource(dg.ConfigurableResource):
    """Routing config, the sinks it names, the attempt journal and the monitor outbox of one Goodput home."""

    config_path: str
    file_sink_path: str     # the file sink: GOODPUT_HOME/alerts/alerts.jsonl
    journal_path: str       # the attempt journal: GOODPUT_HOME/alerts/attempts.jsonl
    outbox_path: str        # alerts about Goodput itself, kept until delivered: GOODPUT_HOME/alerts/monitor.jsonl
    board_url: str = DEFAULT_BOARD_URL   # the incident board alerts link to (GOODPUT_BOARD_URL)

    def config(self) -> AlertingConfig:
        return load_config(self.config_path)

    def journal(self) -> AlertJournal:
        return AlertJournal(self.journal_path)

    def run_url(self, run_id: str | None) -> str | None:
        return f"{self.config().ui_url().rstrip('/')}/runs/{run_id}" if run_id else None

    def post_monitor_alert(self, alert: Mapping) -> None:
        """Keep an alert about Goodput itself (run failure, staleness) until every sink has it."""
        if dedup_key(alert) not in {dedup_key(a) for a in self.monitor_alerts()}:
            _append_jsonl(Path(self.outbox_path), [alert])

    def monitor_alerts(self) -> list[dict]:
        return _read_jsonl(Path(self.outbox_path))

    def pending(self, alerts: list[Mapping]) -> list[Mapping]:
        """The alerts some active sink routed to them has not finished, oldest first."""
        config, done = self.config(), finished(self.journal().attempts())
        file_path, ui = Path(self.file_sink_path), config.ui_url()
        active = {}
        for name, spec in config.sinks.items():
            try:
                Sink(name, spec, file_path, ui).check_active()
                active[name] = True
            except SinkInactive:
                active[name] = False
        return [a for a in alerts if any(active[s] and (s, dedup_key(a)) not in done for s in config.route(a))]

    def deliver(self, alerts: list[Mapping], log: Callable[[str], None] = lambda _m: None,
                clock: Callable[[], float] = time.time, warn: Callable[[str], None] | None = None) -> dict | None:
        """Deliver under the home's delivery lock (one deliverer at a time); None when another holds it."""
        lock = Path(self.journal_path).with_name(".deliver.lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        with open(lock, "a") as handle:
            deadline = time.monotonic() + 5
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        return None
                    time.sleep(0.1)
            try:
                return deliver(alerts, self.config(), self.journal(), Path(self.file_sink_path), log, clock, warn)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def alerting_resource_for(home) -> AlertingResource:
    """The alerting resource of one home; the routing file is `$GOODPUT_ALERTING`, else the repository's."""
    from orchestration.home import alerts_path

    file_sink = alerts_path(Path(home))
    return AlertingResource(
        config_path=os.environ.get("GOODPUT_ALERTING") or str(DEFAULT_CONFIG),
        file_sink_path=str(file_sink),
        journal_path=str(file_sink.with_name("attempts.jsonl")),
        outbox_path=str(file_sink.with_name("monitor.jsonl")),
        board_url=board_url_from_env(),
    )
