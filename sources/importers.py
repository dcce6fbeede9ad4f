"""Importers for logs users already have: TensorBoard event files, Megatron-LM / Megatron-DeepSpeed /
NeMo iteration lines, and prediction logs (JSONL or Parquet), into raw-zone records.

An import rewrites its own producer files (`<run_id>.rank-<r>.<kind>-<digest of the input path>`),
so importing the same log again replaces what it wrote instead of doubling it. A line or value that
cannot be used comes back as a reject and is written as a `quarantine_reason` line, which the
ingest moves to the quarantine table with the reason; the good records around it are kept.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sources.client import iso_utc, replace_hour_files


class ImportErrorForUser(ValueError):
    """An input that cannot be imported at all (missing file, unknown format): one line."""


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


def _inputs(paths, pattern: str) -> list[Path]:
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.rglob(pattern) if f.is_file())
        elif p.is_file():
            files.append(p)
        else:
            raise ImportErrorForUser(f"{p}: no such file or folder")
    if not files:
        raise ImportErrorForUser(f"no input files matching {pattern!r} under {', '.join(map(str, paths))}")
    return files


def _producer(run_id: str, rank: int, kind: str, path: Path) -> str:
    return f"{run_id}.rank-{rank}.{kind}-{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]}"


def _write(raw_root, source, producer, records, rejects) -> int:
    return len(replace_hour_files(raw_root, source, producer, records, rejects))


# -- TensorBoard ---------------------------------------------------------------------------------
def tensorboard_steps(path: Path, run_id: str, rank: int, tag_map: dict[str, str]) -> tuple[list[dict], list[dict]]:
    """Step records from one event file: one per step, the mapped scalars of that step."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    lowered = {k.lower(): v for k, v in tag_map.items()}
    steps: dict[int, dict] = {}
    rejects = []
    try:
        events = list(EventFileLoader(str(path)).Load())
    except Exception as error:  # noqa: BLE001 - a corrupt file must not stop the others
        raise ImportErrorForUser(f"{path}: not a readable TensorBoard event file ({type(error).__name__}: {error})") from None
    for event in events:
        for value in event.summary.value:
            tag = value.tag.lower()
            field = lowered.get(tag) or lowered.get(tag.rsplit("/", 1)[-1])
            if field is None:
                continue
            if value.HasField("tensor"):
                array = tensor_util.make_ndarray(value.tensor)
                if array.size != 1:
                    continue
                number = float(array.reshape(-1)[0])
            else:
                number = float(value.simple_value)
            time = iso_utc(event.wall_time)
            if math.isinf(number) or (math.isnan(number) and field != "loss"):
                rejects.append({"time": time, "raw": f"{value.tag} step={event.step} value={number}",
                                "reason": f"non-finite {value.tag} ({number}) is not a usable {field}"})
                continue
            record = steps.setdefault(event.step, {"run_id": run_id, "rank": rank, "step": int(event.step)})
            record[field] = int(number) if field == "tokens" else number
            record["time"] = max(record.get("time", time), time)
    return [steps[s] for s in sorted(steps)], rejects


def import_tensorboard(paths, raw_root, run_id: str | None, rank: int = 0, tag_map: dict | None = None) -> dict:
    if not run_id:
        raise ImportErrorForUser("--run-id is required: TensorBoard files do not name the run")
    tag_map = {**DEFAULT_TAG_MAP, **(tag_map or {})}
    inputs = _inputs(paths, "events.out.tfevents.*")
    records = files = rejected = 0
    for path in inputs:
        steps, rejects = tensorboard_steps(path, run_id, rank, tag_map)
        files += _write(raw_root, "training_steps", _producer(run_id, rank, "tensorboard", path), steps, rejects)
        records += len(steps)
        rejected += len(rejects)
    return {"inputs": len(inputs), "records": records, "files": files, "rejected": rejected}


# -- Megatron-LM / Megatron-DeepSpeed / NeMo -----------------------------------------------------
_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
_STAMP = re.compile(r"\[?(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?)\]?")
_DATETIME_LINE = re.compile(r"datetime:\s*(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
_MEGATRON_FIELDS = {
    "lm loss": "loss", "loss": "loss", "learning rate": "learning_rate", "lr": "learning_rate",
    "loss scale": "loss_scale", "grad norm": "grad_norm", "global batch size": "global_batch_size",
    "consumed samples": "consumed_samples", "consumed tokens": "tokens",
    "number of skipped iterations": "skipped_iterations", "number of nan iterations": "nan_iterations",
    "tflops": "tflops", "throughput per gpu (tflop/s/gpu)": "tflops",
}


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace(" ", "T")).replace(tzinfo=timezone.utc)


