"""Detectors of the model-quality signals (input drift, prediction drift, confidence shift, business
metric drop).

Each takes its signal's per-endpoint-and-version frame from `sql/detect/quality_*.sql` and returns
findings in `registry.FINDING_COLUMNS` plus `endpoint` and `model_version`. The entity is the
endpoint (fault targets are "endpoint:<name>"); `checkpoint` and the evidence's `training_run` name the
version's checkpoint and training run (from its registration), so the incident carries version -> run
-> checkpoint. `run_id` stays null: the incident is about the endpoint, and a run id would correlate it
with the training run's own incidents (the triage in assets/triage.py fills the run afterwards).
Thresholds and why: docs/signals.md, "Quality signals".
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from checks.registry import FINDING_COLUMNS
from checks.toolkit import active_stretches, finding, findings_frame, mark_stretches, num, prepare, present

QUALITY_COLUMNS = list(FINDING_COLUMNS) + ["endpoint", "model_version", "checkpoint"]


def _empty() -> pd.DataFrame:
    return findings_frame([], QUALITY_COLUMNS)


def _drift(frame: pd.DataFrame, thresholds: Mapping[str, float], what: str) -> pd.DataFrame:
    """Hours where at least `min_drifted_columns` columns drifted, for `min_hours` consecutive hours."""
    if frame.empty:
        return _empty()
    f = prepare(frame.assign(_key=frame["endpoint"].astype(str) + "\0" + frame["model_version"].astype(str)), "_key", "hour")
    hit = f["columns_drifted"].ge(thresholds["min_drifted_columns"])
    f = mark_stretches(f, "_key", hit, min_minutes=thresholds["min_hours"], max_gap_minutes=60, time="hour")
    rows = []
    for s, active in active_stretches(f):
        confirmed, last = active.iloc[0], s.iloc[-1]
        shown = s[s["in_window"]]
        top = shown.loc[shown["top_score"].astype(float).idxmax()]
        rows.append(finding(
            entity_id=last["endpoint"], onset=s["hour"].iloc[0], detected_at=confirmed["tick"], last_seen=last["tick"],
            value=top["top_score"], baseline=None, threshold=top["top_threshold"],
            endpoint=last["endpoint"], model_version=last["model_version"], checkpoint=present(last["checkpoint"]),
            evidence={
                "what": what, "training_run": present(last["run_id"]),
                "drifted_columns": list(last["drifted_columns"]),
                "scores": [dict(x) for x in last["scores"]],
                "hours_drifted": len(s),
                # scored on all rows; the sampled rows are those the evidently report drew
                "rows": int(last["current_rows"]), "reference_rows": int(last["reference_rows"]),
                "margin_noise_units": num(top.get("top_margin"), 1),
                "sampled_rows": int(last["current_sampled"]), "sampled_reference_rows": int(last["reference_sampled"]),
                "reference": f"{last['reference_source']} {last['reference_start']} .. {last['reference_end']}",
                "report_path": present(last["report_path"]),
            },
        ))
    return findings_frame(rows, QUALITY_COLUMNS)


def input_drift(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The features an endpoint receives moved away from the version's reference window."""
    return _drift(frame, thresholds, "input features")


