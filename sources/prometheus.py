"""Prometheus as a source: pull a time window over the HTTP API (`/api/v1/query_range`) and write it
to the raw zone as gpu_samples (dcgm-exporter, nvidia_gpu_exporter) and serving_metrics (vLLM).

Histogram quantiles (TTFT, inter-token latency, end-to-end latency at p50/p95/p99) are computed by
Prometheus itself with `histogram_quantile` over `rate(..._bucket[rate_window])`. Labels and metric
names are configuration (sources.mapping.PrometheusConfig). A window's output replaces the hour's
`prometheus.jsonl` file atomically (write to a temp file, then rename), so pulling a partition
again rewrites it instead of appending duplicates; rejected samples are written as
`quarantine_reason` lines that the ingest moves to the quarantine table.

Credentials (basic auth) come from their own settings, `GOODPUT_PROMETHEUS_USERNAME` and
`GOODPUT_PROMETHEUS_PASSWORD` (Dagster EnvVars: the UI shows the variable's name, never its value);
a `user:password@` in the URL is taken out of it before anything is shown. Every URL in metadata,
logs and errors is the redacted one (`redact_url`).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import dagster as dg
import httpx
import tenacity

from sources.client import iso_utc, replace_hour_files
from sources.mapping import (
    GpuRecordBuilder,
    PrometheusConfig,
    SourcesFile,
    clean_value,
    first_label,
    load_prometheus_config,
    load_sources_file,
    strip_port,
)
from sources.urls import redact_url, split_credentials

PRODUCER = "prometheus"


class PrometheusError(RuntimeError):
    """Prometheus could not answer (unreachable, bad query, error status): one line for the user."""


class _Retriable(Exception):
    """A 502/503/504 answer: Prometheus or a proxy in front of it is restarting."""


class PrometheusClient:
    """A small client for the query API (httpx) with retries (tenacity) on connection errors and
    502/503/504. Queries are reads, so a retry can never do anything twice."""

    def __init__(self, url: str, timeout: float = 30.0, auth: tuple[str, str] | None = None, attempts: int = 4):
        if not url:
            raise PrometheusError("no Prometheus URL configured (set GOODPUT_PROMETHEUS_URL or prometheus.url)")
        bare, in_url = split_credentials(url)
        self.url = bare.rstrip("/")
        self.shown = redact_url(url).rstrip("/")
        self.client = httpx.Client(timeout=timeout, auth=auth or in_url)
        self.retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(attempts), wait=tenacity.wait_exponential(multiplier=0.3, max=3),
            retry=tenacity.retry_if_exception_type((httpx.TransportError, _Retriable)), reraise=True)

    def _post(self, path: str, data: dict) -> httpx.Response:
        for attempt in self.retrying:
            with attempt:
                response = self.client.post(f"{self.url}{path}", data=data)
                if response.status_code in (502, 503, 504):
                    raise _Retriable(f"HTTP {response.status_code}")
        return response

    def query_range(self, query: str, start: datetime, end: datetime, step: float) -> list[dict]:
        """The `result` of a range query: [{metric: {labels}, values: [[unix_ts, "value"], ...]}]."""
        params = {"query": query, "start": start.timestamp(), "end": end.timestamp(), "step": step}
        try:
            response = self._post("/api/v1/query_range", params)
        except (httpx.HTTPError, _Retriable) as error:
            raise PrometheusError(f"Prometheus at {self.shown} is unreachable: {type(error).__name__}") from None
        if response.status_code in (401, 403):
            raise PrometheusError(f"Prometheus at {self.shown} refused the credentials (HTTP {response.status_code}): "
                                  "check GOODPUT_PROMETHEUS_USERNAME / GOODPUT_PROMETHEUS_PASSWORD")
        try:
            body = response.json()
        except ValueError:
            raise PrometheusError(f"Prometheus at {self.shown} answered HTTP {response.status_code} without JSON") from None
        if body.get("status") != "success":
            raise PrometheusError(f"Prometheus rejected {query!r}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]["result"]

    def close(self) -> None:
        self.client.close()


def _regex(names) -> str:
    # Metric names are [a-zA-Z_:][a-zA-Z0-9_:]*: nothing in them needs escaping in an RE2 alternation.
    return "|".join(names)


def _time(ts: float) -> str:
    return iso_utc(datetime.fromtimestamp(float(ts), timezone.utc))


def pull_gpu_samples(client: PrometheusClient, config: PrometheusConfig, start: datetime, end: datetime) -> tuple[list, list]:
    metrics = sorted({s.metric for sources in config.gpu_metrics.values() for s in sources} | {"nvidia_smi_gpu_info"})
    result = client.query_range(f'{{__name__=~"{_regex(metrics)}"}}', start, end, config.step_seconds)
    builder = GpuRecordBuilder(config)
    for series in result:
        labels = dict(series["metric"])
        name = labels.pop("__name__", "")
        for ts, value in series["values"]:
            builder.add(_time(ts), name, labels, float(value), raw=f"{name}{json.dumps(labels, sort_keys=True)} {value} @{ts}")
    rejects = [{"time": _time(raw.rsplit("@", 1)[1]), "raw": raw, "reason": reason} for raw, reason in builder.rejects]
    return builder.build(), rejects


def _series_key(labels: dict, config: PrometheusConfig) -> tuple[str | None, str | None, str | None]:
    endpoint = first_label(labels, config.labels.endpoint)
    model = first_label(labels, config.labels.model_version)
    host = strip_port(labels.get("instance"))
    return endpoint, model, host


def pull_serving_metrics(client: PrometheusClient, config: PrometheusConfig, start: datetime, end: datetime) -> tuple[list, list]:
    s = config.serving
    by = ", ".join(sorted({*config.labels.endpoint, *config.labels.model_version, "instance"}))
    rows: dict[tuple, dict] = defaultdict(dict)
    rejects = []

    def put(series_labels, ts, field, value):
        endpoint, model, host = _series_key(series_labels, config)
        if endpoint is None:
            rejects.append({"time": ts, "raw": f"{field} {json.dumps(series_labels, sort_keys=True)} {value}",
                            "reason": f"cannot tell which endpoint: none of the labels {config.labels.endpoint}"})
            return
        cleaned, reason = clean_value(field, float(value))
        if reason:
            rejects.append({"time": ts, "raw": f"{field} {json.dumps(series_labels, sort_keys=True)} {value}", "reason": reason})
            return
        row = rows[(ts, endpoint, model)]
        row.update({"time": _time(ts), "endpoint": endpoint, "model_version": model, "host": host})
        row[field] = cleaned

    for prefix, names in (("ttft", s.ttft_histogram), ("itl", s.itl_histogram), ("e2e_latency", s.e2e_histogram)):
        for q in s.quantiles:
            field = f"{prefix}_p{round(q * 100):d}_seconds"
            buckets = " or ".join(f'rate({{__name__="{n}_bucket"}}[{config.rate_window}])' for n in names)
            query = f"histogram_quantile({q}, sum by (le, {by}) ({buckets}))"
            for series in client.query_range(query, start, end, config.step_seconds):
                for ts, value in series["values"]:
                    if value in ("NaN", "+Inf", "-Inf"):
                        continue   # no requests in the window: no latency to report
                    put(series["metric"], ts, field, value)
    for field in ("requests_waiting", "requests_running", "kv_cache_usage_ratio"):
        names = getattr(s, field)
        query = f'max by ({by}) ({{__name__=~"{_regex(names)}"}})'
        for series in client.query_range(query, start, end, config.step_seconds):
            for ts, value in series["values"]:
                put(series["metric"], ts, field, value)
    failures = "|".join(s.failure_reasons)
    for field, match in (("request_success_total", "!~"), ("request_failure_total", "=~")):
        query = f'sum by ({by}) ({{__name__="{s.request_counter}", finished_reason{match}"{failures}"}})'
        for series in client.query_range(query, start, end, config.step_seconds):
            for ts, value in series["values"]:
                put(series["metric"], ts, field, value)
    # preemptions: one counter per engine (vLLM labels model_name, engine), summed like the requests
    query = f'sum by ({by}) ({{__name__=~"{_regex(s.preemptions)}"}})'
    for series in client.query_range(query, start, end, config.step_seconds):
        for ts, value in series["values"]:
            put(series["metric"], ts, "preemptions_total", value)
    records = [rows[k] for k in sorted(rows, key=lambda k: (float(k[0]), k[1], k[2] or ""))]
    for r in rejects:
        r["time"] = _time(r["time"])
    return records, rejects


def pull_window(config: PrometheusConfig, raw_root: str | os.PathLike, start: datetime, end: datetime,
                auth: tuple[str, str] | None = None) -> dict:
    """Pull [start, end) (clipped to now) into the raw zone. Returns counts per source."""
    end = min(end, datetime.now(timezone.utc))
    if end <= start:
        return {"gpu_samples": 0, "serving_metrics": 0, "rejected": 0, "files": []}
    # query_range includes its end; stop just short so a record never lands in the next hour.
    last = end - timedelta(milliseconds=1)
    client = PrometheusClient(config.url, timeout=config.timeout_seconds, auth=auth)
    try:
        gpu, gpu_rejects = pull_gpu_samples(client, config, start, last)
        serving, serving_rejects = pull_serving_metrics(client, config, start, last)
    finally:
        client.close()
    files = replace_hour_files(raw_root, "gpu_samples", PRODUCER, gpu, gpu_rejects)
    files += replace_hour_files(raw_root, "serving_metrics", PRODUCER, serving, serving_rejects)
    return {"gpu_samples": len(gpu), "serving_metrics": len(serving), "rejected": len(gpu_rejects) + len(serving_rejects),
            "files": [str(f) for f in files]}


class PrometheusResource(dg.ConfigurableResource):
    """Where Goodput pulls Prometheus from. `url` empty = this source is off. `config_file` is a
    sources YAML whose `prometheus:` section maps labels and metric names (docs/sources.md)."""

    url: str = ""
    config_file: str = ""
    step_seconds: float | None = None
    rate_window: str | None = None
    username: str = ""      # basic auth; the password only through dg.EnvVar (see resource_from_env)
    password: str = ""

    def auth(self) -> tuple[str, str] | None:
        return (self.username, self.password) if self.username or self.password else None

    @property
    def enabled(self) -> bool:
        """Listed in the file's `sources:`, or (no list) a URL is set."""
        return self.sources_file().uses("prometheus", default=bool(self.url or self.config().url))

    def sources_file(self) -> SourcesFile:
        return load_sources_file(self.config_file or None)

    def config(self) -> PrometheusConfig:
        return load_prometheus_config(self.config_file or None, url=self.url,
                                      step_seconds=self.step_seconds, rate_window=self.rate_window)


def env_auth(environ=os.environ) -> tuple[str, str] | None:
    """Basic-auth credentials from their own variables (the CLI's way; the asset's is the resource)."""
    user, password = environ.get("GOODPUT_PROMETHEUS_USERNAME", ""), environ.get("GOODPUT_PROMETHEUS_PASSWORD", "")
    return (user, password) if user or password else None


def resource_from_env(environ=os.environ) -> PrometheusResource:
    """The resource as the definitions build it: every value that may hold a secret (the URL, which
    may carry `user:password@`, and the password) is a dg.EnvVar, so Dagster stores its name only."""
    def env(name: str):
        return dg.EnvVar(name) if environ.get(name) else ""

    return PrometheusResource(url=env("GOODPUT_PROMETHEUS_URL"), config_file=environ.get("GOODPUT_SOURCES_CONFIG", ""),
                              username=environ.get("GOODPUT_PROMETHEUS_USERNAME", ""), password=env("GOODPUT_PROMETHEUS_PASSWORD"))
