"""The Now page: what is on fire. Open incidents (the monitor's own among them) ranked by tier and
GPU-hours at risk, the totals with each correlated group counted once, and the cluster's goodput on
its newest day: productive vs wasted GPU-hours by cause. Lists the runs and endpoints to open."""

from __future__ import annotations

import duckdb
import pandas as pd

from board import charts, db

CAUSES = {"productive_gpu_hours": "productive", "busy_not_progressing_gpu_hours": "busy, not progressing",
          "idle_allocated_gpu_hours": "idle while allocated", "lost_to_restarts_gpu_hours": "lost to restarts"}
CAUSE_COLOURS = {"productive_gpu_hours": "#2e7d32", "busy_not_progressing_gpu_hours": "#c62828",
                 "idle_allocated_gpu_hours": "#f9a825", "lost_to_restarts_gpu_hours": "#6a1b9a"}


def context(con) -> dict:
    day = db.one(con, "goodput_day")
    figure = None
    if day:
        frame = pd.DataFrame([{"what": label, **{c: (day[c] if c == key else 0.0) for c in CAUSES}}
                              for key, label in CAUSES.items()])
        figure = charts.stacked_bars(frame, "what", CAUSES, f"GPU-hours on {day['day']:%Y-%m-%d} (UTC) by cause",
                                     "GPU-h", CAUSE_COLOURS)
    return {
        "incidents": db.records(con, "open_incidents"),
        "totals": db.one(con, "open_totals"),
        "day": day,
        "causes": CAUSES,
        "goodput_figure": figure,
        "recent": db.records(con, "recent_incidents", {"limit": 8}),
        "runs": db.records(con, "runs"),
        "endpoints": db.records(con, "endpoints"),
        "not_judged": not_judged(con),
    }


def not_judged(con) -> list[dict]:
    """What the latest evaluated hour could not judge (sql/incidents/not_judged.sql): no incident
    about those entities is not health."""
    try:
        rows = db.cached(con, "incidents/not_judged", None)
    except duckdb.CatalogException:      # a warehouse from before migration 090
        return []
    return [{k: db.plain(v) for k, v in r.items()} for r in rows.to_dict("records")]
