"""The scenario model: frozen dataclasses for the cluster, its runs, endpoints and faults, built by
the loader (scenario.py) from a validated file, plus the questions the simulator asks of them (when
does a run hold its GPUs, which run uses a GPU, which fault kills a run)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from .badput_shapes import ModelShape, RestartSpec
from .faults import effect


class ScenarioError(ValueError):
    """A scenario file is invalid; the message names the file, the field and the fix."""

    def __init__(self, source: str, field: str, problem: str, fix: str):
        self.source = source
        self.field = field
        super().__init__(f"{source}: {field}: {problem}; {fix}")


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
    host_gpus: tuple[tuple[int, GpuSpec], ...] = ()  # hosts with another GPU model (mixed clusters)

    @property
    def host_names(self) -> tuple[str, ...]:
        return tuple(host_name(i) for i in range(self.hosts))

    def gpu_of(self, host: int) -> GpuSpec:
        """The GPU model on ``host``: its own from ``host_gpus``, else the cluster's."""
        return dict(self.host_gpus).get(host, self.gpu)


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
    # simulator shapes (docs/scenario.md, "Cluster shapes"): a run whose trainer logs one step record every N
    # steps (the interval's mean timings, as Megatron prints them)
    log_every_steps: int = 1

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

    @property
    def host(self) -> int | None:
        """The host index of a ``host:node-<h>`` or ``gpu:node-<h>:<g>`` target."""
        if self.target_kind == "host":
            return int(self.target_id.removeprefix("node-"))
        return None if self.gpu is None else self.gpu[0]


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
class Canary:
    """From ``at``, a ``share`` of the endpoint's requests is served by the latest checkpoint ``run``
    saved before it (registered as a model version, not promoted); the rest by the version served."""

    run: str
    at: datetime  # absolute, UTC
    share: float


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
    canary: Canary | None = None  # a share of requests served by a second version


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
        return sum((f.duration for f in self.faults if effect(f.type).stalls_run and f.target == f"run:{run_id}"),
                   timedelta(0))

    def run_window(self, run_id: str, clip: bool = True) -> tuple[datetime, datetime]:
        """When the run holds its GPUs: start to nominal end plus stalls, or to its failure
        (clipped to the span)."""
        run = self.run(run_id)
        end = run.end + self.stall(run_id)
        failure = self.failure(run_id)
        if failure is not None:
            end = failure.fail  # nothing progresses after the rank died
        return run.start, (min(end, self.end) if clip else end)

    def stretched_window(self, run: Run) -> tuple[datetime, datetime]:
        """The run's start, and its nominal end plus its stalls, ignoring failures (whose process may use a GPU when)."""
        return run.start, run.end + self.stall(run.id)

    def holder(self, gpu: tuple[int, int], at: datetime) -> tuple[Run, int] | None:
        """The run and rank whose process uses ``gpu`` at ``at`` (ignoring failures)."""
        for run in self.runs:
            start, end = self.stretched_window(run)
            if gpu in run.gpus and start <= at < end:
                return run, run.gpus.index(gpu)
        return None

    def host_run(self, host: int, at: datetime) -> Run | None:
        """A run that holds ``host`` (some of its GPUs) at ``at`` (ignoring failures)."""
        for run in self.runs:
            start, end = self.stretched_window(run)
            if any(h == host for h, _ in run.gpus) and start <= at < end:
                return run
        return None

    def killing_fault(self, fault: Fault) -> tuple[Run, int] | None:
        """The run and rank a fault kills, if it kills one."""
        kills = effect(fault.type).kills
        return None if kills is None else kills(self, fault)

    def failure(self, run_id: str) -> Failure | None:
        """The first fault that kills ``run_id``: its rank dies at the onset, and the job
        fails when the survivors' collective times out (the run's ``nccl_timeout``) or the fault ends
        (at once when the fault kills the whole job)."""
        first = None
        for fault in self.faults:
            hit = self.killing_fault(fault)
            if hit is None or hit[0].id != run_id:
                continue
            if first is None or fault.onset < first.death:
                # every rank died at once (a crash, a preemption): no survivor waits in a collective
                fail = fault.onset if effect(fault.type).whole_job else min(fault.onset + hit[0].nccl_timeout, fault.end)
                first = Failure(fault=fault, rank=hit[1], death=fault.onset, fail=fail)
        return first


def host_name(index: int) -> str:
    return f"node-{index}"

