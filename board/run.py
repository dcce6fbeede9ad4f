"""The Run page: one training run. Interactive loss, step time and grad norm with the incident
windows shaded; step time per rank; per-GPU utilization, power, temperature and SM clock as GPU x
minute heatmaps; goodput; checkpoints and what a restart costs; each incident's restart point.
`goodput report` saves this page as one self-contained file."""

from __future__ import annotations

from board import charts, db

HEATMAPS = (  # column, title, unit, scale
    ("utilization_ratio", "GPU utilization", "%", 100.0),
    ("power_watts", "GPU power", "W", 1.0),
    ("temperature_celsius", "GPU temperature", "°C", 1.0),
    ("sm_clock_hertz", "SM clock", "MHz", 1e-6),
)


def exists(con, run_id: str) -> bool:
    return con.execute("SELECT count(*) FROM runs WHERE run_id = $run_id", {"run_id": run_id}).fetchone()[0] > 0


def context(con, run_id: str) -> dict | None:
    if not exists(con, run_id):
        return None
    params = {"run_id": run_id}
    run_row = db.one(con, "run", params)
    goodput = db.one(con, "run_goodput", params)
    windows = db.cached(con, "report/run_incidents", params)
    series = db.cached(con, "report/run_series", params)
    ranks = db.cached(con, "report/rank_step_seconds", params)
    gpus = db.frame(con, "run_gpu_minutes", params)
    figures = {}
    if not series.empty:
        figures["series"] = charts.run_series(series, windows, f"{run_id}: loss, step time, grad norm per minute "
                                              "(shaded: incidents, onset to resolved)")
    if not ranks.empty:
        figures["ranks"] = charts.rank_step_times(ranks, windows, f"{run_id}: median step time per rank and minute")
    drift = db.cached(con, "quality/run_drift", params).rename(columns={"column_name": "column"})
    if not drift.empty:   # the run's models in production: how their inputs and predictions moved
        figures["drift"] = charts.drift_scores(drift, f"{run_id}'s model versions: drift score per column and hour")
    heatmaps = []
    if not gpus.empty:
        for column, title, unit, scale in HEATMAPS:
            if gpus[column].notna().any():
                heatmaps.append(charts.gpu_heatmap(gpus, column, f"{title} per GPU and minute ({unit})", unit, scale))
    return {
        "run_id": run_id,
        "run": run_row,
        "goodput": goodput,
        "incidents": db.records(con, "run_incidents", params),
        "checkpoints": db.records(con, "run_checkpoints", params),
        "status": db.one(con, "run_checkpoint_status", params),
        # restart_cost reads gpu_time for the whole cluster: only ask when the run restarted
        "restarts": db.records(con, "run_restarts", params) if (run_row or {}).get("restarts") else [],
        "figures": figures,
        "heatmaps": heatmaps,
        "gpu_count": int(gpus["gpu"].nunique()) if not gpus.empty else 0,
    }
