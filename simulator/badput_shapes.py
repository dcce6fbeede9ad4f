"""Badput shapes for the simulator: restarts after a crash, logged evaluations, model FLOPs fields,
and the per-category truth of where each run's GPU time went.

The simulator (simulate.py) calls in here at a few hooks; this module owns what the badput
accounting needs to be tested against known durations (docs/scenario.md, "Badput shapes"):

* ``restart: {after: 5m}`` on a run: after the run is killed (a ``rank_dropout`` or an
  ``xid_error`` of magnitude >= 1), the launcher starts it again ``after`` the job failed, on the
  same GPUs: a new ``run_started``, a fresh start-up (which includes the checkpoint restore), and
  steps that continue from the last checkpoint saved before the crash, so the steps since that
  checkpoint are computed twice.
* ``log_evaluations: true``: the run logs an ``evaluation`` lineage event (with ``eval_seconds``)
  at the end of each evaluation pause, as ``GoodputClient.evaluation_done`` does.
* ``model: {layers, hidden, seq_len, vocab}``: step records carry ``parameters`` (12·L·h² + V·h,
  the GPT block count) and ``tflops``, the achieved model TFLOP/s per GPU by Megatron-LM's formula
  (which counts attention: 72·L·h²·tokens·(1 + s/(6h) + V/(12·L·h))), as its logs print it.
* ``badput_truth.json``: per run, the GPU-seconds the simulator put into each badput category.

It imports nothing from the record builders (which import it) and nothing of Dagster; the scenario
loader (scenario.py) reads ``restart:``, ``log_evaluations:`` and ``model:``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np

from .faults import effect

CATEGORIES = ("productive", "startup", "checkpoint_save", "data_stall", "evaluation", "hang", "idle",
              "slow_steps", "wasted_progress", "unexplained")


@dataclass(frozen=True)
class RestartSpec:
    """The launcher restarts a killed run ``after`` its job failed."""

    after: timedelta


@dataclass(frozen=True)
class ModelShape:
    """A GPT-style decoder: enough to count its parameters and its FLOPs per token."""

    layers: int
    hidden: int
    seq_len: int
    vocab: int

    @property
    def parameters(self) -> int:
        """12·L·h² (attention 4h², MLP 8h² per layer) + V·h (embeddings): the usual GPT count."""
        return 12 * self.layers * self.hidden**2 + self.vocab * self.hidden

    @property
    def megatron_flops_per_token(self) -> float:
        """Megatron-LM's model FLOPs per token (forward + backward, no recomputation): the 6N of the
        dense layers plus attention's score and value products, which grow with the sequence."""
        L, h, s, V = self.layers, self.hidden, self.seq_len, self.vocab
        return 72.0 * L * h * h * (1 + s / (6.0 * h) + V / (12.0 * L * h))


# --------------------------------------------------------------------------- restarts


def with_restarts(scenario, timelines: list, build, seconds) -> list:
    """``timelines`` plus one timeline per restart: the killed run started again on its GPUs,
    resuming after the last checkpoint saved before the crash (steps renumbered to continue)."""
    out = list(timelines)
    span = seconds(scenario.duration)
    for tl in timelines:
        run = tl.run
        if run.restart is None or tl.failure is None:
            continue
        again = tl.end + seconds(run.restart.after)
        if again >= span:
            continue
        saved = tl.saves[tl.saves[:, 2] <= tl.death]
        resumed = int(saved[-1, 0]) if len(saved) else 0
        done = max(float(saved[-1, 2]) - tl.first_step, 0.0) if len(saved) else 0.0
        remaining = max(seconds(run.duration) - done, 10 * seconds(run.step_time))
        attempt = dataclasses.replace(run, start=scenario.start + timedelta(seconds=again),
                                      duration=timedelta(milliseconds=round(remaining * 1000)), restart=None)
        # the restarted job runs clean: the faults that killed (or hit) the first attempt are over
        calm = dataclasses.replace(scenario, faults=tuple(f for f in scenario.faults if f.run_id != run.id))
        restarted = build(calm, attempt)
        restarted.steps = restarted.steps + resumed
        restarted.saves = restarted.saves + np.array([resumed, 0.0, 0.0])
        restarted.resumed_from = resumed
        out.append(restarted)
    return out


def merged(parts: list[tuple[np.ndarray, list[str]]]) -> tuple[np.ndarray, list[str]]:
    """One producer's records from several attempts, as one stream (the writer sorts by time)."""
    times = np.concatenate([np.asarray(t, dtype=np.int64) for t, _ in parts]) if parts else np.array([], np.int64)
    return times, [line for _, lines in parts for line in lines]


# --------------------------------------------------------------------------- records


def lineage_events(tl) -> list[tuple[float, dict]]:
    """Evaluation events of a run that logs them (the event's time is the pause's end)."""
    if not tl.run.log_evaluations:
        return []
    return [(float(b), {"event": "evaluation", "run_id": tl.run.id, "eval_seconds": round(float(b - a), 3)})
            for a, b in tl.evals.tolist()]


