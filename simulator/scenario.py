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

__all__ = [
    "FAULT_TYPES",
    "Cluster",
    "Fault",
    "FaultType",
    "GpuSpec",
    "LearningRate",
    "LossCurve",
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
    ``Scenario.run_window``).
    """

    name: str
    target_kinds: tuple[str, ...]
    stalls_run: bool
    description: str


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
    ),
}


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
    """Linear warmup to ``peak`` then cosine decay to ``peak * min_ratio``."""

    peak: float = 3.0e-4
    warmup_steps: int = 200
    min_ratio: float = 0.1


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
        """When the run holds its GPUs: start to nominal end plus stalls (clipped to the span)."""
        run = self.run(run_id)
        end = run.end + self.stall(run_id)
        return run.start, (min(end, self.end) if clip else end)


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
    top = p.mapping(data, "", {"seed", "start", "duration", "cluster", "runs"}, {"name", "faults"})
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
    faults = tuple(_parse_fault(p, f, f"faults[{i}]", start, duration, runs)
                   for i, f in enumerate(faults_raw))

    scenario = Scenario(name=name, seed=seed, start=start, duration=duration, cluster=cluster,
                        runs=runs, faults=faults, source=source)
    _check_stalls(p, scenario)
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
                   "tokens_per_step", "checkpoint_bytes", "job", "dataset"})
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
    if precision not in ("bf16", "fp16"):
        raise p.fail(f"{field}.precision", f"unknown precision {precision!r}", "use 'bf16' or 'fp16'")

    lrf = f"{field}.learning_rate"
    lr_raw = p.mapping(r.get("learning_rate", {}), lrf, set(), {"peak", "warmup_steps", "min_ratio"})
    d = LearningRate()
    learning_rate = LearningRate(
        peak=p.number(lr_raw.get("peak", d.peak), f"{lrf}.peak", positive=True),
        warmup_steps=p.integer(lr_raw.get("warmup_steps", d.warmup_steps), f"{lrf}.warmup_steps", 0),
        min_ratio=p.number(lr_raw.get("min_ratio", d.min_ratio), f"{lrf}.min_ratio", minimum=0),
    )

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
    )


def _parse_fault(p: _Parser, raw: Any, field: str, scenario_start: datetime,
                 scenario_duration: timedelta, runs: tuple[Run, ...]) -> Fault:
    f = p.mapping(raw, field, {"type", "target", "onset", "duration"}, {"magnitude"})
    ftype = f["type"]
    if ftype not in FAULT_TYPES:
        known = ", ".join(sorted(FAULT_TYPES))
        raise p.fail(f"{field}.type", f"unknown fault type {ftype!r}", f"use one of: {known}")
    spec = FAULT_TYPES[ftype]

    target = p.string(f["target"], f"{field}.target")
    kinds = ", ".join(f"'{k}:<id>'" for k in spec.target_kinds)
    kind, _, target_id = target.partition(":")
    if kind not in spec.target_kinds or not target_id:
        raise p.fail(f"{field}.target", f"{ftype} cannot target {target!r}", f"use {kinds}")
    if kind == "run" and target_id not in {r.id for r in runs}:
        known = ", ".join(sorted(r.id for r in runs)) or "(none)"
        raise p.fail(f"{field}.target", f"unknown run id {target_id!r}",
                     f"use one of the runs: {known}")

    offset = p.duration(f["onset"], f"{field}.onset", positive=False)
    if offset >= scenario_duration:
        raise p.fail(f"{field}.onset", "onset is at or after the scenario ends",
                     "use an offset from the scenario start that is inside 'duration'")
    magnitude = p.number(f.get("magnitude", 1.0), f"{field}.magnitude", positive=True)
    if ftype == "hang" and magnitude > 1:
        raise p.fail(f"{field}.magnitude", "a hang's magnitude is at most 1.0", "use 1.0")
    return Fault(type=ftype, target=target, onset=scenario_start + offset,
                 duration=p.duration(f["duration"], f"{field}.duration"), magnitude=magnitude)


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
