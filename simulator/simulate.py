"""Deterministic simulator of a GPU training cluster's raw zone.

``simulate(scenario, out_dir)`` writes what the real collectors would write
for the scenario's time span, plus the faults it injected:

* ``raw/gpu_samples/<YYYY-MM-DD>/<HH>/<host>.jsonl`` - one record per GPU per
  sample interval, idle GPUs included (the node exporter on each host);
* ``raw/training_steps/<YYYY-MM-DD>/<HH>/<run>.rank-<r>.jsonl`` - one record
  per rank per completed step (the training-side client in each rank);
* ``raw/lineage/<YYYY-MM-DD>/<HH>/<run>.jsonl`` - run_started,
  checkpoint_saved and run_ended events (the run's launcher);
* ``ground_truth.jsonl`` - one line per injected fault.

The hour bucket is the UTC hour of each record's ``time``. Output depends only
on the scenario: every random draw comes from a generator seeded with
(seed, entity label), floats are rounded to fixed decimals and nothing reads
the wall clock, so the same scenario gives byte-identical files.

How a run is modelled: steps are generated in *progress time* (seconds of
useful work since the run started: startup, steps, checkpoint pauses) and
then mapped to wall time by inserting each hang's duration at its onset.
That makes a hang stop step records exactly at its onset, resume with the
next step number afterwards and push the run's end later by its duration.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from .scenario import FAULT_TYPES, Run, Scenario, host_name

__all__ = ["simulate", "SOURCES"]

SOURCES = ("gpu_samples", "training_steps", "lineage")
_MS_PER_HOUR = 3_600_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_MS = timedelta(milliseconds=1)

# Fault types with an effect implemented below; keep in step with FAULT_TYPES.
_IMPLEMENTED_FAULTS = {"hang"}
assert _IMPLEMENTED_FAULTS == set(FAULT_TYPES), "a fault type has no simulated effect"

# GPU states, in override order (a hang wins over a checkpoint save, etc.).
IDLE, STARTUP, TRAIN, CHECKPOINT, HANG = range(5)

# Physics constants (see docs/scenario.md, "What the simulator models").
_STEP_SIGMA = 0.04  # lognormal sigma of step time
_SLOW_STEP_P = 0.005  # share of straggler steps ...
_SLOW_STEP_FACTOR = (1.5, 3.0)  # ... and how much slower they are
_RANK_SKEW_S = 0.005  # ranks finish a synchronous step within a few ms
_STARTUP_S = (60.0, 180.0)  # run_started -> first step begins
_SAVE_S = (20.0, 60.0)  # checkpoint save pause
_CONTEXT_BYTES = 550_000_000  # CUDA context etc. on top of the allocator's reservation
_IDLE_MEMORY_BYTES = 536_870_912
_BOOST_HZ = np.array([1_980_000_000, 1_965_000_000, 1_950_000_000])
_IDLE_HZ = 345_000_000
_THERMAL_TAU_S = 90.0
_LOSS_SCALE = 65536.0


def simulate(scenario: Scenario, out_dir: str | Path) -> dict:
    """Write the raw zone and ground truth for ``scenario`` under ``out_dir``.

    Replaces ``out_dir/raw/{gpu_samples,training_steps,lineage}`` and
    ``out_dir/ground_truth.jsonl`` if present; leaves anything else alone.
    Returns ``{"files", "rows": {source: n}, "faults", "start", "end"}``
    where ``files`` counts the raw-zone files written.
    """
    out = Path(out_dir)
    writer = _Writer(out)
    writer.reset()

    timelines = [_build_timeline(scenario, run) for run in scenario.runs]
    for host in range(scenario.cluster.hosts):
        writer.write("gpu_samples", host_name(host), *_gpu_sample_lines(scenario, host, timelines))
    for tl in timelines:
        for rank in range(tl.run.ranks):
            writer.write("training_steps", f"{tl.run.id}.rank-{rank}", *_step_lines(scenario, tl, rank))
        writer.write("lineage", tl.run.id, *_lineage_lines(scenario, tl))

    truth = sorted(scenario.faults, key=lambda f: (f.onset, f.target, f.type))
    with open(out / "ground_truth.jsonl", "w", encoding="utf-8", newline="\n") as fh:
        for f in truth:
            fh.write(_dumps({
                "type": f.type,
                "entity": f.target,
                "onset": _iso(_ms(f.onset)),
                "end": _iso(_ms(min(f.end, scenario.end))),
                "magnitude": f.magnitude,
            }) + "\n")

    return {
        "files": writer.files,
        "rows": {source: writer.rows[source] for source in SOURCES},
        "faults": len(truth),
        "start": _iso(_ms(scenario.start)),
        "end": _iso(_ms(scenario.end)),
    }


# --------------------------------------------------------------------------- #
# Run timelines
# --------------------------------------------------------------------------- #


@dataclass
class _Timeline:
    """One run laid out in wall time; times are seconds since the scenario start."""

    run: Run
    start: float
    end: float  # when the GPUs are released, clipped to the span
    ended: bool  # run_ended falls inside the span
    first_step: float  # end of startup
    steps: np.ndarray  # (n,) step numbers 1..n that complete inside the span
    rank_start: np.ndarray  # (ranks, n) wall time each rank began each step
    rank_end: np.ndarray  # (ranks, n) wall time each rank finished each step
    saves: np.ndarray  # (m, 3) step, save start, save end (checkpoint pauses)
    hangs: np.ndarray  # (h, 2) onset, end
    reserved: np.ndarray  # (ranks,) bytes held by the caching allocator


def _build_timeline(scenario: Scenario, run: Run) -> _Timeline:
    rng = _rng(scenario.seed, "run", run.id)
    span = _seconds(scenario.duration)
    offset = _seconds(run.start - scenario.start)
    budget = _seconds(run.duration)  # progress time the run gets
    step_time = _seconds(run.step_time)
    interval = run.checkpoint_interval_steps

    startup = rng.uniform(*_STARTUP_S)
    reserved = (scenario.cluster.gpu.memory_total_bytes
                * rng.uniform(0.80, 0.86, run.ranks)).astype(np.int64)

    # Draw more steps than can fit; grow (deterministically) in the unlikely case that is short.
    n_cap = int(budget / step_time * 1.25) + 16
    while True:
        dur = step_time * rng.lognormal(-0.5 * _STEP_SIGMA**2, _STEP_SIGMA, n_cap)
        slow = rng.random(n_cap) < _SLOW_STEP_P
        dur *= np.where(slow, rng.uniform(*_SLOW_STEP_FACTOR, n_cap), 1.0)
        numbers = np.arange(1, n_cap + 1)
        pause = np.where(numbers % interval == 0, rng.uniform(*_SAVE_S, n_cap), 0.0)
        skew = rng.uniform(0.0, _RANK_SKEW_S, (run.ranks, n_cap))
        gap = dur + pause
        end_p = startup + np.cumsum(gap) - pause  # progress time step k ends (before rank skew)
        rank_end_p = end_p + skew
        if rank_end_p[:, -1].max() > budget:
            break
        n_cap *= 2

    # Steps whose every rank finishes within the run's budget.
    n = int(np.searchsorted(rank_end_p.max(axis=0), budget, side="right"))
    end_p, pause, rank_end_p = end_p[:n], pause[:n], rank_end_p[:, :n]
    # Each rank starts a step when its previous one (and any checkpoint pause) is done.
    rank_start_p = np.concatenate(
        [np.full((run.ranks, 1), startup), rank_end_p[:, :-1] + pause[:-1]], axis=1)[:, :n]

    # Progress -> wall: every hang inserts its duration at its onset (in progress time).
    hangs = sorted((f for f in scenario.faults if f.type == "hang" and f.target == f"run:{run.id}"),
                   key=lambda f: f.onset)
    hang_on = np.array([_seconds(f.onset - run.start) for f in hangs])
    hang_len = np.array([_seconds(f.duration) for f in hangs])
    hang_on_p = hang_on - np.concatenate([[0.0], np.cumsum(hang_len)[:-1]])
    shift = np.concatenate([[0.0], np.cumsum(hang_len)])

    def wall(p: np.ndarray) -> np.ndarray:
        # side="right": progress exactly at an onset is already stalled, so no step
        # record can carry the onset timestamp itself.
        return offset + p + shift[np.searchsorted(hang_on_p, p, side="right")]

    rank_end = wall(rank_end_p)
    rank_start = wall(rank_start_p)
    is_save = (pause > 0) & (end_p + pause <= budget)
    saves = np.column_stack([np.flatnonzero(is_save) + 1.0, wall(end_p[is_save]),
                             wall(end_p[is_save] + pause[is_save])])
    end = float(wall(np.array([budget]))[0])

    # Clip to the span: records at or after its end belong to the next window.
    keep = int(np.searchsorted(rank_end.max(axis=0), span, side="left"))
    return _Timeline(
        run=run,
        start=offset,
        end=min(end, span),
        ended=end < span,
        first_step=float(wall(np.array([startup]))[0]),
        steps=np.arange(1, keep + 1),
        rank_start=rank_start[:, :keep],
        rank_end=rank_end[:, :keep],
        saves=saves[saves[:, 2] < span],
        hangs=np.column_stack([offset + hang_on, offset + hang_on + hang_len]).reshape(-1, 2),
        reserved=reserved,
    )


def _in_intervals(t: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """Mask of ``t`` inside any [start, end) of sorted, non-overlapping ``intervals``."""
    if len(intervals) == 0:
        return np.zeros(t.shape, dtype=bool)
    i = np.searchsorted(intervals[:, 0], t, side="right") - 1
    return (i >= 0) & (t < intervals[np.maximum(i, 0), 1])


# --------------------------------------------------------------------------- #
# gpu_samples
# --------------------------------------------------------------------------- #


def _gpu_sample_lines(scenario: Scenario, host: int, timelines: list[_Timeline]):
    cluster = scenario.cluster
    gpu = cluster.gpu
    limit = gpu.power_limit_watts
    name = host_name(host)
    interval_ms = _ms_of(cluster.sample_interval)
    span_ms = _ms_of(scenario.duration)
    # Each host's collector polls on its own phase.
    phase_ms = int(_rng(scenario.seed, "host", name).integers(0, min(1000, interval_ms)))
    rel_ms = np.arange(phase_ms, span_ms, interval_ms, dtype=np.int64)
    t = rel_ms / 1000.0
    n = len(t)
    dt = interval_ms / 1000.0

    columns = []
    for g in range(cluster.gpus_per_host):
        rng = _rng(scenario.seed, "gpu", name, g)
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
            state[held & _in_intervals(t, tl.saves[:, 1:])] = CHECKPOINT
            state[held & _in_intervals(t, tl.hangs)] = HANG
            run_of[held] = ti
            train_mem[held] = tl.reserved[rank] + _CONTEXT_BYTES
            # Memory is allocated progressively while the model is built.
            startup_frac[held] = np.clip((t[held] - tl.start) / (tl.first_step - tl.start), 0, 1)

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
                                     limit * u(0.14, 0.20), limit * u(0.35, 0.45)])
        sm = np.select(by_state, [0.0, u(0.03, 0.12), np.clip(z(0.80, 0.02), 0.7, 0.9),
                                  u(0.0, 0.06), np.clip(z(0.90, 0.015), 0.85, 0.95)])
        tensor = np.select(by_state, [0.0, u(0.0, 0.03), np.clip(z(0.45, 0.02), 0.38, 0.52),
                                      u(0.0, 0.01), u(0.0, 0.02)])
        boost = rng.choice(_BOOST_HZ, size=n, p=[0.9, 0.07, 0.03])
        clock = np.where(state == IDLE, _IDLE_HZ, boost)
        idle_mem = _IDLE_MEMORY_BYTES + int(rng.integers(0, 64)) * 1_048_576
        mem_noise = rng.integers(0, 8, n) * 2_097_152  # allocator churn, 2 MiB pages
        memory = np.where(state == IDLE, idle_mem,
                          idle_mem + startup_frac * (train_mem - idle_mem) + mem_noise)
        temp = _temperature(power, limit, dt, ambient=rng.uniform(27.0, 29.0),
                            gain=rng.uniform(44.0, 48.0)) + z(0.0, 0.2)

        columns.append({
            "run_id": [timelines[i].run.id if i >= 0 else None for i in run_of],
            "util": _floats(util, 4),
            "mem": memory.astype(np.int64).tolist(),
            "power": _floats(power, 2),
            "temp": _floats(temp, 1),
            "clock": clock.astype(np.int64).tolist(),
            "sm": _floats(sm, 4),
            "tensor": _floats(tensor, 4),
            "uuid": _gpu_uuid(name, g),
        })

    base_ms = _ms(scenario.start)
    times = _iso_array(base_ms, rel_ms)
    lines = []
    for i in range(n):
        for g, c in enumerate(columns):
            lines.append(_dumps({
                "time": times[i],
                "host": name,
                "gpu_index": g,
                "gpu_uuid": c["uuid"],
                "gpu_name": gpu.name,
                "run_id": c["run_id"][i],
                "utilization_ratio": c["util"][i],
                "memory_used_bytes": c["mem"][i],
                "memory_total_bytes": gpu.memory_total_bytes,
                "power_watts": c["power"][i],
                "power_limit_watts": float(limit),
                "temperature_celsius": c["temp"][i],
                "sm_clock_hertz": c["clock"][i],
                "throttle_reasons": 0,
                "ecc_corrected_errors_total": 0,
                "ecc_uncorrected_errors_total": 0,
                "xid_errors_total": 0,
                "last_xid": None,
                "sm_active_ratio": c["sm"][i],
                "tensor_active_ratio": c["tensor"][i],
            }))
    abs_ms = np.repeat(base_ms + rel_ms, cluster.gpus_per_host)
    return abs_ms, lines


def _temperature(power: np.ndarray, limit: float, dt: float, ambient: float, gain: float) -> np.ndarray:
    """First-order thermal lag toward a power-dependent equilibrium temperature."""
    target = ambient + gain * power / (0.75 * limit)
    alpha = 1.0 - np.exp(-dt / _THERMAL_TAU_S)
    out = np.empty_like(target)
    temp = target[0]  # the span starts at equilibrium
    for i, goal in enumerate(target.tolist()):
        temp += alpha * (goal - temp)
        out[i] = temp
    return out


def _gpu_uuid(host: str, gpu_index: int) -> str:
    digest = hashlib.sha256(f"goodput-simulator/{host}/{gpu_index}".encode()).digest()
    return "GPU-" + str(uuid.UUID(bytes=digest[:16]))


# --------------------------------------------------------------------------- #
# training_steps
# --------------------------------------------------------------------------- #


def _step_lines(scenario: Scenario, tl: _Timeline, rank: int):
    run = tl.run
    n = len(tl.steps)
    k = tl.steps.astype(float)
    rng_run = _rng(scenario.seed, "steps", run.id)  # shared by all ranks (post-all-reduce values)
    rng = _rng(scenario.seed, "steps", run.id, rank)
    step_time = _seconds(run.step_time)

    curve = run.loss
    base = curve.floor + (curve.initial - curve.floor) * (1.0 + k / curve.s0) ** (-curve.decay)
    loss = base * np.exp(curve.noise * rng.standard_normal(n))  # local micro-batch noise
    grad_norm = (0.25 + 1.75 * (1.0 + k / 500.0) ** -0.5) * rng_run.lognormal(0.0, 0.15, n)
    lr = _learning_rate(run, k)

    step_s = np.round(tl.rank_end[rank] - tl.rank_start[rank], 6)
    data_s = np.minimum(np.round(step_time * rng.uniform(0.004, 0.02, n), 6), step_s)
    compute_s = np.round(step_time * 0.8 * rng.lognormal(0.0, 0.01, n), 6)
    compute_s = np.minimum(compute_s, step_s - data_s)
    collective_s = np.maximum(step_s - data_s - compute_s, 0.0)

    reserved = int(tl.reserved[rank])
    allocated = (reserved * rng.uniform(0.86, 0.92)
                 + rng.normal(0.0, 50e6, n)).astype(np.int64)
    allocated = np.minimum(allocated, reserved)
    inactive = ((reserved - allocated) * rng.uniform(0.1, 0.4, n)).astype(np.int64)

    host, gpu_index = run.gpus[rank]
    abs_ms = _ms(scenario.start) + _to_ms(tl.rank_end[rank])
    times = _iso_array(0, abs_ms)
    cols = {
        "step": tl.steps.tolist(),
        "loss": _floats(loss, 5),
        "grad_norm": _floats(grad_norm, 5),
        "lr": _floats(lr, 10),
        "step_s": _floats(step_s, 6),
        "data_s": _floats(data_s, 6),
        "compute_s": _floats(compute_s, 6),
        "collective_s": _floats(collective_s, 6),
        "allocated": allocated.tolist(),
        "inactive": inactive.tolist(),
    }
    loss_scale = _LOSS_SCALE if run.precision == "fp16" else None
    hostname = host_name(host)
    lines = [
        _dumps({
            "time": times[i],
            "run_id": run.id,
            "rank": rank,
            "world_size": run.ranks,
            "host": hostname,
            "gpu_index": gpu_index,
            "step": cols["step"][i],
            "loss": cols["loss"][i],
            "grad_norm": cols["grad_norm"][i],
            "learning_rate": cols["lr"][i],
            "loss_scale": loss_scale,
            "tokens": run.tokens_per_step,
            "step_seconds": cols["step_s"][i],
            "data_seconds": cols["data_s"][i],
            "compute_seconds": cols["compute_s"][i],
            "collective_seconds": cols["collective_s"][i],
            "memory_allocated_bytes": cols["allocated"][i],
            "memory_reserved_bytes": reserved,
            "memory_inactive_split_bytes": cols["inactive"][i],
            "alloc_retries_total": 0,
            "ooms_total": 0,
        })
        for i in range(n)
    ]
    return abs_ms, lines


def _learning_rate(run: Run, k: np.ndarray) -> np.ndarray:
    """Linear warmup, then cosine to ``peak * min_ratio`` over the planned number of steps."""
    sched = run.learning_rate
    planned = max(int(_seconds(run.duration) / _seconds(run.step_time)), sched.warmup_steps + 1)
    warm = sched.peak * k / max(sched.warmup_steps, 1)
    progress = np.clip((k - sched.warmup_steps) / (planned - sched.warmup_steps), 0.0, 1.0)
    floor = sched.peak * sched.min_ratio
    cosine = floor + 0.5 * (sched.peak - floor) * (1.0 + np.cos(np.pi * progress))
    return np.where(k <= sched.warmup_steps, warm, cosine)


# --------------------------------------------------------------------------- #
# lineage
# --------------------------------------------------------------------------- #


def _lineage_lines(scenario: Scenario, tl: _Timeline):
    run = tl.run
    events: list[tuple[float, dict]] = []
    hosts = [host_name(h) for h in run.hosts if any(g[0] == h for g in run.gpus)]
    events.append((tl.start, {
        "event": "run_started",
        "run_id": run.id,
        "job": run.job,
        "git_sha": _hex(f"git/{scenario.name}/{run.job}", 40),
        "config_hash": _hex(json.dumps(_run_config(run), sort_keys=True), 64),
        "dataset": run.dataset,
        "world_size": run.ranks,
        "hosts": hosts,
        "gpus": [f"{host_name(h)}:{g}" for h, g in run.gpus],
    }))
    shard_model = run.checkpoint_bytes // 7 // run.ranks  # bf16 weights ...
    shard_optim = run.checkpoint_bytes * 6 // 7 // run.ranks  # ... and fp32 Adam state
    for step, _save_start, save_end in tl.saves.tolist():
        step = int(step)
        path = f"/checkpoints/{run.id}/step-{step:06d}"
        files = []
        for r in range(run.ranks):
            files.append((f"model_rank{r:03d}.pt", shard_model))
            files.append((f"optim_rank{r:03d}.pt", shard_optim))
        files.append(("metadata.json", 4096 + len(str(step))))
        manifest = [{"path": f, "bytes": b, "sha256": _hex(f"{scenario.seed}/{path}/{f}", 64)}
                    for f, b in files]
        events.append((save_end, {
            "event": "checkpoint_saved",
            "run_id": run.id,
            "step": step,
            "checkpoint_path": path,
            "checkpoint_bytes": sum(b for _, b in files),
            "manifest": {"files": manifest},
        }))
    if tl.ended:
        events.append((tl.end, {"event": "run_ended", "run_id": run.id, "status": "completed"}))

    events.sort(key=lambda e: e[0])  # stable: ties keep the order above
    abs_ms = _ms(scenario.start) + _to_ms(np.array([e[0] for e in events]))
    times = _iso_array(0, abs_ms)
    lines = [_dumps({"time": times[i], **body}) for i, (_, body) in enumerate(events)]
    return abs_ms, lines


def _run_config(run: Run) -> dict:
    return {
        "job": run.job, "dataset": run.dataset, "world_size": run.ranks,
        "precision": run.precision, "tokens_per_step": run.tokens_per_step,
        "checkpoint_interval_steps": run.checkpoint_interval_steps,
        "learning_rate": [run.learning_rate.peak, run.learning_rate.warmup_steps,
                          run.learning_rate.min_ratio],
    }


# --------------------------------------------------------------------------- #
# Writing
# --------------------------------------------------------------------------- #


class _Writer:
    """Splits each producer's time-sorted stream into hourly files under raw/."""

    def __init__(self, out: Path):
        self.out = out
        self.raw = out / "raw"
        self.files = 0
        self.rows = {s: 0 for s in SOURCES}

    def reset(self) -> None:
        # Only the simulator's own outputs: stale hours from an earlier run would
        # otherwise survive next to the new ones.
        for source in SOURCES:
            shutil.rmtree(self.raw / source, ignore_errors=True)
        (self.out / "ground_truth.jsonl").unlink(missing_ok=True)
        self.out.mkdir(parents=True, exist_ok=True)

    def write(self, source: str, producer: str, abs_ms: np.ndarray, lines: list[str]) -> None:
        if not lines:
            return
        order = np.argsort(abs_ms, kind="stable")
        abs_ms = np.asarray(abs_ms)[order]
        lines = [lines[i] for i in order.tolist()]
        hours = abs_ms // _MS_PER_HOUR
        cuts = np.concatenate([[0], np.flatnonzero(np.diff(hours)) + 1, [len(lines)]]).tolist()
        for a, b in zip(cuts[:-1], cuts[1:]):
            bucket = np.datetime_as_string(np.datetime64(int(hours[a]), "h"), unit="h")
            day, hour = bucket.split("T")
            path = self.raw / source / day / hour / f"{producer}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                fh.write("\n".join(lines[a:b]) + "\n")
            self.files += 1
        self.rows[source] += len(lines)