def step_fields(run, step_seconds: np.ndarray, encode) -> tuple[list[tuple[str, object]], dict[str, list[str]]]:
    """Extra step-record fields of a run with ``model:``: its parameter count (constant) and the
    TFLOP/s per GPU Megatron would print for each step."""
    if run.model is None:
        return [], {}
    flops = run.model.megatron_flops_per_token * run.tokens_per_step / np.maximum(step_seconds, 1e-9)
    return [("parameters", run.model.parameters), ("tflops", None)], {"tflops": encode(flops / 1e12, 3)}


# --------------------------------------------------------------------------- truth


def truth(scenario, timelines: list, seconds) -> dict:
    """Per run, the GPU-seconds the simulator spent in each badput category, from its own
    timelines (the injected durations, not a measurement):

    startup: run start -> first step; checkpoint_save / evaluation: the pauses; hang: the hangs and
    a crashed run's spin from its last completed step until the job failed (the dead rank's GPU is
    free from its death on); data_stall: the seconds a slow data pipeline added; slow_steps: every
    other second a step took beyond its draw before the occasional-slow-step factor (stragglers,
    throttling, slower collectives or kernels, the simulator's own occasional slow steps);
    wasted_progress: the steps a restart computed again; idle: spare GPUs an ``idle_allocated``
    fault holds for the run; unexplained: a run that ends mid-step, from its last completed step to its
end. productive is what is left of the held time."""
    span = seconds(scenario.duration)
    runs: dict[str, dict[str, float]] = {}
    discarded = {tl.run.id: tl.resumed_from for tl in timelines if getattr(tl, "resumed_from", None) is not None}
    for tl in timelines:
        ranks = tl.run.ranks
        c = runs.setdefault(tl.run.id, dict.fromkeys(CATEGORIES + ("allocated",), 0.0))
        start, end = tl.start, min(tl.end, span)
        held = ranks * (end - start)
        first = min(tl.first_step, end)
        c["startup"] += ranks * (first - start)
        c["checkpoint_save"] += ranks * float(np.sum(np.minimum(tl.saves[:, 2], end) - tl.saves[:, 1]))
        c["evaluation"] += ranks * float(np.sum(np.minimum(tl.evals[:, 1], end) - tl.evals[:, 0]))
        step_start = tl.rank_start.min(axis=0)
        step_end = tl.rank_end.max(axis=0)
        wasted = np.zeros(len(tl.steps), dtype=bool)
        if getattr(tl, "resumed_from", None) is None and tl.run.id in discarded:
            wasted = tl.steps > discarded[tl.run.id]
        hangs = np.minimum(tl.hangs, end)
        if tl.failure is not None:
            last = float(step_end[-1]) if len(step_end) else first
            hang_wall = float(np.sum(hangs[:-1, 1] - hangs[:-1, 0])) if len(hangs) > 1 else 0.0
            death = min(tl.death, end)
            c["hang"] += ranks * (hang_wall + max(death - last, 0.0)) + (ranks - 1) * max(end - death, 0.0)
            held -= max(end - death, 0.0)  # the dead rank's GPU is released at its death
        else:
            c["hang"] += ranks * float(np.sum(hangs[:, 1] - hangs[:, 0]))
        extra_data = tl.extra_data
        base = tl.base_seconds[: len(tl.steps)]
        took = np.median(tl.rank_end - tl.rank_start, axis=0) if len(tl.steps) else np.zeros(0)
        if tl.failure is None and len(step_end):
            # the job ended mid-step: nothing logged says what its last seconds were for
            c["unexplained"] += ranks * max(end - float(step_end[-1]), 0.0)
        stalled = _hang_seconds_inside(step_start, step_end, tl.hangs)
        slow = np.maximum(took - stalled - extra_data - base, 0.0)
        c["wasted_progress"] += ranks * float(np.sum(np.where(wasted, took - stalled, 0.0)))
        c["data_stall"] += ranks * float(np.sum(np.where(wasted, 0.0, extra_data)))
        c["slow_steps"] += ranks * float(np.sum(np.where(wasted, 0.0, slow)))
        c["allocated"] += held
    for f in scenario.faults:  # spare GPUs held idle for a run
        if not effect(f.type).holds_spare_gpu:
            continue
        run = scenario.host_run(f.gpu[0], f.onset)
        windows = [(tl.start, min(tl.end, span)) for tl in timelines if tl.run.id == run.id]
        a, b = seconds(f.onset - scenario.start), seconds(f.end - scenario.start)
        idle = sum(max(min(b, e) - max(a, s), 0.0) for s, e in windows)
        runs[run.id]["idle"] += idle
        runs[run.id]["allocated"] += idle
    for c in runs.values():
        c["productive"] = c["allocated"] - sum(c[k] for k in CATEGORIES if k != "productive")
    return runs


def _hang_seconds_inside(start: np.ndarray, end: np.ndarray, hangs: np.ndarray) -> np.ndarray:
    """Seconds of each step [start, end) that a hang stood still (a hang stretches the step it hits)."""
    out = np.zeros(len(start))
    for a, b in hangs.tolist():
        out += np.maximum(np.minimum(end, b) - np.maximum(start, a), 0.0)
    return out


def write_truth(out: Path, runs: dict) -> None:
    (Path(out) / "badput_truth.json").write_text(
        json.dumps({run: {k: round(v, 3) for k, v in c.items()} for run, c in sorted(runs.items())}, indent=1) + "\n")
