"""Detectors of the serving-performance signals, one endpoint at a time.

Each takes the per-endpoint per-minute frame of `sql/detect/serving_minutes.sql` (serving_minutes
with its trailing-median baselines and the endpoint's configured SLOs) and returns findings in
`registry.FINDING_COLUMNS` plus `endpoint` and `model_version` (the version serving when the stretch
was last seen; the evidence lists every version the stretch saw). The frame carries a lookback
before the partition (`in_window` False) so that persistence and rolling windows see across the
hour boundary; only stretches that reach into the partition are reported.

Why these shapes (thresholds in docs/signals.md, "Serving signals"): a daily load curve moves
latency and queue slowly (hours), a regression or a saturation moves them within minutes. Rolling
medians over a few minutes and "for N consecutive minutes" keep one bad scrape from alarming.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from checks.registry import FINDING_COLUMNS
from checks.toolkit import MINUTE, active_stretches, finding, findings_frame, mark_stretches, missing, num, prepare, rolling

LATENCY = ("ttft_p50", "ttft_p95", "ttft_p99", "itl_p50", "itl_p95", "itl_p99")
SERVING_COLUMNS = (*FINDING_COLUMNS, "endpoint", "model_version")


def _finding(stretch: pd.DataFrame, active: pd.DataFrame, value: float, baseline, threshold: float,
             evidence: dict) -> dict:
    first, last = active.iloc[0], active.iloc[-1]
    versions = list(dict.fromkeys(stretch["model_version"].dropna().astype(str)))
    return finding(
        entity_id=str(first["endpoint"]), onset=stretch["tick"].iloc[0] - MINUTE, detected_at=first["tick"],
        last_seen=last["tick"], hosts=sorted(set(stretch["host"].dropna().astype(str))),
        value=value, baseline=baseline, threshold=threshold,
        evidence={"endpoint": str(first["endpoint"]), "model_versions": ", ".join(versions) or "unknown",
                  "minutes": int(len(active)), "window": f"{stretch['tick'].iloc[0] - MINUTE} .. {last['tick']}",
                  **evidence},
        endpoint=str(first["endpoint"]), model_version=None if missing(last["model_version"]) else str(last["model_version"]),
    )


# toolkit.rolling per endpoint over the trailing minutes of rows, the current one included
_PER_ENDPOINT = {"key": "endpoint", "time": "tick", "closed": "right"}


def _findings(rows: list[dict]) -> pd.DataFrame:
    return findings_frame(rows, SERVING_COLUMNS)


# ----------------------------------------------------------------------------------------------
# Latency: regression against the endpoint's own rolling baseline, and SLO breach
# ----------------------------------------------------------------------------------------------


def serving_latency_regression(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """TTFT or inter-token latency (p50, p95 or p99) at least `min_ratio` x the endpoint's trailing
    baseline: the median of the last `window_minutes` minutes against the median of the
    `baseline_window_minutes` before (with at least `min_baseline_minutes` of history), for
    `min_minutes` consecutive minutes. It stays open while a minute's latency is `sustain_ratio` x
    its baseline, which the regression itself slowly drags up. The baseline spans every model
    version the endpoint served, so a slower version after a promotion stands out."""
    if frame.empty:
        return _findings([])
    f = prepare(frame, "endpoint")
    ratios, minute_ratios = {}, {}
    for m in LATENCY:
        base = f[f"{m}_baseline"].where(f[f"{m}_baseline"] > 0)
        ratios[m] = rolling(f, f[f"{m}_seconds"], thresholds["window_minutes"], "median", **_PER_ENDPOINT) / base
        minute_ratios[m] = f[f"{m}_seconds"] / base
    ratio = pd.DataFrame(ratios)
    f["ratio"] = ratio.max(axis=1)
    f["worst"] = ratio.fillna(0).idxmax(axis=1)
    history = f["baseline_minutes"].ge(thresholds["min_baseline_minutes"])
    entry = history & f["ratio"].ge(thresholds["min_ratio"])
    sustain = history & pd.DataFrame(minute_ratios).max(axis=1).ge(thresholds["sustain_ratio"])
    f = mark_stretches(f, "endpoint", entry, sustain=sustain, min_minutes=thresholds["min_minutes"])
    rows = []
    for stretch, active in active_stretches(f):
        peak = active.loc[active["ratio"].idxmax()]
        m = peak["worst"]
        regressed = ", ".join(f"{q} x{ratio.loc[active.index, q].max():.2f}" for q in LATENCY
                              if ratio.loc[active.index, q].max() >= thresholds["min_ratio"])
        rows.append(_finding(
            stretch, active, value=float(peak["ratio"]), baseline=1.0, threshold=thresholds["min_ratio"],
            evidence={
                "worst_quantile": m, "ratio_to_baseline": num(peak["ratio"], 2),
                f"{m}_seconds": num(peak[f"{m}_seconds"], 4), f"{m}_baseline_seconds": num(peak[f"{m}_baseline"], 4),
                "regressed_quantiles": regressed,
                "requests_per_second": num(active["requests_per_second"].median(), 2),
                "requests_per_second_baseline": num(active["requests_per_second_baseline"].median(), 2),
                "requests_waiting": num(active["requests_waiting"].median(), 1),
            },
        ))
    return _findings(rows)


def serving_latency_slo_breach(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A latency quantile above the endpoint's SLO for `min_minutes` consecutive minutes. SLOs
    come per endpoint from the `serving_slos:` section of thresholds.yaml (any of TTFT / ITL p50,
    p95, p99); without one, the signal's `ttft_p99_slo_seconds` and `itl_p99_slo_seconds` apply."""
    if frame.empty:
        return _findings([])
    f = prepare(frame, "endpoint")
    defaults = {"ttft_p99": thresholds["ttft_p99_slo_seconds"], "itl_p99": thresholds["itl_p99_slo_seconds"]}
    over, slo = {}, {}
    for m in LATENCY:
        objective = f[f"slo_{m}_seconds"].astype(float)
        if m in defaults:
            objective = objective.fillna(defaults[m])
        slo[m] = objective
        over[m] = f[f"{m}_seconds"] / objective
    over = pd.DataFrame(over)
    f["over"] = over.max(axis=1)
    f["worst"] = over.fillna(0).idxmax(axis=1)
    f = mark_stretches(f, "endpoint", f["over"].gt(1.0), min_minutes=thresholds["min_minutes"])
    rows = []
    for stretch, active in active_stretches(f):
        peak = active.loc[active["over"].idxmax()]
        m = peak["worst"]
        breached = sorted(q for q in LATENCY if (over.loc[active.index, q] > 1.0).any())
        rows.append(_finding(
            stretch, active, value=float(peak[f"{m}_seconds"]), baseline=peak[f"{m}_baseline"],
            threshold=float(slo[m].loc[peak.name]),
            evidence={
                "worst_quantile": m, f"{m}_seconds": num(peak[f"{m}_seconds"], 4),
                f"{m}_slo_seconds": num(slo[m].loc[peak.name], 4), "times_slo": num(peak["over"], 2),
                "breached_quantiles": ", ".join(breached),
                "slo_source": "serving_slos" if pd.notna(peak[f"slo_{m}_seconds"]) else "signal default",
                "requests_waiting": num(active["requests_waiting"].median(), 1),
            },
        ))
    return _findings(rows)


