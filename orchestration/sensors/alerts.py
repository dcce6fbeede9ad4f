"""Sensors: fold incidents after each detect run, deliver incident transitions as alerts, and
watch Goodput itself (failed runs, stale ticks, stale raw data).

Sensors run outside runs, so they never hold the warehouse's write lock for long: the alert sensor
reads pending transitions read-only (a held lock skips the tick), delivers them over HTTP with the
journal as the record of what was delivered, and only then mirrors the journal into
`alert_attempts` through a short write connection that gives up at once when a run is writing (a
later pass mirrors it). See docs/alerting.md.
"""

import hashlib
import json
import math
import time
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd

from orchestration.alerting import monitor as monitor_incidents
from orchestration.alerting.config import AlertingConfigError
from orchestration.alerting.journal import mirror_journal
from orchestration.alerting.resource import AlertingResource
from orchestration.board_links import alert_links
from orchestration.jobs import detect_job, incidents_job
from orchestration.storage import sql
from orchestration.storage.raw_zone import RawZoneResource
from orchestration.storage.warehouse import WarehouseBusy, WarehouseMissing, WarehouseResource

MONITOR_FAMILY = "monitor"


def utcnow() -> float:
    """Wall-clock now (epoch seconds); tests replace it to move time."""
    return time.time()


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


# ---------------------------------------------------------------------------------------------- incident alerts


def _json_safe(value):
    if value is None:
        return None
    if isinstance(value, pd.Timestamp | datetime):
        return None if pd.isna(value) else pd.Timestamp(value).isoformat()
    if hasattr(value, "tolist"):            # numpy arrays and scalars from DuckDB
        return _json_safe(value.tolist())
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def alert_records(rows: pd.DataFrame) -> list[dict]:
    """Transition rows as JSON-safe alert dicts (lists for arrays, ISO strings for times)."""
    alerts = []
    for record in rows.to_dict("records"):
        alert = {k: _json_safe(v) for k, v in record.items()}
        for key in ("hosts", "gpus", "ranks"):
            alert[key] = alert.get(key) or []
        alert["evidence"] = json.loads(alert["evidence"]) if isinstance(alert.get("evidence"), str) else alert.get("evidence") or {}
        alerts.append(alert)
    return alerts


def incident_transitions(warehouse: WarehouseResource) -> list[dict]:
    """Every incident transition, oldest first (read-only; may raise WarehouseBusy / WarehouseMissing)."""
    with warehouse.connect(read_only=True, wait_seconds=0) as con:
        try:
            return alert_records(sql.frame(con, "alerts/transitions"))
        except duckdb.CatalogException:
            return []    # a warehouse from before migration 003: the next run migrates it


def transitions_digest(warehouse: WarehouseResource) -> str:
    """A digest of every incident transition (read-only; may raise WarehouseBusy / WarehouseMissing)."""
    with warehouse.connect(read_only=True, wait_seconds=0) as con:
        try:
            return "/".join(str(v) for v in sql.run(con, "alerts/transitions_digest").fetchone())
        except duckdb.CatalogException:
            return ""


def _latest_fold_run(instance: dg.DagsterInstance) -> str | None:
    event = instance.get_latest_materialization_event(dg.AssetKey("incidents"))
    return event.run_id if event else None


def mirror_attempts(warehouse: WarehouseResource, alerting: AlertingResource) -> tuple[bool, str]:
    """Copy the journal's new attempts into `alert_attempts` if the write lock is free right now."""
    if not Path(warehouse.path).exists():
        return False, "attempt log mirrored once the warehouse exists"
    try:
        with warehouse.connect(wait_seconds=0.5) as con:
            added = mirror_journal(con, alerting.journal())
            monitor = monitor_incidents.mirror(con, alerting.monitor_alerts())   # alerts about Goodput: incidents too
    except WarehouseBusy:
        return False, "attempt log mirrored later (a run holds the warehouse)"
    return True, f"{added} attempt(s) logged in alert_attempts, {monitor} monitor transition(s) in monitor_alerts"


