"""The replay's growing home: its raw zone and checkpoints, grown from a staged (simulated) copy as
simulated time passes (orchestration/evaluation/replay.py drives it tick by tick).

The raw zone grows line by line (`GrowingRawZone`): each staged line is appended to the same hour
file, in the same order, once its data has arrived (its time plus its source's data latency).

Checkpoints grow too (`GrowingCheckpoints`). The simulator writes a run's real checkpoint files into
the staging folder (`<staging>/checkpoints/<run>/step-NNNNNN/`) and its `checkpoint_saved` lineage
line names them relative to the home, so without this the replay home has none and every audit
finds them `missing` (a false SEV1 per checkpoint). Each staged checkpoint a `checkpoint_saved`
line names (relative path, found in staging) is copied into the home at that line's arrival time
(its time + the lineage latency, exactly when the line itself is appended), and before the line:
a training job writes the files, then logs the save. Damage the simulator injected
(`checkpoint_truncated`, a leftover `.tmp`, ...) is in the staged files, so it arrives with them.
The copies' modification time is set to that arrival time in simulated time, so a checkpoint on
the home's disk is in the hour it was saved. Absolute lineage paths are left alone (the simulator
wrote those where they are). Files under the staged checkpoint roots (`checkpoints` and the first
folder of every named path) that no `checkpoint_saved` line names have no knowable simulated write
time (their mtime is the wall clock of the simulation), so they are copied after the last tick,
as they are: they take no part in the ticks, and the home ends with exactly the staged
checkpoints. (The simulator writes none today: a save that `checkpoint_overdue` skips writes
nothing.) Files are copied, not hard-linked: setting a copy's mtime must not touch the staging.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

# Seconds between a record's time and the moment its line is in the raw zone, per raw-zone folder.
# gpu_samples: the NVML agent (sources/nvml_agent) flushes its buffer every 10 s; training_steps: the
# client appends each step's record when the step ends (one ~2 s step after its time at most);
# lineage, serving and prediction records are written as they happen (the Prometheus pull runs
# inside the tick itself, so what it reads is current at the tick).
DEFAULT_LATENCY_S: dict[str, float] = {
    "gpu_samples": 10.0,
    "training_steps": 2.0,
    "lineage": 0.0,
    "serving_metrics": 0.0,
    "predictions": 0.0,
    "prediction_outcomes": 0.0,
}

_TIME = re.compile(rb'"time"\s*:\s*"([^"]*)"')


@dataclass
class StagedFile:
    """One staged raw file: where its lines end (byte offsets) and when each becomes available."""

    relative: Path          # under raw/: <source>/<YYYY-MM-DD>/<HH>/<producer>.jsonl
    data: bytes
    ends: list[int]         # byte offset just past each line (its newline, if it has one)
    available: list[float]  # epoch seconds from which the file holds this line (non-decreasing)
    written: int = 0        # lines appended so far


def index_file(path: Path, relative: Path, latency_s: float) -> StagedFile:
    """Split a staged file into lines and give each its arrival time.

    A line arrives `latency_s` after its record's time, and never before the lines above it (an
    append-only writer writes in order): a line without a readable time arrives with the one above.
    """
    data = path.read_bytes()
    ends, stamps = [], []
    start = 0
    while start < len(data):
        stop = data.find(b"\n", start)
        stop = len(data) if stop < 0 else stop + 1
        found = _TIME.search(data, start, stop)
        stamps.append(found.group(1).decode("utf-8", "replace") if found else None)
        ends.append(stop)
        start = stop
    times = pd.to_datetime(pd.Series(stamps, dtype="object"), utc=True, errors="coerce", format="ISO8601")
    seconds = (times - pd.Timestamp(0, tz="UTC")).dt.total_seconds().fillna(-np.inf).to_numpy()
    available = (np.maximum.accumulate(seconds) + latency_s).tolist() if len(seconds) else []
    return StagedFile(relative=relative, data=data, ends=ends, available=available)


class GrowingRawZone:
    """The home's raw zone, grown from a staged one as simulated time passes."""

    def __init__(self, staging_raw: Path, home_raw: Path, latency: dict[str, float] | None = None):
        self.home_raw = home_raw
        self.latency = {**DEFAULT_LATENCY_S, **(latency or {})}
        self.files = [
            index_file(path, path.relative_to(staging_raw), self.latency.get(path.relative_to(staging_raw).parts[0], 0.0))
            for path in sorted(staging_raw.rglob("*.jsonl"))
        ]

    def advance(self, now: datetime) -> int:
        """Append every line that has arrived by `now`; returns how many lines were appended."""
        cutoff = pd.Timestamp(now).timestamp()
        appended = 0
        for staged in self.files:
            upto = bisect.bisect_right(staged.available, cutoff)
            if upto <= staged.written:
                continue
            begin = staged.ends[staged.written - 1] if staged.written else 0
            target = self.home_raw / staged.relative
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "ab") as out:  # the same hour file, appended, as a producer does
                out.write(staged.data[begin:staged.ends[upto - 1]])
            appended += upto - staged.written
            staged.written = upto
        return appended

    def pending(self) -> int:
        return sum(len(f.ends) - f.written for f in self.files)


