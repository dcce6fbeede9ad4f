"""The scenario file's shape as pydantic models, and the one formatter that turns pydantic's first
problem into a one-line ``ScenarioError`` (``<file>: <field>: <problem>; <what to do>``).

The models check each field alone (types, ranges, durations, timestamps, names); what needs two
fields or the whole scenario (a host index against the cluster, a fault's target against the runs)
is checked when the loader builds the model (scenario.py, placement.py).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from .faults import FAULT_TYPES
from .fields import (
    CHECKPOINT_FORMATS,
    PRECISIONS,
    Count,
    Duration,
    Flag,
    Identifier,
    Index,
    NonNegative,
    Offset,
    Positive,
    Ratio,
    Text,
    Timestamp,
    at_least,
    at_least_duration,
    at_most,
    below,
    choice,
    integer,
    number,
)
from .model import ScenarioError

# --------------------------------------------------------------------------- the document


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuDoc(Doc):
    name: Text = "NVIDIA H100 80GB HBM3"
    memory_total_bytes: Annotated[int, BeforeValidator(integer), AfterValidator(at_least(1 << 30))] = 85_899_345_920
    power_limit_watts: Annotated[float, BeforeValidator(number), AfterValidator(at_least(100))] = 700.0


class ClusterDoc(Doc):
    hosts: Count
    gpus_per_host: Count
    gpu: GpuDoc = GpuDoc()
    sample_interval: Annotated[Duration, AfterValidator(at_least_duration(timedelta(seconds=1), "use e.g. '10s'"))] = \
        timedelta(seconds=10)
    host_gpus: dict[int, GpuDoc] | None = None  # a mixed cluster: host index -> its GPU model


class LossDoc(Doc):
    initial: Positive
    floor: NonNegative
    decay: Positive
    noise: NonNegative
    s0: Positive = 100.0

    @field_validator("floor")
    @classmethod
    def _floor_below_initial(cls, floor: float, info: ValidationInfo) -> float:
        if "initial" in info.data and floor >= info.data["initial"]:
            raise ValueError("floor is not below initial; make floor < initial")
        return floor


class LearningRateDoc(Doc):
    peak: Positive = 3.0e-4
    warmup_steps: Index = 200
    min_ratio: NonNegative = 0.1
    drop_at_step: Count | None = None
    drop_factor: Annotated[Positive, AfterValidator(below(1, "use e.g. 0.3", "a drop factor must be below 1"))] = 0.3


def _inside_home(folder: str) -> str:
    if ".." in Path(folder).parts:
        raise ValueError(f"{folder!r} climbs out with '..'; use a folder under the output directory, or an absolute path")
    return folder


class CheckpointsDoc(Doc):
    dir: Annotated[Text, AfterValidator(_inside_home)] = "checkpoints"
    format: Annotated[str, BeforeValidator(choice(CHECKPOINT_FORMATS, "checkpoint format"))] = "safetensors"


class RestartDoc(Doc):
    after: Duration


class ModelDoc(Doc):
    layers: Count
    hidden: Count
    seq_len: Count
    vocab: Count


class RunDoc(Doc):
    id: Identifier
    start: Offset
    duration: Duration
    hosts: Annotated[list[Index], Field(min_length=1)]
    step_time: Annotated[Duration, AfterValidator(at_least_duration(
        timedelta(milliseconds=100), "use a realistic step time, e.g. '2s'"))]
    loss: LossDoc
    ranks: Count | None = None
    checkpoint_interval_steps: Count = 1000
    precision: Annotated[str, BeforeValidator(choice(PRECISIONS, "precision"))] = "bf16"
    learning_rate: LearningRateDoc = LearningRateDoc()
    tokens_per_step: Count = 16384
    checkpoint_bytes: Annotated[int, BeforeValidator(integer), AfterValidator(at_least(1 << 20))] = 98_000_000_000
    job: Text | None = None
    dataset: Text = "synthetic/web-text-v1"
    eval_interval_steps: Count | None = None
    ordinary_noise: Flag = False
    checkpoints: CheckpointsDoc | None = None
    restart: RestartDoc | None = None
    log_evaluations: Flag = False
    model: ModelDoc | None = None
    nccl_timeout: Duration = timedelta(minutes=10)
    gpu_indices: Annotated[list[Index], Field(min_length=1)] | None = None  # share a host: the GPUs used on each
    log_every_steps: Count = 1

    @field_validator("gpu_indices")
    @classmethod
    def _gpus_once(cls, gpus: list[int] | None) -> list[int] | None:
        if gpus is not None and len(set(gpus)) != len(gpus):
            raise ValueError("a GPU index is listed twice; list each GPU index once")
        return gpus

    @field_validator("hosts")
    @classmethod
    def _hosts_once(cls, hosts: list[int]) -> list[int]:
        if len(set(hosts)) != len(hosts):
            raise ValueError("a host is listed twice; list each host index once")
        return hosts


def _fault_type(value: Any) -> str:
    if value not in FAULT_TYPES:
        raise ValueError(f"unknown fault type {value!r}; use one of: {', '.join(sorted(FAULT_TYPES))}")
    return value


class FaultDoc(Doc):
    type: Annotated[str, BeforeValidator(_fault_type)]
    target: Text
    onset: Offset
    duration: Duration
    magnitude: Positive = 1.0


class LatencyDoc(Doc):
    p50: Positive
    p99: Positive

    @field_validator("p99")
    @classmethod
    def _p99_above_p50(cls, p99: float, info: ValidationInfo) -> float:
        p50 = info.data.get("p50")
        if p50 is not None and p99 <= p50:
            raise ValueError(f"p99 {p99:g} is not above p50 {p50:g}; make p99 > p50")
        return p99


class PredictionsDoc(Doc):
    per_minute: Positive = 6.0
    outcome_share: Annotated[NonNegative, AfterValidator(at_most(1, "use a share in [0, 1]"))] = 0.5
    outcome_delay: Duration = timedelta(hours=2)
    labels: Annotated[list[Text], Field(min_length=2)] = ["positive", "negative", "neutral"]


class PromotionDoc(Doc):
    run: Text
    at: Offset


class CanaryDoc(Doc):
    run: Text
    at: Offset
    share: Annotated[Positive, AfterValidator(below(1, "use e.g. 0.1 (a tenth of the requests)", "a share of {v:g}"))]


class DiurnalDoc(Doc):
    amplitude: Annotated[NonNegative, AfterValidator(below(
        1, "use a share below 1, e.g. 0.5 (peak 1.5x, trough 0.5x the rate)", "{v:g} would stop traffic at the trough"))] = 0.0
    peak_hour: Annotated[NonNegative, AfterValidator(below(
        24, "use 0 to 23.99 (UTC)", "{v:g} is not an hour of the day"))] = 14.0


class EndpointDoc(Doc):
    name: Identifier
    requests_per_second: Positive
    ttft_seconds: LatencyDoc
    itl_seconds: LatencyDoc
    e2e_seconds: LatencyDoc
    host: Index | None = None
    model_version: Text | None = None
    failure_ratio: Ratio = 0.01
    requests_waiting: NonNegative = 1.0
    kv_cache_usage: Ratio = 0.4
    metrics_interval: Annotated[Duration, AfterValidator(at_least_duration(timedelta(seconds=1), "use e.g. '30s'"))] = \
        timedelta(seconds=30)
    predictions: PredictionsDoc | None = None
    promotions: list[PromotionDoc] | None = None
    diurnal: DiurnalDoc | None = None
    canary: CanaryDoc | None = None


class ScenarioDoc(Doc):
    seed: Index
    start: Timestamp
    duration: Duration
    cluster: ClusterDoc
    runs: list[RunDoc]
    name: Identifier | None = None
    faults: list[FaultDoc] | None = None
    endpoints: list[EndpointDoc] | None = None


# --------------------------------------------------------------------------- the one formatter

_FIXES = {
    "model_type": ("expected a mapping, got {kind}", "write it as key: value pairs"),
    "dict_type": ("expected a mapping, got {kind}", "write it as key: value pairs"),
    "list_type": ("expected a list, got {kind}", "write it as a YAML list ('- ...')"),
    "too_short": ("expected at least {min_length} item(s)", "e.g. hosts: [0] or labels: [positive, negative]"),
}


def field_path(loc: tuple) -> str:
    """('runs', 0, 'checkpoints', 'format') -> 'runs[0].checkpoints.format'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The model whose fields the location's last key is looked up in (for 'use one of: ...')."""
    model: Any = ScenarioDoc
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[part].annotation
        model = next((a for a in _flatten(annotation) if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if model is None:
            return None
    return model


def _flatten(annotation: Any):
    yield annotation
    for arg in getattr(annotation, "__args__", ()):
        yield from _flatten(arg)


def from_validation(source: str, error: ValidationError) -> ScenarioError:
    """pydantic's first problem as ``<file>: <field>: <problem>; <fix>``."""
    first = error.errors()[0]
    loc, kind = tuple(first["loc"]), first["type"]
    field = field_path(loc) or "(file)"
    if kind == "missing":
        return ScenarioError(source, field, "missing field", f"add '{loc[-1]}'")
    if kind == "extra_forbidden":
        model = _model_at(loc)
        allowed = ", ".join(sorted(model.model_fields)) if model else "the fields in docs/scenario.md"
        return ScenarioError(source, field, "unknown field", f"remove it or use one of: {allowed}")
    if kind in _FIXES:
        problem, fix = _FIXES[kind]
        ctx = dict(first.get("ctx") or {}, kind=type(first.get("input")).__name__)
        return ScenarioError(source, field, problem.format(**ctx), fix)
    message = str(first["msg"]).removeprefix("Value error, ")
    problem, _, fix = message.rpartition("; ")
    return ScenarioError(source, field, problem or message, fix or "see docs/scenario.md")


def validate(data: Any, source: str) -> ScenarioDoc:
    try:
        return ScenarioDoc.model_validate(data)
    except ValidationError as error:
        raise from_validation(source, error) from None
