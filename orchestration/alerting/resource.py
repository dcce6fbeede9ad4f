"""The alerting resource of one Goodput home: its routes, sinks, journal and the monitor outbox."""

import fcntl
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import dagster as dg
import tenacity

from orchestration.alerting.config import CONFIG_ENV, DEFAULT_CONFIG, AlertingConfig, load_config, routes_path
from orchestration.alerting.delivery import Sink, SinkInactive, deliver
from orchestration.alerting.grouping import notifications
from orchestration.alerting.journal import AlertJournal, append_jsonl, finished, latest_sent, read_jsonl
from orchestration.alerting.payloads import dedup_key
from orchestration.board_links import BOARD_URL_ENV, DEFAULT_BOARD_URL, board_url
from orchestration.config.home import alerts_path

DELIVER_LOCK_SECONDS = 5     # how long a deliverer waits for another's delivery lock before skipping its turn


class AlertingResource(dg.ConfigurableResource):
    """Routing config, the sinks it names, the attempt journal and the monitor outbox of one Goodput home.
    Two settings are environment variables named here and read when a run or tick uses them, not when the
    code location loads (the UI shows their names, like a `dg.EnvVar`): `config_path_env` names the routes
    file (else `config_path`), `board_url_env` the incident board alerts link to (else `board_url`)."""

    config_path: str = str(DEFAULT_CONFIG)
    config_path_env: str = CONFIG_ENV
    file_sink_path: str     # the file sink: GOODPUT_HOME/alerts/alerts.jsonl
    journal_path: str       # the attempt journal: GOODPUT_HOME/alerts/attempts.jsonl
    outbox_path: str        # alerts about Goodput itself, kept until delivered: GOODPUT_HOME/alerts/monitor.jsonl
    board_url: str = DEFAULT_BOARD_URL
    board_url_env: str = BOARD_URL_ENV

    def routes_path(self) -> str:
        return routes_path(self.config_path_env, self.config_path)

    def board_base(self) -> str:
        return board_url(self.board_url_env, self.board_url)

    def config(self) -> AlertingConfig:
        return load_config(self.routes_path())

    def journal(self) -> AlertJournal:
        return AlertJournal(self.journal_path)

    def run_url(self, run_id: str | None) -> str | None:
        return f"{self.config().ui_url().rstrip('/')}/runs/{run_id}" if run_id else None

    def post_monitor_alert(self, alert: Mapping) -> None:
        """Keep an alert about Goodput itself (run failure, staleness) until every sink has it."""
        if dedup_key(alert) not in {dedup_key(a) for a in self.monitor_alerts()}:
            append_jsonl(Path(self.outbox_path), [alert])

    def monitor_alerts(self) -> list[dict]:
        return read_jsonl(Path(self.outbox_path), ("incident_id", "transition", "tier", "title"))

    def pending(self, alerts: list[Mapping], clock: Callable[[], float] = time.time) -> list[Mapping]:
        """`alerts` whole when some active sink has a notification of them to finish (or one that
        group_wait holds back), else none: grouping needs every transition, delivered ones too."""
        config, history = self.config(), self.journal().attempts()
        done, sent = finished(history), latest_sent(history)
        file_path, ui = Path(self.file_sink_path), config.ui_url()
        active = {}
        for name, spec in config.sinks.items():
            try:
                Sink(name, spec, file_path, ui).check_active()
                active[name] = True
            except SinkInactive:
                active[name] = False
        for name in (n for n, on in active.items() if on):
            notified = {incident for (s, incident) in sent if s == name}
            grouped, held = notifications([a for a in alerts if name in config.route(a)], config.grouping, clock(), notified)
            if held or any((name, dedup_key(n)) not in done for n in grouped):
                return list(alerts)
        return []

    def deliver(self, alerts: list[Mapping], log: Callable[[str], None] = lambda _m: None,
                clock: Callable[[], float] = time.time, warn: Callable[[str], None] | None = None) -> dict | None:
        """Deliver under the home's delivery lock (one deliverer at a time); None when another holds it."""
        lock = Path(self.journal_path).with_name(".deliver.lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        with open(lock, "a") as handle:
            try:
                for attempt in tenacity.Retrying(
                    stop=tenacity.stop_after_delay(DELIVER_LOCK_SECONDS), wait=tenacity.wait_fixed(0.1),
                    retry=tenacity.retry_if_exception_type(BlockingIOError), reraise=True,
                ):
                    with attempt:
                        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:     # another deliverer held it all along: this one skips its turn
                return None
            try:
                return deliver(alerts, self.config(), self.journal(), Path(self.file_sink_path), log, clock, warn)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def alerting_resource_for(home) -> AlertingResource:
    """The alerting resource of one home; the routing file is `$GOODPUT_ALERTING`, else the repository's."""
    file_sink = alerts_path(Path(home))
    return AlertingResource(
        file_sink_path=str(file_sink),
        journal_path=str(file_sink.with_name("attempts.jsonl")),
        outbox_path=str(file_sink.with_name("monitor.jsonl")),
    )