def run_alerts(context, alerting: AlertingResource, alerts: list[dict]) -> str:
    """Deliver what is pending among `alerts` and say what happened."""
    pending = alerting.pending(alerts, clock=utcnow)
    if not pending:
        return "no new incident transitions"
    # per-alert lines at debug (the tick's summary says what happened); failures are warnings
    result = alerting.deliver(pending, log=context.log.debug, warn=context.log.warning, clock=utcnow)
    if result is None:
        return "another sensor is delivering; trying next tick"
    for skipped in sorted(set(result["skipped"])):
        context.log.debug(f"inactive {skipped}")
    return (f"delivered {result['delivered']}, failed {result['failed']}, rejected {result['rejected']}, "
            f"waiting {result['waiting']}")


def alerts_pass(context, instance_fn, state: dict, warehouse: WarehouseResource, alerting: AlertingResource) -> str:
    """One pass of the alert sensor: deliver what is pending and mirror the journal; updates `state`
    (its cursor) in place and returns what happened. `context` gives the log; `instance_fn()` the instance."""
    digest = None
    try:
        # the cursor (issue 15): the transitions are read again only when they changed or a delivery waits
        digest = transitions_digest(warehouse) + "|" + hashlib.sha1(repr(alerting.config()).encode()).hexdigest()[:12]
        alerts = [] if digest == state.get("transitions") and state.get("settled") else incident_transitions(warehouse)
    except AlertingConfigError as error:
        return str(error)
    except (WarehouseBusy, WarehouseMissing) as reason:
        alerts, digest = [], None
        if not alerting.monitor_alerts():
            return str(reason)
    try:
        run_url = alerting.run_url(_latest_fold_run(instance_fn())) if alerts else None
        for alert in alerts:
            alert["dagster_run_url"] = run_url
            alert.update(alert_links(alerting.board_base(), alert))   # the incident's page on the board
        everything = sorted(alerts + alerting.monitor_alerts(), key=lambda a: (a.get("transition_at") or "", a["incident_id"]))
        message = run_alerts(context, alerting, everything)
        settled = not alerting.pending(alerts, clock=utcnow)
    except AlertingConfigError as error:
        return str(error)
    if digest is not None and (alerts or not state.get("settled")):
        state.update(transitions=digest, settled=settled)
    # mirror the journal (and the monitor outbox) only when it grew since the last mirror: an idle tick takes no write lock
    journaled = len(alerting.journal().attempts()) + len(alerting.monitor_alerts())
    if journaled != state.get("mirrored"):
        mirrored, note = mirror_attempts(warehouse, alerting)
        message += f"; {note}"
        if mirrored:
            state["mirrored"] = journaled
    return message


