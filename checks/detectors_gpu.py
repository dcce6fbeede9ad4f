"""Detectors of the GPU-hardware signals.

Each takes its signal's per-GPU (or per-run) per-minute frame from `sql/detect/<signal>.sql` and
returns findings in `registry.FINDING_COLUMNS`. Frames carry a lookback before the partition, marked
by `in_window` = False, so persistence and onsets see across the hour boundary; only stretches that
reach into the partition are reported. Counters (XID, ECC, remapped rows) are cumulative: the SQL
turns them into increases against the previous reading, so a level that was already non-zero
before the window never alarms by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
import pynvml

from checks.toolkit import (
    MINUTE,
    active_stretches,
    empty_findings,
    finding,
    findings_frame,
    gpu_suspects,
    mark_stretches,
    num,
    timestamp,
)

# NVML clock-event ("throttle") reason bits, named as nvidia-smi names them.
THROTTLE_BITS = {
    pynvml.nvmlClocksThrottleReasonGpuIdle: "GPU_IDLE",
    pynvml.nvmlClocksThrottleReasonApplicationsClocksSetting: "APPLICATIONS_CLOCKS_SETTING",
    pynvml.nvmlClocksThrottleReasonSwPowerCap: "SW_POWER_CAP",
    pynvml.nvmlClocksThrottleReasonHwSlowdown: "HW_SLOWDOWN",
    pynvml.nvmlClocksThrottleReasonSyncBoost: "SYNC_BOOST",
    pynvml.nvmlClocksThrottleReasonSwThermalSlowdown: "SW_THERMAL_SLOWDOWN",
    pynvml.nvmlClocksThrottleReasonHwThermalSlowdown: "HW_THERMAL_SLOWDOWN",
    pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown: "HW_POWER_BRAKE_SLOWDOWN",
    pynvml.nvmlClocksThrottleReasonDisplayClockSetting: "DISPLAY_CLOCK_SETTING",
}
THERMAL_BITS = pynvml.nvmlClocksThrottleReasonSwThermalSlowdown | pynvml.nvmlClocksThrottleReasonHwThermalSlowdown
POWER_BITS = pynvml.nvmlClocksThrottleReasonSwPowerCap | pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown

# XIDs after which the GPU (or its node) must be drained: uncontained or double-bit memory errors,
# fallen off the bus, NVLink, GSP and micro-controller failures, row-remap failure. Others (13, 31,
# 43, 63, ...) are mostly application faults or informational and the GPU keeps working.
FATAL_XIDS = frozenset({48, 61, 62, 64, 74, 79, 92, 94, 95, 119, 120})


def throttle_names(mask) -> list[str]:
    """The NVML reason names set in a throttle-reasons bitmask (empty for 0 or missing)."""
    if mask is None or pd.isna(mask):
        return []
    mask = int(mask)
    return [name for bit, name in sorted(THROTTLE_BITS.items()) if mask & bit]


def _gpu_finding(stretch: pd.DataFrame, active: pd.DataFrame, value: float, baseline, threshold: float,
                 evidence: dict, onset=None) -> dict:
    first = active.iloc[0]
    runs = sorted(set(active["run_id"].dropna()))
    return finding(
        entity_id=first["entity_id"], onset=onset if onset is not None else stretch["tick"].iloc[0] - MINUTE,
        detected_at=active["tick"].iloc[0], last_seen=active["tick"].iloc[-1], run_id=runs[-1] if runs else None,
        hosts=[str(first["host"])], gpus=[first["entity_id"]], value=value, baseline=baseline, threshold=threshold,
        evidence={"gpu": first["entity_id"], "gpu_uuid": first.get("gpu_uuid"), "runs": ", ".join(runs) or "none",
                  "minutes": int(len(active)), **evidence},
    )


# ----------------------------------------------------------------------------------------------
# XID, ECC, row remapping: events from cumulative counters and flags
# ----------------------------------------------------------------------------------------------


def _xid_detector(fatal: bool) -> Callable[[pd.DataFrame, Mapping[str, float]], pd.DataFrame]:
    def detect(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
        if frame.empty:
            return empty_findings()
        is_fatal = frame["event_xid"].isin(FATAL_XIDS)
        f = gpu_suspects(frame, frame["xid_increase"].fillna(0).ge(thresholds["min_xid_increase"])
                         & (is_fatal if fatal else ~is_fatal))
        if f.empty:
            return empty_findings()
        f = mark_stretches(f, "entity_id", f["_entry"])
        rows = []
        for stretch, active in active_stretches(f):
            xids = sorted({int(x) for x in active["event_xid"].dropna()})
            events = int(active["xid_increase"].sum())
            rows.append(_gpu_finding(
                stretch, active, value=events, baseline=0.0, threshold=thresholds["min_xid_increase"],
                onset=active["event_time"].min(),
                evidence={
                    "xids": ", ".join(map(str, xids)) or "unknown",
                    "xid_events": events,
                    "first_event": active["event_time"].min().isoformat(),
                    "xid_errors_total": int(active["xid_errors_total"].max()),
                    "xid_class": "fatal: drain the GPU" if fatal else "non-fatal: usually the application or driver",
                    "samples_after": int(active["samples"].iloc[-1]),
                },
            ))
        return findings_frame(rows)

    detect.__name__ = "gpu_xid_fatal" if fatal else "gpu_xid_error"
    detect.__doc__ = (
        "A GPU whose XID counter rose with a fatal XID (fallen off the bus, uncontained/double-bit ECC, "
        "NVLink, GSP): one finding per run of minutes with new XIDs." if fatal else
        "A GPU whose XID counter rose with a non-fatal XID (13, 31, 43, ...: application or driver faults)."
    )
    return detect


gpu_xid_error = _xid_detector(fatal=False)
gpu_xid_fatal = _xid_detector(fatal=True)


def gpu_ecc_error(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """Uncorrectable ECC errors rising, uncorrectable remapped rows rising, or a row remap turning
    pending. Corrected errors alone never alarm: a few are normal on healthy HBM and are handled by
    the hardware; they are reported as evidence. A GPU already in row-remap failure is left to
    that (SEV1) signal rather than raising a second incident about the same memory."""
    if frame.empty:
        return empty_findings()
    f = gpu_suspects(frame, (
        frame["uncorrected_increase"].fillna(0).ge(thresholds["min_uncorrected_increase"])
        | frame["remapped_uncorrectable_increase"].fillna(0).gt(0)
        | frame["pending_raised"].fillna(False).astype(bool)
    ) & ~frame["row_remap_failure"].fillna(False).astype(bool))   # that GPU is gpu_row_remap_failure's (SEV1)
    if f.empty:
        return empty_findings()
    f = mark_stretches(f, "entity_id", f["_entry"])
    rows = []
    for stretch, active in active_stretches(f):
        last = active.iloc[-1]
        uncorrected = int(active["uncorrected_increase"].fillna(0).sum())
        rows.append(_gpu_finding(
            stretch, active, value=uncorrected, baseline=0.0, threshold=thresholds["min_uncorrected_increase"],
            onset=active["event_time"].min(),
            evidence={
                "uncorrected_new": uncorrected,
                "corrected_new": int(active["corrected_increase"].fillna(0).sum()),
                "remapped_rows_uncorrectable_new": int(active["remapped_uncorrectable_increase"].fillna(0).sum()),
                "ecc_uncorrected_errors_total": None if pd.isna(last["ecc_uncorrected_errors_total"])
                else int(last["ecc_uncorrected_errors_total"]),
                "row_remap_pending": bool(active["row_remap_pending"].fillna(False).any()),
                "first_event": active["event_time"].min().isoformat(),
            },
        ))
    return findings_frame(rows)


def gpu_row_remap_failure(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A GPU reporting a row-remap failure: it ran out of spare rows and must be drained and
    replaced. A state, not a counter: it stays flagged (and its incident open) until the GPU is
    drained, reset or swapped."""
    if frame.empty:
        return empty_findings()
    f = gpu_suspects(frame, frame["row_remap_failure"].fillna(False).astype(bool))
    if f.empty:
        return empty_findings()
    f = mark_stretches(f, "entity_id", f["_entry"], min_minutes=thresholds["min_minutes"])
    rows = []
    for stretch, active in active_stretches(f):
        rows.append(_gpu_finding(
            stretch, active, value=len(active), baseline=0.0, threshold=thresholds["min_minutes"],
            onset=stretch["failure_since"].min() if stretch["failure_since"].notna().any() else None,
            evidence={
                "failing_since": timestamp(stretch["failure_since"].min()),
                "ecc_uncorrected_errors_total": None if pd.isna(active["ecc_uncorrected_errors_total"].max())
                else int(active["ecc_uncorrected_errors_total"].max()),
                "remapped_rows_uncorrectable_total": None if pd.isna(active["remapped_rows_uncorrectable_total"].max())
                else int(active["remapped_rows_uncorrectable_total"].max()),
            },
        ))
    return findings_frame(rows)


