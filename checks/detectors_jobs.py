"""Detectors of a whole job's fate: a job that ended without finishing (crashed, OOM, killed).

A job-wide crash leaves nothing for the other signals: every rank stops at once, the GPUs are
released together (no rank's peers hold theirs, no GPU spins), so the run simply stops logging. Its
own `run_ended` event says it did not finish; a preemption (the scheduler's decision, requeued or
not) and a completed run are not findings (the SQL leaves them out).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from checks.toolkit import empty_findings, finding, findings_frame, num


def run_crashed(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """One finding per job that ended with a failure status (`run_ended`), at the time it ended.

    The onset is the run's last completed step (when its progress stopped), or the end itself if
    no step is known. A CUDA out-of-memory is named when the run's GPUs' memory reached
    `oom_memory_ratio` of the card in the last `oom_minutes` before the end."""
    if frame.empty:
        return empty_findings()
    rows = []
    for r in frame.itertuples(index=False):
        ended = pd.Timestamp(r.ended_time)
        last = pd.Timestamp(r.last_step_time) if pd.notna(r.last_step_time) else ended
        peak = r.memory_peak_ratio
        oom = pd.notna(peak) and peak >= thresholds["oom_memory_ratio"]
        rows.append(finding(
            entity_id=r.run_id, onset=min(last, ended), detected_at=ended, last_seen=ended, run_id=r.run_id,
            hosts=sorted(r.hosts), gpus=sorted(r.gpus),
            value=(ended - last).total_seconds(), baseline=r.step_interval_seconds, threshold=0.0,
            evidence={
                "status": r.status,
                "ended": ended.isoformat(),
                "last_step": num(r.last_step, 0),
                "last_step_time": last.isoformat(),
                "ranks": int(r.ranks),
                "gpu_count": len(r.gpus),
                "cause": "CUDA out of memory (memory at the card's limit before the end)" if oom else "unknown",
                "memory_peak_pct": num(100 * peak, 1) if pd.notna(peak) else None,
            },
        ))
    return findings_frame(rows)
