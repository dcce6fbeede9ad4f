"""Cluster shapes (docs/scenario.md, "Cluster shapes"): a whole job crashing or running out of
memory, killed without a word (no run_ended), a preemption, a data loader that leaves the GPUs idle, one host's network degrading,
telemetry that stops for a while and a host whose clock is off. Targets: ``run:<id>`` or
``host:node-<h>`` (``gpu:node-<h>:<g>`` for a gap). simulator/scenarios/shapes.yaml has each."""

from __future__ import annotations

import numpy as np

from ..common import fault_window
from ..physics import CHECKPOINT, COLLECTIVE_SHARE, EVAL, HANG, STARTUP, TRAIN
from .registry import FaultEffect, Slowdown, register
from .training import slow_data

_OOM_RAMP_S = 60.0  # an OOM: the allocator's reservation climbs to the card's memory in the last minute


def _whole_job(scenario, f):
    return scenario.run(f.run_id), 0


def _oom_memory(fr, f, rank):
    """magnitude >= 1: the job died of CUDA out-of-memory; its GPUs' memory fills in the last minute."""
    if f.magnitude < 1:
        return
    a, _ = fault_window(f, fr.scenario)
    busy = np.isin(fr.state, (TRAIN, EVAL, HANG, STARTUP, CHECKPOINT))
    ramp = (fr.t >= a - _OOM_RAMP_S) & (fr.t < a) & busy
    full = fr.memory_total - 64 * 1_048_576
    x = np.clip((fr.t - (a - _OOM_RAMP_S)) / _OOM_RAMP_S, 0.0, 1.0)
    fr.memory = np.where(ramp, fr.memory + x * (full - fr.memory), fr.memory)


def _host_network(scenario, run, f, step_time, progress):
    if not any(h == f.host for h, _ in run.gpus):
        return []
    # a ring or tree all-reduce runs at its slowest link: every rank of the run waits for the host's
    return [Slowdown("collective", progress(max(f.onset, run.start)), progress(f.end),
                     2 * f.magnitude * COLLECTIVE_SHARE * step_time)]


def _gap(scenario, f, host, t):
    if f.host != host:
        return None
    a, b = fault_window(f, scenario)
    return (None if f.gpu is None else f.gpu[1]), (t >= a) & (t < b)


def _skew(scenario, f, t):
    a, b = fault_window(f, scenario)
    return np.where((t >= a) & (t < b), f.magnitude, 0.0)


register(FaultEffect(
    "job_crash", "cluster", ("run",),
    "every rank of the job dies at the onset (an exception, a segfault; magnitude >= 1: CUDA out of memory, "
    "the GPUs' memory fills in the minute before): no step after it, all GPUs free at once, run_ended failed",
    whole_job=True, kills=_whole_job, run_gpu=_oom_memory))
register(FaultEffect(
    "job_killed", "cluster", ("run",),
    "every rank of the job is killed at the onset without a word (SIGKILL, the kernel's OOM killer, a node's "
    "crash): no step after it, all GPUs free at once, and no run_ended (the launcher died with it)",
    whole_job=True, logs_end=False, kills=_whole_job))
register(FaultEffect(
    "preemption", "cluster", ("run",),
    "the scheduler preempts the job at the onset: every rank stops, its GPUs are free at once, run_ended "
    "says preempted (with restart:, the job is requeued and resumes from its last checkpoint)",
    whole_job=True, end_status="preempted", kills=_whole_job))
register(FaultEffect(
    "host_network_degraded", "cluster", ("host",),
    "one host's network degrades: every run with a rank on it spends x(1 + 2*magnitude) as long in collectives "
    "(all its ranks wait for the slow link)", slowdown=_host_network))
register(FaultEffect(
    "telemetry_gap", "cluster", ("host", "gpu"),
    "the host's (or one GPU's) exporter writes no gpu_samples from onset to end; the GPUs go on working",
    telemetry=_gap))
register(FaultEffect(
    "clock_skew", "cluster", ("host",),
    "the host's clock runs magnitude seconds ahead from onset to end: its gpu_samples and the step records of "
    "the ranks on it carry shifted times (and land in the hour files of the shifted time)", host_clock=_skew))


def _stalled_gpus(fr, f, rank):
    """While the loader stalls, the GPUs wait with nothing to run: per sample, busy a share 1 / (1 + m)
    of the time, drawing idle power for the rest."""
    a, b = fault_window(f, fr.scenario)
    on = (fr.t >= a) & (fr.t < b) & (fr.state == TRAIN)
    busy = 1.0 / (1.0 + f.magnitude)
    idle_power = np.clip(fr.idle_power, 60.0, 75.0)
    fr.util = np.where(on, fr.util * busy, fr.util)
    fr.sm = np.where(on, fr.sm * busy, fr.sm)
    fr.tensor = np.where(on, fr.tensor * busy, fr.tensor)
    fr.power = np.where(on, idle_power + (fr.power - idle_power) * busy, fr.power)


register(FaultEffect(
    "data_stall", "cluster", ("run",),
    "the data loader cannot keep up: every step waits magnitude x step time for its batch (data_seconds), and "
    "the GPUs sit idle while they wait (utilization, SM and tensor activity and power above idle x 1/(1 + "
    "magnitude))", slowdown=slow_data, run_gpu=_stalled_gpus))
