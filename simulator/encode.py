"""Writing the raw zone: each producer's time-sorted records split into hourly JSON-lines files,
and the JSON lines themselves built column by column (fast and byte-for-byte deterministic)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

SOURCES = ("gpu_samples", "training_steps", "lineage")
SERVING_SOURCES = ("serving_metrics", "predictions", "prediction_outcomes")  # with ``endpoints:``
MS_PER_HOUR = 3_600_000



class Writer:
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
        hours = abs_ms // MS_PER_HOUR
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

NULL = object()  # a constant field whose value is JSON null


def json_lines(fields: list[tuple[str, object]], varying: dict[str, list[str]]) -> list[str]:
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
            value = None if const is NULL else const
            parts.append(prefix + json.dumps(value, allow_nan=False).replace("%", "%%"))
    template = "{" + ",".join(parts) + "}"
    return [template % row for row in zip(*cols)]


def interleave(per_gpu: list[list[str]]) -> list[str]:
    """[[a0, a1], [b0, b1]] -> [a0, b0, a1, b1] (time-major, GPU-minor)."""
    return [x for row in zip(*per_gpu) for x in row]


def enc_floats(values: np.ndarray, decimals: int, null: np.ndarray | None = None) -> list[str]:
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


def enc_ints(values: np.ndarray, null: np.ndarray | None = None) -> list[str]:
    out = list(map(str, np.asarray(values, dtype=np.int64).tolist()))
    if null is not None and null.any():
        for i in np.flatnonzero(null).tolist():
            out[i] = "null"
    return out


def enc_bools(values: np.ndarray) -> list[str]:
    return ["true" if v else "false" for v in np.asarray(values).tolist()]


def enc_strs(values: list) -> list[str]:
    cache: dict = {None: "null"}  # few distinct values (run ids)
    return [cache.get(v) or cache.setdefault(v, json.dumps(v)) for v in values]


def enc_times(stamps: list[str]) -> list[str]:
    """ISO timestamps need no escaping."""
    return ['"' + x + '"' for x in stamps]

