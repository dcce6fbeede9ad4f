"""The Endpoint page: serving latency quantiles, queue and KV cache per minute with the versions and
promotions on the time axis; drift history with evidently's reports, served by the board with a
header that names endpoint, version, hour and reference window; the endpoint's incidents."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from board import charts, db, fmt


def exists(con, endpoint: str) -> bool:
    found = con.execute("SELECT count(*) FROM serving_versions WHERE endpoint = $e", {"e": endpoint}).fetchone()[0]
    return found > 0 or con.execute("SELECT count(*) FROM serving_minutes WHERE endpoint = $e", {"e": endpoint}).fetchone()[0] > 0


def context(con, endpoint: str) -> dict | None:
    if not exists(con, endpoint):
        return None
    params = {"endpoint": endpoint}
    minutes = db.frame(con, "endpoint_minutes", params)
    versions = db.frame(con, "endpoint_versions", params)
    drift = db.frame(con, "endpoint_drift", params)
    marks = pd.DataFrame({"time": versions["served_from"],
                          "label": [f"{v}" + (" promoted" if pd.notna(p) else " serving")
                                    for v, p in zip(versions["model_version"], versions["promoted_at"])]})
    figures = {}
    if not minutes.empty:
        figures["ttft"] = charts.lines(minutes, "minute", {"ttft_p50_seconds": "TTFT p50", "ttft_p95_seconds": "TTFT p95",
                                                           "ttft_p99_seconds": "TTFT p99"},
                                       "Time to first token (s); dashed: versions served", "s", marks)
        figures["itl"] = charts.lines(minutes, "minute", {"itl_p50_seconds": "ITL p50", "itl_p95_seconds": "ITL p95",
                                                          "itl_p99_seconds": "ITL p99"}, "Inter-token latency (s)", "s", marks)
        figures["queue"] = charts.lines(minutes, "minute", {"requests_waiting": "waiting", "requests_running": "running"},
                                        "Requests waiting and running", "requests", marks)
        kv = minutes.assign(kv_cache_percent=minutes["kv_cache_usage_ratio"] * 100)
        figures["kv"] = charts.lines(kv, "minute", {"kv_cache_percent": "KV cache usage"}, "KV cache usage (%)", "%", marks)
    if not drift.empty:
        figures["drift"] = charts.drift_scores(drift, "Drift score per column and hour (ringed: drifted)")
    reports = (drift.dropna(subset=["report_path"]).groupby(["model_version", "hour", "report_path"], as_index=False)
               .agg(drifted=("drifted", "sum"), columns=("column", "count"), reference_start=("reference_start", "first"),
                    reference_end=("reference_end", "first")).sort_values("hour")) if not drift.empty else drift
    return {"endpoint": endpoint, "versions": db.records(con, "endpoint_versions", params), "figures": figures,
            "reports": [{k: db.plain(v) for k, v in r.items()} for r in reports.to_dict("records")],
            "incidents": db.records(con, "endpoint_incidents", params)}


def report_page(con, home: Path, relative: str) -> str | None:
    """A drift report file under GOODPUT_HOME/reports/drift/ with a header naming what it compares; None if unknown."""
    root = (home / "reports" / "drift").resolve()
    path = (home / relative).resolve()
    if not path.is_file() or root not in path.parents:
        return None
    header = db.one(con, "report_header", {"report_path": relative})
    if header is None:
        facts = "<b>drift report</b> (not in the warehouse's drift history)"
    else:
        facts = (f"<b>Drift report</b> · endpoint <b>{html.escape(header['endpoint'])}</b> · model version "
                 f"<b>{html.escape(str(header['model_version']))}</b> · hour <b>{fmt.utc(header['hour'])}</b> "
                 f"(the hour's predictions, {fmt.number(header['current_rows'])} rows) · reference window "
                 f"<b>{fmt.utc(header['reference_start'])} to {fmt.utc(header['reference_end'])}</b> "
                 f"({html.escape(str(header['reference_source'] or ''))}, {fmt.number(header['reference_rows'])} rows) · "
                 f"{header['drifted_columns']} of {header['columns']} columns drifted")
    banner = (f'<div id="goodput-report-header" style="font:14px system-ui,sans-serif;background:#1c2530;color:#fff;'
              f'padding:10px 16px;position:sticky;top:0;z-index:1000">{facts} · <a style="color:#90caf9" '
              f'href="../../../../endpoints/{html.escape(header["endpoint"]) if header else ""}">back to the endpoint</a></div>')
    text = path.read_text(errors="replace")
    marker = text.lower().find("<body")
    if marker >= 0:
        end = text.find(">", marker) + 1
        return text[:end] + banner + text[end:]
    return banner + text
