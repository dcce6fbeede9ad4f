"""The daily maintenance run (assets/maintenance.py) at 03:17 UTC: retention, zstd raw zone,
compaction, bounded run history. The only schedule: detection is event-driven (orchestration/sensors/raw.py)."""

import dagster as dg

maintenance_job = dg.define_asset_job(
    "daily_maintenance", selection=dg.AssetSelection.assets("maintenance"), executor_def=dg.in_process_executor,
    description="Retention, zstd compression of old raw-zone hours, DuckDB compaction, old Dagster runs deleted.")


@dg.schedule(cron_schedule="17 3 * * *", job=maintenance_job, execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.RUNNING)
def maintenance_daily(context: dg.ScheduleEvaluationContext):
    """Once a day, at a quiet hour."""
    return dg.RunRequest(run_key=f"maintenance@{context.scheduled_execution_time:%Y-%m-%d}")
