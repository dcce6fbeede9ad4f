"""Scenario files for the Goodput cluster simulator.

A scenario describes a small GPU cluster (hosts x GPUs), the training runs placed on it, the
serving endpoints, the faults to inject and the seed that makes the simulation reproducible. This
module reads a YAML or JSON scenario file, validates its shape with the pydantic models of
schema.py, builds the frozen dataclasses of model.py and checks what needs the whole scenario
(placement.py), so that ``simulate`` never has to deal with bad input. Every problem raises
:class:`ScenarioError` with a one-line message ``<file>: <field>: <problem>; <what to do>``.

The fault types are the fault-effect registry (simulator/faults/); the file format is documented
in ``docs/scenario.md``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from . import placement
from .badput_shapes import ModelShape, RestartSpec
from .faults import FAULT_TYPES, FaultEffect
from .fields import CHECKPOINT_FORMATS, ID_RE, PRECISIONS, parse_duration
from .model import (
    NCCL_TIMEOUT,
    Canary,
    CheckpointFiles,
    Cluster,
    Endpoint,
    Failure,
    Fault,
    GpuSpec,
    Latency,
    LearningRate,
    LossCurve,
    PredictionLog,
    Promotion,
    Run,
    Scenario,
    ScenarioError,
    host_name,
)
from .schema import EndpointDoc, RunDoc, validate

FaultType = FaultEffect  # the loader's view of a registered fault type

__all__ = [
    "CHECKPOINT_FORMATS", "FAULT_TYPES", "NCCL_TIMEOUT", "PRECISIONS", "CheckpointFiles", "Cluster", "Endpoint",
    "Failure", "Fault", "FaultType", "GpuSpec", "Latency", "LearningRate", "LossCurve", "PredictionLog", "Promotion",
    "Run", "Scenario", "ScenarioError", "host_name", "load_scenario", "parse_duration", "scenario_from_dict",
]


def load_scenario(path: str | Path) -> Scenario:
    """Read a YAML (or ``.json``) scenario file into a validated :class:`Scenario`."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(source, "(file)", f"cannot read: {exc.strerror}", "check the path") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(source, "(file)", f"not UTF-8 text (byte {exc.start})", "is it the right file?") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        problem = " ".join(str(exc).split())
        raise ScenarioError(source, "(file)", f"not valid YAML/JSON: {problem}", "fix the syntax") from None
    return scenario_from_dict(data, source=source, default_name=path.stem)


def scenario_from_dict(data: Any, source: str = "<dict>", default_name: str = "scenario") -> Scenario:
    """Validate an already-parsed scenario document (the same shape as the file)."""
    def fail(field: str, problem: str, fix: str) -> ScenarioError:
        return ScenarioError(source, field, problem, fix)

    doc = validate(data, source)
    name = doc.name or default_name
    if not ID_RE.match(name):
        raise fail("name", f"{name!r} has characters not allowed in file names", "use letters, digits, '.', '_' and '-'")
    c = doc.cluster
    for host in sorted(c.host_gpus or {}):
        if not 0 <= host < c.hosts:
            raise fail(f"cluster.host_gpus.{host}", f"host index {host} does not exist",
                       f"use 0..{c.hosts - 1} (cluster.hosts is {c.hosts})")
    cluster = Cluster(hosts=c.hosts, gpus_per_host=c.gpus_per_host, sample_interval=c.sample_interval,
                      gpu=_gpu(c.gpu), host_gpus=tuple((h, _gpu(g)) for h, g in sorted((c.host_gpus or {}).items())))
    runs = tuple(_build_run(fail, r, f"runs[{i}]", doc.start, doc.duration, cluster) for i, r in enumerate(doc.runs))
    seen: set[str] = set()
    for i, run in enumerate(runs):
        if run.id in seen:
            raise fail(f"runs[{i}].id", f"duplicate run id {run.id!r}", "give every run its own id")
        seen.add(run.id)
    faults = tuple(placement.build_fault(fail, f, f"faults[{i}]", doc.start, doc.duration, runs, cluster)
                   for i, f in enumerate(doc.faults or ()))
    endpoints = tuple(_build_endpoint(fail, e, f"endpoints[{i}]", doc.start, doc.duration, runs, cluster)
                      for i, e in enumerate(doc.endpoints or ()))
    names = [e.name for e in endpoints]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise fail(f"endpoints[{i}].name", f"duplicate endpoint name {n!r}", "give every endpoint its own name")

    scenario = Scenario(name=name, seed=doc.seed, start=doc.start, duration=doc.duration, cluster=cluster,
                        runs=runs, faults=faults, source=source, endpoints=endpoints)
    placement.check_stalls(fail, scenario)
    placement.check_fault_placement(fail, scenario)
    placement.check_gpu_sharing(fail, scenario)
    return scenario


