"""The schedule: re-run the current hour every 5 minutes (and the previous hour just after the
turn of the hour, for its late lines), so a SEV1 stall is seen within minutes, not at hour's end."""

from datetime import timedelta

import dagster as dg

from orchestration.jobs import detect_job
from orchestration.partitions import HOUR_KEY


# On by default, like the sensors: `goodput ui` (dagster dev runs the daemon) keeps detecting.
@dg.schedule(cron_schedule="*/5 * * * *", job=detect_job, execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.RUNNING)
def detect_every_5_minutes(context: dg.ScheduleEvaluationContext):
    """Ingest and check the current hour (and, in the first 10 minutes, the previous one)."""
    now = context.scheduled_execution_time
    hours = [now - timedelta(hours=1)] if now.minute < 10 else []
    hours.append(now)
    for moment in hours:
        key = moment.strftime(HOUR_KEY)
        yield dg.RunRequest(partition_key=key, run_key=f"{key}@{now.isoformat()}")
