"""The drift_reports asset: the drift verdicts, drift history and evidently reports of every served model version.

For each hour, endpoint and model version it compares the version's predictions (features, predicted
label, confidence) with the version's reference window (`version_references` in
sql/migrations/008_quality.sql: the window registered with the version, else its first stable hour
after promotion). The verdict is computed in DuckDB over ALL rows of both windows
(sql/quality/drift_stats.sql): evidently's own statistics, the normed Wasserstein distance for
numerical columns and the Jensen-Shannon distance for categorical ones, exactly, not on a sample
(a sample moved verdicts near the threshold: issue 17 item 9). Each score carries its uncertainty:
`noise` = sqrt(1/n + 1/m), the scale of the distance between two draws of one distribution, and
`margin` = (score - threshold) / noise, how far the verdict sits from flipping in those units.
evidently (DataDriftPreset) still renders the HTML report, on a deterministic sample of at most
`max_rows` rows per side, saved under GOODPUT_HOME/reports/drift/<endpoint>/<version>/<hour>.html.
The per-column scores land in `drift_scores` (the `drift_history` view), which the input_drift and
prediction_drift checks read.

A live tick (the raw-zone sensor's run, every minute) scores every window again but keeps a window's report
while its verdicts and reference hold and its rows have not doubled since the report was drawn (`report_rows`,
sql/migrations/175_drift_report_rows.sql): each tick's run is a fresh process, and drawing cost it evidently's
import (~3 CPU-s) and ~0.8 CPU-s a window (BENCHMARKS.md section 53). Every other run (a backfill, the demo)
draws every report.
"""

import json
import math
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd

from assets.baselines import is_live
from orchestration.partitions import hourly, window_params
from orchestration.storage import sql
from orchestration.storage.warehouse import POOL, WarehouseResource, transaction

PREDICTION_COLUMNS = ("prediction", "confidence")   # prediction drift; every other column is an input
DRIFT_COLUMNS = (
    "endpoint", "model_version", "hour", "kind", "column_name", "column_type", "method", "score", "threshold",
    "drifted", "current_rows", "reference_rows", "current_sampled", "reference_sampled", "current_mean",
    "reference_mean", "reference_start", "reference_end", "reference_source", "report_path", "noise", "margin",
    "report_rows",
)
METHODS = {"num": "wasserstein", "cat": "jensenshannon"}   # what sql/quality/drift_stats.sql computes


class DriftConfig(dg.Config):
    settle_minutes: int = 10
    """Warm-up after a promotion left out of the first-stable reference (canary ramp, caches)."""
    reference_minutes: int = 60
    """Length of the first-stable reference window: an hour holds a full cycle of request mix."""
    min_current_rows: int = 100
    """Fewer predictions in the hour than this: not judged (distances are noise on tiny samples)."""
    min_reference_rows: int = 100
    max_rows: int = 5000
    """Per side, the evidently HTML report sees at most this many rows (a deterministic sample drawn in
    DuckDB): its plots need no more, and its cost grows with the rows (bench/bench_drift.py). The
    verdict does not depend on it: it is computed on all rows."""
    num_method: str = "wasserstein"
    """The only numerical method the warehouse computes (evidently's normed Wasserstein distance)."""
    num_threshold: float = 0.1
    """Wasserstein distance in units of the reference's standard deviation (evidently's default: a
    move of a tenth of a standard deviation), for large samples; see num_noise_factor."""
    num_noise_factor: float = 3.0
    """The threshold is at least this many times sqrt(1/n + 1/m) (n, m: rows per side), the scale of
    the distance between two samples of one distribution: an hour of a small endpoint holds a few
    hundred predictions, where pure sampling noise reaches 0.14 (measured), so 0.1 alone would alarm
    on noise. At 350 rows per side the threshold is 0.23; above ~1,800 rows it is 0.1."""
    cat_method: str = "jensenshannon"
    """The only categorical method the warehouse computes (evidently's Jensen-Shannon distance)."""
    cat_threshold: float = 0.1
    """Jensen-Shannon distance of the category shares (evidently's default)."""
    cat_noise_factor: float = 2.0
    """As num_noise_factor, for the categorical distance (noise measured up to 0.09 at 350 rows)."""
    write_reports: bool = True


