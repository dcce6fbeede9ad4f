"""Replay: detection delay as a user sees it, under the real raw-zone sensor, in simulated time.

A scenario is simulated into a staging folder. A replay clock then walks simulated time one
sensor tick at a time (`CADENCE`, one a minute: the daemon ticks the sensor every 30 s or more).
Before each tick it appends to the home's raw zone every staged line whose data has arrived by
then (its time plus its source's data latency: the NVML agent flushes every 10 s, the training
client writes each step as it ends), to the same hour files, in the same order, append only, so
that the raw zone grows as a producer's would. At each tick it evaluates the real sensor
`raw_zone_detect` (`build_sensor_context` with its cursor, its clock at the tick's time), executes
every run request it yields through the real `detect` job on a real Dagster instance (as `goodput
demo` does), then `fold_incidents` (as the run-status sensor would), and notes when each injected
fault first had a matching incident (the shared scorer's match): the tick's simulated time plus the
wall time its runs took. That is the delay a user sees: data latency + the sensor's cadence + the
signal's detection window + the runs' own time. Each tick's CPU time (this process: the runs
execute in it) is recorded, so a tick's cost can be held to the data it read.

Checkpoints grow too, copied into the home as their `checkpoint_saved` lines arrive; the growing
raw zone and checkpoints are orchestration/evaluation/replay_staging.py.

Library: `replay(staging, home, start, end, ...)` returns a `ReplayResult`; `tier_table` and
`fault_type_table` summarize it against TARGETS. The `goodput replay` command
(orchestration/commands/replay.py) and bench/bench_replay.py drive it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
from dagster._utils.schedules import cron_string_iterator

from orchestration.config.home import raw_root
from orchestration.definitions import build_definitions, resources_for
from orchestration.evaluation.replay_staging import DEFAULT_LATENCY_S, GrowingCheckpoints, GrowingRawZone, StagedFile, index_file
from orchestration.evaluation.scoring import load_truth, match, opened_incidents
from orchestration.partitions import hourly
from orchestration.sensors import raw as sensors_raw

__all__ = ["CADENCE", "DEFAULT_LATENCY_S", "TARGETS", "GrowingCheckpoints", "GrowingRawZone", "ReplayResult", "StagedFile",
           "fault_type_table", "index_file", "replay", "schedule_ticks", "tier_table"]

# What each tier's delay is held to (seconds): SEV1 stalls burn a whole job's GPUs by the minute.
CADENCE = "* * * * *"          # the replayed sensor ticks: one a minute of simulated time
TARGETS = {"SEV1": 5 * 60.0, "SEV2": 30 * 60.0, "SEV3": 24 * 3600.0}
TIER_ORDER = ("SEV1", "SEV2", "SEV3")

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def schedule_ticks(cron: str, timezone_name: str, start: datetime, end: datetime) -> list[datetime]:
    """The schedule's tick times in (start, end], as the Dagster daemon computes them."""
    # dagster's own cron iteration (what the daemon uses), so the ticks are the schedule's exactly
    ticks = []
    for tick in cron_string_iterator(pd.Timestamp(start).timestamp(), cron, timezone_name):
        if tick > end:
            break
        if tick > start:
            ticks.append(tick.astimezone(timezone.utc))
    return ticks


@dataclass
class ReplayResult:
    """What a replay saw: per tick (runs, time), per fault (when first seen), and every incident."""

    ticks: pd.DataFrame
    faults: pd.DataFrame
    incidents: pd.DataFrame
    schedule: str
    cron: str
    latency: dict[str, float] = field(default_factory=dict)