# ----------------------------------------------------------------------------------------------
# Throttling: reason bits under load, with the clock down against the GPU's own baseline
# ----------------------------------------------------------------------------------------------


def _throttle(frame: pd.DataFrame, thresholds: Mapping[str, float], bits: int, hot: bool) -> pd.DataFrame:
    if frame.empty:
        return empty_findings()
    f = gpu_suspects(frame, _throttled(frame, thresholds, bits, hot)[-1])
    if f.empty:
        return empty_findings()
    reason, loaded, _ = _throttled(f, thresholds, bits, hot)   # `_entry`: gpu_suspects kept it
    f["clock_ratio"] = f["sm_clock_hertz"] / f["sm_clock_baseline"]
    # Once open, the stretch lasts while the hardware keeps saying so: the trailing clock
    # baseline drifts down with a long throttle and must not close it. Minutes its run holds the GPU
    # without loading it (a checkpoint pause) cannot show a throttle either way: they neither
    # sustain nor end it (bridged up to `max_gap_minutes`).
    observable = (loaded | f["run_id"].isna()).to_numpy()
    f = f[observable].reset_index(drop=True)
    reason, loaded = (s[observable].reset_index(drop=True) for s in (reason, loaded))
    f = mark_stretches(f, "entity_id", f["_entry"], sustain=reason & loaded, min_minutes=thresholds["min_minutes"],
                       max_gap_minutes=thresholds.get("max_gap_minutes", 1.0))
    rows = []
    for stretch, active in active_stretches(f):
        opened = active[active["clock_ratio"].notna()]
        clock = float(active["sm_clock_hertz"].median())
        usual = float(opened["sm_clock_baseline"].iloc[0]) if not opened.empty else float("nan")
        drop_pct = 100 * (1 - clock / usual) if usual == usual and usual > 0 else float("nan")
        combined = int(np.bitwise_or.reduce(active["throttle_reasons"].fillna(0).astype(np.int64).to_numpy()))
        rows.append(_gpu_finding(
            stretch, active, value=drop_pct, baseline=usual, threshold=100 * thresholds["min_clock_drop"],
            evidence={
                "throttle_reasons": "|".join(throttle_names(combined)) or "none reported",
                "temperature_max_celsius": num(active["temperature_celsius"].max(), 1),
                "sm_clock_mhz": num(clock / 1e6, 0),
                "sm_clock_baseline_mhz": num(usual / 1e6, 0),
                "clock_drop_pct": num(drop_pct, 1),
                "power_watts": num(active["power_watts"].median(), 0),
                "power_limit_watts": num(active["power_limit_watts"].max(), 0),
                "utilization_pct": num(100 * active["utilization_ratio"].mean(), 1),
            },
        ))
    return findings_frame(rows)