@dataclass(frozen=True)
class Window:
    endpoint: str
    model_version: str
    current_start: datetime
    current_end: datetime
    current_rows: int
    reference_start: datetime
    reference_end: datetime
    reference_version: str | None
    reference_rows: int
    reference_source: str


def reports_root(warehouse: WarehouseResource) -> Path:
    """GOODPUT_HOME/reports (the warehouse file lives in GOODPUT_HOME)."""
    return Path(warehouse.path).resolve().parent / "reports"


def windows(con: duckdb.DuckDBPyConnection, start: datetime, end: datetime, config: DriftConfig) -> list[Window]:
    frame = sql.frame(con, "quality/windows", {
        "start": start, "end": end, "settle_minutes": config.settle_minutes, "reference_minutes": config.reference_minutes})
    out = []
    for r in frame.itertuples():
        if r.current_rows < config.min_current_rows or r.reference_rows < config.min_reference_rows:
            continue
        out.append(Window(r.endpoint, r.model_version, r.current_start, r.current_end, int(r.current_rows),
                          r.reference_start, r.reference_end, None if pd.isna(r.reference_version) else r.reference_version,
                          int(r.reference_rows), r.reference_source))
    return out


def sample(con: duckdb.DuckDBPyConnection, endpoint: str, version: str | None, start, end, max_rows: int) -> pd.DataFrame:
    """At most `max_rows` predictions, features expanded into columns (one per JSON key)."""
    rows = sql.frame(con, "quality/sample", {
        "endpoint": endpoint, "version": version, "from": start, "until": end, "max_rows": max_rows})
    features = pd.json_normalize([json.loads(f) if isinstance(f, str) else (f or {}) for f in rows["features"]])
    features.index = rows.index
    return pd.concat([features, rows[["prediction", "confidence"]]], axis=1)


def column_types(current: pd.DataFrame, reference: pd.DataFrame) -> dict[str, str]:
    """'num' or 'cat' per column both sides have (numeric on both sides -> num)."""
    types = {}
    for column in current.columns:
        if column not in reference.columns:
            continue
        numeric = pd.api.types.is_numeric_dtype(current[column]) and pd.api.types.is_numeric_dtype(reference[column])
        types[column] = "num" if numeric and not pd.api.types.is_bool_dtype(current[column]) else "cat"
    return types


def evidently_drift(current: pd.DataFrame, reference: pd.DataFrame, config: DriftConfig):
    """(per-column scores, evidently snapshot): DataDriftPreset with the configured methods, on the rows
    given (the report's sample; the verdict is `verdicts` over all rows)."""
    from evidently import DataDefinition, Dataset, Report
    from evidently.presets import DataDriftPreset

    types = column_types(current, reference)
    noise = math.sqrt(1 / max(len(current), 1) + 1 / max(len(reference), 1))
    num_threshold = max(config.num_threshold, config.num_noise_factor * noise)
    cat_threshold = max(config.cat_threshold, config.cat_noise_factor * noise)
    num = [c for c, t in types.items() if t == "num"]
    cat = [c for c, t in types.items() if t == "cat"]
    for c in cat:   # evidently wants one dtype per categorical column
        current[c], reference[c] = current[c].astype(str), reference[c].astype(str)
    definition = DataDefinition(numerical_columns=num, categorical_columns=cat)
    preset = DataDriftPreset(columns=num + cat, num_method=config.num_method, num_threshold=num_threshold,
                             cat_method=config.cat_method, cat_threshold=cat_threshold)
    snapshot = Report([preset]).run(Dataset.from_pandas(current[num + cat], data_definition=definition),
                                    Dataset.from_pandas(reference[num + cat], data_definition=definition))
    rows = []
    for metric in snapshot.dict()["metrics"]:
        cfg = metric.get("config", {})
        if not cfg.get("type", "").endswith("ValueDrift"):
            continue
        column, method, threshold, score = cfg["column"], cfg["method"], float(cfg["threshold"]), metric["value"]
        score = None if score is None else stable(float(score))
        rows.append({"column_name": column, "column_type": types[column], "method": method, "score": score,
                     "threshold": threshold, "drifted": None if score is None else is_drifted(method, types[column], score, threshold)})
    return pd.DataFrame(rows), snapshot


