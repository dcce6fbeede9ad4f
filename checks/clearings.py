"""What shows that a fault is over, per signal, in the signal's own terms (`Signal.clearing`).

Each function takes the rows of the signal's frame for one entity at the first tick after its last
flagged one (checks/episodes.py finds that tick) and every row of that tick (its peers), and returns {"why": one sentence, facts...}: the
clearing evidence an incident's `resolution` quotes (steps resumed, power and tensor activity back,
the rank back in step with its peers, the clock back, latency back under the SLO).
"""

from __future__ import annotations

import pandas as pd

from checks.detectors_gpu import throttle_names
from checks.toolkit import missing, num

LOADED = 0.5   # the throttle signals' min_utilization: below it a GPU's clock says nothing about throttling


def _pct(value) -> str:
    return "?" if missing(value) else f"{100 * float(value):.0f}%"


def steps_resumed(rows: pd.DataFrame, _tick: pd.DataFrame) -> dict:
    """busy_not_progressing: the run completed a step again, or its GPUs stopped spinning."""
    r = rows.iloc[-1]
    stall = (pd.Timestamp(r["tick"]) - pd.Timestamp(r["last_progress"])).total_seconds() if pd.notna(r["last_progress"]) else None
    resumed = stall is not None and stall < max(300.0, 20 * float(r["step_interval_seconds"] or 0))
    why = (f"steps resumed: step {int(r['last_step'])} completed at {pd.Timestamp(r['last_progress']):%H:%M:%S}"
           if resumed and pd.notna(r["last_step"]) else
           f"the run's GPUs are no longer busy (utilization {_pct(r['utilization_mean'])})")
    return {"why": why, "last_step": None if pd.isna(r["last_step"]) else int(r["last_step"]),
            "utilization_pct": num(100 * r["utilization_mean"], 1), "stall_seconds": num(stall, 0)}


def gpus_working(rows: pd.DataFrame, _tick: pd.DataFrame) -> dict:
    """gpu_busy_low_power: the run's GPUs draw power and use their tensor pipes again (or went idle)."""
    power = (rows["power_watts"] / rows["power_limit_watts"]).mean()
    tensor = rows["tensor_active_ratio"].mean()
    util = rows["utilization_ratio"].mean()
    why = (f"the run's {len(rows)} GPU(s) do work again: power {_pct(power)} of the limit, tensor pipes {_pct(tensor)}, "
           f"utilization {_pct(util)}")
    return {"why": why, "power_pct_of_limit": num(100 * power, 1), "tensor_active_pct": num(100 * tensor, 1),
            "utilization_pct": num(100 * util, 1)}


def rank_rejoined(rows: pd.DataFrame, _tick: pd.DataFrame) -> dict:
    """rank_dropout: the rank completes steps again, or its run no longer holds GPUs for it to block."""
    r = rows.iloc[-1]
    silence = (pd.Timestamp(r["tick"]) - pd.Timestamp(r["last_step_time"])).total_seconds() if pd.notna(r["last_step_time"]) else None
    if silence is not None and silence < 120:
        why = f"rank {int(r['rank'])} completed a step at {pd.Timestamp(r['last_step_time']):%H:%M:%S}: it is back in step"
    else:
        why = (f"the run no longer holds its peers' GPUs ({int(r['gpus_held'])} held): the job ended, nothing waits on "
               f"rank {int(r['rank'])}")
    return {"why": why, "gpus_held": int(r["gpus_held"]), "silence_seconds": num(silence, 0)}


def in_step_with_peers(rows: pd.DataFrame, tick: pd.DataFrame) -> dict:
    """straggler_rank: the rank computes as fast as its peers again (judged against them, not its past);
    recorded only after it stayed so for the signal's `clear_minutes` (checks/episodes.py)."""
    r = rows.iloc[-1]
    peers = tick[(tick["run_id"] == r["run_id"]) & (tick["rank"] != r["rank"])]["compute_seconds"].median()
    ratio = r["compute_seconds"] / peers if peers and pd.notna(peers) else None
    why = (f"rank {int(r['rank'])} computes in step with its peers again: {num(r['compute_seconds'], 4)} s vs their "
           f"median {num(peers, 4)} s (x{num(ratio, 2)})" if ratio is not None else
           f"rank {int(r['rank'])} has no peers computing beside it (its run stopped stepping)")
    return {"why": why, "compute_seconds": num(r["compute_seconds"], 4), "peer_compute_seconds": num(peers, 4),
            "ratio_to_peers": num(ratio, 3)}


