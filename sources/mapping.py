"""Mapping exporter metrics to raw-zone records: which metric feeds which field, in which unit, and
which labels name the host, GPU, run, endpoint and model. The mapping is configuration (a YAML file,
validated with pydantic; see docs/sources.md); the defaults below cover dcgm-exporter,
nvidia_gpu_exporter (`nvidia_smi_*`) and vLLM.

Values are cleaned here for every path (Prometheus query_range, exposition text):
DCGM's sentinel "blank / not found / not supported / no permission" values and NaN become null;
a negative counter is rejected with a reason (the caller quarantines it).
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sources.config_file import ConfigError, from_validation, read_yaml

MIB = 1024 * 1024


class MetricSource(BaseModel):
    """One exporter metric feeding a field: value x scale."""

    model_config = ConfigDict(extra="forbid")
    metric: str
    scale: float = 1.0


class LabelMapping(BaseModel):
    """For each dimension, the exporter labels that may carry it, first match wins."""

    model_config = ConfigDict(extra="forbid")
    host: list[str] = ["Hostname", "hostname", "host", "node", "instance"]
    gpu_index: list[str] = ["gpu", "index", "minor_number"]
    gpu_uuid: list[str] = ["UUID", "uuid"]
    gpu_name: list[str] = ["modelName", "name"]
    run_id: list[str] = ["goodput_run_id", "hpc_job", "pod"]
    endpoint: list[str] = ["endpoint", "service", "instance"]
    model_version: list[str] = ["model_version", "model_name", "model"]


def _m(*pairs) -> list[MetricSource]:
    return [MetricSource(metric=m, scale=s) for m, s in pairs]


DEFAULT_GPU_METRICS: dict[str, list[MetricSource]] = {
    "gpu_index": _m(("nvidia_smi_index", 1)),
    "utilization_ratio": _m(("DCGM_FI_DEV_GPU_UTIL", 0.01), ("nvidia_smi_utilization_gpu_ratio", 1)),
    "memory_used_bytes": _m(("DCGM_FI_DEV_FB_USED", MIB), ("nvidia_smi_memory_used_bytes", 1)),
    "memory_free_bytes": _m(("DCGM_FI_DEV_FB_FREE", MIB), ("nvidia_smi_memory_free_bytes", 1)),
    "memory_reserved_bytes": _m(("DCGM_FI_DEV_FB_RESERVED", MIB), ("nvidia_smi_memory_reserved_bytes", 1)),
    "memory_total_bytes": _m(("DCGM_FI_DEV_FB_TOTAL", MIB), ("nvidia_smi_memory_total_bytes", 1)),
    "power_watts": _m(("DCGM_FI_DEV_POWER_USAGE", 1), ("nvidia_smi_power_draw_watts", 1)),
    "power_limit_watts": _m(("DCGM_FI_DEV_POWER_MGMT_LIMIT", 1), ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 1),
                            ("nvidia_smi_enforced_power_limit_watts", 1), ("nvidia_smi_power_limit_watts", 1)),
    "temperature_celsius": _m(("DCGM_FI_DEV_GPU_TEMP", 1), ("nvidia_smi_temperature_gpu", 1)),
    "sm_clock_hertz": _m(("DCGM_FI_DEV_SM_CLOCK", 1e6), ("nvidia_smi_clocks_current_sm_clock_hz", 1)),
    "throttle_reasons": _m(("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 1), ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 1),
                           ("nvidia_smi_clocks_event_reasons_active", 1)),
    "ecc_corrected_errors_total": _m(("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 1), ("nvidia_smi_ecc_errors_corrected_volatile_total", 1)),
    "ecc_uncorrected_errors_total": _m(("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1),
                                       ("nvidia_smi_ecc_errors_uncorrected_volatile_total", 1)),
    "last_xid": _m(("DCGM_FI_DEV_XID_ERRORS", 1)),
    "sm_active_ratio": _m(("DCGM_FI_PROF_SM_ACTIVE", 1)),
    "tensor_active_ratio": _m(("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1)),
}
# Fields that are integers in the warehouse, and fields that count up (negative is impossible).
INTEGER_FIELDS = {"gpu_index", "memory_used_bytes", "memory_free_bytes", "memory_reserved_bytes", "memory_total_bytes",
                  "throttle_reasons", "ecc_corrected_errors_total", "ecc_uncorrected_errors_total", "last_xid"}
AUX_FIELDS = {"memory_free_bytes", "memory_reserved_bytes"}   # used to derive memory_total_bytes, not written


class ServingMetrics(BaseModel):
    """vLLM-style serving metric names (defaults: vLLM >= 0.6; older names as fallbacks)."""

    model_config = ConfigDict(extra="forbid")
    ttft_histogram: list[str] = ["vllm:time_to_first_token_seconds"]
    itl_histogram: list[str] = ["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"]
    e2e_histogram: list[str] = ["vllm:e2e_request_latency_seconds"]
    requests_waiting: list[str] = ["vllm:num_requests_waiting"]
    requests_running: list[str] = ["vllm:num_requests_running"]
    kv_cache_usage_ratio: list[str] = ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]
    request_counter: str = "vllm:request_success_total"
    preemptions: list[str] = ["vllm:num_preemptions_total"]   # counter: sequences preempted (KV cache full)
    failure_reasons: list[str] = ["abort", "error"]   # finished_reason values counted as failures
    quantiles: list[float] = [0.5, 0.95, 0.99]


class PrometheusConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = ""
    step_seconds: float = Field(15.0, gt=0)
    rate_window: str = "1m"
    timeout_seconds: float = Field(30.0, gt=0)
    labels: LabelMapping = LabelMapping()
    gpu_metrics: dict[str, list[MetricSource]] = Field(default_factory=lambda: dict(DEFAULT_GPU_METRICS))
    serving: ServingMetrics = ServingMetrics()


class AgentConfig(BaseModel):
    """The `agent:` section: defaults for `goodput agent` on every host that reads the file."""

    model_config = ConfigDict(extra="forbid")
    interval_seconds: float = Field(10.0, gt=0)
    job_mapping_dir: str | None = None
    stats_every: int = Field(60, ge=0)


# The producers a sources file may name, and the raw-zone folders each one writes.
SOURCE_NAMES: dict[str, tuple[str, ...]] = {
    "simulator": ("gpu_samples", "training_steps", "lineage", "serving_metrics", "predictions",
                  "prediction_outcomes"),
    "agent": ("gpu_samples",),
    "prometheus": ("gpu_samples", "serving_metrics"),
    "scrape": ("gpu_samples",),
    "client": ("training_steps", "lineage"),
    "tensorboard": ("training_steps",),
    "megatron": ("training_steps",),
    "predictions": ("predictions", "prediction_outcomes"),
}
DEFAULT_SOURCES = ("simulator",)


class SourcesFile(BaseModel):
    """The sources file (docs/sources.md): which sources to use (`sources:`) and how. Absent sections
    keep their defaults; with no file, or no `sources:` list, the simulator is the source (and
    Prometheus too once a URL is set, as before the list existed)."""

    model_config = ConfigDict(extra="forbid")
    sources: list[str] | None = None
    prometheus: dict = Field(default_factory=dict)   # validated as PrometheusConfig, with overrides
    agent: AgentConfig = AgentConfig()

    @field_validator("sources")
    @classmethod
    def _known_sources(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError(f"list at least one source (e.g. [simulator]); known: {', '.join(SOURCE_NAMES)}")
        for name in value:
            if name not in SOURCE_NAMES:
                raise ValueError(f"unknown source {name!r}; known: {', '.join(SOURCE_NAMES)}")
        return list(dict.fromkeys(value))   # a name listed twice counts once

    @property
    def explicit(self) -> bool:
        """Whether the file lists its sources (then only those run)."""
        return self.sources is not None

    def uses(self, name: str, default: bool = False) -> bool:
        """Whether producer `name` should run: as listed, or `default` when the file lists none."""
        if name not in SOURCE_NAMES:
            raise KeyError(name)
        return name in self.sources if self.sources is not None else default

    def names(self) -> tuple[str, ...]:
        return tuple(self.sources) if self.sources is not None else DEFAULT_SOURCES

    def expected_raw_folders(self) -> tuple[str, ...]:
        """The raw-zone folders the listed sources write (where to expect fresh data)."""
        return tuple(dict.fromkeys(f for name in self.names() for f in SOURCE_NAMES[name]))


def _first_error(path, error: ValidationError, prefix: str = "") -> ConfigError:
    return from_validation(path or "sources config", error, prefix)


def load_sources_file(path: str | Path | None) -> SourcesFile:
    """Read and validate a sources YAML file (defaults when path is empty)."""
    if not path:
        return SourcesFile()
    p = Path(path)
    loaded = read_yaml(p) or {}   # unreadable, not text, not YAML: ConfigError `file: problem`
    if not isinstance(loaded, dict):
        raise ConfigError(f"{p}: expected a mapping with `sources:`, `prometheus:` and/or `agent:` sections")
    try:
        return SourcesFile.model_validate(loaded)
    except ValidationError as error:
        raise _first_error(p, error) from None


def load_agent_config(path: str | Path | None) -> AgentConfig:
    return load_sources_file(path).agent


def require_source(path: str | Path | None, name: str) -> SourcesFile:
    """The sources file, or ConfigError when it lists its sources and `name` is not among them
    (a producer started by hand against a file that does not expect it)."""
    sources = load_sources_file(path)
    if not sources.uses(name, default=True):
        raise ConfigError(f"{path}: sources: `{name}` is not listed ({', '.join(sources.names())}); "
                          f"add it to `sources:` to run it with this file")
    return sources


def load_prometheus_config(path: str | Path | None, **overrides) -> PrometheusConfig:
    """The `prometheus:` section of a sources YAML file, with non-empty `overrides` on top."""
    data = dict(load_sources_file(path).prometheus)
    data.update({k: v for k, v in overrides.items() if v not in (None, "")})
    try:
        config = PrometheusConfig.model_validate(data)
    except ValidationError as error:
        raise _first_error(path, error, "prometheus.") from None
    unknown = set(config.gpu_metrics) - set(DEFAULT_GPU_METRICS)
    if unknown:
        raise ConfigError(f"{path}: prometheus.gpu_metrics: unknown field(s) {sorted(unknown)}; "
                          f"known: {sorted(DEFAULT_GPU_METRICS)}")
    return config


def is_dcgm_blank(value: float) -> bool:
    """DCGM's "no value" sentinels (DCGM_INT64_BLANK .. NO_PERMISSION = 0x7ffffffffffffff0 ..f3,
    DCGM_INT32_BLANK .. = 0x7ffffff0 ..f3, DCGM_FP64_BLANK .. = 2**47 .. +3): not measurements."""
    value = float(value)   # as Prometheus carries them: the int64 sentinels all round to 2**63
    return (value >= 9.223372036854775e18
            or 2147483632 <= value <= 2147483635
            or 140737488355328.0 <= value <= 140737488355331.0)


def clean_value(field: str, value: float) -> tuple[float | int | None, str | None]:
    """(value for the record, reason to reject or None). Sentinels -> null (DCGM says "no value")."""
    if value is None:
        return None, None
    value = float(value)
    if math.isnan(value):
        return None, "value is NaN"
    if math.isinf(value):
        return None, "value is infinite"
    if is_dcgm_blank(value):
        return None, None
    if value < 0 and (field.endswith(("_total", "_bytes", "_ratio", "_hertz", "_watts")) or field in INTEGER_FIELDS):
        return None, f"negative value {value:g} for {field}"
    return (int(round(value)) if field in INTEGER_FIELDS else value), None


def first_label(labels: dict, names: list[str]) -> str | None:
    for name in names:
        value = labels.get(name)
        if value not in (None, ""):
            return value
    return None


def strip_port(instance: str | None) -> str | None:
    """`host:9400` -> `host` (the Prometheus `instance` label names a scrape target)."""
    if instance and ":" in instance and not instance.startswith("["):
        return instance.rsplit(":", 1)[0]
    return instance


class GpuRecordBuilder:
    """Folds metric samples (name, labels, value) at one time into one gpu_samples record per GPU.

    A sample that cannot be placed (no GPU label) or has a bad value is rejected with a reason;
    the rest of its GPU's record is kept.
    """

    def __init__(self, config: PrometheusConfig, default_host: str | None = None):
        self.config = config
        self.labels = config.labels
        self.default_host = default_host
        self.by_metric: dict[str, tuple[str, float]] = {}
        for field, sources in config.gpu_metrics.items():
            for source in sources:
                self.by_metric.setdefault(source.metric, (field, source.scale))
        # Earlier entries win when one exporter serves two names for a field.
        self.rank = {(f, s.metric): i for f, sources in config.gpu_metrics.items() for i, s in enumerate(sources)}
        self.records: dict[tuple, dict] = {}
        self._ranks: dict[tuple, int] = {}
        self.rejects: list[tuple[str, str]] = []   # (what, reason)

    def wants(self, metric: str) -> bool:
        return metric in self.by_metric or metric in ("nvidia_smi_gpu_info", "DCGM_FI_DEV_COUNT")

    def add(self, time: str, metric: str, labels: dict, value: float, raw: str | None = None) -> None:
        if not self.wants(metric):
            return
        raw = raw or f"{metric}{labels} {value}"
        uuid = first_label(labels, self.labels.gpu_uuid)
        index = first_label(labels, self.labels.gpu_index)
        if uuid is None and index is None:
            self.rejects.append((raw, f"cannot tell which GPU: none of the labels {self.labels.gpu_uuid + self.labels.gpu_index}"))
            return
        host = first_label(labels, self.labels.host)
        host = strip_port(host) if host else self.default_host
        key = (time, host, uuid or f"index:{index}")
        record = self.records.setdefault(key, {"time": time, "host": host, "gpu_uuid": uuid})
        if index is not None and record.get("gpu_index") is None:
            try:
                record["gpu_index"] = int(index)
            except ValueError:
                self.rejects.append((raw, f"GPU index label {index!r} is not an integer"))
        name = first_label(labels, self.labels.gpu_name)
        if name and not record.get("gpu_name"):
            record["gpu_name"] = name
        run_id = first_label(labels, self.labels.run_id)
        if run_id and not record.get("run_id"):
            record["run_id"] = run_id
        if metric not in self.by_metric:
            return
        field, scale = self.by_metric[metric]
        value, reason = clean_value(field, None if value is None else float(value) * scale)
        if reason:
            self.rejects.append((raw, reason))
            return
        rank = self.rank[(field, metric)]
        slot = (key, field)
        if value is not None and (field not in record or record[field] is None or rank < self._ranks.get(slot, 1 << 30)):
            record[field] = value
            self._ranks[slot] = rank
        else:
            record.setdefault(field, None)

    def build(self) -> list[dict]:
        out = []
        for record in self.records.values():
            if record.get("memory_total_bytes") is None and record.get("memory_used_bytes") is not None \
                    and record.get("memory_free_bytes") is not None:
                record["memory_total_bytes"] = (record["memory_used_bytes"] + record["memory_free_bytes"]
                                                + (record.get("memory_reserved_bytes") or 0))
            for aux in AUX_FIELDS:
                record.pop(aux, None)
            out.append(record)
        return sorted(out, key=lambda r: (r["time"], r["host"] or "", r.get("gpu_index") if r.get("gpu_index") is not None else -1))
