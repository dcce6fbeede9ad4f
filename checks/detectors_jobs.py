"""Detectors of a whole job's fate: a job that ended without finishing (crashed, OOM, killed).

A job-wide crash leaves nothing for the other signals: every rank stops at once, the GPUs are
released together (no rank's peers hold theirs, no GPU spins), so the run simply stops logging. Its
own `run_ended` event says it did not finish; a preemption (the scheduler's decision, requeued or
not) and a completed run are not findings (the SQL leaves them out). A job killed without a word
(SIGKILL, a node's crash: no `run_ended`) is told by its physics: its steps stopped and every GPU it
held reports free (memory released, idle) while the exporter keeps reporting; a hang holds its GPUs,
a checkpoint pause resumes, a telemetry gap stops the reports, a clean exit saved its last step.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from checks.toolkit import empty_findings, finding, findings_frame, num


def run_crashed(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """One finding per job that ended with a failure status (`run_ended`), at the time it ended, or
    that died without one (its GPUs released for `released_minutes`), when that was known.

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
        silent = pd.notna(getattr(r, "memory_after_bytes", None)) or str(r.status).startswith("no run_ended")
        known = pd.Timestamp(r.tick) if pd.notna(r.tick) else ended
        cause = ("CUDA out of memory (memory at the card's limit before the end)" if oom
                 else "killed without a word (SIGKILL, OOM killer, node crash): no run_ended" if silent else "unknown")
        extra = {} if not silent else {
            "gpus_released_since": ended.isoformat(),
            "memory_after_gib": num(r.memory_after_bytes / 2**30, 1) if pd.notna(r.memory_after_bytes) else None,
            "utilization_after_pct": num(100 * r.utilization_after, 1) if pd.notna(r.utilization_after) else None,
            "ranks_stop_spread_seconds": num(r.stop_spread_seconds, 1),
            "last_checkpoint_step": num(r.checkpoint_step, 0) if pd.notna(r.checkpoint_step) else None,
        }
        rows.append(finding(
            entity_id=r.run_id, onset=min(last, ended), detected_at=known, last_seen=known, run_id=r.run_id,
            hosts=sorted(r.hosts), gpus=sorted(r.gpus),
            value=(ended - last).total_seconds(), baseline=r.step_interval_seconds, threshold=0.0,
            evidence={
                "status": r.status,
                "ended": ended.isoformat(),
                "last_step": num(r.last_step, 0),
                "last_step_time": last.isoformat(),
                "ranks": int(r.ranks),
                "gpu_count": len(r.gpus),
                "crashed": True,
                "cause": cause,
                "memory_peak_pct": num(100 * peak, 1) if pd.notna(peak) else None,
                **extra,
            },
        ))
    return findings_frame(rows)
