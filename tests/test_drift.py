"""Drift through the real Dagster `detect` job on the quality scenario's first hours: the evidently
report is written as HTML (parsed here: it is evidently's dashboard), its link is in the input_drift
check's metadata, the drift history view flags the drifted columns and not the stable ones, and the
drift_reports materialization carries the drift-over-time plot."""

import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import dagster as dg
import pytest

from tests.helpers import check_evaluation

REPO = Path(__file__).resolve().parent.parent
QUALITY = REPO / "simulator" / "scenarios" / "quality.yaml"


@pytest.fixture(scope="module")
def drifted(quality_first_hours):
    """quality.yaml, hours 00-02 (tests/conftest.py): chat-base's reference is 00:10-01:10, input drift
    from 01:15. The home is the copy taken after hour 02; the results are those hours' detect runs."""
    return quality_first_hours["snapshot"], quality_first_hours["results"]


def _history(home: Path):
    import duckdb

    with duckdb.connect(str(home / "warehouse.duckdb"), read_only=True) as con:
        return con.execute("SELECT * FROM drift_history").df()


class _Report(HTMLParser):
    """Collects the script bodies and element ids of an HTML page."""

    def __init__(self):
        super().__init__()
        self.scripts, self.ids, self._in_script = [], [], False

    def handle_starttag(self, tag, attrs):
        self.ids += [v for k, v in attrs if k == "id"]
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def test_drift_history_flags_the_drifted_columns_and_not_the_stable_ones(drifted):
    home, _ = drifted
    history = _history(home)
    # hour 00 is the reference itself: nothing judged; 01 (drift from 01:15) and 02 are
    assert sorted(history["hour"].dt.hour.unique()) == [1, 2]
    assert set(history["endpoint"]) == {"chat-api"} and set(history["model_version"]) == {"chat-base"}
    assert set(history["reference_source"]) == {"first_stable"}
    hour2 = history[history["hour"].dt.hour == 2].set_index("column")
    assert set(hour2.index) == {"prompt_tokens", "max_tokens", "language", "temperature", "prediction", "confidence"}
    # the fault moves prompt_tokens (x2), language (half to 'ja') and temperature (+0.3) ...
    assert hour2.loc[["prompt_tokens", "language", "temperature"], "drifted"].all()
    # ... and leaves max_tokens, the predicted label and the confidence alone
    assert not hour2.loc[["max_tokens", "prediction", "confidence"], "drifted"].any()
    assert (hour2.loc["prompt_tokens", "method"], hour2.loc["language", "method"]) == ("wasserstein", "jensenshannon")
    assert hour2.loc["prompt_tokens", "score"] > 0.5 > hour2.loc["prompt_tokens", "threshold"]
    assert set(hour2["kind"]) == {"input", "prediction"}
    # cheap statistics over the full windows: prompts are twice as long in the drifted half hour (to 02:30)
    assert hour2.loc["prompt_tokens", "current_mean"] == pytest.approx(1.5 * hour2.loc["prompt_tokens", "reference_mean"], rel=0.15)
    assert (hour2["current_rows"] == hour2["current_sampled"]).all()     # under max_rows: the report read it whole
    # every verdict states its uncertainty: the margin to the threshold in noise units, signed as the verdict
    assert (hour2["noise"] > 0).all() and (hour2["margin"].gt(0) == hour2["drifted"]).all()


def test_the_drift_check_links_its_evidently_report_and_the_report_is_evidently_html(drifted):
    home, results = drifted
    evaluation = check_evaluation(results[2], "input_drift")
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
    metadata = evaluation.metadata
    # the check links the report through the incident board (a browser opens it), and the file is on disk
    link = metadata["report"].value
    assert link.endswith("/reports/drift/chat-api/chat-base/2026-11-30T02.html") and link.startswith("http")
    assert link in metadata["report_link"].value
    report = home / "reports" / "drift" / "chat-api" / "chat-base" / "2026-11-30T02.html"
    assert report.is_file()
    evidence = metadata["evidence"].value
    assert evidence["report_path"] == "reports/drift/chat-api/chat-base/2026-11-30T02.html"
    assert {"prompt_tokens", "language", "temperature"} <= set(evidence["drifted_columns"])
    assert "max_tokens" not in evidence["drifted_columns"]

    page = _Report()
    page.feed(report.read_text(encoding="utf-8"))
    (data,) = [s for s in page.scripts if re.match(r"\s*var metric_\w+ = \{", s)]
    name, body = re.match(r"\s*var (metric_\w+) = (\{.*)", data, re.S).groups()
    dashboard, _ = json.JSONDecoder().raw_decode(body)     # the first of the script's variables
    assert dashboard["name"] == "Report" and dashboard["widgets"]              # evidently's dashboard model
    assert f"root_{name}" in page.ids                                           # the div it draws into
    assert any(f"window.drawDashboard({name}" in s for s in page.scripts)       # evidently's renderer call
    assert "prompt_tokens" in body and "Wasserstein distance (normed)" in body


