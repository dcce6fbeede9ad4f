"""training_steps: one record per rank per completed step, as the training-side client writes it.
Values every rank shares after the all-reduce (loss curve, non-finite steps, fp16 loss scale) are
drawn once per run (``run_series``); each rank adds its own noise, timings and allocator state. The
training faults' registered effects act on the shared series and on one rank's records."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from . import badput_shapes
from .common import epoch_ms, iso_array, secs, stream, to_ms
from .encode import NULL, enc_floats, enc_ints, enc_times, json_lines
from .faults import effects_with
from .model import Run, Scenario, host_name
from .physics import (
    COMPUTE_SHARE,
    FRAG_BYTES,
    HEALTHY_OVERFLOW_P,
    INF_SHARE,
    LOSS_SCALE,
    LR_DROP_DEPTH,
    LR_DROP_STEPS,
    SCALE_GROWTH_INTERVAL,
    SCALE_MIN,
)
from .timeline import Timeline, host_clock_ms, rank_factor, reserve_cap, reserved_growth


def run_series(scenario: Scenario, tl: Timeline) -> dict:
    """Per-step values every rank shares (after the all-reduce): progress along the loss
    curve, fault multipliers, non-finite steps, the fp16 loss scale and skip counters."""
    run = tl.run
    n = len(tl.steps)
    k = tl.steps.astype(float)
    t = tl.step_wall
    xr = stream(scenario.seed, "steps-x", run.id)
    u_nan, u_inf, u_overflow, z_warm = xr.random(n), xr.random(n), xr.random(n), xr.standard_normal(n)

    fr = SimpleNamespace(scenario=scenario, t=t, u_nan=u_nan, nan=np.zeros(n, dtype=bool),
                         overflow_p=np.zeros(n), scale_reset=np.zeros(n, dtype=bool),
                         progress=np.ones(n),  # share of a step's update that moves the model along its curve
                         loss_mult=np.ones(n), grad_mult=np.ones(n))
    for f, act in effects_with(tl.faults, "series"):
        act(fr, f)
    nan, overflow_p, progress = fr.nan, fr.overflow_p, fr.progress
    loss_mult, grad_mult, scale_reset = fr.loss_mult, fr.grad_mult, fr.scale_reset

    loss_scale = None
    skipped = np.zeros(n, dtype=bool)
    if run.precision == "fp16":
        loss_scale, skipped = loss_scale_series(overflow_p, scale_reset, u_overflow, run.ordinary_noise)
    applied = progress * ~(nan | skipped)  # NaN and overflow steps skip the optimizer update
    # a restarted attempt resumes the model from its checkpoint: its curve goes on from there
    k_eff = np.cumsum(applied) + float(tl.resumed_from or 0)

    curve = run.loss
    base = curve.floor + (curve.initial - curve.floor) * (1.0 + k_eff / curve.s0) ** (-curve.decay)
    sched = run.learning_rate
    if sched.drop_at_step is not None:
        # A step LR decay anneals: the loss settles a little lower over a few hundred steps.
        since = np.maximum(k - sched.drop_at_step, 0.0)
        settle = LR_DROP_DEPTH * (1 - sched.drop_factor) * (1 - np.exp(-since / LR_DROP_STEPS))
        base = curve.floor + (base - curve.floor) * (1 - settle)
    warm = np.zeros(n)
    if run.ordinary_noise and sched.warmup_steps > 0:
        warm = np.clip(1 - k / sched.warmup_steps, 0.0, 1.0)
    return {
        "base": base * loss_mult,
        "noise_scale": 1 + 2 * warm,  # losses and grad norms are noisier early in warm-up
        "grad_mult": grad_mult * (1 + 1.0 * warm) * np.exp(0.25 * warm * z_warm),
        "nan": nan,
        "inf": nan & (u_inf < INF_SHARE),
        "nan_total": np.cumsum(nan),
        "skipped": skipped,
        "skipped_total": np.cumsum(skipped),
        "loss_scale": loss_scale,
    }


def loss_scale_series(overflow_p, reset, u, noisy: bool):
    """Dynamic loss scaling: halve on overflow (the step is skipped), double after
    ``SCALE_GROWTH_INTERVAL`` clean steps, never above the initial scale."""
    n = len(u)
    out = np.empty(n)
    skipped = np.zeros(n, dtype=bool)
    scale, good = LOSS_SCALE, 0
    p_list, u_list, reset_list = overflow_p.tolist(), u.tolist(), reset.tolist()
    for i in range(n):
        if reset_list[i]:
            scale, good = LOSS_SCALE, 0
        p = p_list[i]
        if noisy and scale >= LOSS_SCALE:
            p = max(p, HEALTHY_OVERFLOW_P)
        if u_list[i] < p:
            skipped[i] = True
            scale, good = max(scale / 2, SCALE_MIN), 0
        else:
            good += 1
            if good >= SCALE_GROWTH_INTERVAL and scale < LOSS_SCALE:
                scale, good = scale * 2, 0
        out[i] = scale
    return out, skipped


def step_lines(scenario: Scenario, tl: Timeline, rank: int, series: dict):
    """One rank's step records: the shared series plus its own noise, timings and memory."""
    run = tl.run
    n = len(tl.steps)
    k = tl.steps.astype(float)
    rng_run = stream(scenario.seed, "steps", run.id)  # shared by all ranks (post-all-reduce values)
    rng = stream(scenario.seed, "steps", run.id, rank)
    xr = stream(scenario.seed, "steps-x", run.id, rank)
    step_time = secs(run.step_time)

    curve = run.loss
    loss = series["base"] * np.exp(curve.noise * series["noise_scale"] * rng.standard_normal(n))
    grad_norm = (0.25 + 1.75 * (1.0 + k / 500.0) ** -0.5) * rng_run.lognormal(0.0, 0.15, n)
    grad_norm = grad_norm * series["grad_mult"]
    if run.ordinary_noise:  # the local (pre-all-reduce) norm differs a little between ranks
        grad_norm = grad_norm * xr.lognormal(0.0, 0.03, n)
    fr = SimpleNamespace(scenario=scenario, t=tl.step_wall, grad_norm=grad_norm)
    for f, act in effects_with(tl.faults, "rank_steps"):
        act(fr, f, rank)
    grad_norm = fr.grad_norm
    loss = np.where(series["nan"], np.where(series["inf"], np.inf, np.nan), loss)
    grad_norm = np.where(series["nan"], np.nan, grad_norm)
    lr = learning_rate(run, k)

    step_s = np.round(tl.rank_end[rank] - tl.rank_start[rank], 6)
    data_s = np.minimum(np.round(step_time * rng.uniform(0.004, 0.02, n) + tl.extra_data, 6), step_s)
    compute_s = np.round(step_time * COMPUTE_SHARE * rng.lognormal(0.0, 0.01, n)
                         + tl.extra_compute.get(rank, 0.0), 6)
    compute_s = np.minimum(compute_s, step_s - data_s)
    collective_s = np.maximum(step_s - data_s - compute_s, 0.0)

    reserved0 = int(tl.reserved[rank])
    allocated = (reserved0 * rng.uniform(0.86, 0.92)
                 + rng.normal(0.0, 50e6, n)).astype(np.int64)
    allocated = np.minimum(allocated, reserved0)
    inactive = ((reserved0 - allocated) * rng.uniform(0.1, 0.4, n)).astype(np.int64)
    growth = reserved_growth(scenario, tl.faults, tl.step_wall) * rank_factor(rank)
    retries = np.zeros(n, dtype=np.int64)
    reserved: object = reserved0
    if growth.any():
        # Fragmentation: the cache holds ever more freed-but-unusable blocks, so the allocator
        # reserves more, and it has to free and retry (cudaMalloc retries) ever more often.
        grown = np.minimum(reserved0 + (growth // 2_097_152) * 2_097_152,
                           reserve_cap(scenario, run.gpus[rank][0])).astype(np.int64)
        reserved = enc_ints(grown)
        inactive = inactive + (0.8 * (grown - reserved0)).astype(np.int64)
        level = growth / FRAG_BYTES
        retries = np.cumsum(xr.random(n) < np.minimum(1.0, 0.6 * level**2))

    host, gpu_index = run.gpus[rank]
    abs_ms = epoch_ms(scenario.start) + to_ms(tl.rank_end[rank]) + host_clock_ms(scenario, host, tl.rank_end[rank])
    every = run.log_every_steps
    if every > 1:  # the record shows the mean time per step since the last one (Megatron's elapsed time per iteration)
        step_s, data_s, compute_s, collective_s = (_interval_mean(x, tl.steps, every)
                                                   for x in (step_s, data_s, compute_s, collective_s))
    loss_scale = series["loss_scale"]
    skipped = series["skipped"]
    grad_enc = enc_floats(grad_norm, 5, skipped)  # an overflowed step has no usable norm
    varying = {
        "time": enc_times(iso_array(0, abs_ms)),
        "step": enc_ints(tl.steps),
        "loss": enc_floats(loss, 5),
        "grad_norm": grad_enc,
        "learning_rate": enc_floats(lr, 10),
        "step_seconds": enc_floats(step_s, 6),
        "data_seconds": enc_floats(data_s, 6),
        "compute_seconds": enc_floats(compute_s, 6),
        "collective_seconds": enc_floats(collective_s, 6),
        "memory_allocated_bytes": enc_ints(allocated),
        "memory_inactive_split_bytes": enc_ints(inactive),
        "alloc_retries_total": enc_ints(retries),
        "nan_iterations_total": enc_ints(series["nan_total"]),
        "skipped_iterations_total": enc_ints(series["skipped_total"]),
    }
    if isinstance(reserved, list):
        varying["memory_reserved_bytes"] = reserved
        reserved = None
    if loss_scale is not None and (loss_scale != LOSS_SCALE).any():
        varying["loss_scale"] = enc_floats(loss_scale, 1)
        const_scale = None
    else:
        const_scale = LOSS_SCALE if run.precision == "fp16" else NULL
    fields = [
        ("time", None), ("run_id", run.id), ("rank", rank), ("world_size", run.ranks),
        ("host", host_name(host)), ("gpu_index", gpu_index), ("step", None), ("loss", None),
        ("grad_norm", None), ("learning_rate", None), ("loss_scale", const_scale),
        ("tokens", run.tokens_per_step), ("step_seconds", None), ("data_seconds", None),
        ("compute_seconds", None), ("collective_seconds", None), ("memory_allocated_bytes", None),
        ("memory_reserved_bytes", reserved), ("memory_inactive_split_bytes", None),
        ("alloc_retries_total", None), ("ooms_total", 0), ("nan_iterations_total", None),
        ("skipped_iterations_total", None),
    ]
    extra_fields, extra_varying = badput_shapes.step_fields(run, step_s, enc_floats)
    fields += extra_fields
    varying.update(extra_varying)
    if every > 1:  # only every N-th step is logged
        keep = np.flatnonzero(tl.steps % every == 0)
        abs_ms = abs_ms[keep]
        varying = {key: [values[i] for i in keep.tolist()] for key, values in varying.items()}
    return abs_ms, json_lines(fields, varying)


def _interval_mean(x: np.ndarray, steps: np.ndarray, every: int) -> np.ndarray:
    """At each step, the mean of ``x`` over the steps since the previous multiple of ``every``."""
    total = np.concatenate([[0.0], np.cumsum(x)])
    i = np.arange(len(x))
    since = np.minimum((steps - 1) % every + 1, i + 1)  # a restart's first window may be short
    return np.round((total[i + 1] - total[i + 1 - since]) / since, 6)


def learning_rate(run: Run, k: np.ndarray) -> np.ndarray:
    """Linear warmup, then cosine to ``peak * min_ratio`` over the planned number of steps,
    times ``drop_factor`` from ``drop_at_step`` on."""
    sched = run.learning_rate
    planned = max(int(secs(run.duration) / secs(run.step_time)), sched.warmup_steps + 1)
    warm = sched.peak * k / max(sched.warmup_steps, 1)
    progress = np.clip((k - sched.warmup_steps) / (planned - sched.warmup_steps), 0.0, 1.0)
    floor = sched.peak * sched.min_ratio
    cosine = floor + 0.5 * (sched.peak - floor) * (1.0 + np.cos(np.pi * progress))
    lr = np.where(k <= sched.warmup_steps, warm, cosine)
    if sched.drop_at_step is not None:
        lr = lr * np.where(k >= sched.drop_at_step, sched.drop_factor, 1.0)
    return lr

