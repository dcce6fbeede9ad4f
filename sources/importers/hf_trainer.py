"""Hugging Face Trainer `trainer_state.json` (also what PyTorch Lightning users get through the
HF Trainer) -> training step records.

The Trainer saves `TrainerState` as JSON in each checkpoint folder and the output folder (the
transformers docs, `TrainerState`): `log_history` is a list of dicts, one per logging step
(`{"loss": 2.345, "grad_norm": 1.2, "learning_rate": 4.9e-05, "epoch": 0.02, "step": 10}`), per
evaluation (`eval_loss`, ...) and a last summary (`train_runtime`, `train_steps_per_second`, ...).
A NaN loss is written as JSON `NaN` and kept as a non-finite loss.

Entries carry no time. A record's time is `--start-time` plus its step x the seconds per step,
from the summary's `train_runtime` / `global_step` (or `--step-seconds`).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path

from sources.importers.common import ImportErrorForUser, Parsed, anchor_for, bounded_time, finish, inputs, producer, write_all

FIELDS = {"loss": "loss", "grad_norm": "grad_norm", "learning_rate": "learning_rate"}


def _state(path: Path) -> dict:
    try:
        state = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError:
        raise ImportErrorForUser(f"{path}: not JSON; pass a Trainer's trainer_state.json") from None
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise ImportErrorForUser(f"{path}: not a trainer_state.json (no log_history list in it)")
    return state


def _seconds_per_step(state: dict, step_seconds: float | None) -> float | None:
    if step_seconds:
        return step_seconds
    for entry in reversed(state["log_history"]):
        if not isinstance(entry, dict):
            continue
        runtime, steps = entry.get("train_runtime"), entry.get("step") or state.get("global_step")
        if isinstance(runtime, (int, float)) and isinstance(steps, int) and steps > 0 and runtime > 0:
            return runtime / steps
    return None


def parse_trainer_state(path: Path, run_id: str, rank: int, start_time: datetime | None, step_seconds: float | None) -> Parsed:
    state = _state(path)
    per_step = _seconds_per_step(state, step_seconds)
    if start_time is None or per_step is None:
        raise ImportErrorForUser(f"{path}: trainer_state.json entries carry no time: pass --start-time"
                                 + ("" if per_step else " and --step-seconds (no train_runtime in it)"))
    records, rejects, dropped = [], [], 0
    for number, entry in enumerate(state["log_history"], start=1):
        if not isinstance(entry, dict):
            rejects.append({"line": number, "raw": json.dumps(entry), "reason": f"log_history entry {number} is not an object"})
            continue
        values = {FIELDS[k]: v for k, v in entry.items() if k in FIELDS}
        if not values:
            continue   # an evaluation or the summary
        step = entry.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            rejects.append({"line": number, "raw": json.dumps(entry), "reason": f"log_history entry {number}: step {step!r} is not a step"})
            continue
        bad = [k for k, v in values.items() if not isinstance(v, (int, float)) or isinstance(v, bool)]
        for key in [k for k, v in values.items() if k != "loss" and k not in bad and not math.isfinite(v)]:
            del values[key]   # a NaN grad norm beside a NaN loss: the loss is the evidence, keep the record
            dropped += 1
        if bad:
            rejects.append({"line": number, "raw": json.dumps(entry),
                            "reason": f"log_history entry {number}: {', '.join(bad)} is not a finite number"})
            continue
        try:
            time = bounded_time(start_time + timedelta(seconds=step * per_step))
        except (ValueError, OverflowError) as error:
            rejects.append({"line": number, "raw": json.dumps(entry), "reason": f"log_history entry {number}: {error}"})
            continue
        records.append({"time": time, "run_id": run_id, "rank": rank, "step": step, **values, "step_seconds": per_step})
    return finish(path, records, rejects, [f"{dropped} non-finite grad norm / learning rate value(s) left null"] if dropped else [])


def import_hf_trainer(paths, raw_root, run_id: str | None, rank: int = 0, start_time=None, per_file=None,
                      step_seconds: float | None = None) -> dict:
    if not run_id:
        raise ImportErrorForUser("--run-id is required: trainer_state.json does not name the run")
    parsed = [(producer(run_id, rank, "hf-trainer", p),
               parse_trainer_state(p, run_id, rank, anchor_for(p, start_time, per_file or {}), step_seconds))
              for p in inputs(paths, "trainer_state.json")]
    return write_all(raw_root, "training_steps", parsed)
