"""Detectors of the checkpoint family: small pure functions over the frames of sql/detect/checkpoint_*.sql.

Integrity detectors read the audits of one partition (`checkpoint_audits.sql`) and flag a
checkpoint with a problem of the kinds they watch; the finding names the checkpoint, the model
versions registered from it and its run's restart point (the newest checkpoint that passes every
audit, and the steps and GPU-hours a restart from it would lose). `checkpoint_overdue` flags a
run that has gone past its own checkpoint interval; `checkpoint_size_anomaly` a checkpoint much
smaller or larger than its run's previous ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from checks.registry import FINDING_COLUMNS, LINEAGE_COLUMNS
from checks.toolkit import finding, findings_frame, num, prepare, present, stretch_ids, window_stretches

COLUMNS = (*FINDING_COLUMNS, "model_version", "checkpoint")
MAX_PROBLEMS = 20


def _empty() -> pd.DataFrame:
    return findings_frame([], COLUMNS)


def restart_point(row) -> dict:
    """The run's restart point as the finding's evidence (also filled into the playbook)."""
    return {
        "last_good_checkpoint": present(row.get("last_good_checkpoint")) or "none (a restart starts from scratch)",
        "last_good_step": num(row.get("last_good_step"), 0),
        "steps_since_last_good": num(row.get("steps_since_last_good"), 0),
        "restart_cost_gpu_hours": num(row.get("restart_cost_gpu_hours"), 3),
        "run_gpus": num(row.get("gpus"), 0),
    }


def problems_detector(kinds: tuple[str, ...]) -> Callable[[pd.DataFrame, Mapping[str, float]], pd.DataFrame]:
    """A detector flagging each audited checkpoint with at least `min_problems` problems of `kinds`."""

    def detect(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
        rows = []
        for row in frame.to_dict("records"):
            mine = [p for p in (row["problems"] if row["problems"] is not None else []) if p["kind"] in kinds]
            if len(mine) < thresholds.get("min_problems", 1.0):
                continue
            saved = pd.Timestamp(row["saved_at"])
            detected = max(saved, pd.Timestamp(row["partition_start"]))
            tick = pd.Timestamp(row["tick"]) if pd.notna(row["tick"]) else detected
            versions = row["model_versions"] if isinstance(row["model_versions"], str) else None
            evidence = {
                "checkpoint": row["checkpoint"], "path": row["checkpoint_path"], "format": row["format"],
                "step": None if pd.isna(row["step"]) else int(row["step"]), "saved_at": str(saved),
                "problems": [{k: p[k] for k in ("kind", "file", "detail")} for p in mine[:MAX_PROBLEMS]],
                "problem_count": len(mine),
                "problem_summary": "; ".join(f"{p['kind']} {p['file'] or ''}".strip() for p in mine[:5]),
                "model_versions": versions.split(",") if versions else [],
                "model_versions_text": versions.replace(",", ", ") if versions else "none registered",
                **restart_point(row),
            }
            rows.append(finding(
                entity_id=row["checkpoint"], onset=saved, detected_at=detected, last_seen=max(tick, detected),
                run_id=row["run_id"], value=len(mine), baseline=0.0, threshold=thresholds.get("min_problems", 1.0),
                evidence=evidence, model_version=versions, checkpoint=row["checkpoint_path"],
            ))
        return findings_frame(rows, COLUMNS)

    detect.__name__ = "problems_" + "_".join(kinds)
    return detect


def checkpoint_overdue(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A run progressing past `overdue_factor` x its own checkpoint interval (in steps) since its last
    save, for at least `min_overdue_seconds`: a save failed or was switched off."""
    if frame.empty:
        return _empty()
    factor = thresholds["overdue_factor"]
    f = frame[frame["saves"].fillna(0) >= thresholds["min_saves"]].copy()
    f = f[f["interval_steps"].fillna(0) > 0]
    if f.empty:
        return _empty()
    f["steps_since"] = f["step"] - f["last_saved_step"]
    f["seconds_since"] = (pd.to_datetime(f["last_step_at"]) - pd.to_datetime(f["last_saved_at"])).dt.total_seconds()
    f["intervals"] = f["steps_since"] / f["interval_steps"]
    f["overdue"] = (f["intervals"] >= factor) & (f["seconds_since"] >= thresholds["min_overdue_seconds"])
    f = prepare(f, "run_id", "minute")
    # one stretch per save that went missing: the overdue minutes since the last save the run still had
    stretch = stretch_ids(f.assign(_saved=f["run_id"].astype(str) + f["last_saved_at"].astype(str)), f["overdue"],
                          np.inf, key="_saved", consecutive=False)
    rows = []
    for s, _ in window_stretches(f, f["overdue"], stretch):
        first, last = s.iloc[0], s.iloc[-1]
        due = pd.Timestamp(first["last_saved_at"]) + pd.Timedelta(seconds=float(first["interval_seconds"] or 0))
        gpus = num(last["gpus"], 0)
        rows.append(finding(
            entity_id=last["run_id"], onset=min(due, pd.Timestamp(first["last_step_at"])),
            detected_at=pd.Timestamp(first["last_step_at"]), last_seen=pd.Timestamp(last["last_step_at"]),
            run_id=last["run_id"], value=last["intervals"], baseline=1.0, threshold=factor,
            evidence={
                "last_saved_step": int(last["last_saved_step"]), "last_saved_at": str(last["last_saved_at"]),
                "interval_steps": float(last["interval_steps"]), "interval_seconds": float(last["interval_seconds"] or 0),
                "steps_since_checkpoint": int(last["steps_since"]), "seconds_since_checkpoint": float(last["seconds_since"]),
                "intervals_since_checkpoint": num(last["intervals"], 2),
                "restart_cost_gpu_hours": None if gpus is None else num(gpus * float(last["seconds_since"]) / 3600, 3),
                "run_gpus": gpus,
            },
            model_version=None, checkpoint=None,
        ))
    return findings_frame(rows, COLUMNS)


def checkpoint_size_anomaly(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A checkpoint below `min_ratio` or above `max_ratio` x the median of its run's previous ones
    (at least `min_predecessors` of them): a shard or the optimizer state not saved, or a changed model."""
    rows = []
    for row in frame.to_dict("records"):
        base, size = present(row["baseline_bytes"]), present(row["checkpoint_bytes"])
        if base is None or size is None or base <= 0 or row["predecessors"] < thresholds["min_predecessors"]:
            continue
        ratio = float(size) / float(base)
        if thresholds["min_ratio"] <= ratio <= thresholds["max_ratio"]:
            continue
        saved = pd.Timestamp(row["saved_at"])
        versions = row.get("model_versions") if isinstance(row.get("model_versions"), str) else None
        rows.append(finding(
            entity_id=row["checkpoint"], onset=saved, detected_at=saved, last_seen=saved, run_id=row["run_id"],
            value=ratio, baseline=1.0, threshold=thresholds["min_ratio"] if ratio < 1 else thresholds["max_ratio"],
            evidence={
                "checkpoint": row["checkpoint"], "path": row["checkpoint_path"], "step": int(row["step"]),
                "checkpoint_bytes": int(size), "median_predecessor_bytes": float(base),
                "predecessors": int(row["predecessors"]), "size_ratio": num(ratio, 3),
                "model_versions": versions.split(",") if versions else [],
                "model_versions_text": versions.replace(",", ", ") if versions else "none registered",
            },
            model_version=versions, checkpoint=row["checkpoint_path"],
        ))
    return findings_frame(rows, COLUMNS)


assert set(COLUMNS) - set(FINDING_COLUMNS) <= set(LINEAGE_COLUMNS)
