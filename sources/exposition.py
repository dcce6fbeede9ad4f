"""Prometheus exposition text: parse an exporter's page into gpu_samples records (with rejects),
scrape exporters directly where there is no Prometheus (`goodput scrape`), and write simulated
dcgm-exporter and vLLM pages (for the integration test).

Parsing uses `prometheus_client.parser`, one sample line at a time, so a truncated or garbled
line costs only itself: it comes back as a reject (line, text, reason) for the quarantine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from urllib.parse import urlparse

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sources.client import iso_utc
from sources.mapping import GpuRecordBuilder, PrometheusConfig
from sources.urls import redact_url


@dataclass
class ParsedPage:
    records: list[dict]
    rejects: list[dict] = field(default_factory=list)   # {line, raw, reason}
    samples: int = 0
    ignored: int = 0   # well-formed samples of metrics the mapping does not use


def parse_samples(text: str):
    """Yield (line_number, raw_line, sample or None, error or None) for every sample line."""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            samples = [s for family in text_string_to_metric_families(stripped + "\n") for s in family.samples]
        except Exception as error:  # noqa: BLE001 - the parser raises ValueError/IndexError/... on bad lines
            yield number, line, None, f"unparseable exposition line: {error}"
            continue
        if len(samples) != 1:
            yield number, line, None, "unparseable exposition line: expected one sample"
            continue
        yield number, line, samples[0], None


def parse_gpu_page(text: str, time: str, host: str | None = None, config: PrometheusConfig | None = None) -> ParsedPage:
    """gpu_samples records at `time` from one dcgm-exporter / nvidia_gpu_exporter page."""
    builder = GpuRecordBuilder(config or PrometheusConfig(), default_host=host)
    page = ParsedPage(records=[])
    for number, line, sample, error in parse_samples(text):
        if error:
            page.rejects.append({"time": time, "line": number, "raw": line, "reason": error})
            continue
        page.samples += 1
        if not builder.wants(sample.name):
            page.ignored += 1
            continue
        before = len(builder.rejects)
        builder.add(time, sample.name, sample.labels, sample.value, raw=line)
        for raw, reason in builder.rejects[before:]:
            page.rejects.append({"time": time, "line": number, "raw": raw, "reason": reason})
    page.records = builder.build()
    return page


def scrape_once(urls: list[str], writer_for, config: PrometheusConfig | None = None, timeout: float = 10.0,
                session=None) -> dict:
    """Scrape exporter pages directly (no Prometheus): append each page's gpu_samples records, and its
    rejects as `quarantine_reason` lines, through `writer_for(host)` (a RawWriter per host).
    An unreachable exporter is counted and reported, not raised: the other hosts go on."""
    session = session or httpx.Client()
    totals = {"records": 0, "rejected": 0, "failed": []}
    for url in urls:
        now = iso_utc()
        host = urlparse(url).hostname or redact_url(url)
        try:
            response = session.get(url, timeout=timeout)
            response.raise_for_status()
        except httpx.HTTPError as error:
            totals["failed"].append(f"{redact_url(url)}: {type(error).__name__}")
            continue
        page = parse_gpu_page(response.text, now, host=host, config=config)
        writer = writer_for(host)
        for record in page.records:
            writer.write(record)
        for reject in page.rejects:
            writer.write({"time": now, "quarantine_reason": reject["reason"], "raw": reject["raw"]})
        totals["records"] += len(page.records)
        totals["rejected"] += len(page.rejects)
    return totals


# --------------------------------------------------------------------------------------------
# Simulated exporters
# --------------------------------------------------------------------------------------------

DCGM_INT64_NOT_SUPPORTED = 9223372036854775794

_DCGM_FIELDS = [
    # (metric, TYPE, record field, scale from record to metric)
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "sm_clock_hertz", 1e-6),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "temperature_celsius", 1),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "power_watts", 1),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "power_limit_watts", 1),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "utilization_ratio", 100),
    ("DCGM_FI_DEV_FB_USED", "gauge", "memory_used_bytes", 1 / (1 << 20)),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "memory_free_bytes", 1 / (1 << 20)),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "last_xid", 1),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "throttle_reasons", 1),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "ecc_corrected_errors_total", 1),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "ecc_uncorrected_errors_total", 1),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "sm_active_ratio", 1),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "tensor_active_ratio", 1),
]


def _fmt(value) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def dcgm_exposition(records: list[dict], driver: str = "550.54.15") -> str:
    """A dcgm-exporter page (its metric names, HELP/TYPE lines and labels) for gpu_samples records.
    A field that is null is served as DCGM's "not supported" sentinel, as dcgm-exporter does."""
    lines = []
    for metric, kind, fld, scale in _DCGM_FIELDS:
        lines.append(f"# HELP {metric} {fld} (simulated).")
        lines.append(f"# TYPE {metric} {kind}")
        for r in records:
            value = r.get(fld)
            if fld == "memory_free_bytes" and r.get("memory_total_bytes") is not None:
                value = r["memory_total_bytes"] - r["memory_used_bytes"]
            labels = (f'gpu="{r["gpu_index"]}",UUID="{r["gpu_uuid"]}",pci_bus_id="00000000:{0x18 + r["gpu_index"]:02X}:00.0",'
                      f'device="nvidia{r["gpu_index"]}",modelName="{r.get("gpu_name") or "NVIDIA H100 80GB HBM3"}",'
                      f'Hostname="{r["host"]}",DCGM_FI_DRIVER_VERSION="{driver}"')
            if r.get("run_id"):
                labels += f',hpc_job="{r["run_id"]}"'
            if value is None:
                text = str(DCGM_INT64_NOT_SUPPORTED)
            else:
                scaled = value * scale
                text = str(int(round(scaled))) if kind == "counter" or fld in (
                    "memory_used_bytes", "memory_free_bytes", "last_xid", "throttle_reasons") else _fmt(scaled)
            lines.append(f"{metric}{{{labels}}} {text}")
    return "\n".join(lines) + "\n"


