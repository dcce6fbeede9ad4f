"""gpu_samples: one record per GPU per sample interval on each host, idle GPUs included, with the
fields of the node exporter. The GPU's state (idle, start-up, training, evaluation, checkpoint save,
hang) sets its physics; the GPU faults' registered effects act on the series afterwards."""

from __future__ import annotations

import hashlib
import json
import uuid
from types import SimpleNamespace

import numpy as np

from .common import epoch_ms, in_intervals, iso_array, ms_of, stream
from .encode import enc_bools, enc_floats, enc_ints, enc_strs, enc_times, interleave, json_lines
from .faults import effects_with
from .model import Scenario, host_name
from .physics import (
    BOOST_HZ,
    CHECKPOINT,
    CONTEXT_BYTES,
    EVAL,
    HANG,
    HANG_POWER_SHARE,
    IDLE,
    IDLE_HZ,
    IDLE_MEMORY_BYTES,
    STARTUP,
    THERMAL_TAU_S,
    TRAIN,
)
from .timeline import Timeline, host_clock_ms, rank_factor, reserve_cap, reserved_growth


class GpuFrame(SimpleNamespace):
    """One GPU's series while the fault effects act on them (``util``, ``power``, ``clock``,
    counters, ``lost`` samples...), with what the effects read (``state``, ``t``, ``scenario``)."""

    def update(self, **values) -> None:
        self.__dict__.update(values)


def gpu_sample_lines(scenario: Scenario, host: int, timelines: list[Timeline]):
    cluster = scenario.cluster
    gpu = cluster.gpu_of(host)
    name = host_name(host)
    interval_ms = ms_of(cluster.sample_interval)
    span_ms = ms_of(scenario.duration)
    # Each host's collector polls on its own phase.
    phase_ms = int(stream(scenario.seed, "host", name).integers(0, min(1000, interval_ms)))
    rel_ms = np.arange(phase_ms, span_ms, interval_ms, dtype=np.int64)
    t = rel_ms / 1000.0
    stamped_ms = rel_ms + host_clock_ms(scenario, host, t)  # what the host's own clock says
    n = len(t)
    dt = interval_ms / 1000.0
    run_index = {tl.run.id: i for i, tl in enumerate(timelines)}
    columns = [(gpu_uuid(name, g), _gpu_columns(scenario, host, g, t, dt, timelines, run_index))
               for g in range(cluster.gpus_per_host)]

    base_ms = epoch_ms(scenario.start)
    times = enc_times(iso_array(base_ms, stamped_ms))
    fields = [("time", None), ("host", name), ("gpu_index", None), ("gpu_uuid", None),
              ("gpu_name", gpu.name), ("run_id", None), ("utilization_ratio", None),
              ("memory_used_bytes", None), ("memory_total_bytes", gpu.memory_total_bytes),
              ("power_watts", None), ("power_limit_watts", None), ("temperature_celsius", None),
              ("sm_clock_hertz", None), ("throttle_reasons", None),
              ("ecc_corrected_errors_total", None), ("ecc_uncorrected_errors_total", None),
              ("xid_errors_total", None), ("last_xid", None), ("sm_active_ratio", None),
              ("tensor_active_ratio", None), ("remapped_rows_correctable_total", None),
              ("remapped_rows_uncorrectable_total", None), ("row_remap_pending", None),
              ("row_remap_failure", None)]
    gpus = len(columns)
    varying = {}
    for key, const in fields:
        if const is not None:
            continue
        if key == "time":
            varying[key] = [x for x in times for _ in range(gpus)]
        elif key == "gpu_index":
            varying[key] = [str(g) for _ in range(n) for g in range(gpus)]
        elif key == "gpu_uuid":
            uuids = [json.dumps(u) for u, _ in columns]
            varying[key] = uuids * n
        else:
            varying[key] = interleave([c[key] for _, c in columns])
    lines = json_lines(fields, varying)
    abs_ms = np.repeat(base_ms + stamped_ms, cluster.gpus_per_host)
    return _without_gaps(scenario, host, t, gpus, abs_ms, lines)


def _without_gaps(scenario: Scenario, host: int, t: np.ndarray, gpus: int, abs_ms: np.ndarray, lines: list[str]):
    """Drop the samples a ``telemetry`` effect (an exporter down) never wrote."""
    dropped = np.zeros((len(t), gpus), dtype=bool)
    for f, gap in effects_with(scenario.faults, "telemetry"):
        hit = gap(scenario, f, host, t)
        if hit is None:
            continue
        gpu_index, mask = hit
        if gpu_index is None:
            dropped |= mask[:, None]
        else:
            dropped[:, gpu_index] |= mask
    if not dropped.any():
        return abs_ms, lines
    keep = ~dropped.reshape(-1)
    return abs_ms[keep], [line for line, k in zip(lines, keep.tolist()) if k]