def test_quiet_hours_pass(drifted):
    _, results = drifted
    for hour in (0, 1):   # 0: the reference itself; 1: one drifted hour is not yet a drift (min_hours 2)
        evaluation = check_evaluation(results[hour], "input_drift")
        assert evaluation.passed and "report" not in evaluation.metadata
    assert check_evaluation(results[2], "prediction_drift").passed    # inputs moved, predictions did not
    assert check_evaluation(results[2], "confidence_shift").passed


def test_drift_reports_materialization_shows_drift_over_time(drifted):
    _, results = drifted
    (materialization,) = [m for m in results[2].asset_materializations_for_node("drift_reports")]
    metadata = materialization.metadata
    assert metadata["columns_scored"].value == 6
    assert any("prompt_tokens" in c for c in metadata["columns_drifted"].value)
    plot = metadata["drift over time"].value
    png = base64.b64decode(re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", plot).group(1))
    assert png.startswith(b"\x89PNG")
    assert any(key.startswith("report reports/drift/chat-api/chat-base/") for key in metadata)


def test_a_live_tick_keeps_a_report_until_its_verdicts_change_or_its_rows_double(drifted, tmp_path, monkeypatch):
    """A live tick scores every window again but draws its evidently report again only when the drifted columns
    changed or the window's rows doubled since the report was drawn; every other run draws it."""
    import shutil
    from datetime import datetime

    from assets import drift
    from orchestration.storage.warehouse import WarehouseResource

    home = tmp_path / "home"
    shutil.copytree(drifted[0], home, ignore=shutil.ignore_patterns("dagster"))
    warehouse = WarehouseResource(path=str(home / "warehouse.duckdb"))
    report = home / "reports" / "drift" / "chat-api" / "chat-base" / "2026-11-30T02.html"
    drawn = []
    real = drift.evidently_drift
    monkeypatch.setattr(drift, "evidently_drift", lambda *a: drawn.append(1) or real(*a))

    def tick(live: bool = True, change: str | None = None):
        with warehouse.connect() as con:
            if change:
                con.execute(change)
            scores = drift.compute_drift(con, datetime(2026, 11, 30, 2), datetime(2026, 11, 30, 3), drift.DriftConfig(),
                                         home / "reports", live)
            con.execute("DELETE FROM drift_scores WHERE hour = '2026-11-30 02:00'")
            con.execute("INSERT INTO drift_scores BY NAME SELECT * FROM scores")   # as the asset stores them
        return scores

    stored = tick(live=False)                     # a whole-hour run draws it
    assert len(drawn) == 1 and set(stored["report_rows"]) == set(stored["current_rows"]) and report.is_file()
    assert stored["drifted"].any()
    kept = tick()                                  # nothing changed: kept, the scores computed again
    assert len(drawn) == 1
    assert kept.drop(columns="report_rows").equals(stored.drop(columns="report_rows"))
    assert list(kept["report_rows"]) == list(stored["report_rows"])
    rows = int(stored["current_rows"].iloc[0])
    tick(change=f"UPDATE drift_scores SET report_rows = {rows // 2 + 1}")   # drawn with just over half the rows
    assert len(drawn) == 1
    tick(change=f"UPDATE drift_scores SET report_rows = {rows // 2}")       # the rows doubled since: drawn again
    assert len(drawn) == 2
    tick(change="UPDATE drift_scores SET drifted = NOT drifted WHERE column_name = 'prompt_tokens'")   # a verdict moved
    assert len(drawn) == 3
    report.unlink()
    tick()                                         # the file is gone: drawn again
    assert len(drawn) == 4 and report.is_file()
    tick(live=False)                               # every other run draws every report
    assert len(drawn) == 5


def test_bench_drift_quick_runs_and_prints_its_table(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(REPO / "bench" / "bench_drift.py"), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rows per side" in done.stdout and "evidently alone (s)" in done.stdout and "machine:" in done.stdout
    assert "2,000" in done.stdout and (tmp_path / "rows-2000" / "evidently-alone.html").exists()
