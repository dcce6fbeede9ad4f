"""Plotly figures for the board: time on x in UTC, 24-hour; incident windows shaded; heatmaps GPU x time.

Each builder returns a figure as JSON text for `Plotly.newPlot` in the page (interactive: zoom,
pan, hover). Builders take DataFrames and know nothing of the warehouse.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from board.fmt import TIER_COLOURS

TIME_AXIS = {"type": "date", "tickformat": "%H:%M\n%Y-%m-%d", "hoverformat": "%Y-%m-%d %H:%M:%S UTC",
             "title": {"text": "time (UTC)"}}
MARGIN = {"l": 70, "r": 20, "t": 40, "b": 50}


def to_json(fig: go.Figure) -> str:
    return fig.to_json()


def _layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    fig.update_layout(title={"text": title, "x": 0, "font": {"size": 14}}, height=height, margin=MARGIN,
                      template="plotly_white", hovermode="x unified", legend={"orientation": "h", "y": -0.15})
    fig.update_xaxes(**{k: v for k, v in TIME_AXIS.items() if k != "title"})
    return fig


def shade(fig: go.Figure, windows: pd.DataFrame, rows: int = 1) -> None:
    """Shade each incident's [onset, last seen] across every subplot, coloured by tier, labelled once."""
    for i, w in enumerate(windows.itertuples()):
        colour = TIER_COLOURS.get(w.tier, "#607d8b")
        end = w.resolved if getattr(w, "resolved", None) is not None and pd.notna(w.resolved) else w.last_seen
        fig.add_vrect(x0=w.onset, x1=end, fillcolor=colour, opacity=0.12, line_width=0, layer="below",
                      row="all" if rows > 1 else None, col=1 if rows > 1 else None)
        # one label per window, staggered so that neighbouring windows do not overlap
        fig.add_annotation(x=w.onset, y=1.0 - 0.06 * (i % 3), xref="x", yref="paper", xanchor="left", showarrow=False,
                           text=f"{w.tier} {w.signal}", font={"size": 10, "color": colour}, bgcolor="rgba(255,255,255,.7)")


def run_series(series: pd.DataFrame, windows: pd.DataFrame, title: str) -> str:
    """Loss, median step time and grad norm per minute, stacked on one time axis."""
    panels = [("loss", "loss", ""), ("step_seconds", "step time", "s"), ("grad_norm", "grad norm", "")]
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.04)
    for row, (column, name, unit) in enumerate(panels, 1):
        fig.add_trace(go.Scatter(x=series["minute"], y=series[column], name=f"{name}" + (f" ({unit})" if unit else ""),
                                 mode="lines", connectgaps=False), row=row, col=1)
        fig.update_yaxes(title_text=name + (f" ({unit})" if unit else ""), row=row, col=1)
    if "step_seconds_max" in series:
        fig.add_trace(go.Scatter(x=series["minute"], y=series["step_seconds_max"], name="slowest rank's step (s)",
                                 mode="lines", line={"dash": "dot", "width": 1}), row=2, col=1)
    shade(fig, windows, rows=3)
    _layout(fig, title, 640)
    fig.update_xaxes(title_text="time (UTC)", row=3, col=1)
    return to_json(fig)


def rank_step_times(ranks: pd.DataFrame, windows: pd.DataFrame, title: str, lines_up_to: int = 32) -> str:
    """Median step time per rank and minute: one line per rank, or a rank x minute heatmap for many."""
    fig = go.Figure()
    if ranks["rank"].nunique() <= lines_up_to:
        for rank, rows in ranks.groupby("rank"):
            fig.add_trace(go.Scatter(x=rows["minute"], y=rows["step_seconds"], name=f"rank {rank}", mode="lines"))
        fig.update_yaxes(title_text="step time (s)")
        shade(fig, windows)
        return to_json(_layout(fig, title, 360))
    grid = ranks.pivot_table(index="rank", columns="minute", values="step_seconds")
    fig.add_trace(go.Heatmap(z=grid.values, x=list(grid.columns), y=list(grid.index), colorscale="Viridis",
                             colorbar={"title": {"text": "s"}},
                             hovertemplate="rank %{y}<br>%{x|%Y-%m-%d %H:%M} UTC<br>%{z:.3g} s<extra></extra>"))
    fig.update_yaxes(title_text="rank")
    _layout(fig, title, 420)
    fig.update_layout(hovermode="closest")
    return to_json(fig)


