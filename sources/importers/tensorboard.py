"""TensorBoard event files -> training step records (one per step: the mapped scalars of that step)."""

from __future__ import annotations

import math
from pathlib import Path

from sources.importers.common import ImportErrorForUser, Parsed, bounded_time, finish, inputs, producer, write_all

# TensorBoard scalar tag -> step-record field. Matched on the whole tag, then on its last part.
DEFAULT_TAG_MAP = {
    "loss": "loss", "train/loss": "loss", "lm loss": "loss", "lm-loss-training/lm loss": "loss", "train_loss": "loss",
    "loss/train": "loss", "reduced_train_loss": "loss",
    "grad_norm": "grad_norm", "grad-norm": "grad_norm", "train/grad_norm": "grad_norm",
    "learning_rate": "learning_rate", "learning-rate": "learning_rate", "lr": "learning_rate", "train/lr": "learning_rate",
    "loss_scale": "loss_scale", "loss-scale": "loss_scale",
    "iteration-time": "step_seconds", "step_time": "step_seconds", "train_step_timing": "step_seconds",
    "tokens": "tokens",
}
STEP_FIELD_NAMES = {"loss", "grad_norm", "learning_rate", "loss_scale", "tokens", "step_seconds", "data_seconds",
                    "compute_seconds", "collective_seconds"}


def parse_tag_map(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        tag, sep, field = item.rpartition("=")
        if not sep or not tag or field not in STEP_FIELD_NAMES:
            raise ImportErrorForUser(f"--tag {item!r}: expected TAG=FIELD with FIELD one of {sorted(STEP_FIELD_NAMES)}")
        out[tag] = field
    return out


def _events(path: Path):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    try:
        return list(EventFileLoader(str(path)).Load())
    except Exception as error:  # noqa: BLE001 - a corrupt file must not stop the others
        raise ImportErrorForUser(f"{path}: not a readable TensorBoard event file ({type(error).__name__}: {error})") from None


def _scalar(value) -> float | None:
    from tensorboard.util import tensor_util

    if value.HasField("tensor"):
        array = tensor_util.make_ndarray(value.tensor)
        return float(array.reshape(-1)[0]) if array.size == 1 else None
    return float(value.simple_value)


def parse_tensorboard(path: Path, run_id: str, rank: int, tag_map: dict[str, str]) -> Parsed:
    """Step records from one event file. A file with no event at all (empty, garbage, another
    format) is the wrong kind: ImportErrorForUser."""
    lowered = {k.lower(): v for k, v in tag_map.items()}
    steps: dict[int, dict] = {}
    rejects = []
    events = _events(path)
    if not any(e.HasField("file_version") or e.HasField("summary") for e in events):
        raise ImportErrorForUser(f"{path}: no TensorBoard events in it (empty or not an event file); "
                                 "pass the events.out.tfevents.* files the writer made")
    for index, event in enumerate(events, start=1):
        for value in event.summary.value:
            tag = value.tag.lower()
            field = lowered.get(tag) or lowered.get(tag.rsplit("/", 1)[-1])
            if field is None:
                continue
            raw = f"{value.tag} step={event.step} wall_time={event.wall_time}"
            try:
                time = bounded_time(float(event.wall_time))
                number = _scalar(value)
            except ValueError as error:
                rejects.append({"line": index, "raw": raw, "reason": f"event {index}: wall {error}"})
                continue
            if number is None:
                continue
            if math.isinf(number) or (math.isnan(number) and field != "loss"):
                rejects.append({"line": index, "time": time, "raw": f"{raw} value={number}",
                                "reason": f"non-finite {value.tag} ({number}) is not a usable {field}"})
                continue
            if field == "tokens" and not (0 <= number < 2**63):
                rejects.append({"line": index, "time": time, "raw": f"{raw} value={number}",
                                "reason": f"{value.tag} ({number}) is not a token count"})
                continue
            record = steps.setdefault(event.step, {"run_id": run_id, "rank": rank, "step": int(event.step)})
            record[field] = int(number) if field == "tokens" else number
            record["time"] = max(record.get("time", time), time)
    return finish(path, [steps[s] for s in sorted(steps)], [{k: v for k, v in r.items()} for r in rejects])


def tensorboard_steps(path: Path, run_id: str, rank: int, tag_map: dict[str, str]) -> tuple[list[dict], list[dict]]:
    parsed = parse_tensorboard(path, run_id, rank, tag_map)
    return parsed.records, parsed.rejects


def import_tensorboard(paths, raw_root, run_id: str | None, rank: int = 0, tag_map: dict | None = None) -> dict:
    if not run_id:
        raise ImportErrorForUser("--run-id is required: TensorBoard files do not name the run")
    tag_map = {**DEFAULT_TAG_MAP, **(tag_map or {})}
    parsed = [(producer(run_id, rank, "tensorboard", p), parse_tensorboard(p, run_id, rank, tag_map))
              for p in inputs(paths, "events.out.tfevents.*")]
    return write_all(raw_root, "training_steps", parsed)
