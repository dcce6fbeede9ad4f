"""The alerting routes file (`orchestration/alerting.yaml` or `$GOODPUT_ALERTING`) as pydantic models:
which sinks exist, which transitions each hears, how deliveries are retried. Secrets are never in
the file: a sink names the environment variable that holds its URL or routing key."""

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestration.config.env import env_or
from sources.config_file import ConfigError, config_error, load_model, read_yaml

DEFAULT_CONFIG = Path(__file__).parent.with_name("alerting.yaml")
CONFIG_ENV = "GOODPUT_ALERTING"


def routes_path(env_name: str = CONFIG_ENV, fallback: str | Path = DEFAULT_CONFIG) -> str:
    """The routes file: the environment variable `env_name` where it is set, else `fallback` (the repository's)."""
    return str(env_or(env_name, fallback))


class AlertingConfigError(ConfigError):
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

    @property
    def idempotent(self) -> bool:
        """Whether re-sending a transition the sink may already have is harmless: PagerDuty folds a
        repeat by dedup_key, the webhook carries an Idempotency-Key, the file refuses a key it holds.
        Slack has no such key: a request that may have arrived is never sent again."""
        return self.type != "slack"


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
    attempts_per_tick: int = Field(3, ge=1)
    initial_wait_seconds: float = Field(0.5, ge=0)
    max_wait_seconds: float = Field(4.0, ge=0)
    tick_backoff_seconds: float = Field(30.0, ge=0)
    max_tick_backoff_seconds: float = Field(600.0, ge=0)
    timeout_seconds: float = Field(10.0, gt=0)          # connect, write and pool
    read_timeout_seconds: float = Field(30.0, gt=0)     # waiting for the answer to a request that was sent
    tick_budget_seconds: float = Field(40.0, gt=0)


class Grouping(_Strict):
    """One notification per event (orchestration/alerting/grouping.py), Alertmanager's knobs."""

    group_by: Literal["correlation", "incident"] = "correlation"   # `incident`: every incident pages on its own
    group_wait_seconds: float = Field(60.0, ge=0)        # data time the first notification waits for its group's members
    group_interval_seconds: float = Field(300.0, ge=0)   # later member transitions are batched this long into one update
    event_window_seconds: float = Field(300.0, ge=0)     # correlated onsets this close are one event (one page)


class Monitor(_Strict):
    tier: str = "SEV2"
    owner: str = "platform"
    stale_detect_after_seconds: float = Field(900.0, gt=0)
    stale_raw_after_seconds: float = Field(900.0, gt=0)
    playbook: list[str] = []
    escalation: list[str] = []


class AlertingConfig(_Strict):
    dagster_url: str = "http://127.0.0.1:3000"
    dagster_url_env: str | None = None
    sinks: dict[str, SinkSpec]
    routes: list[Route]
    retry: Retry = Retry()
    grouping: Grouping = Grouping()
    monitor: Monitor = Monitor()

    @model_validator(mode="after")
    def _known_sinks(self):
        for i, route in enumerate(self.routes):
            unknown = [s for s in route.sinks if s not in self.sinks]
            if unknown:
                raise ValueError(f"routes[{i}] names unknown sink(s) {', '.join(unknown)}; known: {', '.join(self.sinks)}")
        return self

    def ui_url(self) -> str:
        return env_or(self.dagster_url_env, self.dagster_url)

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
        data = read_yaml(path, missing_ok=True)
        if data is None and not path.exists():
            raise config_error(path, "", "no alerting config here: set GOODPUT_ALERTING or restore orchestration/alerting.yaml")
        return load_model(path, AlertingConfig, data)
    except ConfigError as error:
        raise AlertingConfigError(str(error)) from None
