"""The incident_plots asset: a picture of each run with an open incident, in the Dagster UI.

For the runs with open incidents (or, when none is open, the run of the latest incident) it draws
loss, step time and grad norm with the incident windows shaded, and the step time per rank, and
attaches them as markdown metadata (inline PNGs), so an operator opening the asset sees the run.
It materializes when the incidents it would draw changed (one opened, escalated, resolved), and while they
stay the same only once their series reach `REDRAW_MINUTES` past the pictures it drew last (`drawn_through`
in its metadata): the fold runs after every live tick, an open incident's last minute moves at each, and
drawing its runs again every minute was ~1.9 CPU-s of a 1,024-GPU tick's ~8 (BENCHMARKS.md section 53).
"""

import hashlib

import dagster as dg
import pandas as pd

from orchestration.storage import sql
from orchestration.storage.warehouse import POOL, WarehouseResource

MAX_RUNS = 3
DPI = 60  # small pictures: they live in the event log
REDRAW_MINUTES = 10
"""The same incidents are drawn again once their series reach this far past the last pictures."""


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
    the line above its peers). Materialized when those incidents changed, or their series moved
    `REDRAW_MINUTES` past the last pictures."""
    with warehouse.connect() as con:
        runs = sql.frame(con, "report/runs_to_plot", {"limit": MAX_RUNS})
        fingerprint = hashlib.sha1(runs[["run_id", "state"]].to_csv(index=False).encode()).hexdigest()[:16]
        through = runs["last_seen"].max() if not runs.empty else None
        last, drawn = _last_pictures(context)
        if fingerprint == last and (pd.isna(through) or drawn is not None
                                    and through < drawn + pd.Timedelta(minutes=REDRAW_MINUTES)):
            context.log.info(f"incidents to plot unchanged since the pictures drawn through {drawn}; keeping them")
            return
        frames = {
            run_id: {name: sql.frame(con, f"report/{name}", {"run_id": run_id})
                     for name in ("run_series", "rank_step_seconds", "run_incidents")}
            for run_id in runs["run_id"]
        }
    from orchestration.plots import markdown_image, rank_plot, run_plot  # matplotlib: ~0.6 s to import, only to draw

    metadata: dict = {"fingerprint": fingerprint, "runs": dg.MetadataValue.json(list(runs["run_id"])),
                      "drawn_through": "" if pd.isna(through) else str(pd.Timestamp(through))}
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


def _last_pictures(context: dg.AssetExecutionContext) -> tuple[str | None, pd.Timestamp | None]:
    """The latest pictures' fingerprint and how far their series reached (None, None: none drawn)."""
    event = context.instance.get_latest_materialization_event(context.asset_key)
    if event is None or event.asset_materialization is None:
        return None, None
    meta = event.asset_materialization.metadata
    fingerprint, through = (getattr(meta.get(k), "value", None) for k in ("fingerprint", "drawn_through"))
    return fingerprint, pd.Timestamp(through) if through else None