def stable(value: float | None, digits: int = 10) -> float | None:
    """`value` to `digits` significant digits. Evidently sums a categorical column's shares in the order
    of a Python set of the category strings, which hash differently in every process: two runs of one
    hour differ in the last bits. Scores and means are kept to 10 digits (far finer than any threshold
    or the sampling noise), so a re-run leaves identical tables."""
    if value is None or not math.isfinite(value):
        return value
    return float(f"{value:.{digits}g}")


def is_drifted(method: str, column_type: str, score: float, threshold: float) -> bool:
    """p-value tests drift below their threshold; distances (Wasserstein, Jensen-Shannon, PSI, ...) at or above.
    Which one `method` is, evidently's registry says (its display name for that column type: 'num' or 'cat')."""
    from evidently.legacy.calculations.stattests.registry import get_registered_stattest
    from evidently.legacy.core import ColumnType

    kind = ColumnType.Numerical if column_type == "num" else ColumnType.Categorical
    return score < threshold if "p_value" in get_registered_stattest(method, kind).display_name.lower() else score >= threshold


def check_methods(config: DriftConfig) -> None:
    """A one-line error for a method the warehouse does not compute (the verdict is never evidently's)."""
    for kind, method in (("num", config.num_method), ("cat", config.cat_method)):
        if method != METHODS[kind]:
            raise ValueError(f"drift_reports config: {kind}_method {method!r} is not computed over all rows in the "
                             f"warehouse; set {kind}_method: {METHODS[kind]} (sql/quality/drift_stats.sql)")


def verdicts(stats: pd.DataFrame, config: DriftConfig) -> pd.DataFrame:
    """Threshold, verdict and uncertainty of each column's all-rows score (`stats`: drift_stats.sql's rows).

    The threshold is the configured one, raised to factor x noise on small windows, where
    noise = sqrt(1/n + 1/m) is the scale of the distance between two draws of one distribution (in
    reference standard deviations for the normed Wasserstein distance). margin = (score - threshold) /
    noise: the verdict's distance from flipping, in units of what another hour of the same traffic
    could move the score; |margin| < 2 is a verdict near the threshold."""
    numerical = stats["column_type"].eq("num")
    noise = np.sqrt(1 / stats["n"].astype(float) + 1 / stats["m"].astype(float))
    threshold = np.where(numerical, np.maximum(config.num_threshold, config.num_noise_factor * noise),
                         np.maximum(config.cat_threshold, config.cat_noise_factor * noise))
    score = stats["score"].astype(float).map(stable)
    return pd.DataFrame({
        "column_name": stats["column_name"], "column_type": stats["column_type"],
        "method": np.where(numerical, config.num_method, config.cat_method),
        "score": score, "threshold": threshold, "drifted": score.ge(threshold),
        "noise": noise.map(stable), "margin": ((score - threshold) / noise).map(stable),
        "current_mean": stats["current_mean"].astype(float).map(stable),
        "reference_mean": stats["reference_mean"].astype(float).map(stable),
    })


def kept_report(drawn: dict | None, w: Window, scores: pd.DataFrame, reports: Path) -> bool:
    """Whether a live tick keeps window `w`'s report as `drawn` (its row of sql/quality/drawn_reports.sql): the
    file is there, the reference is the one it compared with, the drifted columns are the last run's, and the
    window's rows have not doubled since it was drawn."""
    return (drawn is not None and (reports.parent / drawn["report_path"]).is_file()
            and (pd.Timestamp(drawn["reference_start"]), pd.Timestamp(drawn["reference_end"]))
            == (pd.Timestamp(w.reference_start), pd.Timestamp(w.reference_end))
            and sorted(scores.loc[scores["drifted"], "column_name"]) == list(drawn["drifted"])
            and w.current_rows < 2 * drawn["report_rows"])


