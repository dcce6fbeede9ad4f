"""Scenario files for the Goodput cluster simulator.

A scenario describes a small GPU cluster (hosts x GPUs), the training runs
placed on it, the faults to inject and the seed that makes the simulation
reproducible. This module turns a YAML or JSON scenario file into frozen
dataclasses and validates it up front, so that ``simulate`` never has to deal
with bad input. Every problem raises :class:`ScenarioError` with a one-line
message of the form ``<file>: <field>: <problem>; <what to do>``.

The file format is documented in ``docs/scenario.md``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Mapping

import yaml

from .badput_shapes import ModelShape, RestartSpec, parse_flag, parse_model, parse_restart

__all__ = [
    "FAULT_TYPES",
    "NCCL_TIMEOUT",
    "CheckpointFiles",
    "Cluster",
    "Endpoint",
    "Failure",
    "Fault",
    "FaultType",
    "GpuSpec",
    "Latency",
    "LearningRate",
    "LossCurve",
    "PredictionLog",
    "Promotion",
    "Run",
    "Scenario",
    "ScenarioError",
    "load_scenario",
    "parse_duration",
    "scenario_from_dict",
]


class ScenarioError(ValueError):
    """A scenario file is invalid; the message names the file, the field and the fix."""

    def __init__(self, source: str, field: str, problem: str, fix: str):
        self.source = source
        self.field = field
        super().__init__(f"{source}: {field}: {problem}; {fix}")


# --------------------------------------------------------------------------- #
# Fault registry
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class FaultType:
    """What the loader needs to know about a fault type.

    ``stalls_run``: the fault stops a run's progress for its duration, so the
    run's end shifts later by that much (used for GPU-overlap checks and
    ``Scenario.run_window``). ``kills_run``: the fault can end its run early
    (``Scenario.failure``).
    """

    name: str
    target_kinds: tuple[str, ...]
    stalls_run: bool
    description: str
    max_magnitude: float | None = None
    needs_fp16: bool = False  # the target run must use fp16 (dynamic loss scaling)
    needs_holder: bool = False  # a run's rank must hold the target GPU at onset
    kills_run: bool = False  # may end the run it hits (see Scenario.failure)


# Add new fault types here (and their effect in simulate.py).
FAULT_TYPES: dict[str, FaultType] = {
    "hang": FaultType(
        name="hang",
        target_kinds=("run",),
        stalls_run=True,
        description=(
            "stuck collective (e.g. NCCL): no steps from any rank, GPUs stay busy "
            "at high utilisation but low power and no tensor activity"
        ),
        max_magnitude=1.0,
    ),
    # Training (target run:<id>)
    "nan_loss": FaultType(
        "nan_loss", ("run",), False,
        "a share (magnitude) of steps have non-finite loss and grad norm on all ranks; "
        "nan_iterations_total counts them", max_magnitude=1.0),
    "loss_spike": FaultType(
        "loss_spike", ("run",), False,
        "loss jumps x(1 + 2*magnitude) at onset and decays back to the curve by the end; "
        "grad norm jumps too"),
    "loss_divergence": FaultType(
        "loss_divergence", ("run",), False,
        "loss grows geometrically away from the curve, reaching x(1 + 3*magnitude) at the end; "
        "grad norm grows"),
    "loss_plateau": FaultType(
        "loss_plateau", ("run",), False,
        "the run stops learning: a share (magnitude) of each step's progress along the loss curve "
        "is lost, so the loss stays near its onset value", max_magnitude=1.0),
    "step_time_regression": FaultType(
        "step_time_regression", ("run",), False,
        "data pipeline slowdown: every rank's data_seconds grows by magnitude x step time, "
        "so step time is x(1 + magnitude) and throughput drops"),
    "grad_norm_spike": FaultType(
        "grad_norm_spike", ("run",), False,
        "grad norm x(5 + 20*magnitude) for a short burst; loss mostly unaffected"),
    "loss_scale_collapse": FaultType(
        "loss_scale_collapse", ("run",), False,
        "fp16 only: gradients overflow on a share (magnitude / 2) of steps, the loss scale "
        "halves on each down to 1 and skipped_iterations_total counts the skips",
        needs_fp16=True),
    "memory_fragmentation": FaultType(
        "memory_fragmentation", ("run",), False,
        "reserved minus allocated grows by magnitude x 10 GB over the duration, inactive split "
        "bytes grow, alloc retries come ever more often"),
    # Distributed
    "straggler": FaultType(
        "straggler", ("rank",), False,
        "one rank computes x(1 + magnitude) slower; its peers wait in the collective"),
    "mfu_regression": FaultType(
        "mfu_regression", ("run",), False,
        "a kernel or parallelism regression: every rank's compute_seconds grow by magnitude x 0.8 x "
        "step time; the run keeps stepping with the same tokens, so its model FLOPs utilization drops"),
    "collective_regression": FaultType(
        "collective_regression", ("run",), False,
        "network degradation: collective_seconds x(1 + 2*magnitude) on all ranks"),
    "rank_dropout": FaultType(
        "rank_dropout", ("rank",), False,
        "the rank's process dies: its GPU idles, the peers spin in the collective until the "
        "run's NCCL timeout (nccl_timeout, default 10 min) or the fault's end, then the run fails", kills_run=True),
    "gradient_skew": FaultType(
        "gradient_skew", ("rank",), False,
        "the rank's local grad norm is x(1 + magnitude) its peers' (bad data shard)"),
    # GPU (target gpu:<host>:<index>)
    "xid_error": FaultType(
        "xid_error", ("gpu",), False,
        "magnitude >= 1: XID 79 (fallen off the bus), the GPU reports nulls until the end and "
        "the run on it dies; < 1: an application XID (13/31/43), the run goes on",
        kills_run=True),
    "ecc_error": FaultType(
        "ecc_error", ("gpu",), False,
        "round(magnitude) (at least 1) uncorrectable ECC errors, a burst of corrected ones, "
        "rows remapped and a remap pending until the end"),
    "row_remap_failure": FaultType(
        "row_remap_failure", ("gpu",), False,
        "row remapping failed (no spare rows): row_remap_failure true, remapped rows rise"),
    "thermal_throttle": FaultType(
        "thermal_throttle", ("gpu",), False,
        "the GPU heats to 88-95 C, thermal throttle bits, SM clock -20..-50 %, the rank on it "
        "slows (a straggler)", needs_holder=True),
    "power_throttle": FaultType(
        "power_throttle", ("gpu",), False,
        "power capped (SW_POWER_CAP, or HW_POWER_BRAKE at magnitude >= 1), SM clock -15..-40 %, "
        "the rank on it slows", needs_holder=True),
    "idle_allocated": FaultType(
        "idle_allocated", ("gpu",), False,
        "a GPU on a run's host is allocated to the run (run_id set) but no rank uses it"),
    # Serving performance (target endpoint:<name>)
    "latency_regression": FaultType(
        "latency_regression", ("endpoint",), False,
        "the endpoint serves x(1 + magnitude) slower: TTFT, inter-token and end-to-end latency "
        "quantiles at the same load (a slower engine config, kernel or model)"),
    "queue_saturation": FaultType(
        "queue_saturation", ("endpoint",), False,
        "arrivals exceed capacity by a share (magnitude) of the request rate: requests waiting grow "
        "by that many per second, running requests and the KV cache pin at full, TTFT grows with "
        "the queue; the queue drains at the end"),
    "error_burst": FaultType(
        "error_burst", ("endpoint",), False,
        "the server restarts at onset (request counters reset to 0) and a share (magnitude) of "
        "requests fail until the end", max_magnitude=1.0),
    # Model quality (target endpoint:<name>; effects on the prediction log and its outcomes)
    "input_drift": FaultType(
        "input_drift", ("endpoint",), False,
        "the inputs of the version served move: prompt_tokens x(1 + magnitude), a share "
        "(magnitude / 2) of requests switch to language 'ja', temperature +0.3 x magnitude; "
        "predictions and outcomes unchanged"),
    "bad_promotion": FaultType(
        "bad_promotion", ("endpoint",), False,
        "the version promoted at the onset (an endpoint promotion must be at the onset) is worse "
        "until the end: confidence x(1 - 0.25 x magnitude), outcome rate x(1 - 0.4 x magnitude)",
        max_magnitude=1.0),
    "confidence_shift": FaultType(
        "confidence_shift", ("endpoint",), False,
        "prediction confidence x(1 - 0.3 x magnitude); which predictions are right is unchanged",
        max_magnitude=1.0),
    "business_metric_drop": FaultType(
        "business_metric_drop", ("endpoint",), False,
        "outcomes match the prediction x(1 - 0.5 x magnitude) as often; inputs, predictions and "
        "confidence unchanged (a change downstream, or a failure the model cannot see)",
        max_magnitude=1.0),
    # Checkpoints (target checkpoint:<run>/step-NNNNNN, a run with real files; applied after the
    # save, the lineage event keeps what the run saved; onset: when the save happened)
    "checkpoint_truncated": FaultType(
        "checkpoint_truncated", ("checkpoint",), False,
        "one shard file is cut to (1 - magnitude / 2) of its bytes after the save"),
    "checkpoint_bit_flip": FaultType(
        "checkpoint_bit_flip", ("checkpoint",), False,
        "one byte of one shard's tensor data is flipped after the save (same size, new sha256)"),
    "checkpoint_missing_shard": FaultType(
        "checkpoint_missing_shard", ("checkpoint",), False,
        "one rank's model shard is deleted after the save"),
    "checkpoint_partial_write": FaultType(
        "checkpoint_partial_write", ("checkpoint",), False,
        "an interrupted save's temporary file (.<shard>.tmp, half written) is left in the folder"),
    "checkpoint_path_escape": FaultType(
        "checkpoint_path_escape", ("checkpoint",), False,
        "the checkpoint's goodput-manifest.json gains an entry whose path climbs out of the folder "
        "(../../../../etc/passwd)"),
    "checkpoint_weights_only": FaultType(
        "checkpoint_weights_only", ("checkpoint",), False,
        "the save writes the model shards only, no optimizer state (its manifest agrees): a much "
        "smaller checkpoint the run cannot resume from"),
    # Checkpoint freshness (target run:<id>)
    "checkpoint_overdue": FaultType(
        "checkpoint_overdue", ("run",), False,
        "the run's saves from onset to end fail silently: the pause happens, nothing is written "
        "and no checkpoint_saved event is recorded"),
}

# How long the surviving ranks of a run wait in a collective for a dead peer before the job
# fails (NCCL / torch.distributed default timeout).
NCCL_TIMEOUT = timedelta(minutes=10)
PRECISIONS = ("bf16", "fp16")


# --------------------------------------------------------------------------- #
# Scenario model
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class GpuSpec:
    name: str = "NVIDIA H100 80GB HBM3"
    memory_total_bytes: int = 85_899_345_920
    power_limit_watts: float = 700.0


@dataclass(frozen=True)
class Cluster:
    hosts: int
    gpus_per_host: int
    gpu: GpuSpec
    sample_interval: timedelta

    @property
    def host_names(self) -> tuple[str, ...]:
        return tuple(host_name(i) for i in range(self.hosts))


@dataclass(frozen=True)
class LossCurve:
    """``floor + (initial - floor) * (1 + step / s0) ** -decay``, times lognormal noise."""

    initial: float
    floor: float
    decay: float
    noise: float
    s0: float = 100.0


@dataclass(frozen=True)
class LearningRate:
    """Linear warmup to ``peak`` then cosine decay to ``peak * min_ratio``.

    With ``drop_at_step`` the rate is also multiplied by ``drop_factor`` from that step on
    (a step decay, e.g. an annealing phase).
    """

    peak: float = 3.0e-4
    warmup_steps: int = 200
    min_ratio: float = 0.1
    drop_at_step: int | None = None
    drop_factor: float = 0.3


@dataclass(frozen=True)
class CheckpointFiles:
    """Real (tiny) checkpoint files written under ``out_dir/<dir>/<run>/step-NNNNNN/``.

    ``format``: ``safetensors`` (always available) or ``torch`` (``torch.save`` files when torch
    is importable, else raw tensor bytes; either way with a ``goodput-manifest.json``)."""

    dir: str = "checkpoints"
    format: str = "safetensors"


@dataclass(frozen=True)
class Run:
    id: str
    start: datetime  # absolute, UTC
    duration: timedelta  # training time, not counting stalls injected by faults
    hosts: tuple[int, ...]
    ranks: int
    gpus: tuple[tuple[int, int], ...]  # per rank: (host index, gpu index)
    step_time: timedelta
    loss: LossCurve
    checkpoint_interval_steps: int
    precision: str  # "bf16" (loss_scale null) or "fp16" (loss_scale 65536.0)
    learning_rate: LearningRate
    tokens_per_step: int  # per rank
    checkpoint_bytes: int
    job: str
    dataset: str
    eval_interval_steps: int | None = None  # evaluation pause after every N steps
    ordinary_noise: bool = False  # warm-up noise, per-rank grad-norm jitter, fp16 scale sawtooth
    checkpoint_files: CheckpointFiles | None = None  # real files on disk (``checkpoints:``)
    # badput shapes (simulator/badput_shapes.py): restarted after a crash, eval events, model shape
    restart: RestartSpec | None = None
    log_evaluations: bool = False
    model: ModelShape | None = None
    # how long the survivors wait in a collective for a dead peer before the job fails (the job's
    # NCCL / torch.distributed timeout; jobs that raise it, or disable async error handling, spin for hours)
    nccl_timeout: timedelta = NCCL_TIMEOUT

    @property
    def end(self) -> datetime:
        """Nominal end, before any fault stalls it (see ``Scenario.run_window``)."""
        return self.start + self.duration


@dataclass(frozen=True)
class Fault:
    type: str
    target: str  # "<kind>:<id>", e.g. "run:llm-pretrain-a"
    onset: datetime  # absolute, UTC
    duration: timedelta
    magnitude: float

    @property
    def end(self) -> datetime:
        return self.onset + self.duration

    @property
    def target_kind(self) -> str:
        return self.target.split(":", 1)[0]

    @property
    def target_id(self) -> str:
        return self.target.split(":", 1)[1]

    @property
    def run_id(self) -> str | None:
        """The run a ``run:`` or ``rank:`` target names."""
        if self.target_kind == "run":
            return self.target_id
        if self.target_kind == "rank":
            return self.target_id.rsplit("/rank-", 1)[0]
        return None

    @property
    def rank(self) -> int | None:
        return int(self.target_id.rsplit("/rank-", 1)[1]) if self.target_kind == "rank" else None

    @property
    def gpu(self) -> tuple[int, int] | None:
        """(host index, GPU index) of a ``gpu:node-<h>:<g>`` target."""
        if self.target_kind != "gpu":
            return None
        host, gpu = self.target_id.rsplit(":", 1)
        return int(host.removeprefix("node-")), int(gpu)


@dataclass(frozen=True)
class Latency:
    """A lognormal latency: median ``p50`` and 99th percentile ``p99`` (seconds)."""

    p50: float
    p99: float

    @property
    def sigma(self) -> float:
        return math.log(self.p99 / self.p50) / 2.3263478740408408  # z of the 99th percentile


@dataclass(frozen=True)
class PredictionLog:
    """Prediction records of an endpoint; a share get an outcome ``outcome_delay`` (x0.5-1.5) later."""

    per_minute: float = 6.0
    outcome_share: float = 0.5
    outcome_delay: timedelta = timedelta(hours=2)
    labels: tuple[str, ...] = ("positive", "negative", "neutral")


@dataclass(frozen=True)
class Promotion:
    """At ``at``, the latest checkpoint ``run`` saved before it is registered as a model version
    (``<run>-step-NNNNNN``) and promoted to the endpoint."""

    run: str
    at: datetime  # absolute, UTC


@dataclass(frozen=True)
class Endpoint:
    """A serving endpoint (vLLM-style metrics, prediction log)."""

    name: str
    host: int | None
    model_version: str  # served until the first promotion
    requests_per_second: float
    failure_ratio: float
    ttft: Latency
    itl: Latency
    e2e: Latency
    requests_waiting: float  # mean queue length
    kv_cache_usage: float  # mean ratio
    metrics_interval: timedelta
    predictions: PredictionLog | None
    promotions: tuple[Promotion, ...] = ()
    # daily load curve: the request rate is x(1 + amplitude * cos(2 pi (hour - peak_hour) / 24))
    diurnal_amplitude: float = 0.0
    diurnal_peak_hour: float = 14.0


@dataclass(frozen=True)
class Failure:
    """A run killed by a fault: ``rank`` died at ``death``; the job failed at ``fail``."""

    fault: Fault
    rank: int
    death: datetime
    fail: datetime


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    start: datetime  # tz-aware UTC
    duration: timedelta
    cluster: Cluster
    runs: tuple[Run, ...]
    faults: tuple[Fault, ...]
    source: str = "<dict>"
    endpoints: tuple[Endpoint, ...] = ()

    @property
    def end(self) -> datetime:
        return self.start + self.duration

    def run(self, run_id: str) -> Run:
        for run in self.runs:
            if run.id == run_id:
                return run
        raise KeyError(run_id)

    def stall(self, run_id: str) -> timedelta:
        """Total time faults stop ``run_id`` from making progress."""
        return sum(
            (
                f.duration
                for f in self.faults
                if FAULT_TYPES[f.type].stalls_run and f.target == f"run:{run_id}"
            ),
            timedelta(0),
        )

    def run_window(self, run_id: str, clip: bool = True) -> tuple[datetime, datetime]:
        """When the run holds its GPUs: start to nominal end plus stalls, or to its failure
        (clipped to the span)."""
        run = self.run(run_id)
        end = run.end + self.stall(run_id)
        failure = self.failure(run_id)
        if failure is not None:
            end = failure.fail  # nothing progresses after the rank died
        return run.start, (min(end, self.end) if clip else end)

    def _stretched_window(self, run: Run) -> tuple[datetime, datetime]:
        return run.start, run.end + self.stall(run.id)

    def holder(self, gpu: tuple[int, int], at: datetime) -> tuple[Run, int] | None:
        """The run and rank whose process uses ``gpu`` at ``at`` (ignoring failures)."""
        for run in self.runs:
            start, end = self._stretched_window(run)
            if gpu in run.gpus and start <= at < end:
                return run, run.gpus.index(gpu)
        return None

    def host_run(self, host: int, at: datetime) -> Run | None:
        """A run that holds ``host`` (some of its GPUs) at ``at`` (ignoring failures)."""
        for run in self.runs:
            start, end = self._stretched_window(run)
            if any(h == host for h, _ in run.gpus) and start <= at < end:
                return run
        return None

    def killing_fault(self, fault: Fault) -> tuple[Run, int] | None:
        """The run and rank a fault kills, if it kills one."""
        if fault.type == "rank_dropout":
            return self.run(fault.run_id), fault.rank
        if fault.type == "xid_error" and fault.magnitude >= 1.0:
            return self.holder(fault.gpu, fault.onset)
        return None

    def failure(self, run_id: str) -> Failure | None:
        """The first fault that kills ``run_id``: its rank dies at the onset, and the job
        fails when the survivors' collective times out (the run's ``nccl_timeout``) or the fault ends."""
        first = None
        for fault in self.faults:
            hit = self.killing_fault(fault)
            if hit is None or hit[0].id != run_id:
                continue
            if first is None or fault.onset < first.death:
                fail = min(fault.onset + hit[0].nccl_timeout, fault.end)
                first = Failure(fault=fault, rank=hit[1], death=fault.onset, fail=fail)
        return first


def host_name(index: int) -> str:
    return f"node-{index}"


# --------------------------------------------------------------------------- #
# Parsing
# --------------------------------------------------------------------------- #

_NUM = r"(\d+(?:\.\d+)?)"
# "m" must not swallow the "m" of "ms".
_DURATION_RE = re.compile(rf"^(?:{_NUM}h)?(?:{_NUM}m(?!s))?(?:{_NUM}s)?(?:{_NUM}ms)?$")
_DURATION_HINT = "write it like '90s', '15m', '8h', '1h30m' or '500ms'"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def parse_duration(value: Any) -> timedelta:
    """Parse '1h30m', '90s', '2.5s', '500ms' or a number of seconds; rounded to whole ms.

    Raises ValueError for anything else.
    """
    if isinstance(value, bool):
        raise ValueError(f"bad duration {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        m = _DURATION_RE.match(value.strip())
        if not value.strip() or m is None:
            raise ValueError(f"bad duration {value!r}")
        h, mi, s, ms = (float(g) if g else 0.0 for g in m.groups())
        seconds = h * 3600 + mi * 60 + s + ms / 1000
    else:
        raise ValueError(f"bad duration {value!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"bad duration {value!r}")
    return timedelta(milliseconds=round(seconds * 1000))


class _Parser:
    """Field-by-field readers that raise ScenarioError naming the source and field."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, field: str, problem: str, fix: str) -> ScenarioError:
        return ScenarioError(self.source, field, problem, fix)

    def mapping(self, value: Any, field: str, required: set[str], optional: set[str]) -> Mapping:
        if not isinstance(value, Mapping):
            raise self.fail(field, f"expected a mapping, got {type(value).__name__}",
                            "write it as key: value pairs")
        for key in sorted(required):
            if key not in value:
                raise self.fail(_join(field, key), "missing field", f"add '{key}'")
        unknown = sorted(str(k) for k in value if k not in required | optional)
        if unknown:
            allowed = ", ".join(sorted(required | optional))
            raise self.fail(_join(field, unknown[0]), "unknown field",
                            f"remove it or use one of: {allowed}")
        return value

    def integer(self, value: Any, field: str, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(field, f"expected an integer, got {value!r}", "write a whole number")
        if minimum is not None and value < minimum:
            raise self.fail(field, f"{value} is too small", f"use a value >= {minimum}")
        return value

    def number(self, value: Any, field: str, minimum: float | None = None,
               positive: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(field, f"expected a finite number, got {value!r}", "write a number")
        if positive and value <= 0:
            raise self.fail(field, f"{value} is not positive", "use a value > 0")
        if minimum is not None and value < minimum:
            raise self.fail(field, f"{value} is too small", f"use a value >= {minimum}")
        return float(value)

    def string(self, value: Any, field: str, pattern: re.Pattern | None = None) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(field, f"expected a non-empty string, got {value!r}", "quote a value")
        if pattern is not None and not pattern.match(value):
            raise self.fail(field, f"{value!r} has characters not allowed in file names",
                            "use letters, digits, '.', '_' and '-'")
        return value

    def duration(self, value: Any, field: str, positive: bool = True) -> timedelta:
        try:
            d = parse_duration(value)
        except ValueError as exc:
            raise self.fail(field, str(exc), _DURATION_HINT) from None
        if positive and d <= timedelta(0):
            raise self.fail(field, f"duration {value!r} is zero", "use a positive duration")
        return d

    def timestamp(self, value: Any, field: str) -> datetime:
        fix = "write an ISO-8601 UTC time in quotes, e.g. \"2026-11-30T00:00:00Z\""
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                raise self.fail(field, f"bad timestamp {value!r}", fix) from None
        if not isinstance(value, datetime):
            raise self.fail(field, f"bad timestamp {value!r}", fix)
        if value.tzinfo is None:
            raise self.fail(field, f"timestamp {value.isoformat()} has no time zone", fix)
        value = value.astimezone(timezone.utc)
        if value.microsecond % 1000:
            raise self.fail(field, "timestamp is finer than a millisecond", fix)
        return value


def _join(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key


def load_scenario(path: str | Path) -> Scenario:
    """Read a YAML (or ``.json``) scenario file into a validated :class:`Scenario`."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(source, "(file)", f"cannot read: {exc.strerror}",
                            "check the path") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        problem = " ".join(str(exc).split())
        raise ScenarioError(source, "(file)", f"not valid YAML/JSON: {problem}",
                            "fix the syntax") from None
    return scenario_from_dict(data, source=source, default_name=path.stem)


def scenario_from_dict(data: Any, source: str = "<dict>", default_name: str = "scenario") -> Scenario:
    """Validate an already-parsed scenario document (the same shape as the file)."""
    p = _Parser(source)
    top = p.mapping(data, "", {"seed", "start", "duration", "cluster", "runs"},
                    {"name", "faults", "endpoints"})
    name = p.string(top.get("name", default_name), "name", _ID_RE)
    seed = p.integer(top["seed"], "seed", minimum=0)
    start = p.timestamp(top["start"], "start")
    duration = p.duration(top["duration"], "duration")
    cluster = _parse_cluster(p, top["cluster"])

    runs_raw = top["runs"]
    if not isinstance(runs_raw, list):
        raise p.fail("runs", "expected a list", "write runs as a YAML list ('- id: ...')")
    runs = tuple(_parse_run(p, r, f"runs[{i}]", start, duration, cluster)
                 for i, r in enumerate(runs_raw))
    seen: set[str] = set()
    for i, run in enumerate(runs):
        if run.id in seen:
            raise p.fail(f"runs[{i}].id", f"duplicate run id {run.id!r}", "give every run its own id")
        seen.add(run.id)

    faults_raw = top.get("faults") or []
    if not isinstance(faults_raw, list):
        raise p.fail("faults", "expected a list", "write faults as a YAML list ('- type: ...')")
    faults = tuple(_parse_fault(p, f, f"faults[{i}]", start, duration, runs, cluster)
                   for i, f in enumerate(faults_raw))

    endpoints_raw = top.get("endpoints") or []
    if not isinstance(endpoints_raw, list):
        raise p.fail("endpoints", "expected a list", "write endpoints as a YAML list ('- name: ...')")
    endpoints = tuple(_parse_endpoint(p, e, f"endpoints[{i}]", start, duration, runs, cluster)
                      for i, e in enumerate(endpoints_raw))
    names = [e.name for e in endpoints]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise p.fail(f"endpoints[{i}].name", f"duplicate endpoint name {n!r}",
                         "give every endpoint its own name")

    scenario = Scenario(name=name, seed=seed, start=start, duration=duration, cluster=cluster,
                        runs=runs, faults=faults, source=source, endpoints=endpoints)
    _check_stalls(p, scenario)
    _check_fault_placement(p, scenario)
    _check_gpu_sharing(p, scenario)
    return scenario


def _parse_cluster(p: _Parser, raw: Any) -> Cluster:
    c = p.mapping(raw, "cluster", {"hosts", "gpus_per_host"}, {"gpu", "sample_interval"})
    gpu_raw = c.get("gpu", {})
    g = p.mapping(gpu_raw, "cluster.gpu", set(), {"name", "memory_total_bytes", "power_limit_watts"})
    default = GpuSpec()
    gpu = GpuSpec(
        name=p.string(g.get("name", default.name), "cluster.gpu.name"),
        memory_total_bytes=p.integer(g.get("memory_total_bytes", default.memory_total_bytes),
                                     "cluster.gpu.memory_total_bytes", minimum=1 << 30),
        power_limit_watts=p.number(g.get("power_limit_watts", default.power_limit_watts),
                                   "cluster.gpu.power_limit_watts", minimum=100),
    )
    interval = p.duration(c.get("sample_interval", "10s"), "cluster.sample_interval")
    if interval < timedelta(seconds=1):
        raise p.fail("cluster.sample_interval", "shorter than 1s", "use e.g. '10s'")
    return Cluster(
        hosts=p.integer(c["hosts"], "cluster.hosts", minimum=1),
        gpus_per_host=p.integer(c["gpus_per_host"], "cluster.gpus_per_host", minimum=1),
        gpu=gpu,
        sample_interval=interval,
    )


def _parse_run(p: _Parser, raw: Any, field: str, scenario_start: datetime,
               scenario_duration: timedelta, cluster: Cluster) -> Run:
    r = p.mapping(raw, field, {"id", "start", "duration", "hosts", "step_time", "loss"},
                  {"ranks", "checkpoint_interval_steps", "precision", "learning_rate",
                   "tokens_per_step", "checkpoint_bytes", "job", "dataset",
                   "eval_interval_steps", "ordinary_noise", "checkpoints",
                   "restart", "log_evaluations", "model", "nccl_timeout"})
    run_id = p.string(r["id"], f"{field}.id", _ID_RE)
    offset = p.duration(r["start"], f"{field}.start", positive=False)
    if offset >= scenario_duration:
        raise p.fail(f"{field}.start", f"run starts at or after the scenario ends ({r['start']!r})",
                     "use an offset from the scenario start that is inside 'duration'")
    duration = p.duration(r["duration"], f"{field}.duration")

    hosts_raw = r["hosts"]
    if not isinstance(hosts_raw, list) or not hosts_raw:
        raise p.fail(f"{field}.hosts", "expected a non-empty list of host indices", "e.g. hosts: [0]")
    hosts = tuple(p.integer(h, f"{field}.hosts[{i}]", minimum=0) for i, h in enumerate(hosts_raw))
    for i, h in enumerate(hosts):
        if h >= cluster.hosts:
            raise p.fail(f"{field}.hosts[{i}]", f"host index {h} does not exist",
                         f"use 0..{cluster.hosts - 1} (cluster.hosts is {cluster.hosts})")
    if len(set(hosts)) != len(hosts):
        raise p.fail(f"{field}.hosts", "a host is listed twice", "list each host index once")
    capacity = len(hosts) * cluster.gpus_per_host
    ranks = p.integer(r.get("ranks", capacity), f"{field}.ranks", minimum=1)
    if ranks > capacity:
        raise p.fail(f"{field}.ranks", f"{ranks} ranks do not fit on {capacity} GPUs",
                     "list more hosts or use fewer ranks")
    gpus = tuple((hosts[k // cluster.gpus_per_host], k % cluster.gpus_per_host) for k in range(ranks))

    step_time = p.duration(r["step_time"], f"{field}.step_time")
    if step_time < timedelta(milliseconds=100):
        raise p.fail(f"{field}.step_time", "shorter than 100ms", "use a realistic step time, e.g. '2s'")

    lf = f"{field}.loss"
    lr_ = p.mapping(r["loss"], lf, {"initial", "floor", "decay", "noise"}, {"s0"})
    loss = LossCurve(
        initial=p.number(lr_["initial"], f"{lf}.initial", positive=True),
        floor=p.number(lr_["floor"], f"{lf}.floor", minimum=0),
        decay=p.number(lr_["decay"], f"{lf}.decay", positive=True),
        noise=p.number(lr_["noise"], f"{lf}.noise", minimum=0),
        s0=p.number(lr_.get("s0", 100.0), f"{lf}.s0", positive=True),
    )
    if loss.floor >= loss.initial:
        raise p.fail(f"{lf}.floor", "floor is not below initial", "make floor < initial")

    precision = r.get("precision", "bf16")
    if precision not in PRECISIONS:
        raise p.fail(f"{field}.precision", f"unknown precision {precision!r}", "use 'bf16' or 'fp16'")

    lrf = f"{field}.learning_rate"
    lr_raw = p.mapping(r.get("learning_rate", {}), lrf, set(),
                       {"peak", "warmup_steps", "min_ratio", "drop_at_step", "drop_factor"})
    d = LearningRate()
    drop_at = lr_raw.get("drop_at_step")
    learning_rate = LearningRate(
        peak=p.number(lr_raw.get("peak", d.peak), f"{lrf}.peak", positive=True),
        warmup_steps=p.integer(lr_raw.get("warmup_steps", d.warmup_steps), f"{lrf}.warmup_steps", 0),
        min_ratio=p.number(lr_raw.get("min_ratio", d.min_ratio), f"{lrf}.min_ratio", minimum=0),
        drop_at_step=None if drop_at is None else p.integer(drop_at, f"{lrf}.drop_at_step", 1),
        drop_factor=p.number(lr_raw.get("drop_factor", d.drop_factor), f"{lrf}.drop_factor",
                             positive=True),
    )
    if learning_rate.drop_factor >= 1:
        raise p.fail(f"{lrf}.drop_factor", "a drop factor must be below 1", "use e.g. 0.3")
    eval_every = r.get("eval_interval_steps")
    if eval_every is not None:
        eval_every = p.integer(eval_every, f"{field}.eval_interval_steps", minimum=1)
    ordinary_noise = r.get("ordinary_noise", False)
    if not isinstance(ordinary_noise, bool):
        raise p.fail(f"{field}.ordinary_noise", f"expected true or false, got {ordinary_noise!r}",
                     "write true or false")

    return Run(
        id=run_id,
        start=scenario_start + offset,
        duration=duration,
        hosts=hosts,
        ranks=ranks,
        gpus=gpus,
        step_time=step_time,
        loss=loss,
        checkpoint_interval_steps=p.integer(r.get("checkpoint_interval_steps", 1000),
                                            f"{field}.checkpoint_interval_steps", minimum=1),
        precision=precision,
        learning_rate=learning_rate,
        tokens_per_step=p.integer(r.get("tokens_per_step", 16384), f"{field}.tokens_per_step", 1),
        checkpoint_bytes=p.integer(r.get("checkpoint_bytes", 98_000_000_000),
                                   f"{field}.checkpoint_bytes", minimum=1 << 20),
        job=p.string(r.get("job", run_id), f"{field}.job"),
        dataset=p.string(r.get("dataset", "synthetic/web-text-v1"), f"{field}.dataset"),
        eval_interval_steps=eval_every,
        ordinary_noise=ordinary_noise,
        checkpoint_files=_parse_checkpoints(p, r.get("checkpoints"), f"{field}.checkpoints"),
        restart=parse_restart(p, r.get("restart"), f"{field}.restart"),
        log_evaluations=parse_flag(p, r.get("log_evaluations", False), f"{field}.log_evaluations"),
        model=parse_model(p, r.get("model"), f"{field}.model"),
        nccl_timeout=p.duration(r.get("nccl_timeout", "10m"), f"{field}.nccl_timeout"),
    )


CHECKPOINT_FORMATS = ("safetensors", "torch")


def _parse_checkpoints(p: _Parser, raw: Any, field: str) -> CheckpointFiles | None:
    if raw is None:
        return None
    c = p.mapping(raw, field, set(), {"dir", "format"})
    default = CheckpointFiles()
    folder = p.string(c.get("dir", default.dir), f"{field}.dir")
    if ".." in Path(folder).parts:
        raise p.fail(f"{field}.dir", f"{folder!r} climbs out with '..'",
                     "use a folder under the output directory, or an absolute path")
    fmt = c.get("format", default.format)
    if fmt not in CHECKPOINT_FORMATS:
        raise p.fail(f"{field}.format", f"unknown checkpoint format {fmt!r}",
                     "use 'safetensors' or 'torch'")
    return CheckpointFiles(dir=folder, format=fmt)


def _parse_latency(p: _Parser, raw: Any, field: str) -> Latency:
    m = p.mapping(raw, field, {"p50", "p99"}, set())
    p50 = p.number(m["p50"], f"{field}.p50", positive=True)
    p99 = p.number(m["p99"], f"{field}.p99", positive=True)
    if p99 <= p50:
        raise p.fail(f"{field}.p99", f"p99 {p99:g} is not above p50 {p50:g}", "make p99 > p50")
    return Latency(p50=p50, p99=p99)


def _parse_endpoint(p: _Parser, raw: Any, field: str, scenario_start: datetime,
                    scenario_duration: timedelta, runs: tuple[Run, ...], cluster: Cluster) -> Endpoint:
    e = p.mapping(raw, field, {"name", "requests_per_second", "ttft_seconds", "itl_seconds",
                               "e2e_seconds"},
                  {"host", "model_version", "failure_ratio", "requests_waiting", "kv_cache_usage",
                   "metrics_interval", "predictions", "promotions", "diurnal"})
    name = p.string(e["name"], f"{field}.name", _ID_RE)
    host = e.get("host")
    if host is not None:
        host = p.integer(host, f"{field}.host", minimum=0)
        if host >= cluster.hosts:
            raise p.fail(f"{field}.host", f"host index {host} does not exist",
                         f"use 0..{cluster.hosts - 1} (cluster.hosts is {cluster.hosts})")
    failure_ratio = p.number(e.get("failure_ratio", 0.01), f"{field}.failure_ratio", minimum=0)
    kv = p.number(e.get("kv_cache_usage", 0.4), f"{field}.kv_cache_usage", minimum=0)
    for key, value in (("failure_ratio", failure_ratio), ("kv_cache_usage", kv)):
        if value >= 1:
            raise p.fail(f"{field}.{key}", f"{value:g} is not a ratio below 1", "use e.g. 0.4")
    interval = p.duration(e.get("metrics_interval", "30s"), f"{field}.metrics_interval")
    if interval < timedelta(seconds=1):
        raise p.fail(f"{field}.metrics_interval", "shorter than 1s", "use e.g. '30s'")

    predictions = None
    if e.get("predictions") is not None:
        pf = f"{field}.predictions"
        pr = p.mapping(e["predictions"], pf, set(),
                       {"per_minute", "outcome_share", "outcome_delay", "labels"})
        d = PredictionLog()
        share = p.number(pr.get("outcome_share", d.outcome_share), f"{pf}.outcome_share", minimum=0)
        if share > 1:
            raise p.fail(f"{pf}.outcome_share", f"{share:g} is above 1", "use a share in [0, 1]")
        labels = pr.get("labels", list(d.labels))
        if not isinstance(labels, list) or len(labels) < 2:
            raise p.fail(f"{pf}.labels", "expected a list of at least two labels",
                         "e.g. labels: [positive, negative]")
        predictions = PredictionLog(
            per_minute=p.number(pr.get("per_minute", d.per_minute), f"{pf}.per_minute", positive=True),
            outcome_share=share,
            outcome_delay=p.duration(pr.get("outcome_delay", "2h"), f"{pf}.outcome_delay"),
            labels=tuple(p.string(x, f"{pf}.labels[{i}]") for i, x in enumerate(labels)),
        )

    promotions_raw = e.get("promotions") or []
    if not isinstance(promotions_raw, list):
        raise p.fail(f"{field}.promotions", "expected a list", "write '- {run: <id>, at: 1h}'")
    by_id = {r.id: r for r in runs}
    promotions = []
    for i, pr in enumerate(promotions_raw):
        pf = f"{field}.promotions[{i}]"
        m = p.mapping(pr, pf, {"run", "at"}, set())
        run_id = p.string(m["run"], f"{pf}.run")
        if run_id not in by_id:
            raise p.fail(f"{pf}.run", f"unknown run id {run_id!r}",
                         f"use one of the runs: {', '.join(sorted(by_id)) or '(none)'}")
        at = p.duration(m["at"], f"{pf}.at", positive=False)
        if at >= scenario_duration:
            raise p.fail(f"{pf}.at", "promotion is at or after the scenario ends",
                         "use an offset from the scenario start that is inside 'duration'")
        if scenario_start + at <= by_id[run_id].start:
            raise p.fail(f"{pf}.at", f"run {run_id!r} has saved no checkpoint yet at {m['at']!r}",
                         "promote after the run's first checkpoint")
        if promotions and scenario_start + at <= promotions[-1].at:
            raise p.fail(f"{pf}.at", "promotions are not in time order", "list them by 'at'")
        promotions.append(Promotion(run=run_id, at=scenario_start + at))

    diurnal = p.mapping(e.get("diurnal") or {}, f"{field}.diurnal", set(), {"amplitude", "peak_hour"})
    amplitude = p.number(diurnal.get("amplitude", 0.0), f"{field}.diurnal.amplitude", minimum=0)
    if amplitude >= 1:
        raise p.fail(f"{field}.diurnal.amplitude", f"{amplitude:g} would stop traffic at the trough",
                     "use a share below 1, e.g. 0.5 (peak 1.5x, trough 0.5x the rate)")
    peak_hour = p.number(diurnal.get("peak_hour", 14.0), f"{field}.diurnal.peak_hour", minimum=0)
    if peak_hour >= 24:
        raise p.fail(f"{field}.diurnal.peak_hour", f"{peak_hour:g} is not an hour of the day", "use 0 to 23.99 (UTC)")

    return Endpoint(
        name=name,
        host=host,
        model_version=p.string(e.get("model_version", f"{name}-base"), f"{field}.model_version"),
        requests_per_second=p.number(e["requests_per_second"], f"{field}.requests_per_second",
                                     positive=True),
        failure_ratio=failure_ratio,
        ttft=_parse_latency(p, e["ttft_seconds"], f"{field}.ttft_seconds"),
        itl=_parse_latency(p, e["itl_seconds"], f"{field}.itl_seconds"),
        e2e=_parse_latency(p, e["e2e_seconds"], f"{field}.e2e_seconds"),
        requests_waiting=p.number(e.get("requests_waiting", 1.0), f"{field}.requests_waiting",
                                  minimum=0),
        kv_cache_usage=kv,
        metrics_interval=interval,
        predictions=predictions,
        promotions=tuple(promotions),
        diurnal_amplitude=amplitude,
        diurnal_peak_hour=peak_hour,
    )


_RANK_RE = re.compile(r"^(?P<run>.+)/rank-(?P<rank>\d+)$")
_GPU_RE = re.compile(r"^node-(?P<host>\d+):(?P<gpu>\d+)$")
_TARGET_FORMS = {"run": "'run:<run id>'", "rank": "'rank:<run id>/rank-<r>'",
                 "gpu": "'gpu:node-<h>:<gpu index>'", "endpoint": "'endpoint:<endpoint name>'",
                 "checkpoint": "'checkpoint:<run id>/step-NNNNNN'"}
_CHECKPOINT_RE = re.compile(r"^(?P<run>.+)/step-(?P<step>\d{6})$")


def _parse_fault(p: _Parser, raw: Any, field: str, scenario_start: datetime,
                 scenario_duration: timedelta, runs: tuple[Run, ...], cluster: Cluster) -> Fault:
    f = p.mapping(raw, field, {"type", "target", "onset", "duration"}, {"magnitude"})
    ftype = f["type"]
    if ftype not in FAULT_TYPES:
        known = ", ".join(sorted(FAULT_TYPES))
        raise p.fail(f"{field}.type", f"unknown fault type {ftype!r}", f"use one of: {known}")
    spec = FAULT_TYPES[ftype]

    target = p.string(f["target"], f"{field}.target")
    kinds = " or ".join(_TARGET_FORMS[k] for k in spec.target_kinds)
    kind, _, target_id = target.partition(":")
    if kind not in spec.target_kinds or not target_id:
        raise p.fail(f"{field}.target", f"{ftype} cannot target {target!r}", f"use {kinds}")
    run_ids = {r.id: r for r in runs}
    known = ", ".join(sorted(run_ids)) or "(none)"
    if kind == "run" and target_id not in run_ids:
        raise p.fail(f"{field}.target", f"unknown run id {target_id!r}",
                     f"use one of the runs: {known}")
    if kind == "checkpoint":
        _check_checkpoint_target(p, f"{field}.target", target_id, run_ids)
    if kind == "rank":
        m = _RANK_RE.match(target_id)
        if m is None:
            raise p.fail(f"{field}.target", f"bad rank target {target!r}", f"use {kinds}")
        if m["run"] not in run_ids:
            raise p.fail(f"{field}.target", f"unknown run id {m['run']!r}",
                         f"use one of the runs: {known}")
        ranks = run_ids[m["run"]].ranks
        if int(m["rank"]) >= ranks or m["rank"] != str(int(m["rank"])):
            raise p.fail(f"{field}.target", f"run {m['run']!r} has no rank {m['rank']}",
                         f"use rank-0 .. rank-{ranks - 1}")
    if kind == "gpu":
        m = _GPU_RE.match(target_id)
        if m is None:
            raise p.fail(f"{field}.target", f"bad GPU target {target!r}", f"use {kinds}")
        if int(m["host"]) >= cluster.hosts or int(m["gpu"]) >= cluster.gpus_per_host:
            raise p.fail(f"{field}.target", f"GPU {target_id!r} does not exist",
                         f"use node-0 .. node-{cluster.hosts - 1} and GPU 0 .. "
                         f"{cluster.gpus_per_host - 1}")
        if m["host"] != str(int(m["host"])) or m["gpu"] != str(int(m["gpu"])):
            raise p.fail(f"{field}.target", f"bad GPU target {target!r}", "drop leading zeros")

    offset = p.duration(f["onset"], f"{field}.onset", positive=False)
    if offset >= scenario_duration:
        raise p.fail(f"{field}.onset", "onset is at or after the scenario ends",
                     "use an offset from the scenario start that is inside 'duration'")
    magnitude = p.number(f.get("magnitude", 1.0), f"{field}.magnitude", positive=True)
    if spec.max_magnitude is not None and magnitude > spec.max_magnitude:
        raise p.fail(f"{field}.magnitude", f"a {ftype}'s magnitude is at most {spec.max_magnitude}",
                     f"use a value in (0, {spec.max_magnitude}]")
    return Fault(type=ftype, target=target, onset=scenario_start + offset,
                 duration=p.duration(f["duration"], f"{field}.duration"), magnitude=magnitude)


def _check_checkpoint_target(p: _Parser, field: str, target_id: str, run_ids: dict) -> None:
    """A checkpoint fault names one real checkpoint: a run with ``checkpoints:`` and a step it saves."""
    m = _CHECKPOINT_RE.match(target_id)
    if m is None:
        raise p.fail(field, f"bad checkpoint target {target_id!r}", f"use {_TARGET_FORMS['checkpoint']}")
    run = run_ids.get(m["run"])
    if run is None:
        raise p.fail(field, f"unknown run id {m['run']!r}",
                     f"use one of the runs: {', '.join(sorted(run_ids)) or '(none)'}")
    if run.checkpoint_files is None:
        raise p.fail(field, f"run {run.id!r} writes no checkpoint files", "give the run 'checkpoints:'")
    step = int(m["step"])
    if step <= 0 or step % run.checkpoint_interval_steps:
        raise p.fail(field, f"run {run.id!r} saves no checkpoint at step {step}",
                     f"use a multiple of its checkpoint_interval_steps ({run.checkpoint_interval_steps})")


def _check_stalls(p: _Parser, scenario: Scenario) -> None:
    """Stalling faults must fall inside their run's (already stretched) window and not overlap."""
    indexed = sorted(enumerate(scenario.faults), key=lambda x: (x[1].target, x[1].onset, x[0]))
    current, end, prev_end = None, None, None
    for i, fault in indexed:
        if not FAULT_TYPES[fault.type].stalls_run:
            continue
        run = scenario.run(fault.target_id)
        if fault.target != current:
            current, end, prev_end = fault.target, run.end, None
        field = f"faults[{i}].onset"
        if prev_end is not None and fault.onset < prev_end:
            raise p.fail(field, f"overlaps an earlier {fault.type} on {fault.target}",
                         "start it after the previous fault ends")
        if not (run.start <= fault.onset < end):
            stretched = ", stretched by earlier stalls" if end != run.end else ""
            raise p.fail(field, f"onset is outside run {run.id!r} "
                         f"({_iso(run.start)} to {_iso(end)}{stretched})",
                         "move the onset inside the run")
        end += fault.duration
        prev_end = fault.end


def _check_fault_placement(p: _Parser, scenario: Scenario) -> None:
    """Run and rank faults fall inside their run; GPU faults that act through a run find one;
    a run is killed at most once."""
    killed: dict[str, int] = {}
    endpoints = [e.name for e in scenario.endpoints]
    for i, fault in enumerate(scenario.faults):
        spec = FAULT_TYPES[fault.type]
        field = f"faults[{i}]"
        if fault.target_kind == "endpoint" and fault.target_id not in endpoints:
            raise p.fail(f"{field}.target", f"unknown endpoint {fault.target_id!r}",
                         f"use one of the endpoints: {', '.join(endpoints) or '(none)'}")
        if fault.run_id is not None and not spec.stalls_run:
            run = scenario.run(fault.run_id)
            start, end = scenario._stretched_window(run)
            if not (start <= fault.onset < end):
                raise p.fail(f"{field}.onset", f"onset is outside run {run.id!r} "
                             f"({_iso(start)} to {_iso(end)})", "move the onset inside the run")
            if spec.needs_fp16 and run.precision != "fp16":
                raise p.fail(f"{field}.target", f"{fault.type} needs an fp16 run but {run.id!r} "
                             f"is {run.precision}", "target an fp16 run (precision: fp16)")
        if spec.needs_holder and scenario.holder(fault.gpu, fault.onset) is None:
            raise p.fail(f"{field}.target", f"no run's rank uses {fault.target_id} at the onset",
                         f"{fault.type} acts through the rank on the GPU: target a GPU of a "
                         "running run")
        if fault.type == "idle_allocated":
            host, gpu = fault.gpu
            run = scenario.host_run(host, fault.onset)
            if run is None or (host, gpu) in run.gpus:
                raise p.fail(f"{field}.target", f"{fault.target_id} is not a spare GPU on a "
                             "running run's host at the onset",
                             "target a GPU no rank uses on a host a run holds (ranks < GPUs)")
        hit = scenario.killing_fault(fault)
        if hit is not None:
            if hit[0].id in killed:
                raise p.fail(f"{field}.onset", f"run {hit[0].id!r} is already killed by "
                             f"faults[{killed[hit[0].id]}]", "kill each run at most once")
            killed[hit[0].id] = i


def _check_gpu_sharing(p: _Parser, scenario: Scenario) -> None:
    """Two runs may not hold the same GPU at overlapping times (stalls included)."""
    holders: dict[tuple[int, int], list[tuple[datetime, datetime, int]]] = {}
    for i, run in enumerate(scenario.runs):
        start, end = scenario.run_window(run.id, clip=False)
        for gpu in run.gpus:
            holders.setdefault(gpu, []).append((start, end, i))
    for (host, gpu), spans in sorted(holders.items()):
        spans.sort()
        for (_s0, e0, i0), (s1, _e1, i1) in zip(spans, spans[1:]):
            if s1 < e0:
                a, b = scenario.runs[i0].id, scenario.runs[i1].id
                raise p.fail(f"runs[{i1}].start",
                             f"run {b!r} uses {host_name(host)}:{gpu} while run {a!r} still holds it "
                             f"(until {_iso(e0)}, including fault stalls)",
                             "start it later, end the other run earlier or use other hosts")


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
