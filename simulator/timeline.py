"""Run timelines: when each rank of a run starts and ends each step, its checkpoint and evaluation
pauses and its hangs, in wall time (seconds since the scenario start).

Steps are drawn in *progress time* (seconds of useful work since the run started) and mapped to
wall time by inserting each stall's duration at its onset, so a hang stops step records exactly at
its onset and pushes the run's end later. The faults' ``slowdown`` effects add seconds to the steps
that start inside them; a fault that kills a rank cuts the run at the onset.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from .common import secs, stream
from .faults import Slowdown, effect, effects_with
from .model import Failure, Run, Scenario
from .physics import CONTEXT_BYTES, EVAL_S, RANK_SKEW_S, SAVE_S, SLOW_STEP_FACTOR, SLOW_STEP_P, STARTUP_S, STEP_SIGMA


@dataclass
class Timeline:
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


def build_timeline(scenario: Scenario, run: Run) -> Timeline:
    """Lay ``run`` out in wall time: its steps in progress time, then each stall inserted at its onset."""
    rng = stream(scenario.seed, "run", run.id)
    span = secs(scenario.duration)
    offset = secs(run.start - scenario.start)
    budget = secs(run.duration)  # progress time the run gets
    step_time = secs(run.step_time)
    interval = run.checkpoint_interval_steps

    startup = rng.uniform(*STARTUP_S)
    cluster = scenario.cluster
    total = (cluster.gpu.memory_total_bytes if not cluster.host_gpus  # a mixed cluster: each rank's own card
             else np.array([cluster.gpu_of(h).memory_total_bytes for h, _ in run.gpus], dtype=float))
    reserved = (total * rng.uniform(0.80, 0.86, run.ranks)).astype(np.int64)

    # Progress <-> wall: every hang inserts its duration at its onset (in progress time).
    hangs = sorted((f for f in scenario.faults if effect(f.type).stalls_run and f.target == f"run:{run.id}"),
                   key=lambda f: f.onset)
    hang_on = np.array([secs(f.onset - run.start) for f in hangs])
    hang_len = np.array([secs(f.duration) for f in hangs])
    hang_on_p = hang_on - np.concatenate([[0.0], np.cumsum(hang_len)[:-1]])
    shift = np.concatenate([[0.0], np.cumsum(hang_len)])

    def wall(p: np.ndarray) -> np.ndarray:
        # side="right": progress exactly at an onset is already stalled, so no step
        # record can carry the onset timestamp itself.
        return offset + p + shift[np.searchsorted(hang_on_p, p, side="right")]

    def progress(t: datetime) -> float:
        w = secs(t - run.start)
        return w - float(np.minimum(hang_len, np.maximum(w - hang_on, 0.0)).sum())

    slowdowns = slowdowns_of(scenario, run, step_time, progress)

    # Draw more steps than can fit; grow (deterministically) in the unlikely case that is short.
    n_cap = int(budget / step_time * 1.25) + 16
    while True:
        dur = step_time * rng.lognormal(-0.5 * STEP_SIGMA**2, STEP_SIGMA, n_cap)
        base = dur.copy()
        slow = rng.random(n_cap) < SLOW_STEP_P
        dur *= np.where(slow, rng.uniform(*SLOW_STEP_FACTOR, n_cap), 1.0)
        numbers = np.arange(1, n_cap + 1)
        save = np.where(numbers % interval == 0, rng.uniform(*SAVE_S, n_cap), 0.0)
        skew = rng.uniform(0.0, RANK_SKEW_S, (run.ranks, n_cap))
        xr = stream(scenario.seed, "run-x", run.id)
        evalp = np.zeros(n_cap)
        if run.eval_interval_steps:
            evalp = np.where(numbers % run.eval_interval_steps == 0, xr.uniform(*EVAL_S, n_cap), 0.0)
        pause = save + evalp  # evaluation first, then the checkpoint
        extra_data, extra_coll, extra_compute, step_s = apply_slowdowns(
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
        death = secs(failure.death - scenario.start)
        end = secs(failure.fail - scenario.start)  # nothing progresses after the death
        saves = saves[saves[:, 2] < death]
        evals = np.minimum(evals[evals[:, 0] < death], death)
        hang_iv = np.minimum(hang_iv[hang_iv[:, 0] < death], death)
        hang_iv = np.vstack([hang_iv, [[death, end]]])

    # Clip to the span: records at or after its end belong to the next window.
    keep = int(np.searchsorted(rank_end.max(axis=0), min(span, death), side="left"))
    return Timeline(
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


def slowdowns_of(scenario: Scenario, run: Run, step_time: float, progress) -> list[Slowdown]:
    """What the faults' registered ``slowdown`` effects add to ``run``'s steps, in fault order."""
    out = []
    for f, slowdown in effects_with(scenario.faults, "slowdown"):
        out.extend(slowdown(scenario, run, f, step_time, progress))
    return out


def apply_slowdowns(slowdowns, dur, pause, startup, ranks, xr):
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


def reserved_growth(scenario: Scenario, faults, t: np.ndarray) -> np.ndarray:
    """Bytes the faults' ``memory_growth`` effects (memory_fragmentation) add to the allocator's
    reservation at wall times ``t``."""
    growth = np.zeros(t.shape)
    for f, grow in effects_with(faults, "memory_growth"):
        growth += grow(scenario, f, t)
    return growth


def reserve_cap(scenario: Scenario, host: int) -> int:
    """The most the caching allocator can reserve: the card less the CUDA context and slack."""
    return scenario.cluster.gpu_of(host).memory_total_bytes - CONTEXT_BYTES - 268_435_456


def rank_factor(rank: int) -> float:
    """A fixed per-rank spread (0.9-1.1) for effects that differ a little between ranks."""
    return 0.9 + 0.2 * (zlib.crc32(str(rank).encode()) % 1000) / 1000


def host_clock_ms(scenario: Scenario, host: int, t: np.ndarray) -> np.ndarray:
    """Milliseconds the host's clock is off at ``t`` (its ``host_clock`` effects); zeros on a true clock."""
    off = np.zeros(len(t), dtype=np.int64)
    for f, skew in effects_with(scenario.faults, "host_clock"):
        if f.host == host:
            off += np.round(skew(scenario, f, t) * 1000.0).astype(np.int64)
    return off