def megatron_steps(lines, run_id: str, rank: int, start_time: datetime | None = None) -> tuple[list[dict], list[dict]]:
    """Step records from Megatron-style log lines; other lines are skipped. Times: the line's own
    `[YYYY-MM-DD HH:MM:SS]`, else the last timestamp seen plus the elapsed iteration times since."""
    records, rejects = [], []
    anchor = start_time
    last_iteration = None
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\n")
        found = _DATETIME_LINE.search(line)
        match = _ITERATION.search(line)
        if match is None:
            if found:
                anchor, last_iteration = _stamp(found.group(1)), None
            continue
        try:
            iteration = int(match.group(1))
            fields: dict = {}
            seconds = None
            for part in match.group(3).split("|"):
                if ":" not in part:
                    continue
                key, _, text = part.partition(":")
                key, text = key.strip().lower(), text.strip()
                if not text:
                    continue
                if key.startswith("elapsed time per iteration"):
                    seconds = float(text) / (1000.0 if "(ms)" in key else 1.0)
                elif key in _MEGATRON_FIELDS:
                    value = float(text)
                    fields[_MEGATRON_FIELDS[key]] = int(value) if _MEGATRON_FIELDS[key] in (
                        "tokens", "consumed_samples", "global_batch_size", "skipped_iterations", "nan_iterations") else value
        except ValueError as error:
            rejects.append({"line": number, "raw": line, "reason": f"malformed iteration line: {error}"})
            continue
        prefix = line[:match.start()]
        stamp = _STAMP.search(prefix)
        if stamp:
            when = _stamp(stamp.group(1))
            anchor, last_iteration = when, iteration
        elif anchor is not None and seconds is not None:
            done = iteration - (last_iteration if last_iteration is not None else 0)
            when = anchor + timedelta(seconds=seconds * max(done, 0))
            anchor, last_iteration = when, iteration
        else:
            rejects.append({"line": number, "raw": line,
                            "reason": "no timestamp on or before this iteration line: pass --start-time or log with timestamps"})
            continue
        record = {"time": iso_utc(when), "run_id": run_id, "rank": rank, "step": iteration, **fields}
        if seconds is not None:
            record["step_seconds"] = seconds
        records.append(record)
    for reject in rejects:
        reject["time"] = records[0]["time"] if records else iso_utc(start_time or datetime.now(timezone.utc))
    return records, rejects


def import_megatron(paths, raw_root, run_id: str | None, rank: int = 0, start_time: datetime | None = None) -> dict:
    if not run_id:
        raise ImportErrorForUser("--run-id is required: Megatron logs do not name the run")
    inputs = _inputs(paths, "*.log")
    records = files = rejected = 0
    for path in inputs:
        with open(path, encoding="utf-8", errors="replace") as fh:
            steps, rejects = megatron_steps(fh, run_id, rank, start_time)
        files += _write(raw_root, "training_steps", _producer(run_id, rank, "megatron", path), steps, rejects)
        records += len(steps)
        rejected += len(rejects)
    return {"inputs": len(inputs), "records": records, "files": files, "rejected": rejected}


# -- Prediction logs -----------------------------------------------------------------------------
def _prediction_rows(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pandas as pd

        frame = pd.read_parquet(path)
        return json.loads(frame.to_json(orient="records", date_format="iso", date_unit="ms"))
    rows = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    rows.append({"_unparsed": line.rstrip("\n")})
    return rows


def import_predictions(paths, raw_root, endpoint: str | None = None) -> dict:
    """Prediction logs (JSONL or Parquet) -> raw predictions; rows that carry only an outcome for an
    earlier request id (no prediction) -> raw prediction_outcomes."""
    inputs = [p for p in _inputs(paths, "*") if p.suffix in (".jsonl", ".json", ".parquet")]
    records = files = rejected = 0
    for path in inputs:
        predictions, outcomes, rejects = [], [], []
        for row in _prediction_rows(path):
            if "_unparsed" in row or not isinstance(row, dict) or not row.get("time"):
                rejects.append({"raw": json.dumps(row)[:2000], "reason": "not a JSON object with a time"})
                continue
            try:
                row["time"] = iso_utc(datetime.fromisoformat(str(row["time"]).replace("Z", "+00:00")))
            except ValueError:
                rejects.append({"raw": json.dumps(row)[:2000], "reason": f"time {row['time']!r} is not ISO-8601"})
                continue
            if endpoint and not row.get("endpoint"):
                row["endpoint"] = endpoint
            if "prediction" in row and row["prediction"] is not None and not isinstance(row["prediction"], str):
                row["prediction"] = json.dumps(row["prediction"])
            if "outcome" in row and row["outcome"] is not None and not isinstance(row["outcome"], str):
                row["outcome"] = json.dumps(row["outcome"])
            (outcomes if "prediction" not in row and "outcome" in row else predictions).append(row)
        first = (predictions or outcomes or [{"time": iso_utc()}])[0]["time"]
        for reject in rejects:
            reject["time"] = first
        producer = f"import-{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]}"
        files += _write(raw_root, "predictions", producer, predictions, rejects)
        files += _write(raw_root, "prediction_outcomes", producer, outcomes, [])
        records += len(predictions) + len(outcomes)
        rejected += len(rejects)
    return {"inputs": len(inputs), "records": records, "files": files, "rejected": rejected}
