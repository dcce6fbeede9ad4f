"""Deterministic simulator of a GPU training cluster's raw zone.

``simulate(scenario, out_dir)`` writes what the real collectors would write
for the scenario's time span, plus the faults it injected:

* ``raw/gpu_samples/<YYYY-MM-DD>/<HH>/<host>.jsonl`` - one record per GPU per
  sample interval, idle GPUs included (the node exporter on each host);
* ``raw/training_steps/<YYYY-MM-DD>/<HH>/<run>.rank-<r>.jsonl`` - one record
  per rank per completed step (the training-side client in each rank);
* ``raw/lineage/<YYYY-MM-DD>/<HH>/<run>.jsonl`` - run_started,
  checkpoint_saved and run_ended events (the run's launcher);
* with ``endpoints:``, ``raw/serving_metrics/.../<endpoint>.jsonl`` (one
  record per metrics interval, as the Prometheus pull writes them),
  ``raw/predictions/.../<endpoint>.jsonl`` and
  ``raw/prediction_outcomes/.../<endpoint>.jsonl`` (as the predictions
  importer writes them), and model versions registered from a run's checkpoint
  and promoted to an endpoint in that run's lineage;
* with a run's ``checkpoints:``, real tiny checkpoint files and their
  ``goodput-manifest.json`` under ``out_dir/checkpoints/<run>/step-NNNNNN/``;
* ``ground_truth.jsonl`` - one line per injected fault (plus one per effect a
  GPU fault has on the rank using that GPU, marked ``caused_by``).

The hour bucket is the UTC hour of each record's ``time``. Output depends only
on the scenario: every random draw comes from a generator seeded with
(seed, entity label), floats are rounded to fixed decimals and nothing reads
the wall clock, so the same scenario gives byte-identical files.

How a run is modelled: steps are generated in *progress time* (seconds of
useful work since the run started: startup, steps, evaluation and checkpoint
pauses) and then mapped to wall time by inserting each hang's duration at its
onset. That makes a hang stop step records exactly at its onset, resume with
the next step number afterwards and push the run's end later by its duration.
Faults that slow steps (stragglers, throttled GPUs, slow data or network) add
seconds to the steps that start inside them; faults that kill a rank cut the
run at the onset. The physics of every fault is documented in docs/scenario.md.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import uuid
import zipfile
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from sources.client import MANIFEST_NAME, file_manifest

from . import badput_shapes
from .scenario import FAULT_TYPES, Endpoint, Failure, Fault, Run, Scenario, ScenarioError, host_name

__all__ = ["simulate", "SOURCES", "SERVING_SOURCES"]

SOURCES = ("gpu_samples", "training_steps", "lineage")
SERVING_SOURCES = ("serving_metrics", "predictions", "prediction_outcomes")  # with ``endpoints:``
_MS_PER_HOUR = 3_600_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_MS = timedelta(milliseconds=1)

# Fault types with an effect implemented below; keep in step with FAULT_TYPES.
_IMPLEMENTED_FAULTS = {
    "hang", "nan_loss", "loss_spike", "loss_divergence", "loss_plateau", "step_time_regression",
    "grad_norm_spike", "loss_scale_collapse", "memory_fragmentation", "straggler",
    "collective_regression", "rank_dropout", "gradient_skew", "xid_error", "ecc_error",
    "row_remap_failure", "thermal_throttle", "power_throttle", "idle_allocated",
}
_IMPLEMENTED_FAULTS |= {"mfu_regression"}  # _slowdowns (badput shapes: docs/scenario.md)
_IMPLEMENTED_FAULTS |= {"input_drift", "bad_promotion", "confidence_shift", "business_metric_drop"}  # _prediction_lines
_IMPLEMENTED_FAULTS |= {"latency_regression", "queue_saturation", "error_burst"}  # _serving_lines
_IMPLEMENTED_FAULTS |= {"checkpoint_truncated", "checkpoint_bit_flip", "checkpoint_missing_shard",  # _damage_checkpoint
                        "checkpoint_partial_write", "checkpoint_path_escape", "checkpoint_weights_only",
                        "checkpoint_overdue"}  # _lineage_lines
assert _IMPLEMENTED_FAULTS == set(FAULT_TYPES), "a fault type has no simulated effect"

# GPU states, in override order (a hang wins over a checkpoint save, etc.).
IDLE, STARTUP, TRAIN, CHECKPOINT, HANG = range(5)
EVAL, ALLOC_IDLE = 5, 6  # drawn from a second stream, so older scenarios keep their bytes

# Physics constants (see docs/scenario.md, "What the simulator models").
_STEP_SIGMA = 0.04  # lognormal sigma of step time
_SLOW_STEP_P = 0.005  # share of straggler steps ...
_SLOW_STEP_FACTOR = (1.5, 3.0)  # ... and how much slower they are
_RANK_SKEW_S = 0.005  # ranks finish a synchronous step within a few ms
_STARTUP_S = (60.0, 180.0)  # run_started -> first step begins
_SAVE_S = (20.0, 60.0)  # checkpoint save pause
_EVAL_S = (60.0, 180.0)  # evaluation pause
_CONTEXT_BYTES = 550_000_000  # CUDA context etc. on top of the allocator's reservation
_IDLE_MEMORY_BYTES = 536_870_912
_BOOST_HZ = np.array([1_980_000_000, 1_965_000_000, 1_950_000_000])
_IDLE_HZ = 345_000_000
_THERMAL_TAU_S = 90.0
_LOSS_SCALE = 65536.0
_COMPUTE_SHARE = 0.8  # compute_seconds / step time of a healthy step
_COLLECTIVE_SHARE = 0.188  # what is left after data (~1.2 %) and compute

# fp16 dynamic loss scaling (torch.cuda.amp.GradScaler / Megatron style).
_SCALE_GROWTH_INTERVAL = 2000  # steps without overflow before the scale doubles
_SCALE_MIN = 1.0
_HEALTHY_OVERFLOW_P = 1 / 1500  # at the top scale, with ordinary noise: an occasional overflow

# Fault shapes (see docs/scenario.md, "Fault types").
_INF_SHARE = 0.1  # non-finite losses written as "Infinity" rather than "NaN"
_LR_DROP_DEPTH = 0.08  # a step LR decay removes this share (x (1 - factor)) of the loss excess ...
_LR_DROP_STEPS = 300.0  # ... over about this many steps
_FRAG_BYTES = 10e9  # memory_fragmentation: reserved - allocated grows by magnitude x this
_THERMAL_LAG_S = 60.0  # thermal_throttle: seconds from onset until the GPU throttles
_XID_APP = (13, 31, 43)  # application XIDs (graphics exception, MMU fault, channel reset)
_XID_FALLEN_OFF_BUS = 79
# throttle_reasons bits (NVML nvmlClocksThrottleReason*)
SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x4, 0x8, 0x20, 0x40, 0x80


def simulate(scenario: Scenario, out_dir: str | Path) -> dict:
    """Write the raw zone and ground truth for ``scenario`` under ``out_dir``.

    Replaces ``out_dir/raw/{gpu_samples,training_steps,lineage}`` (and the
    serving sources' folders), ``out_dir/ground_truth.jsonl`` and the
    checkpoint folders of runs with ``checkpoints:`` if present; leaves
    anything else alone. Returns ``{"files", "rows": {source: n}, "faults",
    "start", "end"}`` where ``files`` counts the raw-zone files written,
    ``rows`` has the serving sources only for scenarios with endpoints and
    ``faults`` counts the configured faults.
    """
    out = Path(out_dir)
    writer = _Writer(out)
    writer.reset()
    for run in scenario.runs:
        if run.checkpoint_files is not None:
            shutil.rmtree(_checkpoint_root(run, out), ignore_errors=True)

    timelines = [_build_timeline(scenario, run) for run in scenario.runs]
    timelines = badput_shapes.with_restarts(scenario, timelines, _build_timeline, _seconds)
    promotions = _resolve_promotions(scenario, timelines)
    for host in range(scenario.cluster.hosts):
        writer.write("gpu_samples", host_name(host), *_gpu_sample_lines(scenario, host, timelines))
    for run in scenario.runs:  # a restarted run's attempts share its producers' files
        attempts = [tl for tl in timelines if tl.run.id == run.id]
        series = [_run_series(scenario, tl) for tl in attempts]
        for rank in range(run.ranks):
            writer.write("training_steps", f"{run.id}.rank-{rank}", *badput_shapes.merged(
                [_step_lines(scenario, tl, rank, s) for tl, s in zip(attempts, series)]))
        writer.write("lineage", run.id, *badput_shapes.merged(
            [_lineage_lines(scenario, tl, out, promotions) for tl in attempts]))
    for endpoint in scenario.endpoints:
        versions = [(p["at"], p["model_version"]) for p in promotions if p["endpoint"] == endpoint.name]
        writer.write("serving_metrics", endpoint.name, *_serving_lines(scenario, endpoint, versions))
        if endpoint.predictions is not None:
            predictions, outcomes = _prediction_lines(scenario, endpoint, versions)
            writer.write("predictions", endpoint.name, *predictions)
            writer.write("prediction_outcomes", endpoint.name, *outcomes)

    truth = _ground_truth(scenario)
    badput_shapes.write_truth(out, badput_shapes.truth(scenario, timelines, _seconds))
    with open(out / "ground_truth.jsonl", "w", encoding="utf-8", newline="\n") as fh:
        for line in truth:
            fh.write(_dumps(line) + "\n")

    return {
        "files": writer.files,
        "rows": {source: writer.rows[source]
                 for source in SOURCES + (SERVING_SOURCES if scenario.endpoints else ())},
        "faults": len(scenario.faults),
        "start": _iso(_ms(scenario.start)),
        "end": _iso(_ms(scenario.end)),
    }


def _ground_truth(scenario: Scenario) -> list[dict]:
    """One line per fault, plus the rank-level effects of GPU faults (marked ``caused_by``)."""
    lines = []
    for f in scenario.faults:
        end = f.end
        if f.type == "rank_dropout":
            end = scenario.failure(f.run_id).fail  # the run failed then
        lines.append((f.onset, f.target, f.type, {
            "type": f.type, "entity": f.target, "onset": _iso(_ms(f.onset)),
            "end": _iso(_ms(min(end, scenario.end))), "magnitude": f.magnitude,
        }))
        effect = _rank_effect(scenario, f)
        if effect is not None:
            ftype, run, rank, onset, end, magnitude = effect
            target = f"rank:{run.id}/rank-{rank}"
            lines.append((onset, target, ftype, {
                "type": ftype, "entity": target, "onset": _iso(_ms(onset)),
                "end": _iso(_ms(min(end, scenario.end))), "magnitude": magnitude,
                "caused_by": f"{f.type} {f.target}",
            }))
    lines.sort(key=lambda x: x[:3])
    return [x[3] for x in lines]


def _rank_effect(scenario: Scenario, f: Fault):
    """What a GPU fault does to the rank on that GPU: (type, run, rank, onset, end, magnitude)."""
    if f.type in ("thermal_throttle", "power_throttle"):
        run, rank = scenario.holder(f.gpu, f.onset)
        drop, lag = _throttle(f)
        run_end = scenario.run_window(run.id)[1]
        onset = f.onset + timedelta(seconds=lag)
        return "straggler", run, rank, onset, min(f.end, run_end), round(1 / (1 - drop) - 1, 4)
    if f.type == "xid_error":
        hit = scenario.killing_fault(f)
        failure = scenario.failure(hit[0].id) if hit else None
        if failure is not None and failure.fault is f:
            return "rank_dropout", hit[0], hit[1], f.onset, failure.fail, 1.0
    return None


def _throttle(f: Fault) -> tuple[float, float]:
    """(SM clock drop share, seconds from onset until throttling) of a throttle fault."""
    m = min(f.magnitude, 1.0)
    if f.type == "thermal_throttle":
        return 0.2 + 0.3 * m, _THERMAL_LAG_S
    return 0.15 + 0.25 * m, 0.0


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
    step_wall: np.ndarray  # (n,) wall time the step ended (before rank skew)
    saves: np.ndarray  # (m, 3) step, save start, save end (checkpoint pauses)
    evals: np.ndarray  # (e, 2) evaluation pause start, end
    hangs: np.ndarray  # (h, 2) onset, end
    reserved: np.ndarray  # (ranks,) bytes held by the caching allocator
    extra_data: np.ndarray  # (n,) seconds a slow data pipeline adds to every rank's step
    extra_compute: dict = field(default_factory=dict)  # rank -> (n,) seconds of slower compute
    failure: Failure | None = None
    death: float = np.inf  # when the failed rank died
    faults: tuple = ()  # run- and rank-targeted faults on this run
    base_seconds: np.ndarray | None = None  # (n,) each step's draw before the occasional slow-step factor
    resumed_from: int | None = None  # a restart's attempt: the checkpoint step it resumed after


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

    # Progress <-> wall: every hang inserts its duration at its onset (in progress time).
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

    def progress(t: datetime) -> float:
        w = _seconds(t - run.start)
        return w - float(np.minimum(hang_len, np.maximum(w - hang_on, 0.0)).sum())

    slowdowns = _slowdowns(scenario, run, step_time, progress)

    # Draw more steps than can fit; grow (deterministically) in the unlikely case that is short.
    n_cap = int(budget / step_time * 1.25) + 16
    while True:
        dur = step_time * rng.lognormal(-0.5 * _STEP_SIGMA**2, _STEP_SIGMA, n_cap)
        base = dur.copy()
        slow = rng.random(n_cap) < _SLOW_STEP_P
        dur *= np.where(slow, rng.uniform(*_SLOW_STEP_FACTOR, n_cap), 1.0)
        numbers = np.arange(1, n_cap + 1)
        save = np.where(numbers % interval == 0, rng.uniform(*_SAVE_S, n_cap), 0.0)
        skew = rng.uniform(0.0, _RANK_SKEW_S, (run.ranks, n_cap))
        xr = _rng(scenario.seed, "run-x", run.id)
        evalp = np.zeros(n_cap)
        if run.eval_interval_steps:
            evalp = np.where(numbers % run.eval_interval_steps == 0, xr.uniform(*_EVAL_S, n_cap), 0.0)
        pause = save + evalp  # evaluation first, then the checkpoint
        extra_data, extra_coll, extra_compute, step_s = _apply_slowdowns(
            slowdowns, dur, pause, startup, run.ranks, xr)
        end_p = startup + np.cumsum(step_s + pause) - pause  # progress time step k ends (before rank skew)
        rank_end_p = end_p + skew
        if rank_end_p[:, -1].max() > budget:
            break
        n_cap *= 2

    # Steps whose every rank finishes within the run's budget.
    n = int(np.searchsorted(rank_end_p.max(axis=0), budget, side="right"))
    end_p, pause, rank_end_p = end_p[:n], pause[:n], rank_end_p[:, :n]
    save, evalp = save[:n], evalp[:n]
    # Each rank starts a step when its previous one (and any pause) is done.
    rank_start_p = np.concatenate(
        [np.full((run.ranks, 1), startup), rank_end_p[:, :-1] + pause[:-1]], axis=1)[:, :n]

    rank_end = wall(rank_end_p)
    rank_start = wall(rank_start_p)
    is_save = (save > 0) & (end_p + pause <= budget)
    saves = np.column_stack([np.flatnonzero(is_save) + 1.0, wall(end_p[is_save] + evalp[is_save]),
                             wall(end_p[is_save] + pause[is_save])])
    is_eval = (evalp > 0) & (end_p + evalp <= budget)
    evals = np.column_stack([wall(end_p[is_eval]), wall(end_p[is_eval] + evalp[is_eval])]).reshape(-1, 2)
    end = float(wall(np.array([budget]))[0])
    hang_iv = np.column_stack([offset + hang_on, offset + hang_on + hang_len]).reshape(-1, 2)

    # A killed run: no step completes after the rank died; the survivors spin (like a hang)
    # until the job fails, then every GPU is released.
    failure = scenario.failure(run.id)
    death = np.inf
    if failure is not None:
        death = _seconds(failure.death - scenario.start)
        end = _seconds(failure.fail - scenario.start)  # nothing progresses after the death
        saves = saves[saves[:, 2] < death]
        evals = np.minimum(evals[evals[:, 0] < death], death)
        hang_iv = np.minimum(hang_iv[hang_iv[:, 0] < death], death)
        hang_iv = np.vstack([hang_iv, [[death, end]]])

    # Clip to the span: records at or after its end belong to the next window.
    keep = int(np.searchsorted(rank_end.max(axis=0), min(span, death), side="left"))
    return _Timeline(
        run=run,
        start=offset,
        end=min(end, span),
        ended=end < span,
        first_step=float(wall(np.array([startup]))[0]),
        steps=np.arange(1, keep + 1),
        rank_start=rank_start[:, :keep],
        rank_end=rank_end[:, :keep],
        step_wall=wall(end_p[:keep]),
        saves=saves[saves[:, 2] < span],
        evals=evals[evals[:, 0] < span],
        hangs=hang_iv,
        reserved=reserved,
        extra_data=extra_data[:keep],
        extra_compute={r: v[:keep] for r, v in extra_compute.items()},
        failure=failure,
        death=death,
        faults=tuple(f for f in scenario.faults if f.run_id == run.id),
        base_seconds=base[:keep],
    )


@dataclass
class _Slowdown:
    """Seconds added to steps that start inside [start, end) (progress time)."""

    kind: str  # "data" (all ranks), "collective" (all ranks) or "compute" (one rank)
    start: float
    end: float
    seconds: float
    rank: int = -1


def _slowdowns(scenario: Scenario, run: Run, step_time: float, progress) -> list[_Slowdown]:
    out = []
    for f in scenario.faults:
        m = f.magnitude
        if f.run_id == run.id and f.type == "step_time_regression":
            out.append(_Slowdown("data", progress(f.onset), progress(f.end), m * step_time))
        elif f.run_id == run.id and f.type == "collective_regression":
            out.append(_Slowdown("collective", progress(f.onset), progress(f.end),
                                 2 * m * _COLLECTIVE_SHARE * step_time))
        elif f.run_id == run.id and f.type == "straggler":
            out.append(_Slowdown("compute", progress(f.onset), progress(f.end),
                                 m * _COMPUTE_SHARE * step_time, f.rank))
        elif f.run_id == run.id and f.type == "mfu_regression":  # a kernel regression: every rank computes slower
            out.extend(_Slowdown("compute", progress(f.onset), progress(f.end), m * _COMPUTE_SHARE * step_time, r)
                       for r in range(run.ranks))
        elif f.type in ("thermal_throttle", "power_throttle"):
            run_rank = scenario.holder(f.gpu, f.onset)
            if run_rank is None or run_rank[0].id != run.id:
                continue
            drop, lag = _throttle(f)
            # Compute-bound work slows in proportion to the SM clock.
            out.append(_Slowdown("compute", progress(f.onset + timedelta(seconds=lag)),
                                 progress(f.end), (1 / (1 - drop) - 1) * _COMPUTE_SHARE * step_time,
                                 run_rank[1]))
    return out


def _apply_slowdowns(slowdowns, dur, pause, startup, ranks, xr):
    """Per-step extra seconds, found by iterating: a slowdown applies to the steps that start
    inside its window, and when a step starts depends on how slow the earlier ones were."""
    n = len(dur)
    coll_noise = xr.lognormal(0.0, 0.1, n)
    extra_data = np.zeros(n)
    extra_coll = np.zeros(n)
    extra_compute: dict[int, np.ndarray] = {}
    step_s = dur + 0.0
    if not slowdowns:
        return extra_data, extra_coll, extra_compute, step_s
    for _ in range(12):
        begin = startup + np.cumsum(step_s + pause) - pause - step_s
        extra_data = np.zeros(n)
        extra_coll = np.zeros(n)
        extra_compute = {}
        for sd in slowdowns:
            inside = (begin >= sd.start) & (begin < sd.end)
            if sd.kind == "data":
                extra_data += np.where(inside, sd.seconds, 0.0)
            elif sd.kind == "collective":
                extra_coll += np.where(inside, sd.seconds * coll_noise, 0.0)
            else:
                extra_compute[sd.rank] = extra_compute.get(sd.rank, np.zeros(n)) + np.where(
                    inside, sd.seconds, 0.0)
        # Synchronous steps: everyone waits for the slowest rank.
        slowest = np.max(np.vstack(list(extra_compute.values())), axis=0) if extra_compute else 0.0
        new = dur + extra_data + extra_coll + slowest
        if np.array_equal(new, step_s):
            break
        step_s = new
    return extra_data, extra_coll, extra_compute, step_s


def _in_intervals(t: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """Mask of ``t`` inside any [start, end) of sorted, non-overlapping ``intervals``."""
    if len(intervals) == 0:
        return np.zeros(t.shape, dtype=bool)
    i = np.searchsorted(intervals[:, 0], t, side="right") - 1
    return (i >= 0) & (t < intervals[np.maximum(i, 0), 1])


def _window(f: Fault, scenario: Scenario) -> tuple[float, float]:
    return _seconds(f.onset - scenario.start), _seconds(f.end - scenario.start)


def _frag_growth(scenario: Scenario, faults, t: np.ndarray) -> np.ndarray:
    """Bytes that memory_fragmentation adds to the allocator's reservation at wall times ``t``.

    Grows linearly to magnitude x 10 GB at the fault's end; then the job releases its cache
    (``torch.cuda.empty_cache()`` or a restart) and the reservation is back to normal.
    """
    growth = np.zeros(t.shape)
    for f in faults:
        if f.type != "memory_fragmentation":
            continue
        a, b = _window(f, scenario)
        inside = (t >= a) & (t < b)
        growth += np.where(inside, f.magnitude * _FRAG_BYTES * (t - a) / (b - a), 0.0)
    return growth


def _reserve_cap(scenario: Scenario) -> int:
    """The most the caching allocator can reserve: the card less the CUDA context and slack."""
    return scenario.cluster.gpu.memory_total_bytes - _CONTEXT_BYTES - 268_435_456


def _rank_factor(rank: int) -> float:
    """A fixed per-rank spread (0.9-1.1) for effects that differ a little between ranks."""
    return 0.9 + 0.2 * (zlib.crc32(str(rank).encode()) % 1000) / 1000


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
    run_index = {tl.run.id: i for i, tl in enumerate(timelines)}

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
            state[held & _in_intervals(t, tl.evals)] = EVAL
            state[held & _in_intervals(t, tl.saves[:, 1:])] = CHECKPOINT
            state[held & _in_intervals(t, tl.hangs)] = HANG
            run_of[held] = ti
            growth = _frag_growth(scenario, tl.faults, t[held]) * _rank_factor(rank)
            train_mem[held] = (np.minimum(tl.reserved[rank] + growth, _reserve_cap(scenario))
                               + _CONTEXT_BYTES)
            # Memory is allocated progressively while the model is built.
            startup_frac[held] = np.clip((t[held] - tl.start) / (tl.first_step - tl.start), 0, 1)
            if tl.failure is not None and tl.failure.rank == rank:
                # The dead rank's process is gone: its GPU is free from the moment it died.
                gone = held & (t >= tl.death)
                state[gone] = IDLE
                run_of[gone] = -1

        gpu_faults = [f for f in scenario.faults if f.gpu == (host, g)]
        for f in gpu_faults:
            if f.type == "idle_allocated":
                a, b = _window(f, scenario)
                tl = timelines[run_index[scenario.host_run(host, f.onset).id]]
                alloc = (t >= a) & (t < b) & (t >= tl.start) & (t < tl.end)
                state[alloc] = ALLOC_IDLE
                run_of[alloc] = run_index[tl.run.id]

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
        ambient, gain = rng.uniform(27.0, 29.0), rng.uniform(44.0, 48.0)

        # States and faults added later draw from a second stream.
        xr = _rng(scenario.seed, "gpu-x", name, g)
        ev = state == EVAL  # evaluation: forward passes only, GPUs busy but lighter
        util = np.where(ev, xr.uniform(0.70, 0.90, n), util)
        power = np.where(ev, limit * xr.uniform(0.55, 0.65, n), power)
        sm = np.where(ev, xr.uniform(0.55, 0.70, n), sm)
        tensor = np.where(ev, xr.uniform(0.20, 0.30, n), tensor)
        idle_like = xr.uniform(0.5, 1.5, n)
        power_limit = np.full(n, float(limit))
        throttle = np.zeros(n, dtype=np.int64)
        ecc_c = np.zeros(n, dtype=np.int64)
        ecc_u = np.zeros(n, dtype=np.int64)
        xid_total = np.zeros(n, dtype=np.int64)
        last_xid = np.zeros(n, dtype=np.int64)  # 0: none yet
        remap_c = np.zeros(n, dtype=np.int64)
        remap_u = np.zeros(n, dtype=np.int64)
        remap_pending = np.zeros(n, dtype=bool)
        remap_failure = np.zeros(n, dtype=bool)
        lost = np.zeros(n, dtype=bool)
        thermal = []
        for f in gpu_faults:
            a, b = _window(f, scenario)
            inside = (t >= a) & (t < b)
            m = f.magnitude
            frng = _rng(scenario.seed, "fault", f.type, f.target, a)
            if f.type == "idle_allocated":
                al = (state == ALLOC_IDLE) & inside
                # A CUDA context and a few buffers, no kernels (or, below magnitude 1, rare ones).
                util = np.where(al, (1 - min(m, 1.0)) * 0.15 * idle_like, util)
                sm = np.where(al, (1 - min(m, 1.0)) * 0.12 * idle_like, sm)
                tensor = np.where(al, 0.0, tensor)
                power = np.where(al, np.clip(idle_power, 60.0, 75.0) + 15 * (1 - min(m, 1.0)), power)
                memory = np.where(al, idle_mem + 448 * 1_048_576 + mem_noise, memory)
                clock = np.where(al, _IDLE_HZ if m >= 1 else boost, clock)
            elif f.type == "xid_error":
                xid = _XID_FALLEN_OFF_BUS if m >= 1 else int(frng.choice(_XID_APP))
                count = 1 if m >= 1 else 1 + int(3 * m)
                xid_total += np.where(t >= a, count, 0)
                last_xid = np.where(t >= a, xid, last_xid)
                if m >= 1:
                    lost |= inside
            elif f.type == "ecc_error":
                errors = max(1, round(m))
                ecc_u += np.where(t >= a, errors, 0)
                x = np.clip((t - a) / (b - a), 0.0, 1.0)
                ecc_c += np.where(t >= a, np.round(errors * 2 + 40 * m * x).astype(np.int64), 0)
                remap_u += np.where(t >= a, errors, 0)
                remap_pending |= inside  # remapping takes effect at the next GPU reset
            elif f.type == "row_remap_failure":
                rows = max(1, round(m))
                remap_c += np.where(t >= a, rows, 0)
                remap_u += np.where(t >= a, 1, 0)
                remap_failure |= inside
            elif f.type in ("thermal_throttle", "power_throttle"):
                drop, lag = _throttle(f)
                busy = np.isin(state, (TRAIN, EVAL, HANG, STARTUP, CHECKPOINT))
                on = (t >= a + lag) & (t < b) & busy
                clock = np.where(on, np.round(boost * (1 - drop), -6), clock)
                if f.type == "thermal_throttle":
                    thermal.append((a, b, m))
                    bits = SW_THERMAL | (HW_THERMAL | HW_SLOWDOWN if m >= 1 else 0)
                    power = np.where(on, power * (1 - drop) ** 1.5, power)  # lower clock and voltage
                else:
                    cap = limit * 0.75 * (1 - drop) ** 2
                    brake = m >= 1
                    bits = HW_POWER_BRAKE | HW_SLOWDOWN if brake else SW_POWER_CAP
                    power = np.where(on, cap * frng.uniform(0.96, 1.0, n), power)
                    if not brake:  # the enforced limit was lowered (e.g. a facility capping agent)
                        power_limit = np.where(on, round(cap, 2), power_limit)
                throttle = np.where(on, throttle | bits, throttle)

        target = ambient + gain * power / (0.75 * limit)
        temp = _temperature(target, dt) + z(0.0, 0.2)
        for a, b, m in thermal:
            # Failed cooling: the GPU heats up in about a minute and is held at its slowdown
            # temperature by throttling; after the fix it cools with the usual lag.
            peak = 88.0 + 7.0 * min(m, 1.0)
            x = np.clip((t - a) / _THERMAL_LAG_S, 0.0, 1.0)
            hot = temp + x * (peak - temp)
            after = t >= b
            temp = np.where((t >= a) & ~after, hot + xr.normal(0.0, 0.4, n) * (x >= 1), temp)
            cool = temp + (peak - temp) * np.exp(-np.maximum(t - b, 0.0) / _THERMAL_TAU_S)
            temp = np.where(after, cool, temp)

        col = {
            "run_id": _enc_strs([timelines[i].run.id if i >= 0 else None for i in run_of]),
            "utilization_ratio": _enc_floats(util, 4, lost),
            "memory_used_bytes": _enc_ints(memory.astype(np.int64), lost),
            "power_watts": _enc_floats(power, 2, lost),
            "power_limit_watts": _enc_floats(power_limit, 2, lost),
            "temperature_celsius": _enc_floats(temp, 1, lost),
            "sm_clock_hertz": _enc_ints(clock.astype(np.int64), lost),
            "throttle_reasons": _enc_ints(throttle, lost),
            "ecc_corrected_errors_total": _enc_ints(ecc_c),
            "ecc_uncorrected_errors_total": _enc_ints(ecc_u),
            "xid_errors_total": _enc_ints(xid_total),
            "last_xid": _enc_ints(last_xid, last_xid == 0),
            "sm_active_ratio": _enc_floats(sm, 4, lost),
            "tensor_active_ratio": _enc_floats(tensor, 4, lost),
            "remapped_rows_correctable_total": _enc_ints(remap_c),
            "remapped_rows_uncorrectable_total": _enc_ints(remap_u),
            "row_remap_pending": _enc_bools(remap_pending),
            "row_remap_failure": _enc_bools(remap_failure),
        }
        if lost.any():  # fallen off the bus: no process can hold it
            col["run_id"] = [("null" if x else v) for x, v in zip(lost.tolist(), col["run_id"])]
        columns.append((_gpu_uuid(name, g), col))

    base_ms = _ms(scenario.start)
    times = _enc_times(_iso_array(base_ms, rel_ms))
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
            varying[key] = _interleave([c[key] for _, c in columns])
    lines = _json_lines(fields, varying)
    abs_ms = np.repeat(base_ms + rel_ms, cluster.gpus_per_host)
    return abs_ms, lines


def _temperature(target: np.ndarray, dt: float) -> np.ndarray:
    """First-order thermal lag toward a power-dependent equilibrium temperature."""
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


def _run_series(scenario: Scenario, tl: _Timeline) -> dict:
    """Per-step values every rank shares (after the all-reduce): progress along the loss
    curve, fault multipliers, non-finite steps, the fp16 loss scale and skip counters."""
    run = tl.run
    n = len(tl.steps)
    k = tl.steps.astype(float)
    t = tl.step_wall
    xr = _rng(scenario.seed, "steps-x", run.id)
    u_nan, u_inf, u_overflow, z_warm = xr.random(n), xr.random(n), xr.random(n), xr.standard_normal(n)

    nan = np.zeros(n, dtype=bool)
    overflow_p = np.zeros(n)
    progress = np.ones(n)  # share of a step's update that moves the model along its curve
    loss_mult = np.ones(n)
    grad_mult = np.ones(n)
    scale_reset = np.zeros(n, dtype=bool)
    for f in tl.faults:
        a, b = _window(f, scenario)
        inside = (t >= a) & (t < b)
        x = np.clip((t - a) / (b - a), 0.0, 1.0)
        m = f.magnitude
        if f.type == "nan_loss":
            nan |= inside & (u_nan < m)
        elif f.type == "loss_spike":
            # Jumps at onset, decays back to the curve by the end.
            decay = np.where(inside, (np.exp(-5 * x) - np.exp(-5.0)) / (1 - np.exp(-5.0)), 0.0)
            loss_mult *= 1 + 2 * m * decay
            grad_mult *= 1 + 2 * m * decay
        elif f.type == "loss_divergence":
            growth = np.where(inside, (1 + 3 * m) ** x, 1.0)
            loss_mult *= growth
            grad_mult *= growth ** 1.5
        elif f.type == "loss_plateau":
            progress = np.where(inside, progress * (1 - m), progress)
        elif f.type == "grad_norm_spike":
            grad_mult *= np.where(inside, 5 + 20 * m, 1.0)
        elif f.type == "loss_scale_collapse":
            overflow_p = np.where(inside, np.minimum(1.0, 0.5 * m), overflow_p)
            after = np.flatnonzero(t >= b)
            if len(after):  # restarted from a checkpoint with a fresh scaler
                scale_reset[after[0]] = True

    loss_scale = None
    skipped = np.zeros(n, dtype=bool)
    if run.precision == "fp16":
        loss_scale, skipped = _loss_scale(overflow_p, scale_reset, u_overflow, run.ordinary_noise)
    applied = progress * ~(nan | skipped)  # NaN and overflow steps skip the optimizer update
    k_eff = np.cumsum(applied)

    curve = run.loss
    base = curve.floor + (curve.initial - curve.floor) * (1.0 + k_eff / curve.s0) ** (-curve.decay)
    sched = run.learning_rate
    if sched.drop_at_step is not None:
        # A step LR decay anneals: the loss settles a little lower over a few hundred steps.
        since = np.maximum(k - sched.drop_at_step, 0.0)
        settle = _LR_DROP_DEPTH * (1 - sched.drop_factor) * (1 - np.exp(-since / _LR_DROP_STEPS))
        base = curve.floor + (base - curve.floor) * (1 - settle)
    warm = np.zeros(n)
    if run.ordinary_noise and sched.warmup_steps > 0:
        warm = np.clip(1 - k / sched.warmup_steps, 0.0, 1.0)
    return {
        "base": base * loss_mult,
        "noise_scale": 1 + 2 * warm,  # losses and grad norms are noisier early in warm-up
        "grad_mult": grad_mult * (1 + 1.0 * warm) * np.exp(0.25 * warm * z_warm),
        "nan": nan,
        "inf": nan & (u_inf < _INF_SHARE),
        "nan_total": np.cumsum(nan),
        "skipped": skipped,
        "skipped_total": np.cumsum(skipped),
        "loss_scale": loss_scale,
    }


def _loss_scale(overflow_p, reset, u, noisy: bool):
    """Dynamic loss scaling: halve on overflow (the step is skipped), double after
    ``_SCALE_GROWTH_INTERVAL`` clean steps, never above the initial scale."""
    n = len(u)
    out = np.empty(n)
    skipped = np.zeros(n, dtype=bool)
    scale, good = _LOSS_SCALE, 0
    p_list, u_list, reset_list = overflow_p.tolist(), u.tolist(), reset.tolist()
    for i in range(n):
        if reset_list[i]:
            scale, good = _LOSS_SCALE, 0
        p = p_list[i]
        if noisy and scale >= _LOSS_SCALE:
            p = max(p, _HEALTHY_OVERFLOW_P)
        if u_list[i] < p:
            skipped[i] = True
            scale, good = max(scale / 2, _SCALE_MIN), 0
        else:
            good += 1
            if good >= _SCALE_GROWTH_INTERVAL and scale < _LOSS_SCALE:
                scale, good = scale * 2, 0
        out[i] = scale
    return out, skipped


def _step_lines(scenario: Scenario, tl: _Timeline, rank: int, series: dict):
    run = tl.run
    n = len(tl.steps)
    k = tl.steps.astype(float)
    rng_run = _rng(scenario.seed, "steps", run.id)  # shared by all ranks (post-all-reduce values)
    rng = _rng(scenario.seed, "steps", run.id, rank)
    xr = _rng(scenario.seed, "steps-x", run.id, rank)
    step_time = _seconds(run.step_time)

    curve = run.loss
    loss = series["base"] * np.exp(curve.noise * series["noise_scale"] * rng.standard_normal(n))
    grad_norm = (0.25 + 1.75 * (1.0 + k / 500.0) ** -0.5) * rng_run.lognormal(0.0, 0.15, n)
    grad_norm = grad_norm * series["grad_mult"]
    if run.ordinary_noise:  # the local (pre-all-reduce) norm differs a little between ranks
        grad_norm = grad_norm * xr.lognormal(0.0, 0.03, n)
    for f in tl.faults:
        if f.type == "gradient_skew" and f.rank == rank:
            a, b = _window(f, scenario)
            grad_norm = grad_norm * np.where((tl.step_wall >= a) & (tl.step_wall < b), 1 + f.magnitude, 1.0)
    loss = np.where(series["nan"], np.where(series["inf"], np.inf, np.nan), loss)
    grad_norm = np.where(series["nan"], np.nan, grad_norm)
    lr = _learning_rate(run, k)

    step_s = np.round(tl.rank_end[rank] - tl.rank_start[rank], 6)
    data_s = np.minimum(np.round(step_time * rng.uniform(0.004, 0.02, n) + tl.extra_data, 6), step_s)
    compute_s = np.round(step_time * _COMPUTE_SHARE * rng.lognormal(0.0, 0.01, n)
                         + tl.extra_compute.get(rank, 0.0), 6)
    compute_s = np.minimum(compute_s, step_s - data_s)
    collective_s = np.maximum(step_s - data_s - compute_s, 0.0)

    reserved0 = int(tl.reserved[rank])
    allocated = (reserved0 * rng.uniform(0.86, 0.92)
                 + rng.normal(0.0, 50e6, n)).astype(np.int64)
    allocated = np.minimum(allocated, reserved0)
    inactive = ((reserved0 - allocated) * rng.uniform(0.1, 0.4, n)).astype(np.int64)
    growth = _frag_growth(scenario, tl.faults, tl.step_wall) * _rank_factor(rank)
    retries = np.zeros(n, dtype=np.int64)
    reserved: object = reserved0
    if growth.any():
        # Fragmentation: the cache holds ever more freed-but-unusable blocks, so the allocator
        # reserves more, and it has to free and retry (cudaMalloc retries) ever more often.
        grown = np.minimum(reserved0 + (growth // 2_097_152) * 2_097_152,
                           _reserve_cap(scenario)).astype(np.int64)
        reserved = _enc_ints(grown)
        inactive = inactive + (0.8 * (grown - reserved0)).astype(np.int64)
        level = growth / _FRAG_BYTES
        retries = np.cumsum(xr.random(n) < np.minimum(1.0, 0.6 * level**2))

    abs_ms = _ms(scenario.start) + _to_ms(tl.rank_end[rank])
    host, gpu_index = run.gpus[rank]
    loss_scale = series["loss_scale"]
    skipped = series["skipped"]
    grad_enc = _enc_floats(grad_norm, 5, skipped)  # an overflowed step has no usable norm
    varying = {
        "time": _enc_times(_iso_array(0, abs_ms)),
        "step": _enc_ints(tl.steps),
        "loss": _enc_floats(loss, 5),
        "grad_norm": grad_enc,
        "learning_rate": _enc_floats(lr, 10),
        "step_seconds": _enc_floats(step_s, 6),
        "data_seconds": _enc_floats(data_s, 6),
        "compute_seconds": _enc_floats(compute_s, 6),
        "collective_seconds": _enc_floats(collective_s, 6),
        "memory_allocated_bytes": _enc_ints(allocated),
        "memory_inactive_split_bytes": _enc_ints(inactive),
        "alloc_retries_total": _enc_ints(retries),
        "nan_iterations_total": _enc_ints(series["nan_total"]),
        "skipped_iterations_total": _enc_ints(series["skipped_total"]),
    }
    if isinstance(reserved, list):
        varying["memory_reserved_bytes"] = reserved
        reserved = None
    if loss_scale is not None and (loss_scale != _LOSS_SCALE).any():
        varying["loss_scale"] = _enc_floats(loss_scale, 1)
        const_scale = None
    else:
        const_scale = _LOSS_SCALE if run.precision == "fp16" else _NULL
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
    extra_fields, extra_varying = badput_shapes.step_fields(run, step_s, _enc_floats)
    fields += extra_fields
    varying.update(extra_varying)
    return abs_ms, _json_lines(fields, varying)


def _learning_rate(run: Run, k: np.ndarray) -> np.ndarray:
    """Linear warmup, then cosine to ``peak * min_ratio`` over the planned number of steps,
    times ``drop_factor`` from ``drop_at_step`` on."""
    sched = run.learning_rate
    planned = max(int(_seconds(run.duration) / _seconds(run.step_time)), sched.warmup_steps + 1)
    warm = sched.peak * k / max(sched.warmup_steps, 1)
    progress = np.clip((k - sched.warmup_steps) / (planned - sched.warmup_steps), 0.0, 1.0)
    floor = sched.peak * sched.min_ratio
    cosine = floor + 0.5 * (sched.peak - floor) * (1.0 + np.cos(np.pi * progress))
    lr = np.where(k <= sched.warmup_steps, warm, cosine)
    if sched.drop_at_step is not None:
        lr = lr * np.where(k >= sched.drop_at_step, sched.drop_factor, 1.0)
    return lr


# --------------------------------------------------------------------------- #
# lineage
# --------------------------------------------------------------------------- #


def _lineage_lines(scenario: Scenario, tl: _Timeline, out: Path | None = None,
                   promotions: list[dict] = ()):
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
    skipped = _overdue_windows(scenario, run)
    for step, _save_start, save_end in tl.saves.tolist():
        step = int(step)
        if any(a <= save_end < b for a, b in skipped):
            continue  # checkpoint_overdue: the save failed silently, nothing written or recorded
        if run.checkpoint_files is not None and out is not None:
            path = _checkpoint_path(run, step)
            faults = _checkpoint_faults(scenario, run, step)
            manifest = _write_checkpoint(scenario, run, step, out,
                                         weights_only=any(f.type == "checkpoint_weights_only" for f in faults))
            _damage_checkpoint(scenario, run, step, out, faults)
            events.append((save_end, {
                "event": "checkpoint_saved",
                "run_id": run.id,
                "step": step,
                "checkpoint_path": path,
                "checkpoint_bytes": sum(f["bytes"] for f in manifest["files"]),
                "manifest": manifest,
            }))
            continue
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
    events.extend(badput_shapes.lineage_events(tl))
    if tl.ended:
        status = "failed" if tl.failure is not None else "completed"
        events.append((tl.end, {"event": "run_ended", "run_id": run.id, "status": status}))
    for promo in promotions:
        if promo["run"] != run.id:
            continue
        if promo["register"]:  # once per version, however many endpoints it goes to
            events.append((promo["registered"], {
                "event": "model_version_registered", "run_id": run.id,
                "model_version": promo["model_version"], "step": promo["step"],
                "checkpoint_path": promo["checkpoint_path"],
                # the endpoint traffic the version was validated on (shadow): the hour before registration
                "reference_start": _iso(_ms(scenario.start) + _to_ms(np.array([max(0.0, promo["registered"] - 3600.0)]))[0]),
                "reference_end": _iso(_ms(scenario.start) + _to_ms(np.array([promo["registered"]]))[0])}))
        events.append((promo["at"], {
            "event": "model_version_promoted", "run_id": run.id,
            "model_version": promo["model_version"], "endpoint": promo["endpoint"]}))

    events.sort(key=lambda e: e[0])  # stable: ties keep the order above
    abs_ms = _ms(scenario.start) + _to_ms(np.array([e[0] for e in events]))
    times = _iso_array(0, abs_ms)
    lines = [_dumps({"time": times[i], **body}) for i, (_, body) in enumerate(events)]
    return abs_ms, lines


# --------------------------------------------------------------------------- #
# checkpoint files
# --------------------------------------------------------------------------- #

# Tiny stand-ins for a model shard and its optimizer state: (name, shape) of float32 tensors.
_CKPT_TENSORS = {
    "model": (("embed.weight", (16, 8)), ("layers.0.proj.weight", (8, 8)), ("layers.0.proj.bias", (8,))),
    "optim": (("exp_avg.embed.weight", (16, 8)), ("exp_avg_sq.embed.weight", (16, 8))),
}


def _checkpoint_root(run: Run, out: Path) -> Path:
    folder = Path(run.checkpoint_files.dir)
    return (folder if folder.is_absolute() else out / folder) / run.id


def _checkpoint_path(run: Run, step: int) -> str:
    """What lineage records: relative to the Goodput home for a relative ``dir`` (so the output
    does not depend on where it is written), absolute otherwise."""
    return (Path(run.checkpoint_files.dir) / run.id / f"step-{step:06d}").as_posix()


def _write_checkpoint(scenario: Scenario, run: Run, step: int, out: Path, weights_only: bool = False) -> dict:
    """Write one checkpoint's files (per rank: model and optimizer shards, unless ``weights_only``;
    metadata.json) and its goodput-manifest.json, as ``GoodputClient.checkpoint_saved`` does;
    returns the manifest. ``torch`` files are torch.save's zip layout, written without torch so
    that they are byte-for-byte deterministic (torch.load reads them; tests check it)."""
    folder = _checkpoint_root(run, out) / f"step-{step:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    fmt = run.checkpoint_files.format
    for rank in range(run.ranks):
        rng = _rng(scenario.seed, "checkpoint", run.id, step, rank)
        for kind, specs in _CKPT_TENSORS.items():
            tensors = {name: rng.standard_normal(shape).astype("<f4") for name, shape in specs}
            if weights_only and kind == "optim":
                continue
            stem = f"{kind}_rank{rank:03d}"
            if fmt == "safetensors":
                _atomic_write(folder / f"{stem}.safetensors", _safetensors_bytes(tensors))
            else:
                _atomic_write(folder / f"{stem}.pt", torch_save_bytes(tensors))
    metadata = {"run_id": run.id, "step": step, "world_size": run.ranks, "format": fmt}
    _atomic_write(folder / "metadata.json", (json.dumps(metadata, indent=1) + "\n").encode())
    manifest = file_manifest(folder)
    _atomic_write(folder / MANIFEST_NAME,
                  json.dumps({"run_id": run.id, "step": step, **manifest}, indent=1).encode())
    return manifest


def _safetensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    """The safetensors format: u64 little-endian header size, a JSON header (padded with spaces
    to 8 bytes) giving each tensor's dtype, shape and byte offsets, then the raw bytes."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, array in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(a.tobytes() for a in tensors.values())


