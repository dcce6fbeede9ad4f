"""The incident_plots asset: a picture of each run with an open incident, in the Dagster UI.

For the runs with open incidents (or, when none is open, the run of the latest incident) it draws
loss, step time and grad norm with the incident windows shaded, and the step time per rank, and
attaches them as markdown metadata (inline PNGs), so an operator opening the asset sees the run.
It materializes only when the incidents it would draw changed: the fold runs every few minutes,
and unchanged pictures would only grow the event log.
"""

import hashlib

import dagster as dg

from orchestration.storage import sql
from orchestration.storage.warehouse import POOL, WarehouseResource

MAX_RUNS = 3
DPI = 60  # small pictures: they live in the event log


@dg.asset(
    deps=["incidents"],
    group_name="incidents",
    kinds={"duckdb", "python"},
    pool=POOL,
    output_required=False,
)
def incident_plots(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    """Plots of the runs with open incidents (else the latest incident's run): loss, step time and
    grad norm per minute with the incident windows shaded, and step time per rank (a straggler is
    the line above its peers). Materialized only when those incidents changed."""
    with warehouse.connect() as con:
        runs = sql.frame(con, "report/runs_to_plot", {"limit": MAX_RUNS})
        fingerprint = hashlib.sha1(runs.to_csv(index=False).encode()).hexdigest()[:16]
        if fingerprint == _last_fingerprint(context):
            context.log.info("incidents to plot unchanged; keeping the latest pictures")
            return
        frames = {
            run_id: {name: sql.frame(con, f"report/{name}", {"run_id": run_id})
                     for name in ("run_series", "rank_step_seconds", "run_incidents")}
            for run_id in runs["run_id"]
        }
    from orchestration.plots import markdown_image, rank_plot, run_plot  # matplotlib: ~0.6 s to import, only to draw

    metadata: dict = {"fingerprint": fingerprint, "runs": dg.MetadataValue.json(list(runs["run_id"]))}
    for run_id, f in frames.items():
        windows = f["run_incidents"]
        titles = "; ".join(f"{r.tier} {r.title} ({r.status})" for r in windows.itertuples())
        metadata[f"run {run_id}"] = dg.MetadataValue.md(
            f"**{run_id}**: {titles}\n\n"
            + markdown_image(run_plot(f["run_series"], windows, title=f"{run_id}: loss, step time, grad norm", dpi=DPI),
                             f"{run_id} loss, step time, grad norm")
            + "\n\n"
            + markdown_image(rank_plot(f["rank_step_seconds"], windows, title=f"{run_id}: step time per rank", dpi=DPI),
                             f"{run_id} step time per rank")
        )
    context.log.info(f"plotted {len(frames)} run(s): {', '.join(frames) or 'none'}")
    yield dg.MaterializeResult(metadata=metadata)


def _last_fingerprint(context: dg.AssetExecutionContext) -> str | None:
    event = context.instance.get_latest_materialization_event(context.asset_key)
    if event is None or event.asset_materialization is None:
        return None
    value = event.asset_materialization.metadata.get("fingerprint")
    return getattr(value, "value", None) if value is not None else None

