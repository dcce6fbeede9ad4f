"""Distributed-training faults (target ``rank:<run>/rank-<r>`` or ``run:<id>``): stragglers, slower
collectives, a rank that dies, a rank with a skewed gradient."""

from __future__ import annotations

import numpy as np

from ..common import fault_window
from ..physics import COLLECTIVE_SHARE, COMPUTE_SHARE
from .registry import FaultEffect, Slowdown, register


def _straggler(scenario, run, f, step_time, progress):
    if f.run_id != run.id:
        return []
    return [Slowdown("compute", progress(f.onset), progress(f.end), f.magnitude * COMPUTE_SHARE * step_time, f.rank)]


def _collective(scenario, run, f, step_time, progress):
    if f.run_id != run.id:
        return []
    return [Slowdown("collective", progress(f.onset), progress(f.end), 2 * f.magnitude * COLLECTIVE_SHARE * step_time)]


def _dropout_kills(scenario, f):
    return scenario.run(f.run_id), f.rank


def _dropout_end(scenario, f):
    return scenario.failure(f.run_id).fail  # the run failed then


def _gradient_skew(fr, f, rank):
    if f.rank != rank:
        return
    a, b = fault_window(f, fr.scenario)
    fr.grad_norm = fr.grad_norm * np.where((fr.t >= a) & (fr.t < b), 1 + f.magnitude, 1.0)


register(FaultEffect(
    "straggler", "distributed", ("rank",),
    "one rank computes x(1 + magnitude) slower; its peers wait in the collective", slowdown=_straggler))
register(FaultEffect(
    "collective_regression", "distributed", ("run",),
    "network degradation: collective_seconds x(1 + 2*magnitude) on all ranks", slowdown=_collective))
register(FaultEffect(
    "rank_dropout", "distributed", ("rank",),
    "the rank's process dies: its GPU idles, the peers spin in the collective until the run's NCCL timeout "
    "(nccl_timeout, default 10 min) or the fault's end, then the run fails",
    kills=_dropout_kills, truth_end=_dropout_end))
register(FaultEffect(
    "gradient_skew", "distributed", ("rank",),
    "the rank's local grad norm is x(1 + magnitude) its peers' (bad data shard)", rank_steps=_gradient_skew))
