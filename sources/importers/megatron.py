"""Megatron-LM / Megatron-DeepSpeed / NeMo (Megatron-core) iteration lines -> training step records.

The line is the one `training_log` in Megatron-LM's `megatron/training/training.py` prints every
`--log-interval` iterations:

     [2024-05-01 10:00:00] iteration      100/  500000 | consumed samples: 51200 | elapsed time per
     iteration (ms): 1234.5 | learning rate: 3.000000E-04 | global batch size:   512 | lm loss:
     7.123456E+00 | loss scale: 65536.0 | grad norm: 1.234 | number of skipped iterations:   0 |
     number of nan iterations:   0 |

What the numbers mean, and so where they go:
- A loss is the interval's average and is printed only when it is positive (`if avg > 0.0`): an
  interval whose loss went NaN prints no `lm loss` at all. A line that lacks the loss the rest of
  the log prints is therefore a non-finite loss (NaN, with the reason in `loss_reason`), except
  when every iteration of the interval was skipped (fp16 loss-scale overflow: no loss was summed).
- `number of skipped iterations` / `number of nan iterations` count the interval only; the table's
  `skipped_iterations_total` / `nan_iterations_total` are counters, so they are summed along the log.
- `consumed tokens` (Megatron-DeepSpeed) and `consumed samples` are cumulative. The per-step `tokens`
  is global batch size x tokens per sample (consumed tokens / consumed samples), else the
  interval's increase of consumed tokens over its iterations.
- Times: the line's own `[YYYY-MM-DD HH:MM:SS]` when printed; otherwise the last `datetime:` line
  (or `--start-time`) plus the iterations done since x the time per iteration. A run resumed from a
  checkpoint starts counting at its checkpoint's iteration, not at 0 (`... at iteration N` when
  the log says so, else the log interval the segment shows).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sources.importers.common import (
    ImportErrorForUser,
    Parsed,
    anchor_for,
    bounded_time,
    finish,
    inputs,
    producer,
    start_times,
    write_all,
)

ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
STAMP = re.compile(r"\[?(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?)\]?")
DATETIME_LINE = re.compile(r"datetime:\s*(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
# "successfully loaded checkpoint from ... at iteration 31000" (Megatron-LM, Megatron-DeepSpeed)
LOADED_AT = re.compile(r"loaded checkpoint .*\bat iteration\s+(\d+)", re.IGNORECASE)
LOSS_KEYS = ("lm loss", "loss", "reduced_train_loss")
FLOATS = {
    "lm loss": "loss", "loss": "loss", "reduced_train_loss": "loss", "learning rate": "learning_rate", "lr": "learning_rate",
    "loss scale": "loss_scale", "grad norm": "grad_norm",
}
COUNTS = {
    "global batch size": "global_batch_size", "consumed samples": "consumed_samples", "consumed tokens": "consumed_tokens",
    "number of skipped iterations": "skipped", "number of nan iterations": "nan",
}


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace(" ", "T")).replace(tzinfo=timezone.utc)


class _Line:
    """One iteration line, parsed (times and totals are placed later, knowing the whole segment)."""

    def __init__(self, number: int, raw: str, iteration: int, values: dict, seconds: float | None,
                 stamp: datetime | None, segment: int):
        self.number, self.raw, self.iteration, self.values = number, raw, iteration, values
        self.seconds, self.stamp, self.segment = seconds, stamp, segment


def _parse_line(number: int, line: str, match: re.Match, segment: int) -> _Line:
    """ValueError (with what is wrong) for a line that cannot be used."""
    iteration = int(match.group(1))
    values: dict = {}
    seconds = None
    for part in match.group(3).split("|"):
        key, sep, text = part.partition(":")
        key, text = key.strip().lower(), text.strip()
        if not sep or not text:
            continue
        if key.startswith("elapsed time per iteration"):
            seconds = float(text) / (1000.0 if "(ms)" in key else 1.0)
            if not math.isfinite(seconds) or seconds < 0:
                raise ValueError(f"elapsed time per iteration {text!r} is not a duration")
        elif key in FLOATS:
            values[FLOATS[key]] = float(text)
        elif key in COUNTS:
            value = float(text)
            if not math.isfinite(value) or value < 0 or value != int(value):
                raise ValueError(f"{key} {text!r} is not a count")
            values[COUNTS[key]] = int(value)
        elif key.startswith("throughput per gpu") or key == "tflops":
            values["tflops"] = float(text)
    stamp = STAMP.search(line[:match.start()])
    when = None
    if stamp:
        try:
            when = _stamp(stamp.group(1))
        except ValueError:
            raise ValueError(f"timestamp {stamp.group(1)!r} is not a date") from None
    return _Line(number, line, iteration, values, seconds, when, segment)


def _segments(lines: list[_Line]) -> dict[int, int]:
    """Each segment's typical log interval (the most common iteration gap), for its first line."""
    gaps: dict[int, Counter] = {}
    for a, b in zip(lines, lines[1:]):
        if a.segment == b.segment and b.iteration > a.iteration:
            gaps.setdefault(a.segment, Counter())[b.iteration - a.iteration] += 1
    overall = sum(gaps.values(), Counter())
    default = overall.most_common(1)[0][0] if overall else 0
    return {s: (c.most_common(1)[0][0] if c else default) for s, c in gaps.items()} | {"default": default}