# --------------------------------------------------------------------------- #
# Helpers
# --------------------------------------------------------------------------- #


def _rng(seed: int, *labels) -> np.random.Generator:
    """A generator per entity, so adding a run or host leaves the others' draws unchanged."""
    key = zlib.crc32("/".join(str(x) for x in labels).encode())
    return np.random.default_rng([seed, key])


def _seconds(td: timedelta) -> float:
    return td.total_seconds()


def _ms(t: datetime) -> int:
    """Milliseconds since the Unix epoch (exact integer arithmetic)."""
    return (t - _EPOCH) // _ONE_MS


def _ms_of(td: timedelta) -> int:
    return td // _ONE_MS


def _to_ms(seconds: np.ndarray) -> np.ndarray:
    # floor, not round: a time just before a hang's onset must stay before it.
    return np.floor(np.asarray(seconds) * 1000.0 + 1e-6).astype(np.int64)


def _iso(abs_ms: int) -> str:
    return _iso_array(0, np.array([abs_ms]))[0]


def _iso_array(base_ms: int, ms: np.ndarray) -> list[str]:
    stamps = np.datetime_as_string((base_ms + np.asarray(ms, dtype=np.int64)).astype("datetime64[ms]"),
                                   unit="ms")
    return [s + "Z" for s in stamps.tolist()]


def _floats(values: np.ndarray, decimals: int) -> list:
    """Rounded floats as Python values; non-finite ones as the JSON strings the contract uses."""
    rounded = np.round(np.asarray(values, dtype=float), decimals) + 0.0  # +0.0 turns -0.0 into 0.0
    if np.isfinite(rounded).all():
        return rounded.tolist()
    return [x if np.isfinite(x) else ("NaN" if np.isnan(x) else ("Infinity" if x > 0 else "-Infinity"))
            for x in rounded.tolist()]


def _hex(text: str, length: int) -> str:
    """Deterministic fake digest (git shas, config hashes, checkpoint file hashes)."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _dumps(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"), allow_nan=False)
