"""The Cluster / goodput page: productive vs wasted GPU-hours per day, team and cause, and every
GPU of the cluster per hour as a heatmap (utilization, and the share of the hour a run held it)."""

from __future__ import annotations

from board import charts, db
from board.now import CAUSE_COLOURS, CAUSES


def context(con) -> dict:
    # one pass over the goodput view (it reads every GPU sample), summed two ways here
    both = db.frame(con, "cluster_goodput")
    parts = ["allocated_gpu_hours", *CAUSES, "wasted_gpu_hours"]
    days = both.groupby("day", as_index=False)[parts].sum().sort_values("day")
    teams = both.groupby("team", as_index=False).agg(runs=("runs", "sum"), **{p: (p, "sum") for p in parts})
    teams = teams.sort_values(["wasted_gpu_hours", "team"], ascending=[False, True])
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
    return {"days": days.to_dict("records"), "teams": teams.to_dict("records"), "causes": CAUSES,
            "figures": figures, "gpu_count": int(hours["gpu"].nunique()) if not hours.empty else 0}