def megatron_parse(lines, run_id: str, rank: int, start_time: datetime | None = None) -> tuple[list[dict], list[dict], list[str]]:
    """(records, rejects, notes) from Megatron-style log lines; other lines are skipped."""
    parsed: list[_Line] = []
    rejects: list[dict] = []
    anchors: dict[int, datetime | None] = {0: start_time}
    loaded: dict[int, int] = {}
    segment, pending_load = 0, None
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\n")
        match = ITERATION.search(line)
        if match is None:
            found = DATETIME_LINE.search(line)
            if found:
                try:
                    stamp = _stamp(found.group(1))
                except ValueError:
                    rejects.append({"line": number, "raw": line, "reason": f"datetime {found.group(1)!r} is not a date"})
                    continue
                segment += 1
                anchors[segment] = stamp
                if pending_load is not None:   # the load is logged before the new launch's datetime line
                    loaded[segment], pending_load = pending_load, None
            elif (load := LOADED_AT.search(line)) is not None:
                pending_load = int(load.group(1))
            continue
        if pending_load is not None and not any(p.segment == segment for p in parsed[-1:]):
            loaded[segment], pending_load = pending_load, None
        try:
            parsed.append(_parse_line(number, line, match, segment))
        except ValueError as error:
            rejects.append({"line": number, "raw": line, "reason": f"malformed iteration line: {error}"})
    records, notes = _place(parsed, anchors, loaded, rejects)
    return records, rejects, notes