# ----------------------------------------------------------------------------------------------
# Capacity: a queue that keeps growing, a batch that is full
# ----------------------------------------------------------------------------------------------


def _rank_correlation(values: np.ndarray) -> float:
    """Spearman correlation of a window's values with time: 1 = rising every minute."""
    ok = ~np.isnan(values)
    if ok.sum() < 4 or np.ptp(values[ok]) == 0:
        return 0.0
    from scipy.stats import rankdata  # scipy.stats: ~0.6 s to import; only a window with data needs it

    return float(np.corrcoef(rankdata(values[ok]), np.arange(ok.sum()))[0, 1])


def serving_queue_growth(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """Requests waiting that keep rising over `window_minutes`: the level now (median of the last
    `level_minutes`) is at least `min_increase` requests and `min_growth_factor` x (baseline + 1)
    above the level a window ago, and the window's minutes rise with time (rank correlation at
    least `min_rank_correlation`), for `min_minutes`. One spike does not move a median; a daily
    load curve rises over hours, not minutes."""
    if frame.empty:
        return _findings([])
    f = prepare(frame, "endpoint")
    window = thresholds["window_minutes"]
    f["level"] = rolling(f, f["requests_waiting"], thresholds["level_minutes"], "median", **_PER_ENDPOINT)
    then = f[["endpoint", "tick", "level"]].rename(columns={"level": "level_before"})
    then["tick"] = then["tick"] + pd.Timedelta(minutes=window)
    f = pd.merge_asof(f.sort_values("tick"), then.sort_values("tick"), on="tick", by="endpoint",
                      tolerance=pd.Timedelta(minutes=2), direction="backward")
    f = f.sort_values(["endpoint", "tick"], kind="stable").reset_index(drop=True)
    s = pd.Series(f["requests_waiting"].to_numpy(dtype=float), index=f["tick"])
    corr = s.groupby(f["endpoint"].to_numpy()).rolling(f"{int(window)}min").apply(_rank_correlation, raw=True)
    f["trend"] = corr.reset_index(level=0, drop=True).to_numpy()
    f["rise"] = f["level"] - f["level_before"]
    usual = f["requests_waiting_baseline"].fillna(0)
    needed = np.maximum(thresholds["min_increase"], thresholds["min_growth_factor"] * (usual + 1))
    entry = f["rise"].ge(needed) & f["trend"].ge(thresholds["min_rank_correlation"])
    # open while the queue stays well above its usual level (a full queue stops rising but is not fine)
    sustain = f["level"].ge(needed + usual)
    f = mark_stretches(f, "endpoint", entry, sustain=sustain, min_minutes=thresholds["min_minutes"])
    rows = []
    for stretch, active in active_stretches(f):
        opened = active[active["rise"].notna()]
        first = opened.iloc[0] if not opened.empty else active.iloc[0]
        rows.append(_finding(
            stretch, active, value=float(active["requests_waiting"].max()), baseline=first["requests_waiting_baseline"],
            threshold=float(needed.loc[first.name] + usual.loc[first.name]),
            evidence={
                "requests_waiting_max": num(active["requests_waiting_max"].max(), 0),
                "requests_waiting_baseline": num(first["requests_waiting_baseline"], 1),
                "rise_over_window": num(active["rise"].max(), 1), "window_minutes": int(window),
                "trend_rank_correlation": num(active["trend"].max(), 2),
                "requests_running": num(active["requests_running"].median(), 1),
                "kv_cache_usage_ratio": num(active["kv_cache_usage_ratio"].max(), 3),
                "requests_per_second": num(active["requests_per_second"].median(), 2),
                "requests_per_second_baseline": num(first["requests_per_second_baseline"], 2),
            },
        ))
    return _findings(rows)


def serving_batch_saturation(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The engine's batch is full for `min_minutes`: KV-cache usage at least `kv_cache_full_ratio`
    (new sequences wait or are preempted), running requests at `running_full_ratio` of the
    endpoint's `max_num_seqs` (set per endpoint in `serving_slos:`; without it that test is off), or
    at least `min_preemptions_per_minute` preemptions a minute (vLLM preempts a running sequence only
    when the KV cache cannot grow it: a healthy engine preempts nothing)."""
    if frame.empty:
        return _findings([])
    f = prepare(frame, "endpoint")
    kv_full = f["kv_cache_usage_ratio"].ge(thresholds["kv_cache_full_ratio"])
    limit = f["slo_max_num_seqs"].astype(float)
    running_full = limit.notna() & f["requests_running"].ge(thresholds["running_full_ratio"] * limit)
    preempting = f["preemptions"].astype(float).ge(thresholds["min_preemptions_per_minute"])
    f = mark_stretches(f, "endpoint", kv_full | running_full | preempting, min_minutes=thresholds["min_minutes"])
    rows = []
    for stretch, active in active_stretches(f):
        kv = float(active["kv_cache_usage_ratio"].max())
        running = float(active["requests_running"].max())
        cap = active["slo_max_num_seqs"].dropna()
        preemptions = stretch["preemptions"].astype(float).sum(min_count=1)
        by_kv = bool(kv_full.loc[active.index].any())
        by_running = bool(running_full.loc[active.index].any())
        by_preemptions = bool(preempting.loc[active.index].any())
        if by_kv:
            value, threshold = kv, thresholds["kv_cache_full_ratio"]
        elif by_running:
            value, threshold = running / float(cap.iloc[0]), thresholds["running_full_ratio"]
        else:
            value, threshold = float(active["preemptions"].max()), thresholds["min_preemptions_per_minute"]
        full_by = (("kv_cache", by_kv), ("max_num_seqs", by_running), ("preemptions", by_preemptions))
        rows.append(_finding(
            stretch, active, value=value, baseline=None, threshold=threshold,
            evidence={
                "full_by": ", ".join(w for w, hit in full_by if hit),
                "kv_cache_usage_ratio_max": num(kv, 3), "requests_running_max": num(running, 0),
                "max_num_seqs": num(cap.iloc[0], 0) if not cap.empty else "not configured",
                "preemptions": num(preemptions, 0) if pd.notna(preemptions) else "not pulled",
                "requests_waiting": num(active["requests_waiting"].median(), 1),
            },
        ))
    return _findings(rows)


# ----------------------------------------------------------------------------------------------
# Errors: the failed share of finished requests, from counters (resets handled in the baseline SQL)
# ----------------------------------------------------------------------------------------------


def serving_error_rate(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The failed share of requests over the last `window_minutes` (at least `min_requests` of
    them) at or above the endpoint's `error_ratio` SLO, else above both `min_error_ratio` and
    `baseline_factor` x its trailing baseline, for `min_minutes`. The counters' increases come from
    serving_minutes, where a counter that went down (a restart) counts from zero."""
    if frame.empty:
        return _findings([])
    f = prepare(frame, "endpoint")
    window = thresholds["window_minutes"]
    requests = rolling(f, f["requests"].fillna(0), window, "sum", **_PER_ENDPOINT)
    failures = rolling(f, f["failures"].fillna(0), window, "sum", **_PER_ENDPOINT)
    f["window_error_ratio"] = failures / requests.where(requests > 0)
    f["window_requests"] = requests
    usual = f["error_ratio_baseline"].fillna(0)
    limit = f["slo_error_ratio"].astype(float).fillna(
        np.maximum(thresholds["min_error_ratio"], thresholds["baseline_factor"] * usual))
    f["limit"] = limit
    entry = requests.ge(thresholds["min_requests"]) & f["window_error_ratio"].ge(limit)
    f = mark_stretches(f, "endpoint", entry, min_minutes=thresholds["min_minutes"])
    rows = []
    for stretch, active in active_stretches(f):
        peak = active.loc[active["window_error_ratio"].idxmax()]
        rows.append(_finding(
            stretch, active, value=float(peak["window_error_ratio"]), baseline=peak["error_ratio_baseline"],
            threshold=float(peak["limit"]),
            evidence={
                "error_ratio": num(peak["window_error_ratio"], 4), "error_ratio_baseline": num(peak["error_ratio_baseline"], 4),
                "failures": num(active["failures"].sum(), 0), "requests": num(active["requests"].sum(), 0),
                "counter_resets": int(stretch["counter_resets"].sum()),
                "limit_source": "serving_slos" if pd.notna(peak["slo_error_ratio"]) else "baseline",
            },
        ))
    return _findings(rows)