def _held_states(scenario: Scenario, host: int, g: int, t: np.ndarray, timelines: list[Timeline]):
    """Each sample's state and run index (-1: none), the training memory and the share of it
    allocated yet (start-up builds the model progressively), from the runs that hold the GPU."""
    n = len(t)
    state = np.full(n, IDLE, dtype=np.int8)
    run_of = np.full(n, -1)
    train_mem = np.zeros(n)
    startup_frac = np.ones(n)
    for ti, tl in enumerate(timelines):
        if (host, g) not in tl.run.gpus:
            continue
        rank = tl.run.gpus.index((host, g))
        held = (t >= tl.start) & (t < tl.end)
        state[held] = TRAIN
        state[held & (t < tl.first_step)] = STARTUP
        state[held & in_intervals(t, tl.evals)] = EVAL
        state[held & in_intervals(t, tl.saves[:, 1:])] = CHECKPOINT
        state[held & in_intervals(t, tl.hangs)] = HANG
        run_of[held] = ti
        growth = reserved_growth(scenario, tl.faults, t[held]) * rank_factor(rank)
        train_mem[held] = (np.minimum(tl.reserved[rank] + growth, reserve_cap(scenario, host))
                           + CONTEXT_BYTES)
        # Memory is allocated progressively while the model is built.
        startup_frac[held] = np.clip((t[held] - tl.start) / (tl.first_step - tl.start), 0, 1)
        if tl.failure is not None and tl.failure.rank == rank:
            # The dead rank's process is gone: its GPU is free from the moment it died.
            gone = held & (t >= tl.death)
            state[gone] = IDLE
            run_of[gone] = -1

    return state, run_of, train_mem, startup_frac