def prediction_drift(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The predicted labels or confidences moved away from the version's reference window."""
    return _drift(frame, thresholds, "predictions")


def _shifted(current: np.ndarray, reference: np.ndarray, mean_shift: float, thresholds: Mapping[str, float]):
    """(KS result, flagged?) for one window: KS p below `max_p_value` and |mean shift| at least `min_mean_shift`."""
    from scipy import stats  # scipy.stats: ~0.6 s to import; only a window with data to test needs it

    ks = stats.ks_2samp(current, reference)
    return ks, ks.pvalue < thresholds["max_p_value"] and abs(mean_shift) >= thresholds["min_mean_shift"]


def _first_flagged_minute(times, current: np.ndarray, reference: np.ndarray, reference_mean: float,
                          thresholds: Mapping[str, float], last_time):
    """The first minute of the window by which the sampled confidences so far already flag, as the
    minute schedule would have seen it live (a backfill or a late hourly run judges the whole window
    at once); the newest judged prediction when only the whole window flags."""
    if times is None:
        return last_time
    at = pd.to_datetime(pd.Series(list(times))).to_numpy()
    order = np.argsort(at, kind="stable")
    at, values = at[order], current[order]
    minutes = np.unique(at.astype("datetime64[m]")) + np.timedelta64(1, "m")
    for minute in minutes[:-1]:
        n = int(np.searchsorted(at, minute, side="left"))
        if n < thresholds["min_rows"]:
            continue
        prefix = values[:n]
        if _shifted(prefix, reference, float(prefix.mean()) - reference_mean, thresholds)[1]:
            return pd.Timestamp(minute)   # before the newest sampled minute: never after last_time
    return last_time


def confidence_shift(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The distribution of prediction confidence moved: a two-sample KS test (scipy) on the sampled
    confidences with p below `max_p_value`, and the full-window mean moved by at least
    `min_mean_shift` (so a tiny, merely significant shift on a huge window does not alarm).
    Detected at the first minute by which the window's predictions so far already showed it."""
    if frame.empty:
        return _empty()
    rows = []
    for r in frame.itertuples():
        if r.current_rows < thresholds["min_rows"] or r.reference_rows < thresholds["min_reference_rows"]:
            continue
        current, reference = np.asarray(r.current_sample, float), np.asarray(r.reference_sample, float)
        shift = float(r.current_mean) - float(r.reference_mean)
        ks, flagged = _shifted(current, reference, shift, thresholds)
        if not flagged:
            continue
        detected = _first_flagged_minute(getattr(r, "current_sample_times", None), current, reference,
                                         float(r.reference_mean), thresholds, r.last_time)
        rows.append(finding(
            entity_id=r.endpoint, onset=r.window_start, detected_at=detected, last_seen=r.tick,
            value=abs(shift), baseline=r.reference_mean, threshold=thresholds["min_mean_shift"],
            endpoint=r.endpoint, model_version=r.model_version, checkpoint=present(r.checkpoint),
            evidence={
                "training_run": present(r.run_id), "current_mean": num(r.current_mean, 4),
                "reference_mean": num(r.reference_mean, 4),
                "mean_shift": num(shift, 4), "ks_statistic": num(ks.statistic, 4),
                "ks_p_value": float(f"{ks.pvalue:.3g}"), "rows": int(r.current_rows),
                "reference_rows": int(r.reference_rows), "sampled_rows": len(r.current_sample),
                "reference": f"{r.reference_source} {r.reference_start} .. {r.reference_end}",
            },
        ))
    return findings_frame(rows, QUALITY_COLUMNS)


def business_metric_drop(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The outcome rate of the judged prediction hour fell below the reference's by at least
    `min_drop`, with at least `min_labelled` labelled predictions on each side and a one-sided Fisher
    exact test (scipy) below `max_p_value`."""
    if frame.empty:
        return _empty()
    from scipy import stats  # scipy.stats: ~0.6 s to import; only an hour with labelled outcomes needs it

    rows = []
    for r in frame.itertuples():
        if r.current_labelled < thresholds["min_labelled"] or r.reference_labelled < thresholds["min_labelled"]:
            continue
        rate, ref_rate = r.current_hits / r.current_labelled, r.reference_hits / r.reference_labelled
        table = [[r.current_hits, r.current_labelled - r.current_hits], [r.reference_hits, r.reference_labelled - r.reference_hits]]
        p = float(stats.fisher_exact(table, alternative="less").pvalue)
        if ref_rate - rate < thresholds["min_drop"] or p >= thresholds["max_p_value"]:
            continue
        rows.append(finding(
            entity_id=r.endpoint, onset=r.window_start, detected_at=r.detected_at, last_seen=r.tick,
            value=ref_rate - rate, baseline=ref_rate, threshold=thresholds["min_drop"],
            endpoint=r.endpoint, model_version=r.model_version, checkpoint=present(r.checkpoint),
            evidence={
                "training_run": present(r.run_id), "outcome_rate": num(rate, 4), "reference_outcome_rate": num(ref_rate, 4),
                "labelled": int(r.current_labelled), "reference_labelled": int(r.reference_labelled),
                "predictions": int(r.current_predictions), "p_value": float(f"{p:.3g}"),
                "predictions_judged": f"{r.window_start} .. {r.window_end}",
                "reference": f"{r.reference_source} {r.reference_start} .. {r.reference_end}",
            },
        ))
    return findings_frame(rows, QUALITY_COLUMNS)