@dg.sensor(minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def incident_alerts(context: dg.SensorEvaluationContext, warehouse: WarehouseResource, alerting: AlertingResource):
    """Deliver each incident transition (opened, escalated, resolved), and each alert about Goodput
    itself, once to every sink its tier and owner route it to; failing sinks are retried with backoff.
    (`goodput ui` runs this as part of `goodput_service`, orchestration/sensors/service.py.)"""
    state = json.loads(context.cursor) if context.cursor and context.cursor.startswith("{") else {}
    before = json.dumps(state, sort_keys=True)
    message = alerts_pass(context, lambda: context.instance, state, warehouse, alerting)
    if json.dumps(state, sort_keys=True) != before:
        context.update_cursor(json.dumps(state))
    return dg.SkipReason(message)


# ---------------------------------------------------------------------------------------------- the monitor


def monitor_alert(alerting: AlertingResource, *, incident_id: str, transition: str, signal: str, title: str,
                  at: float, evidence: dict, run_url: str | None = None) -> dict:
    """An alert about Goodput itself, shaped like an incident transition so routing and sinks treat it alike."""
    config = alerting.config()
    facts = {"dagster_url": config.ui_url(), **evidence}
    steps = [step.format_map(_Leave(facts)) for step in config.monitor.playbook]
    playbook = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    if config.monitor.escalation:
        playbook += "\nEscalation: " + " -> ".join(config.monitor.escalation)
    iso = datetime.fromtimestamp(at, tz=timezone.utc).isoformat()
    alert = {
        "incident_id": incident_id, "transition": transition, "transition_at": iso, "tier": config.monitor.tier,
        "current_tier": config.monitor.tier, "tier_reason": f"{config.monitor.tier}: monitoring the monitor (alerting config)",
        "title": title, "signal": signal, "family": MONITOR_FAMILY, "status": "resolved" if transition == "resolved" else "open",
        "owner": config.monitor.owner, "entity_type": "goodput", "entity_id": signal, "run_id": None, "rank": None,
        "ranks": [], "hosts": [], "gpus": [], "onset": iso, "opened": iso, "gpu_hours_at_risk": None,
        "evidence": evidence, "playbook": playbook, "dagster_run_url": run_url,
    }
    return {**alert, **alert_links(alerting.board_base(), alert)}   # a monitor incident has its board page too


class _Leave(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def step_errors(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """The failed steps' errors (the root cause's message, not Dagster's wrapper), for the alert's evidence."""
    errors = []
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        event = record.dagster_event
        error = getattr(event.event_specific_data, "error", None) if event else None
        while error is not None and error.cause is not None:
            error = error.cause
        if error is not None:
            errors.append(f"{event.step_key}: {error.message.strip()}")
    return errors


# every 2 minutes (issue 15, idle cost: a tick's fixed cost is ~0.4 CPU-s in the code server); it reads every
# failure since its cursor, so a slower cadence delays the alert by at most a minute and a half, loses none
@dg.run_failure_sensor(name="goodput_run_failures", default_status=dg.DefaultSensorStatus.RUNNING,
                       minimum_interval_seconds=120)
def goodput_run_failures(context: dg.RunFailureSensorContext, warehouse: WarehouseResource, alerting: AlertingResource):
    """Alert through the sinks when a Goodput run fails (ingest, checks, fold): until it is fixed,
    Goodput is blind to new incidents."""
    message = (context.failure_event.message or "") if context.failure_event else ""
    context.log.info(alert_run_failure(context, context.instance, context.dagster_run, message, warehouse, alerting))


def alert_run_failure(context, instance: dg.DagsterInstance, run: dg.DagsterRun, failure_message: str,
                      warehouse: WarehouseResource, alerting: AlertingResource) -> str:
    """Post (once: the incident id is the run's) and deliver the alert about one failed run."""
    message = "; ".join(step_errors(instance, run.run_id)) or failure_message
    evidence = {"job": run.job_name, "run_id": run.run_id, "error": message[:500],
                "partition": run.tags.get("dagster/partition")}
    alert = monitor_alert(alerting, incident_id=f"run-failed-{run.run_id}", transition="opened", signal="goodput_run_failed",
                          title=f"Goodput run failed: {run.job_name} ({run.run_id[:8]})", at=utcnow(), evidence=evidence,
                          run_url=alerting.run_url(run.run_id))
    alerting.post_monitor_alert(alert)
    return f"{run_alerts(context, alerting, alerting.monitor_alerts())}; {mirror_attempts(warehouse, alerting)[1]}"


def newest_raw_arrival(root: Path, hours_per_source: int = 2) -> float | None:
    """The newest modification time (epoch s) among the raw zone's latest hour folders, or None."""
    newest = None
    if not root.is_dir():
        return None
    for source in sorted(p for p in root.iterdir() if p.is_dir()):
        hours = sorted((h for d in source.iterdir() if d.is_dir() for h in d.iterdir() if h.is_dir()),
                       key=lambda h: (h.parent.name, h.name), reverse=True)[:hours_per_source]
        for hour in hours:
            for path in hour.glob("*.jsonl"):
                mtime = path.stat().st_mtime
                newest = mtime if newest is None or mtime > newest else newest
    return newest


def last_detect_success(instance: dg.DagsterInstance) -> float | None:
    records = instance.get_run_records(
        dg.RunsFilter(job_name=detect_job.name, statuses=[dg.DagsterRunStatus.SUCCESS]), limit=1)
    return records[0].end_time if records else None


def staleness(now: float, last: float | None, since: float, after_seconds: float) -> bool:
    """Stale when the last event (or, never seen, the start of watching) is older than `after_seconds`."""
    return now - (last if last is not None else since) > after_seconds


@dg.sensor(minimum_interval_seconds=120, default_status=dg.DefaultSensorStatus.RUNNING)   # stale after 15 min: 2 min is prompt
def goodput_staleness(context: dg.SensorEvaluationContext, warehouse: WarehouseResource, alerting: AlertingResource,
                      raw_zone: RawZoneResource):
    """Alert when no detect run has succeeded, or no raw data has arrived, for the configured time
    (and resolve when it is fresh again). On by default, like the detect schedule. Its warehouse
    resource's set-up frees the pool slots of dead runs each tick (orchestration/storage/instance.py)."""
    state = json.loads(context.cursor) if context.cursor else {}
    message = staleness_pass(context, context.instance, state, warehouse, alerting, Path(raw_zone.root))
    context.update_cursor(json.dumps(state, sort_keys=True))
    return dg.SkipReason(message)


def staleness_pass(context, instance: dg.DagsterInstance, state: dict, warehouse: WarehouseResource,
                   alerting: AlertingResource, raw_root: Path) -> str:
    """One staleness check: open or resolve the stale-detect and stale-raw alerts; updates `state` in place."""
    now = utcnow()
    state.setdefault("since", now)
    state.setdefault("open", {})
    monitor = alerting.config().monitor
    raw_last, detect_last = newest_raw_arrival(raw_root), last_detect_success(instance)
    # Detection is event-driven (issue 15): with no raw data newer than the last detect run there is
    # nothing to detect, so it is fresh; otherwise it is stale once data has waited `after` seconds.
    if raw_last is None or (detect_last is not None and raw_last <= detect_last):
        state.pop("waiting_since", None)
        detect_basis = now
    else:
        state.setdefault("waiting_since", now)
        detect_basis = max(detect_last if detect_last is not None else state["since"], state["waiting_since"])
    watched = {
        "detect": (detect_basis, monitor.stale_detect_after_seconds,
                   "no detect run has completed", "goodput_stale_detect"),
        "raw": (raw_last, monitor.stale_raw_after_seconds,
                "no raw data has arrived", "goodput_stale_raw"),
    }
    notes = []
    for kind, (last, after, what, signal) in watched.items():
        stale = staleness(now, last, state["since"], after)
        episode = state["open"].get(kind)
        last_text = datetime.fromtimestamp(last, tz=timezone.utc).isoformat() if last else "never"
        if stale and not episode:
            basis = last if last is not None else state["since"]
            iid = f"stale-{kind}-" + hashlib.sha1(f"{kind}|{basis}".encode()).hexdigest()[:12]
            evidence = {"last": last_text, "stale_after_seconds": after, "silent_seconds": round(now - basis)}
            alerting.post_monitor_alert(monitor_alert(
                alerting, incident_id=iid, transition="opened", signal=signal, at=now, evidence=evidence,
                title=f"Goodput is stale: {what} for {round((now - basis) / 60)} min (last: {last_text})"))
            state["open"][kind] = {"id": iid, "title": what}
            notes.append(f"{kind} stale")
        elif not stale and episode:
            alerting.post_monitor_alert(monitor_alert(
                alerting, incident_id=episode["id"], transition="resolved", signal=signal, at=now,
                evidence={"last": last_text}, title=f"Goodput is fresh again: {what} resolved (last: {last_text})"))
            del state["open"][kind]
            notes.append(f"{kind} fresh again")
    delivered = run_alerts(context, alerting, alerting.monitor_alerts())
    if notes:
        delivered += f"; {mirror_attempts(warehouse, alerting)[1]}"
    return "; ".join(notes + [delivered]) if notes else f"fresh or already alerted; {delivered}"