def _throttled(f: pd.DataFrame, thresholds: Mapping[str, float], bits: int, hot: bool) -> tuple[pd.Series, ...]:
    """Per row: (a throttle reason of `bits` set, the GPU loaded, the stretch's entry: both with the clock down
    `min_clock_drop` against a baseline of `min_baseline_minutes`)."""
    reason = (f["throttle_reasons"].fillna(0).astype(np.int64) & bits) != 0
    if hot:   # exporters without reason bits: a very hot GPU still counts
        reason = reason | f["temperature_celsius"].ge(thresholds["hot_celsius"])
    loaded = f["utilization_ratio"].ge(thresholds["min_utilization"])
    history = f["baseline_minutes"].ge(thresholds["min_baseline_minutes"]) & f["sm_clock_baseline"].gt(0)
    dropped = (f["sm_clock_hertz"] / f["sm_clock_baseline"]).le(1.0 - thresholds["min_clock_drop"])
    return reason, loaded, reason & loaded & history & dropped


def gpu_thermal_throttle(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A loaded GPU slowed by heat: SW/HW thermal slowdown bits (or a temperature past
    `hot_celsius`) with its SM clock at least `min_clock_drop` below its own trailing baseline for
    `min_minutes`; it then stays flagged while the thermal reason and the load last."""
    return _throttle(frame, thresholds, THERMAL_BITS, hot=True)


def gpu_power_throttle(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A loaded GPU held back by power: SW power cap or HW power brake bits with its SM clock at
    least `min_clock_drop` below its own baseline for `min_minutes` (brief power-cap dips of a few
    percent are how healthy GPUs run at their limit, and do not qualify)."""
    return _throttle(frame, thresholds, POWER_BITS, hot=False)


# ----------------------------------------------------------------------------------------------
# Allocation: a GPU held but idle; a run's GPUs busy without doing work
# ----------------------------------------------------------------------------------------------


def gpu_idle_allocated(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A GPU held by a run (its samples carry the run id) that sits idle (utilization at most
    `max_utilization`: a CUDA context and now and then a stray kernel) for `min_minutes` while the
    run's other GPUs are busy. Checkpoint saves and evaluation pauses idle all of a run's GPUs
    together, and startup keeps them all low, so they do not qualify. A minute in which the others
    pause too (a checkpoint save) cannot tell this GPU's idleness from the run's pause: it neither
    counts toward `min_minutes` nor restarts the count, so saves every few minutes never hide an
    idle GPU."""
    if frame.empty:
        return empty_findings()
    f = gpu_suspects(frame, np.logical_and(*_idle(frame, thresholds)))
    if f.empty:
        return empty_findings()
    idle, others_busy = _idle(f, thresholds)
    paused = idle & f["other_gpus"].ge(1) & ~others_busy
    # Once open it lasts while the GPU stays idle: a checkpoint save idles the others for a minute.
    f = mark_stretches(f, "entity_id", f["_entry"], sustain=idle, min_minutes=thresholds["min_minutes"], unobservable=paused)
    rows = []
    for stretch, active in active_stretches(f):
        rows.append(_gpu_finding(
            stretch, active, value=100 * active["utilization_ratio"].mean(),
            baseline=100 * active["others_utilization"].mean(), threshold=100 * thresholds["max_utilization"],
            evidence={
                "idle_minutes": int(len(stretch)),
                "utilization_pct": num(100 * active["utilization_ratio"].mean(), 1),
                "others_utilization_pct": num(100 * active["others_utilization"].mean(), 1),
                "other_gpus": int(active["other_gpus"].max()),
                "memory_used_gib": num(active["memory_used_bytes"].max() / 2**30, 1),
                "power_watts": num(active["power_watts"].median(), 0),
            },
        ))
    return findings_frame(rows)


def _idle(f: pd.DataFrame, thresholds: Mapping[str, float]) -> tuple[pd.Series, pd.Series]:
    """Per row: (the GPU held by a run and idle, the run's other GPUs busy)."""
    return (f["run_id"].notna() & f["utilization_ratio"].le(thresholds["max_utilization"]),
            f["others_utilization"].ge(thresholds["min_others_utilization"]) & f["other_gpus"].ge(1))
