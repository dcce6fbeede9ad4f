"""Small pure detectors of the efficiency signals: a run that keeps stepping, but does less useful
work per GPU-second than it did. Input: the per-minute frame of `sql/detect/mfu_drop.sql`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from checks.toolkit import empty_findings, num, prepare, previous, rolling, run_findings, stretch_ids, stretch_total

# sigma of a series from the median of its minute-to-minute changes: a level shift counts once, so
# a drop does not inflate the noise it is judged against (MAD -> sigma, and a difference's sqrt 2)
DIFF_TO_SIGMA = 1.4826 / 2 ** 0.5


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
    f = prepare(frame[frame["mfu"].notna() & (frame["steps_completed"] > 0)], "run_id", "minute")
    if f.empty:
        return empty_findings()
    ref = thresholds["ref_minutes"]
    f["baseline"] = rolling(f, "mfu", ref, "quantile", q=0.75)
    f["spread"] = rolling(f, (f["mfu"] - previous(f, f["mfu"])).abs(), ref, "median") * DIFF_TO_SIGMA
    f["history"] = rolling(f, pd.Series(1.0, index=f.index), ref, "sum").fillna(0)
    f["drop"] = 1.0 - f["mfu"] / f["baseline"]
    f["flagged"] = (
        (f["history"] >= thresholds["min_history_minutes"])
        & (f["drop"] >= thresholds["min_drop_ratio"])
        & (f["baseline"] - f["mfu"] >= thresholds["z"] * f["spread"])
    )
    # consecutive flagged stepping minutes (non-stepping minutes are not in f, so they do not break it)
    stretch = stretch_ids(f, f["flagged"], np.inf)
    qualified = stretch_total(f["flagged"], stretch) >= thresholds["min_minutes"]

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        first, now = span.iloc[0], hits.iloc[-1]
        baseline = float(first["baseline"])
        held = float(span["allocated_gpu_seconds"].sum()) or float("nan")
        return {
            "value": span["mfu"].median(),
            "baseline": baseline,
            "threshold": baseline * (1.0 - thresholds["min_drop_ratio"]),
            "evidence": {
                "mfu_pct": num(100 * span["mfu"].median(), 1),
                "mfu_baseline_pct": num(100 * baseline, 1),
                "drop_pct": num(100 * span["drop"].median(), 1),
                "threshold_pct": num(100 * thresholds["min_drop_ratio"], 1),
                "noise_pct": num(100 * first["spread"], 2),
                "minutes": int(len(span)),
                "gpu_name": now["gpu_name"],
                "precision": now["precision"],
                "peak_tflops_per_gpu": num(now["peak_flops_per_gpu"] / 1e12, 1),
                "mfu_source": "model FLOPs (tokens x FLOPs per token or 6N)" if pd.notna(now["mfu_from_model_flops"])
                              else "reported TFLOP/s",
                "slow_steps_share_pct": num(100 * span["slow_steps_gpu_seconds"].sum() / held, 1),
                "data_stall_share_pct": num(100 * span["data_stall_gpu_seconds"].sum() / held, 1),
                "gpu_count": int(now["gpu_count"]),
            },
        }

    return run_findings(f, qualified, stretch, build)