def _place(parsed: list[_Line], anchors: dict, loaded: dict, rejects: list[dict]) -> tuple[list[dict], list[str]]:
    intervals = _segments(parsed)
    prints_loss = any("loss" in p.values for p in parsed)
    records, notes = [], Counter()
    nan_total = skipped_total = 0
    anchor, last_iteration, current = None, None, None
    for p in parsed:
        if p.segment != current:
            current, anchor, last_iteration = p.segment, anchors.get(p.segment), loaded.get(p.segment)
        # iterations this line's interval covers (its averages are over them)
        done = p.iteration - last_iteration if last_iteration is not None else intervals.get(p.segment, intervals["default"])
        done = max(done, 0)
        if p.stamp is None and (anchor is None or p.seconds is None):
            rejects.append({"line": p.number, "raw": p.raw, "reason": "no timestamp on or before this iteration line: "
                            "pass --start-time (the time training started), or log with timestamps"})
            continue
        try:
            when = p.stamp if p.stamp is not None else anchor + timedelta(seconds=p.seconds * done)
            time = bounded_time(when)
        except OverflowError:
            rejects.append({"line": p.number, "raw": p.raw, "reason": "time out of range (iterations x time per iteration)"})
            continue
        except ValueError as error:
            rejects.append({"line": p.number, "raw": p.raw, "reason": str(error)})
            continue
        anchor, last_iteration = when, p.iteration
        v = p.values
        record = {"time": time, "step": p.iteration}
        for field in ("loss", "learning_rate", "loss_scale", "grad_norm", "tflops"):   # tflops: the MFU of issue 20
            if field in v:
                record[field] = v[field]
        if p.seconds is not None:
            record["step_seconds"] = p.seconds
        if "loss" not in v and (prints_loss or v.get("nan")):
            all_skipped = done > 0 and v.get("skipped", 0) >= done and not v.get("nan")
            if all_skipped:
                record["loss_reason"] = f"no loss printed: all {done} iterations of the interval were skipped (loss-scale overflow)"
            else:
                record["loss"] = math.nan
                record["loss_reason"] = ("no loss printed: Megatron omits a non-finite interval loss"
                                         + (f" ({v['nan']} nan iteration(s))" if v.get("nan") else ""))
            notes[record["loss_reason"].split(":")[0] + ": " + ("skipped" if all_skipped else "read as NaN")] += 1
        if "nan" in v:
            nan_total += v["nan"]
            record["nan_iterations_total"] = nan_total
        if "skipped" in v:
            skipped_total += v["skipped"]
            record["skipped_iterations_total"] = skipped_total
        tokens = _tokens_per_step(v, records[-1] if records and records[-1]["_segment"] == p.segment else None, done)
        if tokens is not None:
            record["tokens"] = tokens
        record["_segment"], record["_consumed_tokens"] = p.segment, v.get("consumed_tokens")
        records.append(record)
    for r in records:
        del r["_segment"], r["_consumed_tokens"]
    return records, [f"{n} line(s) {what}" for what, n in notes.items()]


def _tokens_per_step(v: dict, previous: dict | None, done: int) -> int | None:
    if v.get("consumed_tokens") and v.get("consumed_samples") and v.get("global_batch_size"):
        return round(v["global_batch_size"] * v["consumed_tokens"] / v["consumed_samples"])
    if previous is not None and previous.get("_consumed_tokens") is not None and v.get("consumed_tokens") is not None and done > 0:
        increase = v["consumed_tokens"] - previous["_consumed_tokens"]
        return round(increase / done) if increase >= 0 else None
    return None


def megatron_steps(lines, run_id: str, rank: int, start_time: datetime | None = None) -> tuple[list[dict], list[dict]]:
    """Step records and rejects from Megatron-style log lines (tests and callers that hold lines)."""
    records, rejects, _ = megatron_parse(lines, run_id, rank, start_time)
    out = [{"run_id": run_id, "rank": rank, **r} for r in records]
    for reject in rejects:
        reject.setdefault("time", out[0]["time"] if out else bounded_time(start_time or datetime(2000, 1, 1, tzinfo=timezone.utc)))
    return out, rejects


def parse_megatron(path: Path, run_id: str, rank: int, start_time: datetime | None) -> Parsed:
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.readlines()
    records, rejects, notes = megatron_parse(lines, run_id, rank, start_time)
    if not records and not any(ITERATION.search(line) for line in lines):
        raise ImportErrorForUser(f"{path}: not a Megatron / NeMo training log (no `iteration N/M |` line in it)")
    return finish(path, [{"run_id": run_id, "rank": rank, **r} for r in records], rejects, notes)


def import_megatron(paths, raw_root, run_id: str | None, rank: int = 0, start_time: list[str] | datetime | None = None) -> dict:
    if not run_id:
        raise ImportErrorForUser("--run-id is required: Megatron logs do not name the run")
    default, per_file = (start_time, {}) if isinstance(start_time, datetime) or start_time is None else start_times(start_time)
    parsed = [(producer(run_id, rank, "megatron", p), parse_megatron(p, run_id, rank, anchor_for(p, default, per_file)))
              for p in inputs(paths, "*.log")]
    return write_all(raw_root, "training_steps", parsed)