def geometric_buckets(low: float, high: float, ratio: float) -> list[float]:
    edges, edge = [], low
    while edge < high:
        edges.append(round(edge, 9))
        edge *= ratio
    return edges


@dataclass
class LatencyDistribution:
    """Log-normal latency: median x exp(sigma x z)."""

    median: float
    sigma: float

    def quantile(self, q: float) -> float:
        return self.median * math.exp(self.sigma * NormalDist().inv_cdf(q))


class SimulatedVllmEndpoint:
    """A vLLM server's /metrics for one model: latency histograms that grow by a fixed, stratified
    batch of requests per scrape, so the truth of every quantile over any window is the
    distribution's quantile, plus queue, KV-cache, request and preemption counters
    (`preemptions_per_scrape`: 0 is a healthy engine)."""

    HISTOGRAMS = {
        "vllm:time_to_first_token_seconds": "ttft",
        "vllm:inter_token_latency_seconds": "itl",
        "vllm:e2e_request_latency_seconds": "e2e",
    }

    def __init__(self, model_name: str, ttft: LatencyDistribution, itl: LatencyDistribution, e2e: LatencyDistribution,
                 batch: int = 2000, waiting: float = 3, running: float = 17, kv_cache: float = 0.42, failure_every: int = 50,
                 buckets: list[float] | None = None, preemptions_per_scrape: int = 0):
        self.model_name = model_name
        self.dists = {"ttft": ttft, "itl": itl, "e2e": e2e}
        self.batch, self.waiting, self.running, self.kv_cache = batch, waiting, running, kv_cache
        self.failure_every = failure_every
        self.preemptions_per_scrape = preemptions_per_scrape
        self.buckets = buckets or geometric_buckets(0.001, 120.0, 1.02)
        self.counts = {name: [0] * (len(self.buckets) + 1) for name in self.dists}
        self.sums = {name: 0.0 for name in self.dists}
        self.requests = 0
        self.preemptions = 0
        self.scrapes = 0

    def advance(self) -> None:
        import bisect
        for name, dist in self.dists.items():
            for i in range(self.batch):
                value = dist.quantile((i + 0.5) / self.batch)
                self.counts[name][bisect.bisect_left(self.buckets, value)] += 1
                self.sums[name] += value
        self.requests += self.batch
        self.preemptions += self.preemptions_per_scrape
        self.scrapes += 1

    def exposition(self) -> str:
        model = self.model_name
        lab = f'model_name="{model}"'
        lines = []
        for metric, name in self.HISTOGRAMS.items():
            lines += [f"# HELP {metric} Histogram of {name} in seconds.", f"# TYPE {metric} histogram"]
            cumulative = 0
            for edge, count in zip(self.buckets, self.counts[name]):
                cumulative += count
                lines.append(f'{metric}_bucket{{{lab},le="{edge}"}} {cumulative}.0')
            cumulative += self.counts[name][-1]
            lines.append(f'{metric}_bucket{{{lab},le="+Inf"}} {cumulative}.0')
            lines.append(f"{metric}_count{{{lab}}} {cumulative}.0")
            lines.append(f"{metric}_sum{{{lab}}} {self.sums[name]!r}")
        failures = self.requests // self.failure_every
        lines += ["# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{lab}}} {float(self.waiting)}",
                  "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{lab}}} {float(self.running)}",
                  "# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc{{{lab}}} {self.kv_cache}",
                  "# TYPE vllm:request_success_total counter",
                  f'vllm:request_success_total{{{lab},finished_reason="stop"}} {float(self.requests - failures)}',
                  f'vllm:request_success_total{{{lab},finished_reason="length"}} 0.0',
                  f'vllm:request_success_total{{{lab},finished_reason="abort"}} {float(failures)}',
                  "# TYPE vllm:num_preemptions_total counter",
                  f'vllm:num_preemptions_total{{{lab},engine="0"}} {float(self.preemptions)}']
        return "\n".join(lines) + "\n"