def clock_back(rows: pd.DataFrame, _tick: pd.DataFrame) -> dict | None:
    """gpu_thermal_throttle / gpu_power_throttle: under load again without the throttle, or released
    by its run. A GPU its run still holds but does not load (a checkpoint pause) cannot tell: None."""
    r = rows.iloc[-1]
    if pd.notna(r.get("run_id")) and not r.get("utilization_ratio", 0) >= LOADED:
        return None
    if pd.isna(r.get("run_id")):
        return {"why": f"the GPU was released by its run (utilization {_pct(r.get('utilization_ratio'))}): "
                       f"no load left to throttle", "utilization_pct": num(100 * r.get("utilization_ratio", 0), 1)}
    names = "|".join(throttle_names(r.get("throttle_reasons"))) or "none"
    base = r.get("sm_clock_baseline")
    why = (f"throttle reasons {names}, SM clock {num(r['sm_clock_hertz'] / 1e6, 0)} MHz"
           + (f" (baseline {num(base / 1e6, 0)} MHz)" if base is not None and pd.notna(base) else "")
           + f", {num(r.get('temperature_celsius'), 0)} °C, utilization {_pct(r.get('utilization_ratio'))}")
    return {"why": why, "throttle_reasons": names, "sm_clock_mhz": num(r["sm_clock_hertz"] / 1e6, 0),
            "temperature_celsius": num(r.get("temperature_celsius"), 1)}


def step_time_back(rows: pd.DataFrame, _tick: pd.DataFrame) -> dict:
    """step_time_regression: the run's minute-median step is back near its reference."""
    r = rows.iloc[-1]
    pace = r.get("pace_seconds", r["step_seconds"])     # the job's pace: its slowest rank's step
    return {"why": f"step time {num(pace, 3)} s (data {num(r.get('data_seconds'), 3)} s, "
                   f"compute {num(r.get('compute_seconds'), 3)} s): back under the regression threshold",
            "step_seconds": num(pace, 4)}


def collective_back(rows: pd.DataFrame, _tick: pd.DataFrame) -> dict:
    """collective_regression: the run's transfer time (collectives less the wait for the slowest rank)
    fell back toward its healthy baseline."""
    r = rows.iloc[-1]
    return {"why": f"transfer time {num(r['transfer_seconds'], 4)} s (collective {num(r['collective_seconds'], 4)} s, "
                   f"of which {num(r.get('wait_seconds'), 4)} s waiting for the slowest rank), back within the "
                   f"regression threshold of its healthy baseline",
            "transfer_seconds": num(r["transfer_seconds"], 4), "collective_seconds": num(r["collective_seconds"], 4)}


def latency_back(rows: pd.DataFrame, _tick: pd.DataFrame) -> dict:
    """serving_latency_slo_breach: every latency quantile is back under the endpoint's objective."""
    r = rows.iloc[-1]
    return {"why": f"TTFT p99 {num(r.get('ttft_p99_seconds'), 3)} s, ITL p99 {num(r.get('itl_p99_seconds'), 4)} s: "
                   f"back under the SLO", "ttft_p99_seconds": num(r.get("ttft_p99_seconds"), 4),
            "itl_p99_seconds": num(r.get("itl_p99_seconds"), 4)}


def latency_near_baseline(rows: pd.DataFrame, _tick: pd.DataFrame) -> dict:
    """serving_latency_regression: the latency quantiles are within the sustain ratio of their trailing
    baselines (which a regression lasting longer than the baseline window drags along: SEV3)."""
    r = rows.iloc[-1]
    return {"why": f"TTFT p99 {num(r.get('ttft_p99_seconds'), 3)} s vs trailing baseline "
                   f"{num(r.get('ttft_p99_baseline'), 3)} s: no quantile clearly above its trailing baseline",
            "ttft_p99_seconds": num(r.get("ttft_p99_seconds"), 4), "ttft_p99_baseline": num(r.get("ttft_p99_baseline"), 4)}
