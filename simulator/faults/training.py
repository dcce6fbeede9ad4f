"""Training faults (target ``run:<id>``): the loss curve, gradients, fp16 loss scaling, the caching
allocator, slow data and hangs. Physics in docs/scenario.md, "Fault types"."""

from __future__ import annotations

import numpy as np

from ..common import fault_window
from ..physics import FRAG_BYTES
from .registry import FaultEffect, Slowdown, register


def _x(fr, f):
    """(window mask, position 0..1 through the fault) at the steps' wall times."""
    a, b = fault_window(f, fr.scenario)
    return (fr.t >= a) & (fr.t < b), np.clip((fr.t - a) / (b - a), 0.0, 1.0)


def _nan_loss(fr, f):
    inside, _ = _x(fr, f)
    fr.nan |= inside & (fr.u_nan < f.magnitude)


def _loss_spike(fr, f):
    # Jumps at onset, decays back to the curve by the end.
    inside, x = _x(fr, f)
    decay = np.where(inside, (np.exp(-5 * x) - np.exp(-5.0)) / (1 - np.exp(-5.0)), 0.0)
    fr.loss_mult *= 1 + 2 * f.magnitude * decay
    fr.grad_mult *= 1 + 2 * f.magnitude * decay


def _loss_divergence(fr, f):
    inside, x = _x(fr, f)
    growth = np.where(inside, (1 + 3 * f.magnitude) ** x, 1.0)
    fr.loss_mult *= growth
    fr.grad_mult *= growth ** 1.5


def _loss_plateau(fr, f):
    inside, _ = _x(fr, f)
    fr.progress = np.where(inside, fr.progress * (1 - f.magnitude), fr.progress)


def _grad_norm_spike(fr, f):
    inside, _ = _x(fr, f)
    fr.grad_mult *= np.where(inside, 5 + 20 * f.magnitude, 1.0)


def _loss_scale_collapse(fr, f):
    inside, _ = _x(fr, f)
    fr.overflow_p = np.where(inside, np.minimum(1.0, 0.5 * f.magnitude), fr.overflow_p)
    after = np.flatnonzero(fr.t >= fault_window(f, fr.scenario)[1])
    if len(after):  # restarted from a checkpoint with a fresh scaler
        fr.scale_reset[after[0]] = True


def _fragmentation(scenario, f, t):
    """Grows linearly to magnitude x 10 GB at the fault's end; then the job releases its cache
    (``torch.cuda.empty_cache()`` or a restart) and the reservation is back to normal."""
    a, b = fault_window(f, scenario)
    inside = (t >= a) & (t < b)
    return np.where(inside, f.magnitude * FRAG_BYTES * (t - a) / (b - a), 0.0)


def slow_data(scenario, run, f, step_time, progress):
    if f.run_id != run.id:
        return []
    return [Slowdown("data", progress(f.onset), progress(f.end), f.magnitude * step_time)]


register(FaultEffect(
    "hang", "training", ("run",),
    "stuck collective (e.g. NCCL): no steps from any rank, GPUs stay busy at high utilisation but low "
    "power and no tensor activity", stalls_run=True, max_magnitude=1.0))
register(FaultEffect(
    "nan_loss", "training", ("run",),
    "a share (magnitude) of steps have non-finite loss and grad norm on all ranks; nan_iterations_total "
    "counts them", max_magnitude=1.0, series=_nan_loss))
register(FaultEffect(
    "loss_spike", "training", ("run",),
    "loss jumps x(1 + 2*magnitude) at onset and decays back to the curve by the end; grad norm jumps too",
    series=_loss_spike))
register(FaultEffect(
    "loss_divergence", "training", ("run",),
    "loss grows geometrically away from the curve, reaching x(1 + 3*magnitude) at the end; grad norm grows",
    series=_loss_divergence))
register(FaultEffect(
    "loss_plateau", "training", ("run",),
    "the run stops learning: a share (magnitude) of each step's progress along the loss curve is lost, so "
    "the loss stays near its onset value", max_magnitude=1.0, series=_loss_plateau))
register(FaultEffect(
    "step_time_regression", "training", ("run",),
    "data pipeline slowdown: every rank's data_seconds grows by magnitude x step time, so step time is "
    "x(1 + magnitude) and throughput drops", slowdown=slow_data))
register(FaultEffect(
    "grad_norm_spike", "training", ("run",),
    "grad norm x(5 + 20*magnitude) for a short burst; loss mostly unaffected", series=_grad_norm_spike))
register(FaultEffect(
    "loss_scale_collapse", "training", ("run",),
    "fp16 only: gradients overflow on a share (magnitude / 2) of steps, the loss scale halves on each down "
    "to 1 and skipped_iterations_total counts the skips", needs_fp16=True, series=_loss_scale_collapse))
register(FaultEffect(
    "memory_fragmentation", "training", ("run",),
    "reserved minus allocated grows by magnitude x 10 GB over the duration, inactive split bytes grow, "
    "alloc retries come ever more often", memory_growth=_fragmentation))