@dataclass
class StagedCheckpoint:
    """A staged checkpoint (folder or file) and when its `checkpoint_saved` line arrives."""

    relative: str          # as lineage names it, relative to the home
    available: float       # epoch seconds: its line's arrival time
    copied: bool = False


class GrowingCheckpoints:
    """The home's checkpoints, grown from the staged ones as their `checkpoint_saved` lines arrive."""

    def __init__(self, staging: Path, home: Path, raw: GrowingRawZone, roots: Iterable[str] = ("checkpoints",)):
        self.staging, self.home = staging, home
        named: dict[str, StagedCheckpoint] = {}
        for staged in raw.files:
            if staged.relative.parts[0] != "lineage":
                continue
            begin = 0
            for end, available in zip(staged.ends, staged.available):
                line = staged.data[begin:end]
                begin = end
                if b"checkpoint_saved" not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                path = record.get("checkpoint_path") if isinstance(record, dict) else None
                if (record.get("event") != "checkpoint_saved" or not isinstance(path, str) or not path
                        or Path(path).is_absolute() or ".." in Path(path).parts):
                    continue
                if not (staging / path).exists():
                    continue
                key = Path(path).as_posix()
                if key not in named or available < named[key].available:   # the first line naming it
                    named[key] = StagedCheckpoint(relative=key, available=available)
        self.checkpoints = sorted(named.values(), key=lambda c: (c.available, c.relative))
        self.roots = sorted(set(roots) | {Path(c.relative).parts[0] for c in self.checkpoints})

    def advance(self, now: datetime) -> int:
        """Copy every checkpoint whose line has arrived by `now`; returns how many were copied."""
        cutoff = pd.Timestamp(now).timestamp()
        copied = 0
        for checkpoint in self.checkpoints:
            if checkpoint.copied or checkpoint.available > cutoff:
                continue
            self._copy(self.staging / checkpoint.relative, self.home / checkpoint.relative, checkpoint.available)
            checkpoint.copied = True
            copied += 1
        return copied

    def unnamed(self) -> list[Path]:
        """Staged files under the checkpoint roots that no `checkpoint_saved` line names (relative)."""
        named = [Path(c.relative) for c in self.checkpoints]
        out = []
        for root in self.roots:
            for path in sorted((self.staging / root).rglob("*")):
                relative = path.relative_to(self.staging)
                if path.is_file() and not any(relative == n or n in relative.parents for n in named):
                    out.append(relative)
        return out

    def finish(self) -> int:
        """After the last tick: copy the staged files no line names, as they are; returns how many."""
        files = self.unnamed()
        for relative in files:
            target = self.home / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.staging / relative, target)
        return len(files)

    def pending(self) -> int:
        return sum(not c.copied for c in self.checkpoints)

    @staticmethod
    def _copy(source: Path, target: Path, at: float) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
            paths = [p for p in target.rglob("*")] + [target]
        else:
            shutil.copyfile(source, target)
            paths = [target]
        for path in paths:   # written when it was saved, in simulated time
            os.utime(path, (at, at))
