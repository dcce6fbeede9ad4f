"""Plotly figures for the board: time on x in UTC, 24-hour; incident windows shaded; heatmaps GPU x time.

Each builder returns a figure as JSON text ({"data", "layout"}) for `Plotly.newPlot` in the page
(interactive: zoom, pan, hover). Figures are plain dicts in plotly.js's schema, not
`plotly.graph_objects` (whose validation costs seconds per page); plotly's JSON encoder writes them
(timestamps, NumPy arrays, NaN as null). Builders take DataFrames and know nothing of the warehouse.
"""

from __future__ import annotations

import json

import pandas as pd
from plotly.utils import PlotlyJSONEncoder

from board.fmt import TIER_COLOURS

HOVER_TIME = "%Y-%m-%d %H:%M:%S UTC"
MARGIN = {"l": 70, "r": 20, "t": 40, "b": 90}
GRID = "#e6e9ed"


def to_json(data: list[dict], layout: dict) -> str:
    return json.dumps({"data": data, "layout": layout}, cls=PlotlyJSONEncoder)


def _time_axis(**extra) -> dict:
    return {"type": "date", "tickformat": "%H:%M\n%Y-%m-%d", "hoverformat": HOVER_TIME, "gridcolor": GRID, **extra}


def _layout(title: str, height: int, **extra) -> dict:
    return {"title": {"text": title, "x": 0, "font": {"size": 14}}, "height": height, "margin": MARGIN,
            "paper_bgcolor": "#fff", "plot_bgcolor": "#fff", "hovermode": "x unified",
            "legend": {"orientation": "h", "y": -0.3, "traceorder": "normal"}, "xaxis": _time_axis(title={"text": "time (UTC)"}), **extra}


def _values(series: pd.Series) -> list:
    return [None if pd.isna(v) else v for v in series]


def _times(values) -> list[str]:
    """Times as plotly.js reads them ("2026-11-30 01:35:00", UTC), written once per array, not per value."""
    return list(pd.DatetimeIndex(values).strftime("%Y-%m-%d %H:%M:%S"))


def shapes_for(windows: pd.DataFrame) -> tuple[list[dict], list[dict]]:
    """Each incident's [onset, resolved or last seen] shaded across the plot, coloured by tier, labelled once;
    labels staggered in height so that neighbouring windows do not overlap."""
    shapes, notes = [], []
    for i, w in enumerate(windows.itertuples()):
        colour = TIER_COLOURS.get(w.tier, "#607d8b")
        resolved = getattr(w, "resolved", None)
        end = resolved if resolved is not None and pd.notna(resolved) else w.last_seen
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": w.onset, "x1": end, "y0": 0, "y1": 1,
                       "fillcolor": colour, "opacity": 0.12, "line": {"width": 0}, "layer": "below"})
        notes.append({"x": w.onset, "y": 1.0 - 0.05 * (i % 3), "xref": "x", "yref": "paper", "xanchor": "left",
                      "yanchor": "top", "showarrow": False, "text": f"{w.tier} {w.signal}",
                      "font": {"size": 10, "color": colour}, "bgcolor": "rgba(255,255,255,.7)"})
    return shapes, notes


def run_series(series: pd.DataFrame, windows: pd.DataFrame, title: str) -> str:
    """Loss, median step time (and the slowest rank's) and grad norm per minute, stacked on one time axis."""
    x = _times(series["minute"])
    data = [
        {"type": "scatter", "mode": "lines", "x": x, "y": _values(series["loss"]), "name": "loss", "yaxis": "y3"},
        {"type": "scatter", "mode": "lines", "x": x, "y": _values(series["step_seconds"]), "name": "median step time (s)",
         "yaxis": "y2"},
        {"type": "scatter", "mode": "lines", "x": x, "y": _values(series["grad_norm"]), "name": "grad norm", "yaxis": "y"},
    ]
    if "step_seconds_max" in series:
        data.append({"type": "scatter", "mode": "lines", "x": x, "y": _values(series["step_seconds_max"]),
                     "name": "slowest rank's step (s)", "yaxis": "y2", "line": {"dash": "dot", "width": 1}})
    shapes, notes = shapes_for(windows)
    layout = _layout(title, 640, shapes=shapes, annotations=notes,
                     yaxis={"domain": [0, 0.29], "title": {"text": "grad norm"}, "gridcolor": GRID},
                     # log scale: the step that ends a hang takes minutes, the others seconds; both stay readable
                     yaxis2={"domain": [0.35, 0.64], "title": {"text": "step time (s, log)"}, "type": "log", "gridcolor": GRID},
                     yaxis3={"domain": [0.70, 1.0], "title": {"text": "loss"}, "gridcolor": GRID})
    return to_json(data, layout)


