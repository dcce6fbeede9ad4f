"""Detectors of the training family: small pure functions over a run's per-minute series.
This module holds step time, gradients, loss scale and memory; the loss detectors are in
`checks/detectors_loss.py`, the shared machinery in `checks/toolkit.py`.

Each takes the frame its signal's SQL builds (one row per run per minute, from `run_minutes` /
`rank_minutes`, oldest first) and the signal's thresholds, and returns findings in the columns
of `registry.FINDING_COLUMNS`, one row per contiguous flagged stretch per run.

The frames carry history before the evaluated partition (the trailing windows the detectors
need, and the start of a stretch that began in an earlier hour). History rows have `in_window`
false: they feed baselines, persistence and onsets but are never reported, so each flagged minute is
reported by exactly one partition's check.

Conventions shared by every detector here:
- a minute is `flagged` when it is abnormal on its own; a stretch is a run of flagged observed
  minutes (minutes without step records, e.g. an evaluation pause, neither flag nor break it
  unless the gap exceeds `bridge_minutes`); a stretch is reported from the minute it has
  persisted `min_minutes`;
- baselines are the run's own trailing history (robust: medians, MADs, minima), never a
  snapshot, and every detector stays quiet until that history holds `min_history_minutes`;
- the evidence names the value, the baseline, the threshold and the window behind the finding.
"""


from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from checks import episodes
from checks.detectors import empty_findings
from checks.detectors_loss import _loss_excursion, loss_divergence, loss_plateau, loss_spike, non_finite_loss  # noqa: F401  (one module for the registry)
from checks.toolkit import (
    GIB,
    MAD_TO_SIGMA,
    counter_increase,
    jitter,
    num,
    prepare,
    rolling,
    rows_rolling,
    run_findings,
    stretch_ids,
    stretch_total,
    window_text,
)


