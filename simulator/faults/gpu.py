"""GPU faults (target ``gpu:node-<h>:<index>``): XIDs, ECC and row remapping, thermal and power
throttling, and a GPU allocated to a run that no rank uses. They act on the GPU's samples; a
throttle also slows the rank on the GPU and an XID 79 kills it."""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from ..common import fault_window, stream
from ..physics import (
    ALLOC_IDLE,
    CHECKPOINT,
    COMPUTE_SHARE,
    EVAL,
    HANG,
    HW_POWER_BRAKE,
    HW_SLOWDOWN,
    HW_THERMAL,
    IDLE_HZ,
    STARTUP,
    SW_POWER_CAP,
    SW_THERMAL,
    THERMAL_LAG_S,
    THERMAL_TAU_S,
    TRAIN,
    XID_APP,
    XID_FALLEN_OFF_BUS,
)
from .registry import FaultEffect, Slowdown, register

# SM clock drop (base + per-magnitude share) and seconds from onset until the GPU throttles
_THROTTLE = {"thermal_throttle": (0.2, 0.3, THERMAL_LAG_S), "power_throttle": (0.15, 0.25, 0.0)}


def throttle_shape(f) -> tuple[float, float]:
    """(SM clock drop share, seconds from onset until throttling) of a throttle fault."""
    base, per, lag = _THROTTLE[f.type]
    return base + per * min(f.magnitude, 1.0), lag


def _frng(fr, f):
    return stream(fr.scenario.seed, "fault", f.type, f.target, fault_window(f, fr.scenario)[0])


# --------------------------------------------------------------------------- XID, ECC, row remapping


def _xid_kills(scenario, f):
    return scenario.holder(f.gpu, f.onset) if f.magnitude >= 1.0 else None


def _xid(fr, f):
    a, b = fault_window(f, fr.scenario)
    m = f.magnitude
    xid = XID_FALLEN_OFF_BUS if m >= 1 else int(_frng(fr, f).choice(XID_APP))
    count = 1 if m >= 1 else 1 + int(3 * m)
    fr.xid_total += np.where(fr.t >= a, count, 0)
    fr.last_xid = np.where(fr.t >= a, xid, fr.last_xid)
    if m >= 1:
        fr.lost |= (fr.t >= a) & (fr.t < b)


def _xid_rank_effect(scenario, f):
    hit = scenario.killing_fault(f)
    failure = scenario.failure(hit[0].id) if hit else None
    if failure is not None and failure.fault is f:
        return "rank_dropout", hit[0], hit[1], f.onset, failure.fail, 1.0
    return None


def _ecc(fr, f):
    a, b = fault_window(f, fr.scenario)
    t, m = fr.t, f.magnitude
    errors = max(1, round(m))
    fr.ecc_u += np.where(t >= a, errors, 0)
    x = np.clip((t - a) / (b - a), 0.0, 1.0)
    fr.ecc_c += np.where(t >= a, np.round(errors * 2 + 40 * m * x).astype(np.int64), 0)
    fr.remap_u += np.where(t >= a, errors, 0)
    fr.remap_pending |= (t >= a) & (t < b)  # remapping takes effect at the next GPU reset


def _row_remap(fr, f):
    a, b = fault_window(f, fr.scenario)
    rows = max(1, round(f.magnitude))
    fr.remap_c += np.where(fr.t >= a, rows, 0)
    fr.remap_u += np.where(fr.t >= a, 1, 0)
    fr.remap_failure |= (fr.t >= a) & (fr.t < b)


# --------------------------------------------------------------------------- throttling


def _throttle_slowdown(scenario, run, f, step_time, progress):
    run_rank = scenario.holder(f.gpu, f.onset)
    if run_rank is None or run_rank[0].id != run.id:
        return []
    drop, lag = throttle_shape(f)
    # Compute-bound work slows in proportion to the SM clock.
    return [Slowdown("compute", progress(f.onset + timedelta(seconds=lag)), progress(f.end),
                     (1 / (1 - drop) - 1) * COMPUTE_SHARE * step_time, run_rank[1])]


def _throttle_rank_effect(scenario, f):
    run, rank = scenario.holder(f.gpu, f.onset)
    drop, lag = throttle_shape(f)
    run_end = scenario.run_window(run.id)[1]
    onset = f.onset + timedelta(seconds=lag)
    return "straggler", run, rank, onset, min(f.end, run_end), round(1 / (1 - drop) - 1, 4)


def _throttled(fr, f):
    a, b = fault_window(f, fr.scenario)
    drop, lag = throttle_shape(f)
    busy = np.isin(fr.state, (TRAIN, EVAL, HANG, STARTUP, CHECKPOINT))
    on = (fr.t >= a + lag) & (fr.t < b) & busy
    fr.clock = np.where(on, np.round(fr.boost * (1 - drop), -6), fr.clock)
    return on, drop


def _thermal(fr, f):
    on, drop = _throttled(fr, f)
    bits = SW_THERMAL | (HW_THERMAL | HW_SLOWDOWN if f.magnitude >= 1 else 0)
    fr.power = np.where(on, fr.power * (1 - drop) ** 1.5, fr.power)  # lower clock and voltage
    fr.throttle = np.where(on, fr.throttle | bits, fr.throttle)


