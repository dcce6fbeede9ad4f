"""Alerts about Goodput itself become incidents: the monitor outbox (GOODPUT_HOME/alerts/monitor.jsonl)
mirrored into the warehouse table `monitor_alerts`, which the views `monitor_incidents` and
`open_incidents` read. The sensors that raise the alerts mirror them in the same short write
connection as the delivery journal, so a monitor incident shows beside the fold's with the same
lifecycle (opened, resolved) and the same routing (the alert itself goes through the sinks).
"""

from __future__ import annotations

import json

import pandas as pd

from orchestration.storage import sql
from orchestration.storage.warehouse import transaction

COLUMNS = ("incident_id", "transition", "transition_at", "signal", "tier", "owner", "title", "tier_reason",
           "evidence", "playbook", "dagster_run_url")


def frame(alerts: list[dict]) -> pd.DataFrame:
    """The outbox's alerts as `monitor_alerts` rows (UTC times, evidence as JSON text)."""
    rows = [{c: a.get(c) for c in COLUMNS} for a in alerts if a.get("incident_id") and a.get("transition")]
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    out["transition_at"] = pd.to_datetime(out["transition_at"], utc=True, format="ISO8601").dt.tz_localize(None)
    out["evidence"] = [json.dumps(e, sort_keys=True, default=str) if isinstance(e, dict) else e for e in out["evidence"]]
    return out.drop_duplicates(["incident_id", "transition"])


def mirror(con, alerts: list[dict]) -> int:
    """Insert the monitor transitions the warehouse lacks (inside a write connection); returns rows added."""
    new = frame(alerts)
    if new.empty:
        return 0
    before = con.execute("SELECT count(*) FROM monitor_alerts").fetchone()[0]
    with transaction(con, new_monitor_alerts=new):
        sql.run(con, "monitor/store_alerts")
    return con.execute("SELECT count(*) FROM monitor_alerts").fetchone()[0] - before