def _aware(moment) -> datetime:
    stamp = pd.Timestamp(moment)
    return (stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")).to_pydatetime()


def replay(staging: Path, home: Path, start, end, *, instance=None, latency: dict[str, float] | None = None,
           sensor_name: str = "raw_zone_detect", tail: timedelta = timedelta(minutes=15),
           progress: Callable[[int, int, str], None] | None = None,
           evaluate: Callable[[datetime], bool] | None = None) -> ReplayResult:
    """Grow `home`'s raw zone from `staging`'s over [start, end + tail) in simulated time, running
    the real sensor's ticks; `staging` holds a simulated raw zone and its ground_truth.jsonl.
    `progress(i, total, line)` is called after each tick. `evaluate(tick)` False leaves a tick out
    (bench/bench_replay.py --windows: only the minutes around some faults); its data arrives with
    the next tick evaluated."""
    start, stop = _aware(start), _aware(end) + tail
    first = hourly.start.astimezone(timezone.utc)
    if first > start.replace(minute=0, second=0, microsecond=0):
        # the sensor requests no hour before the partitions: every tick would look idle
        raise ValueError(f"the partitions start at {first:%Y-%m-%d %H:00} UTC, after this replay's first hour "
                         f"({start:%Y-%m-%d %H:00}): the code location was loaded for another home "
                         f"(GOODPUT_HOME={os.environ.get('GOODPUT_HOME', './.goodput')}); point GOODPUT_HOME at the "
                         "replay's home (orchestration.commands.common.use_home) before importing orchestration.evaluation.replay")
    instance = instance or dg.DagsterInstance.get()
    defs = build_definitions(home)
    # the raw-zone sensor alone (goodput ui runs it inside goodput_service): the replay runs the fold itself
    sensor = sensors_raw.raw_zone_detect if sensor_name == sensors_raw.raw_zone_detect.name else defs.resolve_sensor_def(sensor_name)
    resources = resources_for(home)
    detect = defs.resolve_job_def(sensor.job_name)
    fold = defs.resolve_job_def("fold_incidents")
    truth = load_truth(staging / "ground_truth.jsonl")
    raw = GrowingRawZone(raw_root(staging), raw_root(home), latency)
    checkpoints = GrowingCheckpoints(staging, home, raw)
    ticks = schedule_ticks(CADENCE, "UTC", start, stop)
    first_seen: dict[int, tuple[datetime, list[str]]] = {}
    incident_seen: dict[str, datetime] = {}
    incidents = pd.DataFrame()
    tick_rows = []
    cursor = None
    say = progress or (lambda _i, _n, _line: None)
    clock = sensors_raw.utcnow
    try:
        for i, tick in enumerate(ticks, 1):
            if evaluate is not None and not evaluate(tick):
                continue
            saved = checkpoints.advance(tick)   # the files first, then the lines that name them
            appended = raw.advance(tick)
            cpu0 = time.process_time()
            sensors_raw.utcnow = lambda tick=tick: tick
            with dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor,
                                         repository_def=defs.get_repository_def()) as context:
                result = sensor.evaluate_tick(context)
                cursor = context.cursor
            requests = list(result.run_requests or [])
            t0 = time.monotonic()
            failed = []
            for request in requests:
                job = defs.resolve_job_def(request.job_name) if request.job_name else detect   # with shards: detect_shard too
                done = job.execute_in_process(partition_key=request.partition_key, instance=instance,
                                              run_config=QUIET, tags=request.tags, raise_on_error=False)
                if not done.success:
                    failed.append(request.partition_key)
            if requests:  # the run-status sensor folds incidents after each successful detect run
                fold.execute_in_process(instance=instance, run_config=QUIET)
            wall = time.monotonic() - t0
            cpu = time.process_time() - cpu0
            seen_at = tick + timedelta(seconds=wall)
            if requests:
                incidents, _counts = opened_incidents(home)
                for incident_id in incidents["incident_id"]:
                    incident_seen.setdefault(incident_id, seen_at)
                matched = match(truth, incidents)
                for row in matched.itertuples():
                    if row.detected and row.Index not in first_seen:
                        first_seen[row.Index] = (seen_at, list(row.incident_ids))
            tick_rows.append({"tick": tick, "runs": len(requests), "partitions": [r.partition_key for r in requests],
                              "failed": failed, "lines_appended": appended, "checkpoints_copied": saved, "wall_s": wall,
                              "cpu_s": cpu, "faults_seen": len(first_seen)})
            say(i, len(ticks), f"{tick:%Y-%m-%d %H:%M} {len(requests)} run(s) {wall:4.1f}s, "
                f"{appended:,} lines appended, {len(first_seen)}/{len(truth)} faults seen"
                + (f", {saved} checkpoint(s) copied" if saved else "")
                + (f", FAILED {', '.join(failed)}" if failed else ""))
    finally:
        sensors_raw.utcnow = clock
    checkpoints.finish()   # staged checkpoint files no lineage line names: after the last tick
    # An incident that matches no injected fault (the shared scorer's match) is a false alarm.
    explained = {i for ids in match(truth, incidents)["incident_ids"] for i in ids} if not incidents.empty else set()
    return ReplayResult(
        ticks=pd.DataFrame(tick_rows),
        faults=_fault_rows(truth, first_seen, incidents),
        incidents=_incident_rows(incidents, incident_seen).assign(
            false_alarm=lambda f: ~f["incident_id"].isin(explained)),
        schedule=sensor_name, cron=CADENCE, latency=raw.latency,
    )


