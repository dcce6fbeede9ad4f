"""Prometheus as a source: pull a time window over the HTTP API (`/api/v1/query_range`) and write it
to the raw zone as gpu_samples (dcgm-exporter, nvidia_gpu_exporter) and serving_metrics (vLLM).

Histogram quantiles (TTFT, inter-token latency, end-to-end latency at p50/p95/p99) are computed by
Prometheus itself with `histogram_quantile` over `rate(..._bucket[rate_window])`. Labels and metric
names are configuration (sources.mapping.PrometheusConfig). A window's output replaces the hour's
`prometheus.jsonl` file atomically (write to a temp file, then rename), so pulling a partition
again rewrites it instead of appending duplicates; rejected samples are written as
`quarantine_reason` lines that the ingest moves to the quarantine table.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import dagster as dg
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

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

PRODUCER = "prometheus"


class PrometheusError(RuntimeError):
    """Prometheus could not answer (unreachable, bad query, error status): one line for the user."""


class PrometheusClient:
    """A small client for the query API with retries on connection errors and 5xx."""

    def __init__(self, url: str, timeout: float = 30.0):
        if not url:
            raise PrometheusError("no Prometheus URL configured (set GOODPUT_PROMETHEUS_URL or prometheus.url)")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        retry = Retry(total=3, backoff_factor=0.3, status_forcelist=(502, 503, 504), allowed_methods=("GET", "POST"))
        self.session.mount("http://", HTTPAdapter(max_retries=retry))
        self.session.mount("https://", HTTPAdapter(max_retries=retry))

    def query_range(self, query: str, start: datetime, end: datetime, step: float) -> list[dict]:
        """The `result` of a range query: [{metric: {labels}, values: [[unix_ts, "value"], ...]}]."""
        params = {"query": query, "start": start.timestamp(), "end": end.timestamp(), "step": step}
        try:
            response = self.session.post(f"{self.url}/api/v1/query_range", data=params, timeout=self.timeout)
        except requests.RequestException as error:
            raise PrometheusError(f"Prometheus at {self.url} is unreachable: {type(error).__name__}") from None
        try:
            body = response.json()
        except ValueError:
            raise PrometheusError(f"Prometheus at {self.url} answered HTTP {response.status_code} without JSON") from None
        if body.get("status") != "success":
            raise PrometheusError(f"Prometheus rejected {query!r}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]["result"]


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


def pull_window(config: PrometheusConfig, raw_root: str | os.PathLike, start: datetime, end: datetime) -> dict:
    """Pull [start, end) (clipped to now) into the raw zone. Returns counts per source."""
    end = min(end, datetime.now(timezone.utc))
    if end <= start:
        return {"gpu_samples": 0, "serving_metrics": 0, "rejected": 0, "files": []}
    # query_range includes its end; stop just short so a record never lands in the next hour.
    last = end - timedelta(milliseconds=1)
    client = PrometheusClient(config.url, timeout=config.timeout_seconds)
    gpu, gpu_rejects = pull_gpu_samples(client, config, start, last)
    serving, serving_rejects = pull_serving_metrics(client, config, start, last)
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

    @property
    def enabled(self) -> bool:
        """Listed in the file's `sources:`, or (no list) a URL is set."""
        return self.sources_file().uses("prometheus", default=bool(self.url or self.config().url))

    def sources_file(self) -> SourcesFile:
        return load_sources_file(self.config_file or None)

    def config(self) -> PrometheusConfig:
        return load_prometheus_config(self.config_file or None, url=self.url,
                                      step_seconds=self.step_seconds, rate_window=self.rate_window)
