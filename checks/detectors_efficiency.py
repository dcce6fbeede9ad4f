"""Small pure detectors of the efficiency signals: a run that keeps stepping, but does less useful
work per GPU-second than it did. Input: the per-minute frame of `sql/detect/mfu_drop.sql`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from checks.detectors import empty_findings
from checks.registry import FINDING_COLUMNS

# sigma of a series from the median of its minute-to-minute changes: a level shift counts once, so
# a drop does not inflate the noise it is judged against (MAD -> sigma, and a difference's sqrt 2)
DIFF_TO_SIGMA = 1.4826 / 2 ** 0.5


def _trailing(minutes: pd.Series, values: pd.Series, window_minutes: float, q: float) -> pd.Series:
    """Quantile `q` of `values` over the `window_minutes` before each row (the row itself excluded)."""
    series = pd.Series(values.to_numpy(dtype=float), index=pd.DatetimeIndex(minutes))
    return pd.Series(series.rolling(pd.Timedelta(minutes=window_minutes), closed="left", min_periods=1)
                     .quantile(q).to_numpy(), index=values.index)


def mfu_drop(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The run's model FLOPs utilization fell persistently below its own baseline while it kept stepping.

    Per run and minute with steps, the baseline is the upper quartile of its MFU over the trailing
    `ref_minutes` (stepping minutes only), so a drop stays visible after it has lasted a while; the
    noise is the median minute-to-minute change over the same window, in sigmas. A minute is flagged when MFU is
    `min_drop_ratio` below the baseline and `z` noise sigmas under it, once the baseline holds
    `min_history_minutes`; minutes without steps (checkpoint saves, evaluations, hangs: other signals
    and categories) neither flag nor break a stretch. A stretch is reported after `min_minutes`
    flagged minutes.
    """
    if frame.empty:
        return empty_findings()
    f = frame[frame["mfu"].notna() & (frame["steps_completed"] > 0)].sort_values(["run_id", "minute"]).copy()
    if f.empty:
        return empty_findings()
    rows = []
    for run_id, g in f.groupby("run_id", sort=True):
        g = g.copy()
        ref = thresholds["ref_minutes"]
        g["baseline"] = _trailing(g["minute"], g["mfu"], ref, 0.75)
        g["spread"] = _trailing(g["minute"], g["mfu"].diff().abs(), ref, 0.5) * DIFF_TO_SIGMA
        g["history"] = pd.Series(np.ones(len(g)), index=pd.DatetimeIndex(g["minute"])).rolling(
            pd.Timedelta(minutes=ref), closed="left").sum().fillna(0).to_numpy()
        g["drop"] = 1.0 - g["mfu"] / g["baseline"]
        g["flagged"] = (
            (g["history"] >= thresholds["min_history_minutes"])
            & (g["drop"] >= thresholds["min_drop_ratio"])
            & (g["baseline"] - g["mfu"] >= thresholds["z"] * g["spread"])
        )
        # consecutive flagged stepping minutes (non-stepping minutes are not in g, so they do not break it)
        stretch = (g["flagged"] != g["flagged"].shift()).cumsum()
        for _, span in g[g["flagged"]].groupby(stretch[g["flagged"]]):
            if len(span) < thresholds["min_minutes"]:
                continue
            qualified = span.iloc[int(thresholds["min_minutes"]) - 1:]
            reported = qualified[qualified["tick"].notna()]
            if reported.empty:
                continue
            first, now = span.iloc[0], reported.iloc[-1]
            baseline = float(first["baseline"])
            held = float(span["allocated_gpu_seconds"].sum()) or float("nan")
            peak = now["peak_flops_per_gpu"]
            rows.append({
                "entity_id": run_id,
                "onset": first["minute"],
                "detected_at": reported["tick"].iloc[0],
                "last_seen": now["tick"],
                "run_id": run_id,
                "rank": None,
                "hosts": list(now["hosts"]),
                "gpus": list(now["gpus"]),
                "value": float(span["mfu"].median()),
                "baseline": baseline,
                "threshold": baseline * (1.0 - thresholds["min_drop_ratio"]),
                "evidence": {
                    "mfu_pct": round(100 * float(span["mfu"].median()), 1),
                    "mfu_baseline_pct": round(100 * baseline, 1),
                    "drop_pct": round(100 * float(span["drop"].median()), 1),
                    "threshold_pct": round(100 * thresholds["min_drop_ratio"], 1),
                    "noise_pct": round(100 * float(first["spread"]), 2),
                    "minutes": int(len(span)),
                    "gpu_name": now["gpu_name"],
                    "precision": now["precision"],
                    "peak_tflops_per_gpu": None if pd.isna(peak) else round(float(peak) / 1e12, 1),
                    "mfu_source": "model FLOPs (tokens x FLOPs per token or 6N)" if pd.notna(now["mfu_from_model_flops"])
                                  else "reported TFLOP/s",
                    "slow_steps_share_pct": round(100 * float(span["slow_steps_gpu_seconds"].sum()) / held, 1),
                    "data_stall_share_pct": round(100 * float(span["data_stall_gpu_seconds"].sum()) / held, 1),
                    "gpu_count": int(now["gpu_count"]),
                },
            })
    if not rows:
        return empty_findings()
    return pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
