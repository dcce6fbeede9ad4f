"""Judged or not: which entities a signal's evaluation could actually judge, and why not the others.

A detector that lacks the history or the field it compares stays silent, and silence reads as
"healthy". So every evaluation records, per entity present in the partition's window, how many
minutes it was present and how many of those the signal could judge, and, when it could judge
none, why (table `judgements`, migration 090; the checks, `goodput incidents`, the board and the
`unjudged_entities` view show it).

What a signal needs is read from its frame, not from each detector:
- fields: the columns its detector measures (`FIELDS` below, by signal); a row where one is null
  is "missing field <column>" (a log without loss scale, a GPU without power readings);
- history: the rolling baseline of each needed field (`<field>_baseline`, when the frame has it)
  and, when its thresholds name a minimum (`*min_baseline_minutes`, `*min_history_minutes`,
  `min_reference_rows`), the frame's `baseline_minutes` / `reference_rows` at least that: below it
  is "too little history". Rows outside the partition's window (the lookback) are not counted.
Pure functions over frames; storage is the check's business.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from checks.episodes import entity_ids
from checks.toolkit import nanoseconds

# The fields each signal's detector measures (columns of its frame). A signal not listed needs no
# field beyond its entity (checkpoint audits judge every checkpoint they see).
_TRAINING = {"step_time_regression": ("step_seconds",), "loss_spike": ("loss",), "loss_divergence": ("loss",),
             "loss_plateau": ("loss",), "grad_norm_spike": ("grad_norm",), "loss_scale_collapse": ("loss_scale",),
             "non_finite_loss": ("loss",), "memory_fragmentation": ("inactive_split_bytes", "memory_reserved_bytes"),
             "mfu_drop": ("mfu",), "busy_not_progressing": ("utilization_mean",)}
_GPU = {"gpu_busy_low_power": ("utilization_ratio", "power_watts"), "gpu_idle_allocated": ("utilization_ratio",),
        "gpu_power_throttle": ("sm_clock_hertz", "throttle_reasons"), "gpu_thermal_throttle": ("sm_clock_hertz", "throttle_reasons"),
        "gpu_xid_error": ("xid_errors_total",), "gpu_xid_fatal": ("xid_errors_total",),
        "gpu_ecc_error": ("ecc_uncorrected_errors_total",), "gpu_row_remap_failure": ("row_remap_failure",)}
_DISTRIBUTED = {"straggler_rank": ("compute_seconds",), "collective_regression": ("collective_seconds",),
                "gradient_skew": ("grad_norm", "peer_grad_norm"), "rank_dropout": ()}
_SERVING = {"serving_latency_regression": ("ttft_p95_seconds",), "serving_latency_slo_breach": ("ttft_p95_seconds",),
            "serving_error_rate": ("error_ratio",), "serving_queue_growth": ("requests_waiting",),
            "serving_batch_saturation": ("requests_running",)}
FIELDS: Mapping[str, tuple[str, ...]] = {**_TRAINING, **_GPU, **_DISTRIBUTED, **_SERVING}

HISTORY_THRESHOLDS = ("min_baseline_minutes", "min_history_minutes")
GRID_CELLS = 50_000_000   # the most entity x minute cells counted on a grid (bytes): larger frames sort their pairs
JUDGEMENT_COLUMNS = ("signal", "partition_start", "entity_type", "entity_id", "minutes", "judged_minutes", "judged", "reason")


def _needs(frame: pd.DataFrame, signal_name: str, thresholds: Mapping[str, float]) -> list[tuple[pd.Series, str]]:
    """(row passes, reason when it does not) for every need the frame can show, fields first."""
    needs: list[tuple[pd.Series, str]] = []
    for column in FIELDS.get(signal_name, ()):
        if column in frame.columns:
            needs.append((frame[column].notna(), f"missing field {column}"))
    for column in FIELDS.get(signal_name, ()):
        for baseline in (f"{column}_baseline", f"{column.removesuffix('_seconds')}_baseline"):
            if baseline in frame.columns:
                needs.append((frame[baseline].notna(), f"too little history (no {baseline})"))
                break
    minimum = max((float(v) for k, v in thresholds.items() if k.endswith(HISTORY_THRESHOLDS)), default=None)
    if minimum is not None and "baseline_minutes" in frame.columns:
        needs.append((pd.to_numeric(frame["baseline_minutes"], errors="coerce").ge(minimum),
                      f"too little history (< {minimum:g} baseline minutes)"))
    if "min_reference_rows" in thresholds and "reference_rows" in frame.columns:
        needs.append((pd.to_numeric(frame["reference_rows"], errors="coerce").ge(thresholds["min_reference_rows"]),
                      f"too little history (< {thresholds['min_reference_rows']:g} reference rows)"))
    return needs


def in_window(frame: pd.DataFrame) -> pd.Series:
    """Rows of the partition's own window (not its lookback): `in_window` where the frame says, else a tick."""
    if "in_window" in frame.columns:
        return frame["in_window"].fillna(False).astype(bool) & frame["tick"].notna()
    if "tick" in frame.columns:
        return frame["tick"].notna()
    return pd.Series(True, index=frame.index)


