"""Checks that need the whole scenario: a fault's target against the runs and the cluster, faults
inside their runs (stalls not overlapping, GPU faults finding the run they act through, each run
killed at most once, plus each effect's own ``validate``), and no GPU held by two runs at once.
Each raises the loader's one-line ``ScenarioError`` through ``fail(field, problem, fix)``."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from .faults import FAULT_TYPES
from .model import Cluster, Fault, Run, Scenario, host_name

_RANK_RE = re.compile(r"^(?P<run>.+)/rank-(?P<rank>\d+)$")
_GPU_RE = re.compile(r"^node-(?P<host>\d+):(?P<gpu>\d+)$")
_HOST_RE = re.compile(r"^node-(?P<host>\d+)$")
_TARGET_FORMS = {"host": "'host:node-<h>'", "run": "'run:<run id>'", "rank": "'rank:<run id>/rank-<r>'",
                 "gpu": "'gpu:node-<h>:<gpu index>'", "endpoint": "'endpoint:<endpoint name>'",
                 "checkpoint": "'checkpoint:<run id>/step-NNNNNN'"}
_CHECKPOINT_RE = re.compile(r"^(?P<run>.+)/step-(?P<step>\d{6})$")


def build_fault(fail, doc, field: str, scenario_start: datetime, scenario_duration: timedelta,
                runs: tuple[Run, ...], cluster: Cluster) -> Fault:
    """A validated fault document as a ``Fault``, its target checked against the runs and cluster."""
    spec = FAULT_TYPES[doc.type]
    target = doc.target
    kinds = " or ".join(_TARGET_FORMS[k] for k in spec.target_kinds)
    kind, _, target_id = target.partition(":")
    if kind not in spec.target_kinds or not target_id:
        raise fail(f"{field}.target", f"{doc.type} cannot target {target!r}", f"use {kinds}")
    run_ids = {r.id: r for r in runs}
    known = ", ".join(sorted(run_ids)) or "(none)"
    if kind == "run" and target_id not in run_ids:
        raise fail(f"{field}.target", f"unknown run id {target_id!r}", f"use one of the runs: {known}")
    if kind == "checkpoint":
        _check_checkpoint_target(fail, f"{field}.target", target_id, run_ids)
    if kind == "rank":
        m = _RANK_RE.match(target_id)
        if m is None:
            raise fail(f"{field}.target", f"bad rank target {target!r}", f"use {kinds}")
        if m["run"] not in run_ids:
            raise fail(f"{field}.target", f"unknown run id {m['run']!r}", f"use one of the runs: {known}")
        ranks = run_ids[m["run"]].ranks
        if int(m["rank"]) >= ranks or m["rank"] != str(int(m["rank"])):
            raise fail(f"{field}.target", f"run {m['run']!r} has no rank {m['rank']}", f"use rank-0 .. rank-{ranks - 1}")
    if kind == "host":
        m = _HOST_RE.match(target_id)
        if m is None or m["host"] != str(int(m["host"])):
            raise fail(f"{field}.target", f"bad host target {target!r}", f"use {kinds}")
        if int(m["host"]) >= cluster.hosts:
            raise fail(f"{field}.target", f"host {target_id!r} does not exist", f"use node-0 .. node-{cluster.hosts - 1}")
    if kind == "gpu":
        _check_gpu_target(fail, f"{field}.target", target, target_id, kinds, cluster)
    if doc.onset >= scenario_duration:
        raise fail(f"{field}.onset", "onset is at or after the scenario ends",
                   "use an offset from the scenario start that is inside 'duration'")
    if spec.max_magnitude is not None and doc.magnitude > spec.max_magnitude:
        raise fail(f"{field}.magnitude", f"a {doc.type}'s magnitude is at most {spec.max_magnitude}",
                   f"use a value in (0, {spec.max_magnitude}]")
    return Fault(type=doc.type, target=target, onset=scenario_start + doc.onset, duration=doc.duration,
                 magnitude=doc.magnitude)


def _check_gpu_target(fail, field: str, target: str, target_id: str, kinds: str, cluster: Cluster) -> None:
    m = _GPU_RE.match(target_id)
    if m is None:
        raise fail(field, f"bad GPU target {target!r}", f"use {kinds}")
    if int(m["host"]) >= cluster.hosts or int(m["gpu"]) >= cluster.gpus_per_host:
        raise fail(field, f"GPU {target_id!r} does not exist",
                   f"use node-0 .. node-{cluster.hosts - 1} and GPU 0 .. {cluster.gpus_per_host - 1}")
    if m["host"] != str(int(m["host"])) or m["gpu"] != str(int(m["gpu"])):
        raise fail(field, f"bad GPU target {target!r}", "drop leading zeros")


def _check_checkpoint_target(fail, field: str, target_id: str, run_ids: dict) -> None:
    """A checkpoint fault names one real checkpoint: a run with ``checkpoints:`` and a step it saves."""
    m = _CHECKPOINT_RE.match(target_id)
    if m is None:
        raise fail(field, f"bad checkpoint target {target_id!r}", f"use {_TARGET_FORMS['checkpoint']}")
    run = run_ids.get(m["run"])
    if run is None:
        raise fail(field, f"unknown run id {m['run']!r}",
                     f"use one of the runs: {', '.join(sorted(run_ids)) or '(none)'}")
    if run.checkpoint_files is None:
        raise fail(field, f"run {run.id!r} writes no checkpoint files", "give the run 'checkpoints:'")
    step = int(m["step"])
    if step <= 0 or step % run.checkpoint_interval_steps:
        raise fail(field, f"run {run.id!r} saves no checkpoint at step {step}",
                     f"use a multiple of its checkpoint_interval_steps ({run.checkpoint_interval_steps})")


def check_stalls(fail, scenario: Scenario) -> None:
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
            raise fail(field, f"overlaps an earlier {fault.type} on {fault.target}",
                         "start it after the previous fault ends")
        if not (run.start <= fault.onset < end):
            stretched = ", stretched by earlier stalls" if end != run.end else ""
            raise fail(field, f"onset is outside run {run.id!r} "
                         f"({_iso(run.start)} to {_iso(end)}{stretched})",
                         "move the onset inside the run")
        end += fault.duration
        prev_end = fault.end


def check_fault_placement(fail, scenario: Scenario) -> None:
    """Run and rank faults fall inside their run; GPU faults that act through a run find one;
    a run is killed at most once."""
    killed: dict[str, int] = {}
    endpoints = [e.name for e in scenario.endpoints]
    for i, fault in enumerate(scenario.faults):
        spec = FAULT_TYPES[fault.type]
        field = f"faults[{i}]"
        if fault.target_kind == "endpoint" and fault.target_id not in endpoints:
            raise fail(f"{field}.target", f"unknown endpoint {fault.target_id!r}",
                         f"use one of the endpoints: {', '.join(endpoints) or '(none)'}")
        if fault.run_id is not None and not spec.stalls_run:
            run = scenario.run(fault.run_id)
            start, end = scenario.stretched_window(run)
            if not (start <= fault.onset < end):
                raise fail(f"{field}.onset", f"onset is outside run {run.id!r} "
                             f"({_iso(start)} to {_iso(end)})", "move the onset inside the run")
            if spec.needs_fp16 and run.precision != "fp16":
                raise fail(f"{field}.target", f"{fault.type} needs an fp16 run but {run.id!r} "
                             f"is {run.precision}", "target an fp16 run (precision: fp16)")
        if spec.needs_holder and scenario.holder(fault.gpu, fault.onset) is None:
            raise fail(f"{field}.target", f"no run's rank uses {fault.target_id} at the onset",
                         f"{fault.type} acts through the rank on the GPU: target a GPU of a "
                         "running run")
        if spec.validate is not None:
            spec.validate(scenario, fault, fail, field)
        hit = scenario.killing_fault(fault)
        if hit is not None:
            if hit[0].id in killed:
                raise fail(f"{field}.onset", f"run {hit[0].id!r} is already killed by "
                             f"faults[{killed[hit[0].id]}]", "kill each run at most once")
            killed[hit[0].id] = i


def check_gpu_sharing(fail, scenario: Scenario) -> None:
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
                raise fail(f"runs[{i1}].start",
                             f"run {b!r} uses {host_name(host)}:{gpu} while run {a!r} still holds it "
                             f"(until {_iso(e0)}, including fault stalls)",
                             "start it later, end the other run earlier or use other hosts")


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