def _build_run(fail, r: RunDoc, field: str, scenario_start: datetime, scenario_duration: timedelta,
               cluster: Cluster) -> Run:
    if r.start >= scenario_duration:
        raise fail(f"{field}.start", f"run starts at or after the scenario ends ({_text(r.start)!r})",
                   "use an offset from the scenario start that is inside 'duration'")
    for i, h in enumerate(r.hosts):
        if h >= cluster.hosts:
            raise fail(f"{field}.hosts[{i}]", f"host index {h} does not exist",
                       f"use 0..{cluster.hosts - 1} (cluster.hosts is {cluster.hosts})")
    indices = list(range(cluster.gpus_per_host)) if r.gpu_indices is None else r.gpu_indices
    for i, g in enumerate(indices):
        if g >= cluster.gpus_per_host:
            raise fail(f"{field}.gpu_indices[{i}]", f"GPU index {g} does not exist",
                       f"use 0..{cluster.gpus_per_host - 1} (cluster.gpus_per_host is {cluster.gpus_per_host})")
    capacity = len(r.hosts) * len(indices)
    ranks = capacity if r.ranks is None else r.ranks
    if ranks > capacity:
        raise fail(f"{field}.ranks", f"{ranks} ranks do not fit on {capacity} GPUs", "list more hosts or use fewer ranks")
    hosts = tuple(r.hosts)
    gpus = tuple((hosts[k // len(indices)], indices[k % len(indices)]) for k in range(ranks))
    lr = r.learning_rate
    return Run(
        id=r.id, start=scenario_start + r.start, duration=r.duration, hosts=hosts, ranks=ranks, gpus=gpus,
        step_time=r.step_time,
        loss=LossCurve(initial=r.loss.initial, floor=r.loss.floor, decay=r.loss.decay, noise=r.loss.noise, s0=r.loss.s0),
        checkpoint_interval_steps=r.checkpoint_interval_steps, precision=r.precision,
        learning_rate=LearningRate(peak=lr.peak, warmup_steps=lr.warmup_steps, min_ratio=lr.min_ratio,
                                   drop_at_step=lr.drop_at_step, drop_factor=lr.drop_factor),
        tokens_per_step=r.tokens_per_step, checkpoint_bytes=r.checkpoint_bytes, job=r.job or r.id, dataset=r.dataset,
        eval_interval_steps=r.eval_interval_steps, ordinary_noise=r.ordinary_noise,
        checkpoint_files=None if r.checkpoints is None else CheckpointFiles(dir=r.checkpoints.dir,
                                                                            format=r.checkpoints.format),
        restart=None if r.restart is None else RestartSpec(after=r.restart.after),
        log_evaluations=r.log_evaluations,
        model=None if r.model is None else ModelShape(r.model.layers, r.model.hidden, r.model.seq_len, r.model.vocab),
        nccl_timeout=r.nccl_timeout,
        log_every_steps=r.log_every_steps,
    )


def _build_endpoint(fail, e: EndpointDoc, field: str, scenario_start: datetime, scenario_duration: timedelta,
                    runs: tuple[Run, ...], cluster: Cluster) -> Endpoint:
    if e.host is not None and e.host >= cluster.hosts:
        raise fail(f"{field}.host", f"host index {e.host} does not exist",
                   f"use 0..{cluster.hosts - 1} (cluster.hosts is {cluster.hosts})")
    by_id = {r.id: r for r in runs}
    promotions: list[Promotion] = []
    for i, pr in enumerate(e.promotions or ()):
        pf = f"{field}.promotions[{i}]"
        if pr.run not in by_id:
            raise fail(f"{pf}.run", f"unknown run id {pr.run!r}",
                       f"use one of the runs: {', '.join(sorted(by_id)) or '(none)'}")
        if pr.at >= scenario_duration:
            raise fail(f"{pf}.at", "promotion is at or after the scenario ends",
                       "use an offset from the scenario start that is inside 'duration'")
        if scenario_start + pr.at <= by_id[pr.run].start:
            raise fail(f"{pf}.at", f"run {pr.run!r} has saved no checkpoint yet at {_text(pr.at)!r}",
                       "promote after the run's first checkpoint")
        if promotions and scenario_start + pr.at <= promotions[-1].at:
            raise fail(f"{pf}.at", "promotions are not in time order", "list them by 'at'")
        promotions.append(Promotion(run=pr.run, at=scenario_start + pr.at))
    canary = None
    if e.canary is not None:
        c = e.canary
        if c.run not in by_id:
            raise fail(f"{field}.canary.run", f"unknown run id {c.run!r}",
                       f"use one of the runs: {', '.join(sorted(by_id)) or '(none)'}")
        if c.at >= scenario_duration or scenario_start + c.at <= by_id[c.run].start:
            raise fail(f"{field}.canary.at", "the canary starts outside the scenario or before its run",
                       "start it inside 'duration', after the run's first checkpoint")
        canary = Canary(run=c.run, at=scenario_start + c.at, share=c.share)
    p = e.predictions
    diurnal = e.diurnal
    return Endpoint(
        name=e.name, host=e.host, model_version=e.model_version or f"{e.name}-base",
        requests_per_second=e.requests_per_second, failure_ratio=e.failure_ratio,
        ttft=Latency(e.ttft_seconds.p50, e.ttft_seconds.p99), itl=Latency(e.itl_seconds.p50, e.itl_seconds.p99),
        e2e=Latency(e.e2e_seconds.p50, e.e2e_seconds.p99), requests_waiting=e.requests_waiting,
        kv_cache_usage=e.kv_cache_usage, metrics_interval=e.metrics_interval,
        predictions=None if p is None else PredictionLog(per_minute=p.per_minute, outcome_share=p.outcome_share,
                                                         outcome_delay=p.outcome_delay, labels=tuple(p.labels)),
        promotions=tuple(promotions),
        diurnal_amplitude=0.0 if diurnal is None else diurnal.amplitude,
        diurnal_peak_hour=14.0 if diurnal is None else diurnal.peak_hour,
        canary=canary,
    )


def _gpu(g) -> GpuSpec:
    return GpuSpec(name=g.name, memory_total_bytes=g.memory_total_bytes, power_limit_watts=g.power_limit_watts)


def _text(offset: timedelta) -> str:
    """An offset as the file would write it (for messages)."""
    seconds = offset.total_seconds()
    return f"{seconds / 60:g}m" if seconds % 60 == 0 else f"{seconds:g}s"