def _row_arrays(frame: pd.DataFrame, signal_name: str, entity: str, entity_column: str,
                thresholds: Mapping[str, float], ids: pd.Series | None = None,
                ) -> tuple[pd.Index, np.ndarray, pd.Series, np.ndarray] | None:
    """`row_needs`' columns as arrays (row index, entity ids, minutes, failed), or None for an empty frame.
    `ids`: the frame's `entity_ids`, where the caller has them already."""
    if frame.empty:
        return None
    ids = entity_ids(frame, entity, entity_column) if ids is None else ids
    rows = (in_window(frame) & ids.notna()).to_numpy()
    index = frame.index[rows]
    minute = nanoseconds(frame["tick"][rows]).dt.floor("min") if "tick" in frame.columns else pd.Series(0, index=index)
    failed = np.full(len(index), None, dtype=object)
    for passes, reason in _needs(frame, signal_name, thresholds):   # the first need a row misses is its reason
        failed[(failed == None) & ~passes.fillna(False).astype(bool).to_numpy()[rows]] = reason  # noqa: E711
    return index, ids[rows].astype(str).to_numpy(dtype=object), minute, failed


def row_needs(frame: pd.DataFrame, signal_name: str, entity: str, entity_column: str,
              thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The window's rows that name an entity: `entity_id`, `minute`, and `failed`, the first need the row
    misses (None when the signal could judge it)."""
    arrays = _row_arrays(frame, signal_name, entity, entity_column, thresholds)
    if arrays is None:
        return pd.DataFrame(columns=["entity_id", "minute", "failed"])
    index, ids, minute, failed = arrays
    return pd.DataFrame({"entity_id": pd.Series(ids, index=index, dtype=object), "minute": minute,
                         "failed": pd.Series(failed, index=index, dtype=object)})


def judge(frame: pd.DataFrame, signal_name: str, entity: str, entity_column: str,
          thresholds: Mapping[str, float], ids: pd.Series | None = None) -> pd.DataFrame:
    """One row per entity present in the window: minutes present, minutes judged, judged, and the
    reason when none was (the need most of its rows missed; ties: the first by name). Counted with numpy
    on codes: 40 signals judge every tick, and pandas' per-call cost was a tenth of a small hour's run."""
    columns = ["entity_type", "entity_id", "minutes", "judged_minutes", "judged", "reason"]
    arrays = _row_arrays(frame, signal_name, entity, entity_column, thresholds, ids)
    if arrays is None or len(arrays[0]) == 0:
        return pd.DataFrame(columns=columns)
    _, ids, minute, failed = arrays
    entity_code, entities = pd.factorize(ids, sort=True)
    minute_code, minutes = pd.factorize(minute)
    n, width = len(entities), max(len(minutes), 1)
    ok = failed == None  # noqa: E711

    def distinct_minutes(mask: np.ndarray) -> np.ndarray:
        if n * width <= GRID_CELLS:   # an entity x minute grid: linear, where np.unique sorted the pairs
            seen = np.zeros((n, width), dtype=bool)
            seen[entity_code[mask], minute_code[mask]] = True
            return seen.sum(axis=1)
        pairs = np.unique(entity_code[mask].astype(np.int64) * width + minute_code[mask])
        return np.bincount(pairs // width, minlength=n)

    present, judged_minutes = distinct_minutes(np.ones(len(ids), dtype=bool)), distinct_minutes(ok)
    # per entity, how many of its rows failed on each reason; the most common one (argmax: the first by name)
    reason_code, reasons = pd.factorize(failed[~ok], sort=True)
    kinds = max(len(reasons), 1)
    counts = np.bincount(entity_code[~ok] * kinds + reason_code, minlength=n * kinds).reshape(n, kinds)
    most = np.append(np.asarray(reasons, dtype=object), None)[np.where(counts.any(axis=1), counts.argmax(axis=1), -1)]
    judged = judged_minutes > 0
    reason = np.where(judged, None, np.where(counts.any(axis=1), most, "not judged")).astype(object)
    return pd.DataFrame({"entity_type": entity, "entity_id": np.asarray(entities, dtype=object), "minutes": present.astype(int),
                         "judged_minutes": judged_minutes.astype(int), "judged": judged, "reason": reason}, columns=columns)


def summary(judged: pd.DataFrame, noun: str) -> str:
    """`3 run(s) judged; 2 not judged: too little history (< 20 baseline minutes)` (reasons by count)."""
    if judged.empty:
        return f"no {noun} in the window"
    ok = int(judged["judged"].sum())
    missing = judged[~judged["judged"].astype(bool)]
    text = f"{ok} {noun}(s) judged"
    if not missing.empty:
        reasons = missing["reason"].value_counts()
        text += f"; {len(missing)} not judged: " + "; ".join(f"{n} {r}" for r, n in reasons.items())
    return text
