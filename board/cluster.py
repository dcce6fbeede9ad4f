"""The Cluster / goodput page: productive vs wasted GPU-hours per day, team and cause, and every
GPU of the cluster per hour as a heatmap (utilization, and the share of the hour a run held it)."""

from __future__ import annotations

from board import charts, db
from board.now import CAUSE_COLOURS, CAUSES


def context(con) -> dict:
    days = db.frame(con, "cluster_days")
    teams = db.frame(con, "cluster_teams")
    hours = db.frame(con, "cluster_gpu_hours")
    figures = {}
    if not days.empty:
        figures["days"] = charts.stacked_bars(days, "day", CAUSES, "GPU-hours per day (UTC) by cause", "GPU-h",
                                              CAUSE_COLOURS, x_is_time=True)
    if not teams.empty:
        figures["teams"] = charts.stacked_bars(teams, "team", CAUSES, "GPU-hours per team by cause", "GPU-h", CAUSE_COLOURS)
    if not hours.empty:
        figures["utilization"] = charts.gpu_heatmap(hours, "utilization_ratio", "Utilization per GPU and hour (%)", "%",
                                                    100.0, time_column="hour")
        figures["allocated"] = charts.gpu_heatmap(hours, "allocated_ratio", "Share of each hour a run held the GPU (%)",
                                                  "%", 100.0, time_column="hour", colorscale="Blues")
    return {"days": db.records(con, "cluster_days"), "teams": teams.to_dict("records"), "causes": CAUSES,
            "figures": figures, "gpu_count": int(hours["gpu"].nunique()) if not hours.empty else 0}
