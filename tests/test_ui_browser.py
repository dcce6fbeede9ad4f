"""The Dagster UI as an operator sees it, in a real browser.

Runs `goodput demo` on the small scenario, starts `goodput ui` on that home on a free loopback
port, and drives Debian's headless Chromium (Playwright with the system browser; `.ci/run` installs
it) to the asset graph, the failing busy_not_progressing check with its evidence, the incidents
asset's table, the incident plots and the automation page. Screenshots go to `$GOODPUT_TEST_ARTIFACTS/ui/` (default
`test-artifacts/ui/`, git-ignored).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, copy_home, free_port

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "simulator" / "scenarios" / "small.yaml"
GOODPUT = [sys.executable, "-m", "orchestration.cli"]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium "
                                "(apt-get install chromium; .ci/run installs it)")


def artifacts() -> Path:
    root = Path(os.environ.get("GOODPUT_TEST_ARTIFACTS", REPO / "test-artifacts")) / "ui"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("GOODPUT_HOME", "DAGSTER_HOME")}


@pytest.fixture(scope="module")
def ui(tmp_path_factory, small_demo):
    """The demo's home served by `goodput ui`; yields the base URL. Stops the whole process group.
    The demo is the session's one small demo (tests/conftest.py), on a copy of its home."""
    assert small_demo["status"] == 0, small_demo["terminal"]
    home = copy_home(small_demo["home"], tmp_path_factory.mktemp("ui") / "home")
    port = free_port()
    log = open(artifacts() / "goodput-ui.log", "w")  # noqa: SIM115  (closed below)
    server = subprocess.Popen([*GOODPUT, "ui", "--home", str(home), "--host", "127.0.0.1", "--port", str(port)],
                              cwd=REPO, env=_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, f"goodput ui exited with {server.returncode}; see {log.name}"
            try:
                with urllib.request.urlopen(base + "/server_info", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"goodput ui did not answer on {base} within 180 s; see {log.name}"
            time.sleep(1)
        yield base
    finally:
        # dagster dev runs a webserver, a daemon and code servers: end the group it leads
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, ui, request):
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    # Dagster greets a visitor of a fresh instance on loopback with a newsletter dialog over the page;
    # the flag its "Skip" button stores says it was seen, so the dialog never opens (no race with it)
    context.add_init_script("window.localStorage.setItem('communityNux', JSON.stringify('1'))")
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    yield page
    # what the page showed at the end, passed or not: the first thing to look at when one fails
    page.screenshot(path=str(artifacts() / f"last-{request.node.name}.png"), full_page=True)
    context.close()


def visit(page, base: str, path: str) -> None:
    page.goto(base + path, wait_until="networkidle", timeout=WAIT_MS)


def shot(page, name: str) -> Path:
    path = artifacts() / name
    page.wait_for_timeout(1000)  # let dialogs finish fading in, so the picture shows what was asserted
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000, f"{path} looks empty"
    return path


def test_asset_graph_shows_the_ingest_assets_their_kind_and_the_failed_check(page, ui):
    visit(page, ui, "/locations/goodput/asset-groups/ingest/lineage")
    for name in ("gpu_samples", "lineage_events", "training_steps"):
        page.get_by_text(name, exact=True).first.wait_for()
    page.get_by_text("incidents", exact=True).first.wait_for()  # the downstream asset, in the other group
    # training_steps' checks: some failed after the demo; the schedule may since have checked a quiet hour
    page.get_by_text(re.compile(r"^\d+ / \d+ Passed$")).first.wait_for()
    assert page.get_by_text("DuckDB").count() >= 3
    shot(page, "asset_graph.png")
    visit(page, ui, "/asset-groups")
    page.get_by_text("Global asset lineage").wait_for()
    for group in ("ingest", "incidents"):
        page.get_by_text(group, exact=True).first.wait_for()
    shot(page, "asset_groups.png")


def test_failing_check_shows_its_evidence(page, ui):
    visit(page, ui, "/assets/training_steps?view=checks")
    page.get_by_text("busy_not_progressing", exact=True).first.click()  # one of the asset's checks
    page.get_by_text("[SEV1, owner: platform]").first.wait_for()  # the check's description
    shot(page, "check.png")
    # the schedule is on, so a newer evaluation (of the current hour) may come first: find the demo's
    page.get_by_text("Execution history", exact=True).first.click()
    row = page.get_by_role("row").filter(has_text="2026-11-30-01:00").filter(has_text="Failed").first
    row.wait_for()
    assert "Run busy but not progressing: 1 run(s) flagged" in row.inner_text()
    shot(page, "check_history.png")
    row.get_by_role("button").last.click()  # its metadata
    metadata = page.get_by_role("dialog").first
    metadata.get_by_text("threshold", exact=True).wait_for()
    text = metadata.inner_text()
    for expected in ("value", "threshold", "300", "SEV1", "platform", "window", "2026-11-30 01:0", "offending", "evidence"):
        assert expected in text, (expected, text)
    shot(page, "check_metadata.png")
    # the offending entities are a markdown table behind a button
    metadata.get_by_text("[Show Markdown]").first.click()
    table = page.get_by_role("dialog").filter(has_text="node-0:0, node-0:1").first
    table.wait_for()
    text = table.inner_text()
    assert "llm-small" in text and "2026-11-30 00:49:58" in text
    shot(page, "check_evidence.png")


def test_incidents_asset_shows_the_incident_table(page, ui):
    visit(page, ui, "/assets/incidents")
    page.get_by_text("recent_incidents", exact=True).wait_for()
    row = page.get_by_role("row").filter(has_text="Run busy but not progressing: run llm-small")
    row.first.wait_for()
    cells = row.first.inner_text()
    for expected in ("SEV1", "resolved", "llm-small", "0.67", "platform"):
        assert expected in cells, (expected, cells)
    body = page.inner_text("body")
    assert "open_incidents" in body and "No incidents." in body  # the demo's one incident has resolved
    assert "Severity-tiered incident records" in body  # the description
    row.first.scroll_into_view_if_needed()  # the page scrolls inside its own pane: bring the table into the picture
    shot(page, "incidents.png")


def test_incident_plots_show_the_run_with_its_incident_shaded(page, ui):
    visit(page, ui, "/assets/incident_plots")
    page.get_by_text("run llm-small", exact=True).wait_for()
    page.get_by_text("[Show Markdown]").first.click()
    dialog = page.get_by_role("dialog").first
    dialog.get_by_text("Run busy but not progressing").first.wait_for()
    images = dialog.locator("img[src^='data:image/png']")
    images.nth(1).wait_for()
    assert images.count() == 2
    for i in range(2):  # rendered, not broken: the browser decoded each PNG at a readable size
        assert page.evaluate("(img) => img.complete && img.naturalWidth", images.nth(i).element_handle()) >= 400
    shot(page, "incident_plots.png")


def test_sensors_are_on_by_default(page, ui):
    visit(page, ui, "/automation")
    for name in ("goodput_service", "maintenance_daily"):   # one sensor does the raw-zone, fold and alert work
        page.get_by_text(name, exact=True).wait_for()
    # both switches on (a string predicate would be `eval`, which the page's CSP forbids)
    page.locator("input[type=checkbox]:checked").nth(1).wait_for(state="attached")
    shot(page, "automation.png")