def _naive(moment: datetime) -> pd.Timestamp:
    return pd.Timestamp(moment).tz_convert("UTC").tz_localize(None)


def _fault_rows(truth: pd.DataFrame, first_seen: dict, incidents: pd.DataFrame) -> pd.DataFrame:
    tiers = dict(zip(incidents["incident_id"], incidents["tier"])) if not incidents.empty else {}
    signals = dict(zip(incidents["incident_id"], incidents["signal"])) if not incidents.empty else {}
    rows = []
    for index, fault in enumerate(truth.itertuples()):
        seen, ids = first_seen.get(index, (None, []))
        # the fault's tier is its most severe matching incident's (SEV1 < SEV2 < SEV3)
        tier = min((tiers[i] for i in ids if i in tiers), default=None, key=TIER_ORDER.index)
        rows.append({
            "type": fault.type, "entity": fault.entity, "onset": fault.onset, "end": fault.end,
            "tier": tier, "signals": sorted({signals[i] for i in ids if i in signals}),
            "first_seen": _naive(seen) if seen else pd.NaT,
            "delay_s": (_naive(seen) - fault.onset).total_seconds() if seen else np.nan,
        })
    return pd.DataFrame(rows, columns=["type", "entity", "onset", "end", "tier", "signals", "first_seen", "delay_s"])


def _incident_rows(incidents: pd.DataFrame, seen: dict[str, datetime]) -> pd.DataFrame:
    if incidents.empty:
        return pd.DataFrame(columns=["incident_id", "signal", "tier", "onset", "opened", "first_seen"])
    out = incidents[["incident_id", "signal", "tier", "onset", "opened"]].copy()
    out["first_seen"] = [_naive(seen[i]) if i in seen else pd.NaT for i in out["incident_id"]]
    return out.reset_index(drop=True)


def _minutes(values: Iterable[float], how: str) -> float:
    series = pd.Series(list(values), dtype="float64").dropna()
    if series.empty:
        return np.nan
    return float(getattr(series, how)()) / 60


def tier_table(faults: pd.DataFrame) -> pd.DataFrame:
    """Per tier: faults, detected, delay median and max (minutes) against the tier's target."""
    rows = []
    for tier in TIER_ORDER:
        mine = faults[faults["tier"] == tier]
        if mine.empty:
            continue
        worst = _minutes(mine["delay_s"], "max")
        rows.append({"tier": tier, "faults detected": len(mine), "delay median (min)": _minutes(mine["delay_s"], "median"),
                     "delay max (min)": worst, "target (min)": TARGETS[tier] / 60,
                     "met": "yes" if worst <= TARGETS[tier] / 60 else "no"})
    missed = faults[faults["tier"].isna()]
    if not missed.empty:
        rows.append({"tier": "missed", "faults detected": 0, "delay median (min)": np.nan, "delay max (min)": np.nan,
                     "target (min)": np.nan, "met": f"{len(missed)} not detected: " + ", ".join(sorted(set(missed["type"])))})
    return pd.DataFrame(rows)


def fault_type_table(faults: pd.DataFrame) -> pd.DataFrame:
    """Per fault type: injected, detected, tier, delay median and max (minutes)."""
    rows = []
    for fault_type, mine in faults.groupby("type", sort=True):
        tiers = sorted(set(mine["tier"].dropna()), key=TIER_ORDER.index)
        rows.append({"fault type": fault_type, "injected": len(mine), "detected": int(mine["tier"].notna().sum()),
                     "tier": "/".join(tiers) or "-",
                     "signals": ", ".join(sorted({s for ss in mine["signals"] for s in ss})) or "-",
                     "delay median (min)": _minutes(mine["delay_s"], "median"),
                     "delay max (min)": _minutes(mine["delay_s"], "max")})
    return pd.DataFrame(rows)