def torch_save_bytes(tensors: dict[str, np.ndarray], archive: str = "archive") -> bytes:
    """What ``torch.save({name: float32 tensor})`` writes, without torch: a stored (uncompressed) zip
    with ``data.pkl`` (a protocol-2 pickle of an OrderedDict of ``torch._utils._rebuild_tensor_v2``
    calls whose storages are persistent ids ``('storage', torch.FloatStorage, key, 'cpu', numel)``),
    one ``data/<key>`` record per storage, ``byteorder`` and ``version``. The pickle is assembled
    opcode by opcode because pickling torch globals needs torch itself."""
    def text(value: str) -> bytes:
        raw = value.encode()
        return b"X" + len(raw).to_bytes(4, "little") + raw

    def ints(values) -> bytes:
        return b"(" + b"".join(b"J" + int(v).to_bytes(4, "little", signed=True) for v in values) + b"t"

    pkl = b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01("
    records = []
    for key, (name, array) in enumerate(tensors.items()):
        shape = array.shape
        strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
        pkl += (text(name) + b"ctorch._utils\n_rebuild_tensor_v2\n("
                + b"(" + text("storage") + b"ctorch\nFloatStorage\n" + text(str(key)) + text("cpu")
                + b"J" + int(array.size).to_bytes(4, "little") + b"tQ"
                + b"J\x00\x00\x00\x00" + ints(shape) + ints(strides) + b"\x89"
                + b"ccollections\nOrderedDict\n)R" + b"tR")
        records.append((f"data/{key}", np.ascontiguousarray(array, dtype="<f4").tobytes()))
    pkl += b"u."
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in [("data.pkl", pkl), ("byteorder", b"little"), *records, ("version", b"3\n")]:
            info = zipfile.ZipInfo(f"{archive}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            zf.writestr(info, data)
    return buffer.getvalue()


def _tensor_byte(shard: Path, data: bytes) -> int:
    """An offset inside the shard's tensor data, away from any header or zip record."""
    if shard.suffix == ".safetensors":
        return len(data) - 5  # the last tensor's bytes end the file
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = next(i for i in zf.infolist() if "/data/" in i.filename)
    return info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + 3


def _checkpoint_faults(scenario: Scenario, run: Run, step: int) -> list:
    target = f"checkpoint:{run.id}/step-{step:06d}"
    return [f for f in scenario.faults if f.target == target]


def _overdue_windows(scenario: Scenario, run: Run) -> list[tuple[float, float]]:
    """Seconds from the scenario start during which the run's saves fail (checkpoint_overdue)."""
    return [((f.onset - scenario.start).total_seconds(), (f.end - scenario.start).total_seconds())
            for f in scenario.faults if f.type == "checkpoint_overdue" and f.target == f"run:{run.id}"]


def _damage_checkpoint(scenario: Scenario, run: Run, step: int, out: Path, faults: list) -> None:
    """Apply the checkpoint faults to the files just written (the lineage manifest keeps what the
    run saved, so the audit can tell)."""
    folder = _checkpoint_root(run, out) / f"step-{step:06d}"
    ext = ".safetensors" if run.checkpoint_files.format == "safetensors" else ".pt"
    shard = folder / f"model_rank{(run.ranks - 1):03d}{ext}"
    for f in faults:
        if f.type == "checkpoint_truncated":
            data = shard.read_bytes()
            shard.write_bytes(data[:int(len(data) * (1 - min(f.magnitude, 1.0) / 2))])
        elif f.type == "checkpoint_bit_flip":
            data = bytearray(shard.read_bytes())
            data[_tensor_byte(shard, data)] ^= 0x10
            shard.write_bytes(bytes(data))
        elif f.type == "checkpoint_missing_shard":
            shard.unlink()
        elif f.type == "checkpoint_partial_write":
            partial = folder / f"optim_rank000{ext}"
            (folder / f".{partial.name}.tmp").write_bytes(partial.read_bytes()[: partial.stat().st_size // 2])
        elif f.type == "checkpoint_path_escape":
            manifest = json.loads((folder / MANIFEST_NAME).read_text())
            manifest["files"].append({"path": "../../../../etc/passwd", "bytes": 1, "sha256": "0" * 64})
            _atomic_write(folder / MANIFEST_NAME, json.dumps(manifest, indent=1).encode())


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


# --------------------------------------------------------------------------- #
# serving: model versions, endpoint metrics, predictions
# --------------------------------------------------------------------------- #


def _resolve_promotions(scenario: Scenario, timelines: list[_Timeline]) -> list[dict]:
    """Each promotion: the run's latest checkpoint saved before ``at`` becomes a model version.
    Times are seconds since the scenario start."""
    by_run = {tl.run.id: tl for tl in timelines}
    start_ms = _ms(scenario.start)
    out, registered = [], set()
    for e_i, endpoint in enumerate(scenario.endpoints):
        for p_i, promo in enumerate(endpoint.promotions):
            tl = by_run[promo.run]
            at = (_ms(promo.at) - start_ms) / 1000.0
            saved = [(int(step), end) for step, _s, end in tl.saves.tolist() if end < at]
            if not saved:
                raise ScenarioError(scenario.source, f"endpoints[{e_i}].promotions[{p_i}].at",
                                    f"run {promo.run!r} has saved no checkpoint before {_iso(_ms(promo.at))}",
                                    "promote later or checkpoint more often (checkpoint_interval_steps)")
            step, save_end = saved[-1]
            version = f"{promo.run}-step-{step:06d}"
            run = tl.run
            path = (_checkpoint_path(run, step) if run.checkpoint_files is not None
                    else f"/checkpoints/{run.id}/step-{step:06d}")
            out.append({"endpoint": endpoint.name, "run": promo.run, "step": step, "at": at,
                        "model_version": version, "checkpoint_path": path,
                        "registered": save_end + min(60.0, (at - save_end) / 2),
                        "register": version not in registered})
            registered.add(version)
    return out


def _version_at(endpoint: Endpoint, versions: list[tuple[float, str]], t: np.ndarray) -> list[str]:
    """The model version an endpoint serves at each time (seconds since the scenario start)."""
    out = [endpoint.model_version] * len(t)
    for at, version in versions:  # in time order
        for i in np.flatnonzero(t >= at).tolist():
            out[i] = version
    return out


# z-scores of the quantiles the Prometheus pull writes (p50, p95, p99).
_Z = {"p50": 0.0, "p95": 1.6448536269514722, "p99": 2.3263478740408408}
_SERVING_FIELDS = ("ttft", "itl", "e2e_latency")


def _serving_lines(scenario: Scenario, endpoint: Endpoint, versions: list[tuple[float, str]]):
    """One serving_metrics record per metrics interval, with the fields and key order of
    ``sources.prometheus.pull_serving_metrics``: latency quantiles of lognormal distributions
    (slower under more load), queue, KV cache and cumulative request and preemption counters (a
    healthy engine preempts nothing). Traffic follows the endpoint's daily load curve
    (``diurnal``); the serving faults of the endpoint act here."""
    rng = _rng(scenario.seed, "endpoint", endpoint.name)
    step = _seconds(endpoint.metrics_interval)
    t = np.arange(0.0, _seconds(scenario.duration), step)
    n = len(t)
    expected = endpoint.requests_per_second * step
    day = _diurnal(scenario, endpoint, t)
    load = day * np.exp(rng.normal(0.0, 0.1, n))  # this window's traffic relative to the nominal rate
    requests = rng.poisson(expected * load)
    faults = [f for f in scenario.faults if f.target == f"endpoint:{endpoint.name}"]
    failure_ratio = np.full(n, endpoint.failure_ratio)
    restarts = []
    for f in faults:
        if f.type == "error_burst":
            lo, hi = _window(f, scenario)
            failure_ratio[(t >= lo) & (t < hi)] = f.magnitude
            restarts.append(int(np.searchsorted(t, lo)))
    failures = rng.binomial(requests, failure_ratio)
    success_total = _restarted_cumsum(requests - failures, restarts)
    failure_total = _restarted_cumsum(failures, restarts)
    model = _version_at(endpoint, versions, t)
    host = None if endpoint.host is None else host_name(endpoint.host)
    columns = {}
    for prefix, dist in zip(_SERVING_FIELDS, (endpoint.ttft, endpoint.itl, endpoint.e2e)):
        jitter = np.exp(rng.normal(0.0, 0.03, n)) * np.sqrt(load)
        for q, z in _Z.items():
            columns[f"{prefix}_{q}_seconds"] = np.round(dist.p50 * np.exp(dist.sigma * z) * jitter, 6)
    e2e_mean = endpoint.e2e.p50 * np.exp(endpoint.e2e.sigma ** 2 / 2)
    columns["requests_waiting"] = rng.poisson(endpoint.requests_waiting * load ** 2).astype(float)
    columns["requests_running"] = rng.poisson(endpoint.requests_per_second * load * e2e_mean).astype(float)
    columns["kv_cache_usage_ratio"] = np.round(
        np.clip(endpoint.kv_cache_usage * load * np.exp(rng.normal(0.0, 0.05, n)), 0.0, 0.99), 6)
    preempted = _serving_faults(scenario, endpoint, faults, t, load, columns, rng)
    columns["request_success_total"] = success_total.astype(float)
    columns["request_failure_total"] = failure_total.astype(float)
    columns["preemptions_total"] = _restarted_cumsum(preempted, restarts)   # a restart resets it too
    abs_ms = _ms(scenario.start) + _to_ms(t)
    times = _iso_array(0, abs_ms)
    rows = {k: v.tolist() for k, v in columns.items()}
    lines = [_dumps({"time": times[i], "endpoint": endpoint.name, "model_version": model[i], "host": host,
                     **{k: rows[k][i] for k in columns}}) for i in range(n)]
    return abs_ms, lines


def _diurnal(scenario: Scenario, endpoint: Endpoint, t: np.ndarray) -> np.ndarray:
    """The daily load curve at ``t`` (seconds since the start): 1 +- amplitude, peak at the peak hour (UTC)."""
    start = scenario.start
    hour = (start.hour + start.minute / 60 + start.second / 3600 + t / 3600.0) % 24
    return 1.0 + endpoint.diurnal_amplitude * np.cos(2 * np.pi * (hour - endpoint.diurnal_peak_hour) / 24)


def _restarted_cumsum(values: np.ndarray, restarts: list[int]) -> np.ndarray:
    """A Prometheus counter over ``values`` that restarts from 0 at each index in ``restarts``."""
    total = np.cumsum(values).astype(float)
    for i in sorted(restarts):
        if 0 < i < len(total):
            total[i:] -= total[i - 1]
    return total


# vLLM admits a waiting request as soon as KV-cache blocks free up and preempts the newest running
# sequence when the others' growth needs the blocks back: under an overload of magnitude x the rate,
# about a quarter of the excess arrivals are admitted and preempted again (a few a minute at 5%).
_PREEMPTED_SHARE = 0.25


def _serving_faults(scenario: Scenario, endpoint: Endpoint, faults: list[Fault], t: np.ndarray, load: np.ndarray,
                    columns: dict, rng: np.random.Generator) -> np.ndarray:
    """The latency_regression and queue_saturation faults of ``endpoint``, applied to its columns;
    returns the preemptions in each metrics interval (exact zeros without a queue saturation).
    Draws from ``rng`` only when such a fault exists, so scenarios without one keep their numbers;
    the preemptions draw from a stream of their own per fault, so adding them changed no other value."""
    running_full = float(np.max(columns["requests_running"])) if len(t) else 0.0
    preempted = np.zeros(len(t))
    for k, f in enumerate(faults):
        lo, hi = _window(f, scenario)
        on = (t >= lo) & (t < hi)
        if not on.any():
            continue
        if f.type == "latency_regression":
            for prefix in _SERVING_FIELDS:
                for q in _Z:
                    col = columns[f"{prefix}_{q}_seconds"]
                    col[on] = np.round(col[on] * (1.0 + f.magnitude), 6)
        elif f.type == "queue_saturation":
            # arrivals exceed capacity by magnitude x the rate: the queue grows that many per second
            rate = endpoint.requests_per_second * load[on]
            queued = np.cumsum(f.magnitude * rate * np.diff(t[on], prepend=lo))
            columns["requests_waiting"][on] += np.round(queued)
            columns["requests_running"][on] = running_full
            columns["kv_cache_usage_ratio"][on] = np.round(rng.uniform(0.96, 0.99, int(on.sum())), 6)
            wait = queued / rate  # Little's law: the time a new arrival spends queued
            for prefix in ("ttft", "e2e_latency"):
                for q in _Z:
                    col = columns[f"{prefix}_{q}_seconds"]
                    col[on] = np.round(col[on] + wait, 6)
            expected = _PREEMPTED_SHARE * f.magnitude * rate * np.diff(t[on], prepend=lo)
            preempted[on] += _rng(scenario.seed, "preemptions", endpoint.name, k).poisson(expected)
    return preempted


_LANGUAGES = ("en", "de", "fr", "ja", "es")


def _prediction_lines(scenario: Scenario, endpoint: Endpoint, versions: list[tuple[float, str]]):
    """Prediction records (shape of ``sources.importers.import_predictions``) and the outcomes of
    a share of them, ``outcome_delay`` x0.5-1.5 later; outcomes due after the span are not written
    (they have not arrived yet)."""
    spec = endpoint.predictions
    rng = _rng(scenario.seed, "predictions", endpoint.name)
    span = _seconds(scenario.duration)
    n = int(rng.poisson(spec.per_minute * span / 60.0))
    t = np.sort(rng.uniform(0.0, span, n))
    abs_ms = _ms(scenario.start) + _to_ms(t)
    times = _iso_array(0, abs_ms)
    model = _version_at(endpoint, versions, t)
    labels = spec.labels
    predicted = rng.integers(0, len(labels), n)
    confidence = np.round(rng.beta(5.0, 2.0, n), 4)
    prompt_tokens = rng.integers(8, 2048, n)
    max_tokens = rng.choice([64, 128, 256, 512], n)
    language = rng.integers(0, len(_LANGUAGES), n)
    temperature = np.round(rng.uniform(0.0, 1.0, n), 2)
    gets_outcome = rng.uniform(size=n) < spec.outcome_share
    delay = _seconds(spec.outcome_delay) * rng.uniform(0.5, 1.5, n)
    hit = rng.uniform(size=n)
    correct = hit < confidence
    other = (predicted + rng.integers(1, len(labels), n)) % len(labels)
    _quality_faults(scenario, endpoint, versions, t, hit, confidence, correct, prompt_tokens, language, temperature)
    lines, outcome_ms, outcome_lines = [], [], []
    for i in range(n):
        request_id = str(uuid.UUID(_hex(f"{scenario.seed}/{endpoint.name}/request/{i}", 32)))
        lines.append(_dumps({
            "time": times[i], "endpoint": endpoint.name, "model_version": model[i], "request_id": request_id,
            "features": {"prompt_tokens": int(prompt_tokens[i]), "max_tokens": int(max_tokens[i]),
                         "language": _LANGUAGES[int(language[i])], "temperature": float(temperature[i])},
            "prediction": labels[int(predicted[i])], "confidence": float(confidence[i])}))
        if gets_outcome[i] and t[i] + delay[i] < span:
            ms = int(abs_ms[i] + _to_ms(np.array([delay[i]]))[0])
            outcome_ms.append(ms)
            outcome_lines.append(_dumps({
                "time": _iso(ms), "request_id": request_id, "endpoint": endpoint.name,
                "outcome": labels[int(predicted[i] if correct[i] else other[i])]}))
    return (abs_ms, lines), (np.array(outcome_ms, dtype=np.int64), outcome_lines)


def _quality_faults(scenario: Scenario, endpoint: Endpoint, versions: list[tuple[float, str]], t: np.ndarray,
                    hit: np.ndarray, confidence: np.ndarray, correct: np.ndarray, prompt_tokens: np.ndarray,
                    language: np.ndarray, temperature: np.ndarray) -> None:
    """The model-quality faults of ``endpoint`` (input_drift, bad_promotion, confidence_shift,
    business_metric_drop), applied in place to the prediction columns between onset and end. A
    prediction is right when ``hit`` (its uniform draw) is below its chance of being right, so a
    lower chance makes the same predictions wrong more often. Draws from a stream of its own, and
    only when such a fault exists, so other scenarios keep their bytes."""
    faults = [f for f in scenario.faults if f.target == f"endpoint:{endpoint.name}"
              and f.type in ("input_drift", "bad_promotion", "confidence_shift", "business_metric_drop")]
    for k, f in enumerate(faults):
        lo, hi = _window(f, scenario)
        on = (t >= lo) & (t < hi)
        m = f.magnitude
        if f.type == "bad_promotion" and not any(abs(at - lo) < 1.0 for at, _ in versions):
            raise ScenarioError(scenario.source, "faults", f"bad_promotion on {f.target} at {_iso(_ms(f.onset))} "
                                "is not at a promotion of the endpoint", "set its onset to a promotion's 'at'")
        if not on.any():
            continue
        rng = _rng(scenario.seed, "quality-fault", endpoint.name, k)
        if f.type == "input_drift":
            prompt_tokens[on] = np.clip(np.round(prompt_tokens[on] * (1.0 + m)), 8, 32768).astype(prompt_tokens.dtype)
            language[on & (rng.uniform(size=len(t)) < m / 2)] = _LANGUAGES.index("ja")
            temperature[on] = np.round(np.clip(temperature[on] + 0.3 * m, 0.0, 1.0), 2)
        elif f.type == "bad_promotion":
            correct[on] = hit[on] < confidence[on] * (1.0 - 0.4 * m)
            confidence[on] = np.round(confidence[on] * (1.0 - 0.25 * m), 4)
        elif f.type == "confidence_shift":
            confidence[on] = np.round(confidence[on] * (1.0 - 0.3 * m), 4)
        elif f.type == "business_metric_drop":
            correct[on] = hit[on] < confidence[on] * (1.0 - 0.5 * m)


def _run_config(run: Run) -> dict:
    config = {
        "job": run.job, "dataset": run.dataset, "world_size": run.ranks,
        "precision": run.precision, "tokens_per_step": run.tokens_per_step,
        "checkpoint_interval_steps": run.checkpoint_interval_steps,
        "learning_rate": [run.learning_rate.peak, run.learning_rate.warmup_steps,
                          run.learning_rate.min_ratio],
    }
    if run.learning_rate.drop_at_step is not None:
        config["learning_rate"] += [run.learning_rate.drop_at_step, run.learning_rate.drop_factor]
    if run.eval_interval_steps is not None:
        config["eval_interval_steps"] = run.eval_interval_steps
    return config


# --------------------------------------------------------------------------- #
# Writing
# --------------------------------------------------------------------------- #


class _Writer:
    """Splits each producer's time-sorted stream into hourly files under raw/."""

    def __init__(self, out: Path):
        self.out = out
        self.raw = out / "raw"
        self.files = 0
        self.rows = {s: 0 for s in SOURCES + SERVING_SOURCES}

    def reset(self) -> None:
        # Only the simulator's own outputs: stale hours from an earlier run would
        # otherwise survive next to the new ones.
        for source in SOURCES + SERVING_SOURCES:
            shutil.rmtree(self.raw / source, ignore_errors=True)
        (self.out / "ground_truth.jsonl").unlink(missing_ok=True)
        self.out.mkdir(parents=True, exist_ok=True)

    def write(self, source: str, producer: str, abs_ms: np.ndarray, lines: list[str]) -> None:
        if not lines:
            return
        abs_ms = np.asarray(abs_ms)
        if len(abs_ms) > 1 and (np.diff(abs_ms) < 0).any():
            order = np.argsort(abs_ms, kind="stable")
            abs_ms = abs_ms[order]
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
# JSON lines, built column by column
# --------------------------------------------------------------------------- #

_NULL = object()  # a constant field whose value is JSON null


def _json_lines(fields: list[tuple[str, object]], varying: dict[str, list[str]]) -> list[str]:
    """Lines identical to ``json.dumps(record, separators=(",", ":"))`` for records whose keys
    are ``fields`` in order: constant values are encoded once, varying ones come as lists of
    already-encoded JSON values (``_enc_*``). Much faster than a dict and dumps per record."""
    parts, cols = [], []
    for key, const in fields:
        prefix = json.dumps(key) + ":"
        if key in varying:
            parts.append(prefix + "%s")
            cols.append(varying[key])
        else:
            value = None if const is _NULL else const
            parts.append(prefix + json.dumps(value, allow_nan=False).replace("%", "%%"))
    template = "{" + ",".join(parts) + "}"
    return [template % row for row in zip(*cols)]


def _interleave(per_gpu: list[list[str]]) -> list[str]:
    """[[a0, a1], [b0, b1]] -> [a0, b0, a1, b1] (time-major, GPU-minor)."""
    return [x for row in zip(*per_gpu) for x in row]


def _enc_floats(values: np.ndarray, decimals: int, null: np.ndarray | None = None) -> list[str]:
    """Rounded floats as JSON; non-finite ones as the strings the contract uses, masked as null."""
    rounded = np.round(np.asarray(values, dtype=float), decimals) + 0.0  # +0.0 turns -0.0 into 0.0
    out = list(map(float.__repr__, rounded.tolist()))
    if not np.isfinite(rounded).all():
        for i in np.flatnonzero(~np.isfinite(rounded)).tolist():
            x = rounded[i]
            out[i] = '"NaN"' if np.isnan(x) else ('"Infinity"' if x > 0 else '"-Infinity"')
    if null is not None and null.any():
        for i in np.flatnonzero(null).tolist():
            out[i] = "null"
    return out


def _enc_ints(values: np.ndarray, null: np.ndarray | None = None) -> list[str]:
    out = list(map(str, np.asarray(values, dtype=np.int64).tolist()))
    if null is not None and null.any():
        for i in np.flatnonzero(null).tolist():
            out[i] = "null"
    return out


def _enc_bools(values: np.ndarray) -> list[str]:
    return ["true" if v else "false" for v in np.asarray(values).tolist()]


def _enc_strs(values: list) -> list[str]:
    cache: dict = {None: "null"}  # few distinct values (run ids)
    return [cache.get(v) or cache.setdefault(v, json.dumps(v)) for v in values]


def _enc_times(stamps: list[str]) -> list[str]:
    """ISO timestamps need no escaping."""
    return ['"' + x + '"' for x in stamps]


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


def _hex(text: str, length: int) -> str:
    """Deterministic fake digest (git shas, config hashes, checkpoint file hashes)."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _dumps(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"), allow_nan=False)
