"""Sensors: fold incidents after each detect run, and deliver incident transitions as alerts.

The alert sensor opens the warehouse read-only; while a run holds the write lock it skips the
tick and tries again. Each transition (opened, resolved) is delivered once per sink: the cursor
remembers what was sent, and the sink itself refuses a key it already holds.
"""

import json

import dagster as dg

from orchestration import sql
from orchestration.jobs import detect_job, incidents_job
from orchestration.sinks import FileSinkResource, dedup_key
from orchestration.warehouse import WarehouseBusy, WarehouseMissing, WarehouseResource


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=[detect_job],
    request_job=incidents_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
)
def fold_incidents_after_detect(context: dg.RunStatusSensorContext):
    """After a detect run succeeds, fold the findings into incidents."""
    return dg.RunRequest(run_key=f"after-{context.dagster_run.run_id}")


def pending_alerts(warehouse: WarehouseResource, delivered: set[str]) -> list[dict]:
    """Incident transitions not yet delivered, oldest first (read-only; may raise WarehouseBusy)."""
    with warehouse.connect(read_only=True, wait_seconds=0) as con:
        rows = sql.frame(con, "alerts/transitions")
    alerts = []
    for record in rows.to_dict("records"):
        for key in ("hosts", "gpus"):
            record[key] = list(record[key]) if record[key] is not None else []
        record["evidence"] = json.loads(record["evidence"]) if record["evidence"] else {}
        if dedup_key(record) not in delivered:
            alerts.append(record)
    return alerts


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def incident_alerts(context: dg.SensorEvaluationContext, warehouse: WarehouseResource, alert_sink: FileSinkResource):
    """Deliver each new incident transition (opened, resolved) once to the alert sink."""
    delivered = set(json.loads(context.cursor)) if context.cursor else set()
    try:
        alerts = pending_alerts(warehouse, delivered)
    except (WarehouseBusy, WarehouseMissing) as reason:
        return dg.SkipReason(str(reason))
    if not alerts:
        return dg.SkipReason("no new incident transitions")
    written = alert_sink.deliver(alerts)
    delivered.update(dedup_key(a) for a in alerts)
    context.update_cursor(json.dumps(sorted(delivered)))
    for alert in written:
        context.log.info(f"alert {alert['transition']}: [{alert['tier']}] {alert['title']} ({alert['incident_id']})")
    return dg.SkipReason(f"delivered {len(written)} alert(s)")
