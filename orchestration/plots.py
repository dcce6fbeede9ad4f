"""Plots where a person would rather look than read, as PNG bytes (matplotlib, Agg backend).

Pure functions of data frames: no warehouse access, no files. `goodput report` writes them into an
HTML page; an asset or check can attach them to its materialization with `markdown_image`, which
the Dagster UI renders in the metadata panel.

Inputs (column names as the `run_health` view and `sql/report/*.sql` give them):
  series   minute, loss, step_seconds, grad_norm            one run, one row per minute
  ranks    rank, minute, step_seconds                       one run, one row per rank and minute
  windows  window_start, window_end, signal, tier           incidents to shade (may be empty)
"""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")  # headless: no display on servers or in CI

import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

TIER_COLOURS = {"SEV1": "#d62728", "SEV2": "#ff7f0e", "SEV3": "#bcbd22"}
DPI = 100


def _shade(ax, windows: pd.DataFrame, label: bool) -> None:
    for i, w in enumerate(windows.itertuples()):
        colour = TIER_COLOURS.get(getattr(w, "tier", None), "#7f7f7f")
        ax.axvspan(w.window_start, w.window_end, color=colour, alpha=0.18, lw=0,
                   label=f"{w.tier} {w.signal}" if label and i < 6 else None)


def _finish(fig, dpi: int) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _time_axis(ax) -> None:
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    ax.set_xlabel("time (UTC)")


def run_plot(series: pd.DataFrame, windows: pd.DataFrame | None = None, title: str = "", dpi: int = DPI) -> bytes:
    """Loss, step time and grad norm per minute, stacked, with incident windows shaded."""
    windows = windows if windows is not None else pd.DataFrame(columns=["window_start", "window_end", "signal", "tier"])
    panels = [("loss", "loss"), ("step_seconds", "step time (s, median)"), ("grad_norm", "grad norm (median)")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 7), sharex=True)
    for n, (ax, (column, label)) in enumerate(zip(axes, panels)):
        data = series[["minute", column]] if column in series else pd.DataFrame(columns=["minute", column])
        ax.plot(data["minute"], data[column].astype(float), lw=1.2, color="#1f77b4")  # NaN (no steps) breaks the line
        if data[column].dropna().empty:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="#7f7f7f")
        _shade(ax, windows, label=n == 0)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    if not windows.empty:
        axes[0].legend(loc="upper right", fontsize=8)
    _time_axis(axes[-1])
    fig.suptitle(title or "run health")
    fig.autofmt_xdate()
    return _finish(fig, dpi)


def rank_plot(ranks: pd.DataFrame, windows: pd.DataFrame | None = None, title: str = "", dpi: int = DPI) -> bytes:
    """Per-rank median step time per minute: a straggler is the line above its peers."""
    windows = windows if windows is not None else pd.DataFrame(columns=["window_start", "window_end", "signal", "tier"])
    fig, ax = plt.subplots(figsize=(10, 4))
    ordered = sorted(ranks["rank"].unique()) if not ranks.empty else []
    if ordered:
        # one column per rank over every minute, so minutes without steps break the lines
        wide = ranks.pivot_table(index="minute", columns="rank", values="step_seconds")
        wide = wide.reindex(pd.date_range(wide.index.min(), wide.index.max(), freq="min"))
        for rank in ordered:
            ax.plot(wide.index, wide[rank], lw=1.0, label=f"rank {rank}" if len(ordered) <= 16 else None)
    if ranks.empty:
        ax.text(0.5, 0.5, "no step records", transform=ax.transAxes, ha="center", va="center", color="#7f7f7f")
    else:
        # a hung step's hour-long duration would flatten every other point: clip the axis, say so
        top = float(ranks["step_seconds"].quantile(0.99)) * 1.5
        if float(ranks["step_seconds"].max()) > top > 0:
            ax.set_ylim(0, top)
            ax.text(0.01, 0.97, f"axis clipped at {top:.3g}s (max {ranks['step_seconds'].max():.3g}s)",
                    transform=ax.transAxes, va="top", fontsize=8, color="#7f7f7f")
    _shade(ax, windows, label=False)
    ax.set_ylabel("step time (s, median per minute)")
    ax.grid(alpha=0.3)
    if 0 < len(ordered) <= 16:
        ax.legend(loc="upper right", fontsize=8, ncol=min(4, len(ordered)))
    _time_axis(ax)
    ax.set_title(title or "step time per rank")
    fig.autofmt_xdate()
    return _finish(fig, dpi)


def markdown_image(png: bytes, alt: str) -> str:
    """Markdown that shows the PNG inline (a data URI), for `dg.MetadataValue.md`."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})"


def drift_plot(history: pd.DataFrame, title: str = "", dpi: int = DPI) -> bytes:
    """Drift score per column over time (one panel per endpoint, one line per version and column),
    drifted hours marked, thresholds dashed. `history`: rows of the `drift_history` view (endpoint,
    model_version, hour, column_name or column, score, threshold, drifted)."""
    history = history.rename(columns={"column": "column_name"})
    endpoints = sorted(history["endpoint"].unique()) or ["(none)"]
    fig, axes = plt.subplots(len(endpoints), 1, figsize=(10, 3.2 * len(endpoints)), sharex=True, squeeze=False)
    for ax, endpoint in zip(axes[:, 0], endpoints):
        rows = history[history["endpoint"] == endpoint]
        for (version, column), g in rows.groupby(["model_version", "column_name"], sort=True):
            g = g.sort_values("hour")
            line, = ax.plot(g["hour"], g["score"].astype(float), marker="o", ms=3, lw=1.2, label=f"{version}: {column}")
            hit = g[g["drifted"].fillna(False).astype(bool)]
            ax.scatter(hit["hour"], hit["score"].astype(float), s=40, color=line.get_color(), edgecolor="#d62728", zorder=3)
        for threshold in sorted(rows["threshold"].dropna().round(2).unique()):   # thresholds vary with sample size
            ax.axhline(float(threshold), color="#7f7f7f", ls="--", lw=0.8)
        if rows.empty:
            ax.text(0.5, 0.5, "no drift scores", transform=ax.transAxes, ha="center", va="center", color="#7f7f7f")
        ax.set_ylabel(f"{endpoint}\nscore")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    _time_axis(axes[-1, 0])
    axes[0, 0].set_title(title or "drift score per column (dashed: threshold; ringed: drifted)")
    fig.autofmt_xdate()
    return _finish(fig, dpi)
