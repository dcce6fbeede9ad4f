"""`goodput report RUN_ID` and the plotting functions behind it.

The report runs on the small scenario processed through the real assets; the plots are pure
functions, tested on frames with a known shape (a hang window, a straggling rank, no data at all).
PNG copies go to `$GOODPUT_TEST_ARTIFACTS/report/` (default `test-artifacts/report/`) to look at.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import matplotlib.image
import numpy as np
import pandas as pd
import pytest

from orchestration.definitions import resources_for
from orchestration.plots import markdown_image, rank_plot, run_plot
from tests.helpers import copy_home, memory_instance

REPO = Path(__file__).resolve().parent.parent
GOODPUT = [sys.executable, "-m", "orchestration.cli"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def artifacts() -> Path:
    root = Path(os.environ.get("GOODPUT_TEST_ARTIFACTS", REPO / "test-artifacts")) / "report"
    root.mkdir(parents=True, exist_ok=True)
    return root


def goodput(*args):
    env = {k: v for k, v in os.environ.items() if k not in ("GOODPUT_HOME", "DAGSTER_HOME")}
    return subprocess.run([*GOODPUT, *args], cwd=REPO, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def home(tmp_path_factory, small_folded) -> Path:
    """The small scenario's two hours checked and folded (the session's small_folded), copied: the tests write
    reports and plots into it."""
    return copy_home(small_folded, tmp_path_factory.mktemp("report") / "home")


def pixels(png: bytes) -> np.ndarray:
    return matplotlib.image.imread(io.BytesIO(png), format="png")


def test_report_is_the_board_run_page_in_one_self_contained_file(home):
    done = goodput("report", "llm-small", "--home", str(home))
    assert done.returncode == 0, done.stderr
    page_path = home / "reports" / "llm-small.html"
    assert str(page_path) in done.stdout
    assert page_path.stat().st_mode & 0o777 == 0o644            # readable by the group (and others)
    page = page_path.read_text()
    for expected in ("Run busy but not progressing: run llm-small", "busy_not_progressing", "SEV1",
                     "/checkpoints/llm-small/step-001000 (step 1,000)", "/checkpoints/llm-small/step-002500",
                     "Restarts (0)", "GPU-h", "UTC",
                     "Loss, step time and grad norm", "Step time per rank", "GPU utilization per GPU and minute (%)"):
        assert expected in page, expected
    # one file: plotly.js inline, no script or image fetched from elsewhere; no raw dataframe dumps
    assert "<script src=" not in page and "<img" not in page and "Plotly.newPlot" in page and len(page) > 3_000_000
    text = re.sub(r"<script.*?</script>", "", page, flags=re.S)
    for raw in ("NaN", "None", "<NA>", "NaT", 'class="dataframe"'):
        assert raw not in text, raw
    shutil.copy(page_path, artifacts() / "llm-small.html")
    assert not list(page_path.parent.glob(".*"))  # no temporary files left behind


def test_report_on_an_unknown_run_lists_the_known_ones(home, tmp_path):
    done = goodput("report", "no-such-run", "--home", str(home), "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "no-such-run" in done.stderr and "llm-small" in done.stderr
    assert not (tmp_path / "r").exists()


def test_incident_plots_asset_attaches_the_pictures_and_skips_when_nothing_changed(home):
    from assets.incident_plots import incident_plots

    resources = resources_for(home)
    with memory_instance() as instance:
        first = dg.materialize([incident_plots], resources=resources, instance=instance)
        (event,) = first.asset_materializations_for_node("incident_plots")
        meta = event.metadata
        assert meta["runs"].value == ["llm-small"]  # no incident is open: the latest incident's run
        markdown = meta["run llm-small"].value
        assert markdown.count("](data:image/png;base64,") == 2 and "Run busy but not progressing" in markdown
        assert len(markdown) < 400_000  # small pictures: they live in the event log
        again = dg.materialize([incident_plots], resources=resources, instance=instance)
        assert again.success and again.asset_materializations_for_node("incident_plots") == []


def test_incident_plots_of_an_open_incident_are_drawn_again_every_redraw_minutes_or_when_it_changes(home, tmp_path):
    """An open incident's last minute moves at every live tick: its pictures are drawn again once its series reach
    REDRAW_MINUTES past the last ones, not at each; a change of the incidents themselves (here, resolved) at once."""
    from assets.incident_plots import REDRAW_MINUTES, incident_plots

    copy = tmp_path / "home"
    shutil.copytree(home, copy, ignore=shutil.ignore_patterns("dagster"))
    resources = resources_for(copy)

    def drawn(instance, sql: str | None = None) -> bool:
        if sql:
            with resources["warehouse"].connect() as con:
                con.execute(sql)
        done = dg.materialize([incident_plots], resources=resources, instance=instance)
        return len(done.asset_materializations_for_node("incident_plots")) == 1

    later = "UPDATE incidents SET last_seen = last_seen + INTERVAL {} MINUTE WHERE run_id = 'llm-small'"
    with memory_instance() as instance:
        assert drawn(instance, "UPDATE incidents SET status = 'open', resolved = NULL WHERE run_id = 'llm-small'")
        assert not drawn(instance, later.format(1))
        assert not drawn(instance, later.format(REDRAW_MINUTES - 2))   # REDRAW_MINUTES - 1 past the pictures
        assert drawn(instance, later.format(1))                         # REDRAW_MINUTES past them
        assert not drawn(instance)
        assert drawn(instance, "UPDATE incidents SET status = 'resolved' WHERE run_id = 'llm-small'")


# --------------------------------------------------------------------------- the plots, pure

MINUTES = pd.date_range("2026-11-30 00:00", periods=120, freq="min")
HANG = pd.DataFrame({"window_start": [MINUTES[50]], "window_end": [MINUTES[70]],
                     "signal": ["busy_not_progressing"], "tier": ["SEV1"]})


def series() -> pd.DataFrame:
    k = np.arange(len(MINUTES), dtype=float)
    frame = pd.DataFrame({"minute": MINUTES, "loss": 2 + 7 * np.exp(-k / 30), "step_seconds": 2.0 + 0.01 * np.sin(k),
                          "grad_norm": 1 + 1 / (1 + k)})
    frame.loc[51:69, ["loss", "step_seconds", "grad_norm"]] = np.nan  # no steps during the hang
    return frame


def test_run_plot_shades_the_incident_window():
    plain, shaded = run_plot(series(), None), run_plot(series(), HANG, title="hang")
    assert plain.startswith(PNG_MAGIC) and shaded.startswith(PNG_MAGIC)
    (artifacts() / "run_plot_hang.png").write_bytes(shaded)
    a, b = pixels(plain), pixels(shaded)
    assert a.shape == b.shape
    # shading adds red-tinted pixels (SEV1 colour) that the plain plot does not have
    red = lambda img: ((img[..., 0] > 0.9) & (img[..., 1] < 0.9) & (img[..., 1] > 0.75)).sum()  # noqa: E731
    assert red(b) > red(a) + 10_000


def test_rank_plot_shows_a_straggler_above_its_peers():
    rows = [{"rank": r, "minute": m, "step_seconds": 2.0 + (0.8 if r == 3 and i >= 60 else 0.0)}
            for r in range(4) for i, m in enumerate(MINUTES)]
    png = rank_plot(pd.DataFrame(rows), None, title="rank 3 straggles from 01:00")
    (artifacts() / "rank_plot_straggler.png").write_bytes(png)
    assert png.startswith(PNG_MAGIC) and pixels(png).shape[1] >= 800


def test_plots_of_no_data_still_render():
    empty = pd.DataFrame(columns=["minute", "loss", "step_seconds", "grad_norm"])
    assert run_plot(empty).startswith(PNG_MAGIC)
    assert rank_plot(pd.DataFrame(columns=["rank", "minute", "step_seconds"])).startswith(PNG_MAGIC)


def test_markdown_image_embeds_the_png():
    md = markdown_image(b"\x89PNG-bytes", "loss")
    assert md.startswith("![loss](data:image/png;base64,") and md.endswith(")")