def _thermal_temperature(fr, f):
    # Failed cooling: the GPU heats up in about a minute and is held at its slowdown
    # temperature by throttling; after the fix it cools with the usual lag.
    a, b = fault_window(f, fr.scenario)
    t, temp = fr.t, fr.temp
    peak = 88.0 + 7.0 * min(f.magnitude, 1.0)
    x = np.clip((t - a) / THERMAL_LAG_S, 0.0, 1.0)
    hot = temp + x * (peak - temp)
    after = t >= b
    temp = np.where((t >= a) & ~after, hot + fr.xr.normal(0.0, 0.4, fr.n) * (x >= 1), temp)
    cool = temp + (peak - temp) * np.exp(-np.maximum(t - b, 0.0) / THERMAL_TAU_S)
    fr.temp = np.where(after, cool, temp)


def _power(fr, f):
    on, drop = _throttled(fr, f)
    cap = fr.limit * 0.75 * (1 - drop) ** 2
    brake = f.magnitude >= 1
    bits = HW_POWER_BRAKE | HW_SLOWDOWN if brake else SW_POWER_CAP
    fr.power = np.where(on, cap * _frng(fr, f).uniform(0.96, 1.0, fr.n), fr.power)
    if not brake:  # the enforced limit was lowered (e.g. a facility capping agent)
        fr.power_limit = np.where(on, round(cap, 2), fr.power_limit)
    fr.throttle = np.where(on, fr.throttle | bits, fr.throttle)


# --------------------------------------------------------------------------- idle allocated GPU


def _idle_state(fr, f):
    a, b = fault_window(f, fr.scenario)
    tl = fr.timelines[fr.run_index[fr.scenario.host_run(fr.host, f.onset).id]]
    t = fr.t
    alloc = (t >= a) & (t < b) & (t >= tl.start) & (t < tl.end)
    fr.state[alloc] = ALLOC_IDLE
    fr.run_of[alloc] = fr.run_index[tl.run.id]


def _idle(fr, f):
    a, b = fault_window(f, fr.scenario)
    m = f.magnitude
    al = (fr.state == ALLOC_IDLE) & (fr.t >= a) & (fr.t < b)
    # A CUDA context and a few buffers, no kernels (or, below magnitude 1, rare ones).
    fr.util = np.where(al, (1 - min(m, 1.0)) * 0.15 * fr.idle_like, fr.util)
    fr.sm = np.where(al, (1 - min(m, 1.0)) * 0.12 * fr.idle_like, fr.sm)
    fr.tensor = np.where(al, 0.0, fr.tensor)
    fr.power = np.where(al, np.clip(fr.idle_power, 60.0, 75.0) + 15 * (1 - min(m, 1.0)), fr.power)
    fr.memory = np.where(al, fr.idle_mem + 448 * 1_048_576 + fr.mem_noise, fr.memory)
    fr.clock = np.where(al, IDLE_HZ if m >= 1 else fr.boost, fr.clock)


def _idle_validate(scenario, f, fail, field):
    host, gpu = f.gpu
    run = scenario.host_run(host, f.onset)
    if run is None or (host, gpu) in run.gpus:
        raise fail(f"{field}.target", f"{f.target_id} is not a spare GPU on a running run's host at the onset",
                   "target a GPU no rank uses on a host a run holds (ranks < GPUs)")


register(FaultEffect(
    "xid_error", "gpu", ("gpu",),
    "magnitude >= 1: XID 79 (fallen off the bus), the GPU reports nulls until the end and the run on it dies; "
    "< 1: an application XID (13/31/43), the run goes on",
    kills=_xid_kills, gpu=_xid, rank_effect=_xid_rank_effect))
register(FaultEffect(
    "ecc_error", "gpu", ("gpu",),
    "round(magnitude) (at least 1) uncorrectable ECC errors, a burst of corrected ones, rows remapped and a "
    "remap pending until the end", gpu=_ecc))
register(FaultEffect(
    "row_remap_failure", "gpu", ("gpu",),
    "row remapping failed (no spare rows): row_remap_failure true, remapped rows rise", gpu=_row_remap))
register(FaultEffect(
    "thermal_throttle", "gpu", ("gpu",),
    "the GPU heats to 88-95 C, thermal throttle bits, SM clock -20..-50 %, the rank on it slows (a straggler)",
    needs_holder=True, slowdown=_throttle_slowdown, gpu=_thermal, gpu_temperature=_thermal_temperature,
    rank_effect=_throttle_rank_effect))
register(FaultEffect(
    "power_throttle", "gpu", ("gpu",),
    "power capped (SW_POWER_CAP, or HW_POWER_BRAKE at magnitude >= 1), SM clock -15..-40 %, the rank on it slows",
    needs_holder=True, slowdown=_throttle_slowdown, gpu=_power, rank_effect=_throttle_rank_effect))
register(FaultEffect(
    "idle_allocated", "gpu", ("gpu",),
    "a GPU on a run's host is allocated to the run (run_id set) but no rank uses it",
    holds_spare_gpu=True, gpu_state=_idle_state, gpu=_idle, validate=_idle_validate))
