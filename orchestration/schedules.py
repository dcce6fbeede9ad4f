"""The schedule: re-run the current hour every minute (and the previous hour just after the turn of
the hour, for its last and late lines), so a SEV1 stall is seen within minutes, not at hour's end.

Why every minute: a user sees an incident at the first tick after its evidence is in the raw zone,
so the delay is data latency + detection window + up to one cadence + the run's own time. The SEV1
detectors need 1-3 minutes of evidence (a hang: 3 minutes busy without a step); at the former
5-minute cadence SEV1 incidents appeared 5.2-5.3 minutes after onset in replay (bench/bench_replay.py),
over the 5-minute target; at 1 minute they appear within ~4. The cost is more runs: each re-ingests
the hour so far, which at 1,024 GPUs is ~22 s for a full hour (BENCHMARKS.md), so the schedule does
not queue a run for an hour that already has one waiting: when it starts it reads the newest lines.
"""

from datetime import timedelta

import dagster as dg

from orchestration.jobs import detect_job
from orchestration.partitions import HOUR_KEY

# Minutes past the hour at which the previous hour is re-run too: its last minute's lines (data
# latency up to ~10 s) in the first minutes, and late files again at minute 5.
PREVIOUS_HOUR_MINUTES = (0, 1, 2, 5)
WAITING = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED]


def _waiting(instance: dg.DagsterInstance | None, key: str) -> bool:
    """Whether a detect run for partition `key` is queued and not started yet."""
    if instance is None:
        return False
    runs = instance.get_runs(
        filters=dg.RunsFilter(job_name=detect_job.name, statuses=WAITING, tags={"dagster/partition": key}), limit=1)
    return bool(runs)


# On by default, like the sensors: `goodput ui` (dagster dev runs the daemon) keeps detecting.
@dg.schedule(cron_schedule="* * * * *", job=detect_job, execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.RUNNING)
def detect_every_minute(context: dg.ScheduleEvaluationContext):
    """Ingest and check the current hour every minute (and the previous one just after the turn)."""
    now = context.scheduled_execution_time
    hours = [now - timedelta(hours=1)] if now.minute in PREVIOUS_HOUR_MINUTES else []
    hours.append(now)
    instance = context.instance if _has_instance(context) else None
    requested = False
    for moment in hours:
        key = moment.strftime(HOUR_KEY)
        if _waiting(instance, key):
            continue
        requested = True
        yield dg.RunRequest(partition_key=key, run_key=f"{key}@{now.isoformat()}")
    if not requested:
        yield dg.SkipReason("a detect run for this hour is already waiting to start")


def _has_instance(context: dg.ScheduleEvaluationContext) -> bool:
    try:
        return context.instance is not None
    except dg.DagsterInvariantViolationError:  # a context built without an instance (tests)
        return False
