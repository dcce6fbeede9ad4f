"""Small helpers every part of the simulator uses: seeded random streams per entity, time in
milliseconds and ISO text, fault windows, deterministic fake digests and compact JSON."""

from __future__ import annotations

import hashlib
import json
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ONE_MS = timedelta(milliseconds=1)


def stream(seed: int, *labels) -> np.random.Generator:
    """A generator per entity, so adding a run or host leaves the others' draws unchanged."""
    key = zlib.crc32("/".join(str(x) for x in labels).encode())
    return np.random.default_rng([seed, key])


def secs(td: timedelta) -> float:
    return td.total_seconds()


def epoch_ms(t: datetime) -> int:
    """Milliseconds since the Unix epoch (exact integer arithmetic)."""
    return (t - EPOCH) // ONE_MS


def ms_of(td: timedelta) -> int:
    return td // ONE_MS


def to_ms(seconds: np.ndarray) -> np.ndarray:
    # floor, not round: a time just before a hang's onset must stay before it.
    return np.floor(np.asarray(seconds) * 1000.0 + 1e-6).astype(np.int64)


def iso(abs_ms: int) -> str:
    return iso_array(0, np.array([abs_ms]))[0]


def iso_array(base_ms: int, ms: np.ndarray) -> list[str]:
    stamps = np.datetime_as_string((base_ms + np.asarray(ms, dtype=np.int64)).astype("datetime64[ms]"),
                                   unit="ms")
    return [s + "Z" for s in stamps.tolist()]


def fake_hex(text: str, length: int) -> str:
    """Deterministic fake digest (git shas, config hashes, checkpoint file hashes)."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def dumps(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"), allow_nan=False)


def fault_window(f, scenario) -> tuple[float, float]:
    """A fault's [onset, end) in seconds since the scenario start."""
    return secs(f.onset - scenario.start), secs(f.end - scenario.start)


def in_intervals(t: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """Mask of ``t`` inside any [start, end) of sorted, non-overlapping ``intervals``."""
    if len(intervals) == 0:
        return np.zeros(t.shape, dtype=bool)
    i = np.searchsorted(intervals[:, 0], t, side="right") - 1
    return (i >= 0) & (t < intervals[np.maximum(i, 0), 1])


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