def drift_window(con: duckdb.DuckDBPyConnection, w: Window, hour: datetime, config: DriftConfig,
                 reports: Path | None, drawn: dict | None = None) -> pd.DataFrame:
    """Score one window on all rows in DuckDB; render evidently's report of a sample when `reports`, unless
    `drawn` (a live tick's: the report as the last run left it) may be kept (`kept_report`)."""
    stats = sql.frame(con, "quality/drift_stats", {
        "endpoint": w.endpoint, "version": w.model_version, "current_start": w.current_start, "current_end": w.current_end,
        "reference_start": w.reference_start, "reference_end": w.reference_end, "reference_version": w.reference_version})
    scores = verdicts(stats, config)
    report_path, sampled, report_rows = None, (0, 0), None
    if reports is not None and kept_report(drawn, w, scores, reports):
        report_path, report_rows = drawn["report_path"], int(drawn["report_rows"])
        sampled = (int(drawn["current_sampled"]), int(drawn["reference_sampled"]))
    elif reports is not None:
        current = sample(con, w.endpoint, w.model_version, w.current_start, w.current_end, config.max_rows)
        reference = sample(con, w.endpoint, w.reference_version, w.reference_start, w.reference_end, config.max_rows)
        _, snapshot = evidently_drift(current, reference, config)
        relative = Path("reports", "drift", _safe(w.endpoint), _safe(w.model_version), f"{hour:%Y-%m-%dT%H}.html")
        _save_html(snapshot, reports.parent / relative)
        report_path, sampled, report_rows = relative.as_posix(), (len(current), len(reference)), w.current_rows
    return scores.assign(
        endpoint=w.endpoint, model_version=w.model_version, hour=pd.Timestamp(hour),
        kind=scores["column_name"].map(lambda c: "prediction" if c in PREDICTION_COLUMNS else "input"),
        current_rows=w.current_rows, reference_rows=w.reference_rows,
        current_sampled=sampled[0], reference_sampled=sampled[1],
        reference_start=w.reference_start, reference_end=w.reference_end, reference_source=w.reference_source,
        report_path=report_path, report_rows=report_rows,
    )[list(DRIFT_COLUMNS)]


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def _save_html(snapshot, target: Path) -> None:
    """Write the report atomically: a reader never sees half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".html.tmp")
    os.close(fd)
    try:
        snapshot.save_html(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def compute_drift(con: duckdb.DuckDBPyConnection, start: datetime, end: datetime, config: DriftConfig,
                  reports: Path | None, live: bool = False) -> pd.DataFrame:
    """Drift scores of every judged window of [start, end) (reports written under `reports`; a `live` tick keeps
    the reports it may, `kept_report`)."""
    check_methods(config)
    drawn = {}
    if live and reports is not None:
        found = sql.frame(con, "quality/drawn_reports", {"start": start})
        drawn = {(r["endpoint"], r["model_version"]): r for r in found.to_dict("records")}
    frames = [drift_window(con, w, start, config, reports, drawn.get((w.endpoint, w.model_version)))
              for w in windows(con, start, end, config)]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(DRIFT_COLUMNS))


@dg.asset(
    deps=["predictions", "lineage_events"],
    partitions_def=hourly,
    group_name="baselines",   # runs in the detect job with the other per-hour baselines
    kinds={"duckdb", "python"},
    pool=POOL,
)
def drift_reports(context: dg.AssetExecutionContext, config: DriftConfig, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Per endpoint and model version: evidently drift of the hour's inputs and predictions against the
    version's reference window; HTML reports under GOODPUT_HOME/reports/drift/, per-column scores in
    `drift_scores` (view `drift_history`), and a drift-over-time plot."""
    params = window_params(context.partition_time_window)
    reports = reports_root(warehouse) if config.write_reports else None
    with warehouse.connect() as con:
        scores = compute_drift(con, params["start"], params["end"], config, reports, is_live(context))
        with transaction(con, new_drift_scores=scores):
            sql.run(con, "quality/replace_drift", params)
        history = sql.frame(con, "quality/drift_over_time", {"end": params["end"], "hours": 24})
    drifted = scores[scores["drifted"].fillna(False).astype(bool)]
    metadata: dict = {
        "windows": int(scores[["endpoint", "model_version"]].drop_duplicates().shape[0]) if not scores.empty else 0,
        "columns_scored": len(scores),
        "columns_drifted": dg.MetadataValue.json(
            [f"{r.endpoint}/{r.model_version}: {r.column_name} ({r.method} {r.score:.3f})" for r in drifted.itertuples()]),
    }
    for path in sorted(set(scores["report_path"].dropna())):
        metadata[f"report {path}"] = dg.MetadataValue.path(str(reports.parent / path))
    if not history.empty:
        from orchestration.plots import drift_plot, markdown_image  # matplotlib: ~0.6 s to import, only to draw

        metadata["drift over time"] = dg.MetadataValue.md(markdown_image(
            drift_plot(history, title="drift score per column (last 24 h)", dpi=60), "drift over time"))
    return dg.MaterializeResult(metadata=metadata)