def _gpu_columns(scenario: Scenario, host: int, g: int, t: np.ndarray, dt: float, timelines: list[Timeline],
                 run_index: dict[str, int]) -> dict[str, list[str]]:
    """One GPU's encoded columns: the state's physics drawn for every sample (so the stream does
    not depend on the states), then the GPU faults' registered effects."""
    n = len(t)
    name = host_name(host)
    card = scenario.cluster.gpu_of(host)
    limit = card.power_limit_watts
    rng = stream(scenario.seed, "gpu", name, g)
    state, run_of, train_mem, startup_frac = _held_states(scenario, host, g, t, timelines)
    gpu_faults = [f for f in scenario.faults if f.gpu == (host, g)]
    fr = GpuFrame(scenario=scenario, host=host, t=t, n=n, state=state, run_of=run_of, timelines=timelines,
                  run_index=run_index, limit=limit, memory_total=card.memory_total_bytes)
    for f, set_state in effects_with(gpu_faults, "gpu_state"):
        set_state(fr, f)

    # Draw every series for every sample so the stream does not depend on the states.
    def u(lo: float, hi: float, rng=rng, n=n) -> np.ndarray:
        return rng.uniform(lo, hi, n)

    def z(mu: float, sd: float, rng=rng, n=n) -> np.ndarray:
        return rng.normal(mu, sd, n)

    idle_power = rng.uniform(62.0, 72.0) + z(0.0, 1.0)
    by_state = [state == s for s in (IDLE, STARTUP, TRAIN, CHECKPOINT, HANG)]
    util = np.select(by_state, [0.0, u(0.05, 0.2), np.clip(z(0.962, 0.012), 0.93, 0.995),
                                u(0.0, 0.1), u(0.97, 1.0)])
    power = np.select(by_state, [np.clip(idle_power, 60.0, 75.0), limit * u(0.18, 0.25),
                                 limit * np.clip(z(0.75, 0.02), 0.70, 0.80),
                                 limit * u(0.14, 0.20), limit * u(*HANG_POWER_SHARE)])
    sm = np.select(by_state, [0.0, u(0.03, 0.12), np.clip(z(0.80, 0.02), 0.7, 0.9),
                              u(0.0, 0.06), np.clip(z(0.90, 0.015), 0.85, 0.95)])
    tensor = np.select(by_state, [0.0, u(0.0, 0.03), np.clip(z(0.45, 0.02), 0.38, 0.52),
                                  u(0.0, 0.01), u(0.0, 0.02)])
    boost = rng.choice(BOOST_HZ, size=n, p=[0.9, 0.07, 0.03])
    clock = np.where(state == IDLE, IDLE_HZ, boost)
    idle_mem = IDLE_MEMORY_BYTES + int(rng.integers(0, 64)) * 1_048_576
    mem_noise = rng.integers(0, 8, n) * 2_097_152  # allocator churn, 2 MiB pages
    memory = np.where(state == IDLE, idle_mem,
                      idle_mem + startup_frac * (train_mem - idle_mem) + mem_noise)
    ambient, gain = rng.uniform(27.0, 29.0), rng.uniform(44.0, 48.0)

    # States and faults added later draw from a second stream.
    xr = stream(scenario.seed, "gpu-x", name, g)
    ev = state == EVAL  # evaluation: forward passes only, GPUs busy but lighter
    util = np.where(ev, xr.uniform(0.70, 0.90, n), util)
    power = np.where(ev, limit * xr.uniform(0.55, 0.65, n), power)
    sm = np.where(ev, xr.uniform(0.55, 0.70, n), sm)
    tensor = np.where(ev, xr.uniform(0.20, 0.30, n), tensor)
    idle_like = xr.uniform(0.5, 1.5, n)
    fr.update(xr=xr, util=util, power=power, sm=sm, tensor=tensor, boost=boost, clock=clock, memory=memory,
              idle_power=idle_power, idle_mem=idle_mem, mem_noise=mem_noise, idle_like=idle_like,
              power_limit=np.full(n, float(limit)), throttle=np.zeros(n, dtype=np.int64),
              ecc_c=np.zeros(n, dtype=np.int64), ecc_u=np.zeros(n, dtype=np.int64),
              xid_total=np.zeros(n, dtype=np.int64), last_xid=np.zeros(n, dtype=np.int64),  # 0: none yet
              remap_c=np.zeros(n, dtype=np.int64), remap_u=np.zeros(n, dtype=np.int64),
              remap_pending=np.zeros(n, dtype=bool), remap_failure=np.zeros(n, dtype=bool),
              lost=np.zeros(n, dtype=bool))
    for f, act in effects_with(gpu_faults, "gpu"):
        act(fr, f)

    target = ambient + gain * fr.power / (0.75 * limit)
    fr.temp = temperature(target, dt) + z(0.0, 0.2)
    for f, act in effects_with(scenario.faults, "run_gpu"):  # faults of the run this GPU serves
        held = f.run_id is not None and (host, g) in scenario.run(f.run_id).gpus
        if held:
            act(fr, f, scenario.run(f.run_id).gpus.index((host, g)))
    for f, heat in effects_with(gpu_faults, "gpu_temperature"):
        heat(fr, f)
    lost = fr.lost

    col = {
        "run_id": enc_strs([timelines[i].run.id if i >= 0 else None for i in run_of]),
        "utilization_ratio": enc_floats(fr.util, 4, lost),
        "memory_used_bytes": enc_ints(fr.memory.astype(np.int64), lost),
        "power_watts": enc_floats(fr.power, 2, lost),
        "power_limit_watts": enc_floats(fr.power_limit, 2, lost),
        "temperature_celsius": enc_floats(fr.temp, 1, lost),
        "sm_clock_hertz": enc_ints(fr.clock.astype(np.int64), lost),
        "throttle_reasons": enc_ints(fr.throttle, lost),
        "ecc_corrected_errors_total": enc_ints(fr.ecc_c),
        "ecc_uncorrected_errors_total": enc_ints(fr.ecc_u),
        "xid_errors_total": enc_ints(fr.xid_total),
        "last_xid": enc_ints(fr.last_xid, fr.last_xid == 0),
        "sm_active_ratio": enc_floats(fr.sm, 4, lost),
        "tensor_active_ratio": enc_floats(fr.tensor, 4, lost),
        "remapped_rows_correctable_total": enc_ints(fr.remap_c),
        "remapped_rows_uncorrectable_total": enc_ints(fr.remap_u),
        "row_remap_pending": enc_bools(fr.remap_pending),
        "row_remap_failure": enc_bools(fr.remap_failure),
    }
    if lost.any():  # fallen off the bus: no process can hold it
        col["run_id"] = [("null" if x else v) for x, v in zip(lost.tolist(), col["run_id"])]
    return col



def temperature(target: np.ndarray, dt: float) -> np.ndarray:
    """First-order thermal lag toward a power-dependent equilibrium temperature."""
    alpha = 1.0 - np.exp(-dt / THERMAL_TAU_S)
    out = np.empty_like(target)
    temp = target[0]  # the span starts at equilibrium
    for i, goal in enumerate(target.tolist()):
        temp += alpha * (goal - temp)
        out[i] = temp
    return out


def gpu_uuid(host: str, gpu_index: int) -> str:
    digest = hashlib.sha256(f"goodput-simulator/{host}/{gpu_index}".encode()).digest()
    return "GPU-" + str(uuid.UUID(bytes=digest[:16]))