def step_time_regression(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The job's pace got persistently slower: a change point, not a slow step.

    A synchronous job steps at the pace of its slowest rank: per step the longest of the ranks'
    step times, per minute the median over its steps (`pace_seconds`). The median across ranks
    would jump when one rank of a mixed-speed job crosses between a fast and a slow group, though
    the job's pace did not change. The minute's pace is compared with the run's reference: the
    lowest trailing median (`pace_seconds_baseline`) of the last `ref_minutes`, so a regression stays visible
    after the trailing median has absorbed it; noise is the median trailing MAD over the same
    span. A minute is flagged when the step is `min_increase_ratio` slower and `z` noise sigmas
    above the reference; a stretch is reported after `min_minutes`. Medians ignore single slow
    steps; checkpoint and evaluation pauses produce no step records.

    The pace is the slowest rank's, so a straggler (one rank computing slower, its peers waiting)
    or a slower network raise it too; those are the distributed signals' to report. What a
    straggler adds is the growth of the ranks' imbalance (`imbalance_seconds`: the slowest rank's
    work over the typical rank's, against its lowest trailing median over `ref_minutes`, like the
    pace's reference); it is taken off the pace before the comparison, so a regression of every
    rank's own work is still found while a straggler runs beside it. When most of what remains is
    longer collectives (`max_collective_share`; the shortest collective of any rank, which waits
    for no one, where the ranks report it), the network owns it. This signal reports slowdowns in
    the run's own data or compute time.
    """
    if frame.empty:
        return empty_findings()
    f = prepare(frame, "run_id", "minute", "pace_seconds")
    if f.empty:
        return empty_findings()
    ref_minutes = thresholds["ref_minutes"]
    # an episode carried in from the previous hour keeps the healthy reference it opened with
    f["ref"] = episodes.held_reference(f, rolling(f, "pace_seconds_baseline", ref_minutes, "min", closed="right"))
    f["ref_noise"] = MAD_TO_SIGMA * rolling(f, "pace_seconds_mad", ref_minutes, "median", closed="right")
    f["ref_collective"] = rolling(f, "collective_seconds_baseline", ref_minutes, "min", closed="right")
    f["ref_data"] = rolling(f, "data_seconds", thresholds["decompose_minutes"], "median")
    f["ref_compute"] = rolling(f, "compute_seconds", thresholds["decompose_minutes"], "median")
    # what the slowest rank's extra work adds to the pace, against the same kind of reference
    f["straggle_seconds"] = _growth(f, "imbalance_seconds", thresholds["decompose_minutes"], ref_minutes)
    f["own_pace"] = f["pace_seconds"] - f["straggle_seconds"]
    f["increase"] = f["own_pace"] / f["ref"] - 1.0
    f["z"] = (f["own_pace"] - f["ref"]) / f["ref_noise"].where(f["ref_noise"] > 0)
    extra = (f["own_pace"] - f["ref"]).where(lambda s: s > 0)
    # the transfer itself: the shortest collective of any rank (the slowest waits for no one); the
    # median rank's collective where the ranks do not report theirs
    floor = _growth(f, "collective_floor_seconds", thresholds["decompose_minutes"], ref_minutes)
    median = f["collective_seconds"] - f["ref_collective"]
    collective_change = floor.where(f.get("collective_floor_seconds", pd.Series(np.nan, index=f.index)).notna(), median)
    f["collective_share"] = (collective_change / extra).clip(lower=0.0).fillna(0.0)
    f["flagged"] = (
        (f["baseline_minutes"] >= thresholds["min_history_minutes"])
        & (f["increase"] >= thresholds["min_increase_ratio"])
        & (f["z"].fillna(np.inf) >= thresholds["z"])
        & (f["collective_share"] < thresholds["max_collective_share"])
    )
    stretch = stretch_ids(f, f["flagged"], thresholds["bridge_minutes"])
    count = stretch_total(f["flagged"], stretch)
    qualified = count >= thresholds["min_minutes"]

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        first = span.iloc[0]
        now = hits.iloc[-1]
        ref = float(first["ref"])
        return {
            "value": float(now["own_pace"]),
            "baseline": ref,
            "threshold": ref * (1.0 + thresholds["min_increase_ratio"]),
            "evidence": {
                "step_seconds": num(now["pace_seconds"], 4),   # the job's pace: its slowest rank
                "step_seconds_baseline": num(ref, 4),
                "median_rank_step_seconds": num(now["step_seconds"], 4),
                "held_reference": ref,
                "increase_pct": num(100.0 * float(now["increase"]), 1),
                "threshold_pct": num(100.0 * thresholds["min_increase_ratio"], 1),
                "z": num(now["z"], 1),
                "noise_seconds": num(first["ref_noise"], 4),
                "tokens_per_second": num(now.get("tokens_per_second"), 1),
                "tokens_per_second_baseline": num(first.get("tokens_per_second_baseline"), 1),
                "data_seconds": num(now.get("data_seconds"), 4),
                "compute_seconds": num(now.get("compute_seconds"), 4),
                "collective_seconds": num(now.get("collective_seconds"), 4),
                "collective_share_pct": num(100.0 * float(now["collective_share"]), 1),
                # taken off the pace: the slowest rank's extra work (a straggler's, reported by straggler_rank)
                "straggler_seconds": num(now["straggle_seconds"], 4),
                "own_pace_seconds": num(now["own_pace"], 4),
                "data_seconds_change": num(now["data_seconds"] - first["ref_data"], 4),
                "compute_seconds_change": num(now["compute_seconds"] - first["ref_compute"], 4),
                "collective_seconds_change": num(now["collective_seconds"] - first["ref_collective"], 4),
                "minutes_slow": int(len(span)),
                "baseline_window_minutes": int(ref_minutes),
                "window": window_text(span),
            },
        }

    return run_findings(f, qualified, stretch, build)


def _growth(f: pd.DataFrame, column: str, smooth_minutes: float, ref_minutes: float) -> pd.Series:
    """How far `column` (per run and minute) stands above its healthy level, >= 0: the minute's value
    less the lowest trailing `smooth_minutes` median of the last `ref_minutes` (0 where the run does not
    report it)."""
    if column not in f.columns:
        return pd.Series(0.0, index=f.index)
    values = f[column].astype(float)
    level = rolling(f, rolling(f, values, smooth_minutes, "median"), ref_minutes, "min", closed="right")
    return (values - level.fillna(values)).clip(lower=0.0).fillna(0.0)


# --------------------------------------------------------------------------------------------- #
# Gradient-norm spike
# --------------------------------------------------------------------------------------------- #


def grad_norm_spike(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The run's gradient norm far above its trailing baseline for at least a minute.

    The minute's median gradient norm (half of the minute's steps at least) is compared with the
    trailing median (`grad_norm_baseline`) on a log scale: flagged when it is `min_ratio` times
    the baseline and `z` robust sigmas above it (sigma of log grad norm = 1.4826 MAD / median).
    A stretch is reported once it spans `min_steps` steps, so one outlier step never alarms.
    Minutes where the loss itself is up (spike, divergence) or non-finite are left to the loss
    signals: there the grad norm is a symptom, not the finding.
    """
    if frame.empty:
        return empty_findings()
    f = _loss_excursion(frame, thresholds, "loss_") if frame["loss"].notna().any() else prepare(frame, "run_id", "minute")
    f = f[f["grad_norm"].notna() & (f["grad_norm"] > 0) & (f["grad_norm_baseline"] > 0)].reset_index(drop=True)
    if f.empty:
        return empty_findings()
    f["ratio"] = f["grad_norm"] / f["grad_norm_baseline"]
    sigma = (MAD_TO_SIGMA * f["grad_norm_mad"] / f["grad_norm_baseline"]).clip(lower=thresholds["min_sigma"])
    f["z"] = np.log(f["ratio"]) / sigma
    loss_up = f["elevated"].fillna(False) if "elevated" in f else False
    f["flagged"] = (
        (f["baseline_minutes"] >= thresholds["min_history_minutes"])
        & (f["ratio"] >= thresholds["min_ratio"])
        & (f["z"] >= thresholds["z"])
        & ~loss_up
        & ~(pd.to_numeric(f["nonfinite_losses"], errors="coerce") > 0)
    )
    stretch = stretch_ids(f, f["flagged"], thresholds["bridge_minutes"])
    steps = stretch_total(f["steps_completed"], stretch)
    qualified = steps >= thresholds["min_steps"]

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        peak = span.loc[span["ratio"].idxmax()]
        return {
            "value": float(peak["grad_norm"]),
            "baseline": float(peak["grad_norm_baseline"]),
            "threshold": float(peak["grad_norm_baseline"] * thresholds["min_ratio"]),
            "evidence": {
                "grad_norm": num(peak["grad_norm"], 4),
                "grad_norm_max": num(span["grad_norm_max"].max(), 4),
                "grad_norm_baseline": num(peak["grad_norm_baseline"], 4),
                "ratio": num(peak["ratio"], 1),
                "threshold_ratio": thresholds["min_ratio"],
                "z": num(peak["z"], 1),
                "loss": num(peak["loss"], 4),
                "steps_in_burst": int(span["steps_completed"].sum()),
                "minutes": int(len(span)),
                "learning_rate": num(peak.get("learning_rate"), 8),
                "baseline_window_minutes": num(peak.get("baseline_window_minutes"), 0),
                "window": window_text(span),
            },
        }

    return run_findings(f, qualified, stretch, build)


# --------------------------------------------------------------------------------------------- #
# Loss-scale collapse
# --------------------------------------------------------------------------------------------- #


def loss_scale_collapse(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """Mixed precision's dynamic loss scale collapsing (fp16): overflow after overflow.

    The minute's loss scale (lowest over ranks) is flagged when it is at or below `floor_scale`,
    or `min_drop_factor` below the run's trailing median scale of the last `ref_minutes` (a
    healthy scale oscillates within a factor of a few; the start-up search from 2^32 is over
    before `min_history_minutes`), while iterations keep being skipped (`skipped_iterations_total`
    rose within `skip_window_minutes`, when the run reports it). bf16/fp32 runs have no loss
    scale and are never flagged.
    """
    if frame.empty:
        return empty_findings()
    f = prepare(frame, "run_id", "minute", "loss_scale")
    f = f[f["loss_scale"] > 0].reset_index(drop=True)
    if f.empty:
        return empty_findings()
    f["ref"] = rolling(f, "loss_scale", thresholds["ref_minutes"], "median")
    f["history"] = rolling(f, "loss_scale", thresholds["ref_minutes"], "count").fillna(0)
    f["drop"] = f["ref"] / f["loss_scale"]
    skips = counter_increase(f, "skipped_iterations_total")
    f["skipped_recent"] = rolling(f, skips, thresholds["skip_window_minutes"], "sum", closed="right")
    reports_skips = f["skipped_iterations_total"].notna().groupby(f["run_id"]).transform("any")
    f["flagged"] = (
        (f["history"] >= thresholds["min_history_minutes"])
        & ((f["loss_scale"] <= thresholds["floor_scale"]) | (f["drop"] >= thresholds["min_drop_factor"]))
        & (~reports_skips | (f["skipped_recent"] >= thresholds["min_skipped"]))
    )
    stretch = stretch_ids(f, f["flagged"], thresholds["bridge_minutes"])
    count = stretch_total(f["flagged"], stretch)
    qualified = count >= thresholds["min_minutes"]

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        now = hits.iloc[-1]
        ref = float(span["ref"].iloc[0])      # the scale before the collapse (later medians absorb it)
        drop = ref / float(now["loss_scale"])
        skipped = span["skipped_iterations_total"]
        return {
            "value": float(now["loss_scale"]),
            "baseline": ref,
            "threshold": max(thresholds["floor_scale"], ref / thresholds["min_drop_factor"]),
            "evidence": {
                "loss_scale": num(now["loss_scale"], 4),
                "loss_scale_baseline": num(ref, 4),
                "drop_factor": round(drop, 1),
                "halvings": round(float(np.log2(max(drop, 1.0))), 1),
                "threshold_drop_factor": thresholds["min_drop_factor"],
                "floor_scale": thresholds["floor_scale"],
                "skipped_iterations_total": num(skipped.max(), 0),
                "skipped_in_window": num(skipped.max() - skipped.min(), 0) if skipped.notna().any() else None,
                "baseline_window_minutes": int(thresholds["ref_minutes"]),
                "last_step": num(now["last_step"], 0),
                "window": window_text(span),
            },
        }

    return run_findings(f, qualified, stretch, build)


# --------------------------------------------------------------------------------------------- #
# Memory fragmentation
# --------------------------------------------------------------------------------------------- #


def memory_fragmentation(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The caching allocator fragmenting: reserved minus allocated growing, with symptoms.

    Per run and minute the SQL gives the worst rank's reserved-minus-allocated gap, inactive
    split bytes, the ranks' summed alloc retries and the highest reserved share of a GPU's
    memory. The gap (5-minute median) is compared with its lowest value over the trailing
    `window_minutes`; a minute is flagged when it grew by `min_growth_gib` and `z` sigmas of its
    own minute-to-minute jitter, and the growth shows as fragmentation: alloc retries rose in the
    window (`min_retries`) or inactive split bytes grew by `min_inactive_share` of the gap's
    growth (or the growth alone reaches `large_growth_gib`). Reported after `min_minutes`; the
    evidence gives the OOM headroom (reserved vs the GPU's memory).
    """
    if frame.empty:
        return empty_findings()
    f = prepare(frame, "run_id", "minute", "gap_bytes")
    if "first_minute" in f:   # the allocator settles during the run's first minutes: not a baseline
        warm = pd.to_datetime(f["first_minute"]).astype("datetime64[ns]") + pd.Timedelta(minutes=thresholds["warmup_minutes"])
        f = f[~(f["minute"] < warm)].reset_index(drop=True)
    if f.empty:
        return empty_findings()
    W = thresholds["window_minutes"]
    gap = rows_rolling(f, f["gap_bytes"].astype(float), 5, "median")
    inactive = rows_rolling(f, f["inactive_split_bytes"].astype(float), 5, "median")
    f["gap_ref"] = rolling(f, gap, W, "min")
    f["history"] = rolling(f, gap, W, "count").fillna(0)
    f["growth"] = gap - f["gap_ref"]
    f["inactive_growth"] = inactive - rolling(f, inactive, W, "min")
    f["noise"] = jitter(f, f["gap_bytes"], W)
    inactive_noise = jitter(f, f["inactive_split_bytes"], W).fillna(0.0)
    retries = counter_increase(f, "alloc_retries_total")
    f["retries_recent"] = rolling(f, retries, W, "sum", closed="right")
    f["needed"] = np.fmax(thresholds["min_growth_gib"] * GIB, thresholds["z"] * f["noise"].fillna(0.0))
    symptoms = (
        (f["retries_recent"] >= thresholds["min_retries"])
        | (f["inactive_growth"] >= np.fmax(thresholds["min_inactive_share"] * f["growth"], 3.0 * inactive_noise))
        | (f["growth"] >= thresholds["large_growth_gib"] * GIB)
    )
    f["flagged"] = (f["history"] >= thresholds["min_history_minutes"]) & (f["growth"] >= f["needed"]) & symptoms
    stretch = stretch_ids(f, f["flagged"], thresholds["bridge_minutes"])
    count = stretch_total(f["flagged"], stretch)
    qualified = count >= thresholds["min_minutes"]

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        now = hits.iloc[-1]
        total = now.get("memory_total_bytes")
        reserved = float(now["memory_reserved_bytes"]) if pd.notna(now.get("memory_reserved_bytes")) else None
        return {
            "value": float(now["growth"]),
            "baseline": float(now["gap_ref"]),
            "threshold": float(now["needed"]),
            "evidence": {
                "gap_gib": num(float(now["gap_bytes"]) / GIB, 2),
                "gap_baseline_gib": num(float(now["gap_ref"]) / GIB, 2),
                "growth_gib": num(float(now["growth"]) / GIB, 2),
                "threshold_gib": num(float(now["needed"]) / GIB, 2),
                "inactive_split_gib": round(float(now["inactive_split_bytes"]) / GIB, 2),
                "inactive_growth_gib": round(float(now["inactive_growth"]) / GIB, 2),
                "alloc_retries_in_window": int(now["retries_recent"]),
                "alloc_retries_total": num(now.get("alloc_retries_total"), 0),
                "ooms_total": num(now.get("ooms_total"), 0),
                "worst_rank": num(now.get("worst_rank"), 0),
                "reserved_gib": num(reserved / GIB, 2) if reserved is not None else None,
                "gpu_memory_gib": num(float(total) / GIB, 2) if pd.notna(total) else None,
                "reserved_pct": num(100.0 * reserved / float(total), 1) if reserved is not None and pd.notna(total) else None,
                "headroom_gib": num((float(total) - reserved) / GIB, 2) if reserved is not None and pd.notna(total) else None,
                "baseline_window_minutes": int(W),
                "window": window_text(span),
            },
        }

    return run_findings(f, qualified, stretch, build)
