"""`goodput report RUN_ID`: one run on one small HTML page, with PNG plots.

The page shows the run (team, job, restarts), its goodput (productive vs wasted GPU-hours), its
checkpoint status, its incidents and restarts, and two plots: loss, step time and grad norm with
the incident windows shaded, and step time per rank. It reads the warehouse read-only (waiting
politely while a run writes) and writes `GOODPUT_HOME/reports/<run_id>/` (or `--out`).
"""

from __future__ import annotations

import html
import os
import tempfile
from pathlib import Path

import duckdb
import pandas as pd


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="write an HTML page with plots for one training run")
    p.add_argument("run_id", help="the run id (see: goodput sql \"SELECT run_id FROM runs\")")
    p.add_argument("--home", help="GOODPUT_HOME (default: $GOODPUT_HOME or ./.goodput)")
    p.add_argument("--out", help="folder for index.html and the PNGs (default: GOODPUT_HOME/reports/<run_id>)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait while a run holds the write lock")
    p.set_defaults(func=cmd_report)


def read_run(con, run_id: str) -> dict[str, pd.DataFrame]:
    """Every frame the report needs, from the analyst views and `sql/report/`."""
    from orchestration import sql

    params = {"run_id": run_id}
    return {
        "run": con.execute("SELECT * FROM runs WHERE run_id = $run_id", params).df(),
        "goodput": con.execute("SELECT * FROM goodput WHERE run_id = $run_id ORDER BY day", params).df(),
        "checkpoint": con.execute("SELECT * FROM checkpoint_status WHERE run_id = $run_id", params).df(),
        "restarts": con.execute("SELECT * FROM restart_cost WHERE run_id = $run_id ORDER BY attempt", params).df(),
        "series": sql.frame(con, "report/run_series", params),
        "ranks": sql.frame(con, "report/rank_step_seconds", params),
        "incidents": sql.frame(con, "report/run_incidents", params),
        "drift": sql.frame(con, "quality/run_drift", params),
    }


def render(run_id: str, frames: dict[str, pd.DataFrame], out: Path) -> Path:
    """Write index.html, run.png and ranks.png into `out` (each file replaced atomically)."""
    from orchestration.plots import drift_plot, rank_plot, run_plot

    out.mkdir(parents=True, exist_ok=True)
    windows = frames["incidents"]
    _write(out / "run.png", run_plot(frames["series"], windows, title=f"{run_id}: loss, step time, grad norm"))
    _write(out / "ranks.png", rank_plot(frames["ranks"], windows, title=f"{run_id}: step time per rank"))
    summary = frames["goodput"]
    totals = ""
    if not summary.empty:
        allocated = summary["allocated_gpu_hours"].sum()
        productive = summary["productive_gpu_hours"].sum()
        totals = (f"<p class=big>{productive:.2f} of {allocated:.2f} allocated GPU-hours productive "
                  f"({productive / allocated:.0%} goodput); {summary['wasted_gpu_hours'].sum():.2f} wasted.</p>"
                  if allocated else "")
    incidents = windows.drop(columns=["window_start", "window_end"], errors="ignore")
    sections = [
        f"<h1>Run {html.escape(run_id)}</h1>",
        _table(frames["run"].drop(columns=["git_sha", "config_hash"], errors="ignore")),
        "<h2>Goodput</h2>", totals, _table(summary),
        "<h2>Loss, step time and grad norm</h2><p>Shaded: incident windows (onset to last seen).</p>",
        '<img src="run.png" alt="loss, step time and grad norm per minute">',
        "<h2>Step time per rank</h2>", '<img src="ranks.png" alt="step time per rank per minute">',
        f"<h2>Incidents ({len(incidents)})</h2>", _table(incidents),
        "<h2>Checkpoint status</h2>", _table(frames["checkpoint"]),
        f"<h2>Restarts ({len(frames['restarts'])})</h2>", _table(frames["restarts"]),
    ]
    drift = frames.get("drift", pd.DataFrame())
    if not drift.empty:   # the run's models in production: how their inputs and predictions moved
        _write(out / "drift.png", drift_plot(drift, title=f"{run_id}'s model versions: drift score per column"))
        sections += ["<h2>Drift of the run's model versions</h2><p>evidently drift score per column and hour "
                     "against each version's reference window (dashed: threshold; ringed: drifted).</p>",
                     '<img src="drift.png" alt="drift score per column over time">']
    page = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>Goodput report: {html.escape(run_id)}</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}"
        "table{border-collapse:collapse;font-size:13px;margin:.5em 0}"
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}img{max-width:100%}.big{font-size:1.2em}"
        "</style></head><body>" + "\n".join(sections) + "</body></html>\n"
    )
    _write(out / "index.html", page.encode())
    return out / "index.html"


def _table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "<p>none</p>"
    return frame.to_html(index=False, escape=True, na_rep="", float_format=lambda v: f"{v:.4g}", border=0)


def _write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_report(args) -> int:
    from orchestration.cli import CliError, use_home
    from orchestration.home import warehouse_path
    from orchestration.warehouse import WarehouseBusy, WarehouseResource

    home = use_home(args.home)
    warehouse = WarehouseResource(path=str(warehouse_path(home)))
    try:
        with warehouse.connect(read_only=True, wait_seconds=max(args.timeout, 0.0)) as con:
            try:
                known = [r for (r,) in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
            except duckdb.CatalogException:
                raise CliError(f"{warehouse_path(home)} has no analyst views yet: they are created by the next write "
                               "(a run, or `goodput demo`)") from None
            if args.run_id not in known:
                listed = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
                raise CliError(f"no run {args.run_id!r} in {warehouse_path(home)}; known runs: {listed or 'none'}")
            frames = read_run(con, args.run_id)
    except WarehouseBusy:
        raise CliError(f"the warehouse {warehouse_path(home)} stayed locked by a writing run for {args.timeout:g}s; "
                       "try again, or pass a longer --timeout") from None
    out = Path(args.out) if args.out else home / "reports" / args.run_id
    page = render(args.run_id, frames, out)
    print(f"wrote {page} (plots: {out / 'run.png'}, {out / 'ranks.png'})")
    return 0