def rank_step_times(ranks: pd.DataFrame, windows: pd.DataFrame, title: str, lines_up_to: int = 32) -> str:
    """Median step time per rank and minute: one line per rank, or a rank x minute heatmap for many."""
    if ranks["rank"].nunique() <= lines_up_to:
        data = [{"type": "scatter", "mode": "lines", "x": _times(rows["minute"]), "y": _values(rows["step_seconds"]),
                 "name": f"rank {rank}"} for rank, rows in ranks.groupby("rank")]
        shapes, notes = shapes_for(windows)
        layout = _layout(title, 360, shapes=shapes, annotations=notes, yaxis={"title": {"text": "step time (s)"}, "gridcolor": GRID})
        return to_json(data, layout)
    grid = ranks.pivot_table(index="rank", columns="minute", values="step_seconds")
    return _heatmap(grid, title, "s", "rank", "rank %{y}")


def _heatmap(grid: pd.DataFrame, title: str, unit: str, axis: str, who: str, colorscale: str = "Viridis") -> str:
    data = [{"type": "heatmap", "z": grid.to_numpy(), "x": _times(grid.columns), "y": [str(v) for v in grid.index],
             "colorscale": colorscale, "colorbar": {"title": {"text": unit}},
             "hovertemplate": who + "<br>%{x|%Y-%m-%d %H:%M} UTC<br>%{z:.3g} " + unit + "<extra></extra>"}]
    height = max(280, min(900, 130 + 14 * len(grid.index)))
    layout = _layout(title, height, hovermode="closest",
                     yaxis={"title": {"text": axis}, "type": "category", "autorange": "reversed"})
    return to_json(data, layout)


def gpu_heatmap(cells: pd.DataFrame, value: str, title: str, unit: str, scale: float = 1.0, time_column: str = "minute",
                colorscale: str = "Viridis") -> str:
    """One value per GPU and time bucket (GPU on y in the query's order, time on x)."""
    order = list(dict.fromkeys(cells["gpu"]))
    grid = cells.pivot_table(index="gpu", columns=time_column, values=value).reindex(order) * scale
    return _heatmap(grid, title, unit, "GPU (host:index)", "GPU %{y}", colorscale)


def stacked_bars(frame: pd.DataFrame, x: str, parts: dict[str, str], title: str, unit: str, colours: dict[str, str],
                 x_is_time: bool = False) -> str:
    """Stacked bars of `parts` (column -> label) per `x`."""
    xs = _times(frame[x]) if x_is_time else list(frame[x])
    data = [{"type": "bar", "x": xs, "y": _values(frame[column]), "name": label, "marker": {"color": colours.get(column)},
             "hovertemplate": f"{label}: %{{y:.2f}} {unit}<extra></extra>"} for column, label in parts.items()]
    xaxis = ({"type": "date", "tickformat": "%Y-%m-%d", "title": {"text": "day (UTC)"}, "dtick": 86400000}
             if x_is_time else {"type": "category"})
    layout = _layout(title, 340, barmode="stack", hovermode="closest", xaxis=xaxis,
                     yaxis={"title": {"text": unit}, "gridcolor": GRID})
    return to_json(data, layout)


def lines(frame: pd.DataFrame, x: str, columns: dict[str, str], title: str, unit: str, marks: pd.DataFrame | None = None,
          height: int = 320) -> str:
    """Lines of `columns` (column -> label) over time, with vertical marks (time, label) for versions/promotions."""
    data = [{"type": "scatter", "mode": "lines", "x": _times(frame[x]), "y": _values(frame[c]), "name": label}
            for c, label in columns.items() if c in frame]
    shapes, notes = [], []
    for i, m in enumerate((marks if marks is not None else pd.DataFrame(columns=["time", "label"])).itertuples()):
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": m.time, "x1": m.time, "y0": 0, "y1": 1,
                       "line": {"dash": "dash", "color": "#455a64", "width": 1}})
        notes.append({"x": m.time, "y": 1.0 - 0.07 * (i % 3), "xref": "x", "yref": "paper", "text": m.label, "showarrow": False,
                      "xanchor": "left", "yanchor": "top", "font": {"size": 10}, "bgcolor": "rgba(255,255,255,.7)"})
    layout = _layout(title, height, shapes=shapes, annotations=notes, yaxis={"title": {"text": unit}, "gridcolor": GRID})
    return to_json(data, layout)


def drift_scores(drift: pd.DataFrame, title: str) -> str:
    """Drift score per column and hour, the threshold dashed, drifted hours ringed."""
    data = []
    for column, rows in drift.groupby("column"):
        flags = [bool(d) for d in rows["drifted"]]
        data.append({"type": "scatter", "mode": "lines+markers", "x": _times(rows["hour"]), "y": _values(rows["score"]),
                     "name": str(column), "marker": {"size": [12 if d else 6 for d in flags],
                                                     "line": {"width": [2 if d else 0 for d in flags], "color": "#c62828"}}})
    shapes = []
    if not drift.empty:
        threshold = float(drift["threshold"].median())
        shapes.append({"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": threshold, "y1": threshold,
                       "line": {"dash": "dash", "color": "#c62828", "width": 1}})
    layout = _layout(title, 340, shapes=shapes, hovermode="closest", yaxis={"title": {"text": "drift score (dashed: threshold)"},
                                                                            "gridcolor": GRID})
    return to_json(data, layout)