def gpu_heatmap(cells: pd.DataFrame, value: str, title: str, unit: str, scale: float = 1.0, time_column: str = "minute",
                colorscale: str = "Viridis") -> str:
    """One value per GPU and time bucket (GPU on y, time on x)."""
    grid = cells.pivot_table(index="gpu", columns=time_column, values=value) * scale
    height = max(260, min(900, 60 + 14 * len(grid.index)))
    fig = go.Figure(go.Heatmap(z=grid.values, x=list(grid.columns), y=list(grid.index), colorscale=colorscale,
                               colorbar={"title": {"text": unit}},
                               hovertemplate="GPU %{y}<br>%{x|%Y-%m-%d %H:%M} UTC<br>%{z:.3g} " + unit + "<extra></extra>"))
    fig.update_yaxes(title_text="GPU (host:index)", type="category", autorange="reversed")
    _layout(fig, title, height)
    fig.update_layout(hovermode="closest")
    return to_json(fig)


def stacked_bars(frame: pd.DataFrame, x: str, parts: dict[str, str], title: str, unit: str, colours: dict[str, str],
                 x_is_time: bool = False) -> str:
    """Stacked bars of `parts` (column -> label) per `x`."""
    fig = go.Figure()
    for column, label in parts.items():
        fig.add_trace(go.Bar(x=frame[x], y=frame[column], name=label, marker_color=colours.get(column),
                             hovertemplate=f"{label}: %{{y:.2f}} {unit}<extra></extra>"))
    fig.update_layout(barmode="stack", title={"text": title, "x": 0, "font": {"size": 14}}, height=340, margin=MARGIN,
                      template="plotly_white", legend={"orientation": "h", "y": -0.2})
    fig.update_yaxes(title_text=unit)
    if x_is_time:
        fig.update_xaxes(type="date", tickformat="%Y-%m-%d", title_text="day (UTC)")
    else:
        fig.update_xaxes(type="category")
    return to_json(fig)


def lines(frame: pd.DataFrame, x: str, columns: dict[str, str], title: str, unit: str, marks: pd.DataFrame | None = None,
          height: int = 320) -> str:
    """Lines of `columns` (column -> label) over time, with vertical marks (time, label) for versions/promotions."""
    fig = go.Figure()
    for column, label in columns.items():
        if column in frame:
            fig.add_trace(go.Scatter(x=frame[x], y=frame[column], name=label, mode="lines"))
    fig.update_yaxes(title_text=unit)
    if marks is not None:
        for i, m in enumerate(marks.itertuples()):
            fig.add_vline(x=m.time, line={"dash": "dash", "color": "#455a64", "width": 1})
            fig.add_annotation(x=m.time, y=1.0 - 0.07 * (i % 3), xref="x", yref="paper", text=m.label, showarrow=False,
                               xanchor="left", font={"size": 10}, bgcolor="rgba(255,255,255,.7)")
    return to_json(_layout(fig, title, height))


def drift_scores(drift: pd.DataFrame, title: str) -> str:
    """Drift score per column and hour, the threshold dashed, drifted hours ringed."""
    fig = go.Figure()
    for column, rows in drift.groupby("column"):
        fig.add_trace(go.Scatter(x=rows["hour"], y=rows["score"], name=str(column), mode="lines+markers",
                                 marker={"size": [12 if d else 6 for d in rows["drifted"]],
                                         "line": {"width": [2 if d else 0 for d in rows["drifted"]], "color": "#c62828"}}))
    if not drift.empty:
        fig.add_hline(y=float(drift["threshold"].median()), line={"dash": "dash", "color": "#c62828", "width": 1},
                      annotation_text="threshold", annotation_position="top left")
    fig.update_yaxes(title_text="drift score")
    return to_json(_layout(fig, title, 340))
