"""The on-call view in a real browser: the incident board beside the Dagster UI, `goodput ui`.

A home holds the on-call scenario (tests/fixtures/oncall.yaml: a 2-GPU run that hangs at 01:35) processed
through the real Definitions up to 02:00, so the hang is still open (SEV1). `goodput ui` serves the
Dagster UI and the board; Debian's headless Chromium (Playwright, one browser session) answers the six
on-call questions from the board's front page within two clicks, asserted on the pages' text, and sees
the `incidents` asset's check fail in the Dagster lineage while the SEV1 is open, then pass once hour
02 is processed and the hang has resolved. Screenshots go to `$GOODPUT_TEST_ARTIFACTS/board/`
(default `test-artifacts/board/`).
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

from tests.helpers import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, free_port

REPO = Path(__file__).resolve().parent.parent
ONCALL = REPO / "tests" / "fixtures" / "oncall.yaml"
GOODPUT = [sys.executable, "-m", "orchestration.cli"]
PIPELINE = """
import sys
from datetime import datetime
from orchestration.commands.common import run_pipeline, use_home
run_pipeline(use_home(sys.argv[1]), datetime.fromisoformat(sys.argv[2]), datetime.fromisoformat(sys.argv[3]), progress=print)
"""

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium")


def artifacts() -> Path:
    root = Path(os.environ.get("GOODPUT_TEST_ARTIFACTS", REPO / "test-artifacts")) / "board"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("GOODPUT_HOME", "DAGSTER_HOME", "GOODPUT_BOARD_URL")}


def process(home: Path, start: str, end: str, board: str) -> None:
    """Run the real detect job on each hour of [start, end), then the fold and the alert sensor; links
    in check metadata and alerts point at `board`."""
    done = subprocess.run([sys.executable, "-c", PIPELINE, str(home), start, end], cwd=REPO,
                          env={**_env(), "GOODPUT_BOARD_URL": board},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def _wait_for(url: str, server: subprocess.Popen, log: Path, deadline: float) -> None:
    while True:
        assert server.poll() is None, f"goodput ui exited with {server.returncode}; see {log}"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer in time; see {log}"
        time.sleep(1)


@pytest.fixture(scope="module")
def oncall(tmp_path_factory):
    """(home, Dagster URL, board URL): the on-call home with the hang open, served by `goodput ui`."""
    home = tmp_path_factory.mktemp("oncall") / "home"
    simulated = subprocess.run([*GOODPUT, "simulate", "--scenario", str(ONCALL), "--out", str(home)], cwd=REPO, env=_env(),
                               capture_output=True, text=True)
    assert simulated.returncode == 0, simulated.stderr
    port, board_port = free_port(), free_port()
    process(home, "2026-11-30T00:00:00+00:00", "2026-11-30T02:00:00+00:00", f"http://127.0.0.1:{board_port}")
    # the service sensor (its raw-zone part) would run hour 02 as soon as the daemon starts (its raw data is there and was
    # never processed), resolving the hang before the test looks; the test drives the hours itself
    stopped = subprocess.run([str(Path(sys.executable).with_name("dagster")), "sensor", "stop", "goodput_service",
                              "-w", str(REPO / "workspace.yaml")], cwd=REPO, capture_output=True, text=True,
                             env={**_env(), "GOODPUT_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")})
    assert stopped.returncode == 0, stopped.stderr[-2000:]
    log = artifacts() / "goodput-ui.log"
    with open(log, "w") as out:
        server = subprocess.Popen([*GOODPUT, "ui", "--home", str(home), "--port", str(port), "--board-port", str(board_port)],
                                  cwd=REPO, env=_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    dagster, board = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{board_port}"
    try:
        deadline = time.monotonic() + 1800   # dagster dev's start on a busy machine
        _wait_for(board + "/healthz", server, log, deadline)
        _wait_for(dagster + "/server_info", server, log, deadline)
        yield home, dagster, board
    finally:
        os.killpg(server.pid, signal.SIGTERM)   # dagster dev and the board share the process group
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1500, "height": 1000})
        # Dagster greets a visitor of a fresh instance on loopback with a newsletter dialog over the page;
        # the flag its "Skip" button stores says it was seen, so the dialog never opens (no race with it)
        context.add_init_script("window.localStorage.setItem('communityNux', JSON.stringify('1'))")
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        yield page
        browser.close()


def open_board(page, url: str) -> str:
    """Go to a board page and return its text; a "warehouse busy" answer (a scheduled run writing) is retried."""
    for _ in range(60):
        page.goto(url, wait_until="networkidle", timeout=WAIT_MS)
        text = page.inner_text("body")
        if "Warehouse busy, retry" not in text:
            return text
        page.wait_for_timeout(2000)
    raise AssertionError(f"{url} stayed busy")


def shot(page, name: str) -> None:
    page.wait_for_timeout(800)
    path = artifacts() / name
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000


def test_the_six_on_call_questions_are_answered_within_two_clicks(oncall, page):
    _, _, board = oncall
    front = open_board(page, board + "/")
    shot(page, "1-now.png")
    row = page.locator("#open-incidents tbody tr").filter(has_text="Run busy but not progressing").first
    cells = row.inner_text()
    # 1. which run is hung, 2. since when, 3. on which GPUs, 4. what it costs: on the front page, no click
    assert "run llm-oncall" in cells and "SEV1" in cells
    assert re.search(r"2026-11-30 01:3\d:\d\d UTC", cells), cells
    assert "node-0:0, node-0:1" in cells
    assert re.search(r"\d+\.\d\d GPU-h", cells) and "GPU-hours at risk" in front
    # 5. what to do and 6. which checkpoint to restart from: one click, the incident
    row.get_by_role("link", name=re.compile("Run busy but not progressing")).click()
    page.wait_for_load_state("networkidle")
    incident = page.inner_text("body")
    shot(page, "2-incident.png")
    playbook = page.inner_text("#playbook")
    assert playbook.startswith("1. Confirm the stall: run llm-oncall") and "restart it from" in playbook
    restart = page.inner_text("#restart-checkpoint")
    assert re.search(r"/checkpoints/llm-oncall/step-\d+ \(step [\d,]+, saved 2026-11-30 01:\d\d:\d\d UTC", restart), restart
    assert "onset" in incident and "UTC" in incident and "not yet (open)" in incident
    # the run's charts: a second click
    page.get_by_role("link", name="llm-oncall").first.click()
    page.wait_for_load_state("networkidle")
    page.locator("div.chart .main-svg").first.wait_for()
    assert page.locator("div.chart").count() >= 6
    shot(page, "3-run.png")
    open_board(page, board + "/cluster")
    page.locator("div.chart .main-svg").first.wait_for()
    shot(page, "4-cluster.png")


def _incidents_checks(page, dagster: str, expected: str) -> None:
    """The `incidents` node of the lineage shows its checks' tally `expected` (the only asset with checks
    in the group): the page is reloaded until the UI has the latest evaluation."""
    for _ in range(30):
        page.goto(dagster + "/locations/goodput/asset-groups/incidents/lineage", wait_until="networkidle", timeout=WAIT_MS)
        page.get_by_text("incidents", exact=True).first.wait_for()
        tally = page.get_by_text(re.compile(r"^\d+ / \d+ Passed$")).first
        tally.wait_for()
        if tally.inner_text() == expected:
                return
        page.wait_for_timeout(2000)
    raise AssertionError(f"the incidents asset's checks never showed {expected!r}")


def test_the_dagster_lineage_shows_incidents_failing_while_a_sev1_is_open_then_passing(oncall, page):
    home, dagster, board = oncall
    _incidents_checks(page, dagster, "0 / 1 Passed")          # the check failed: the node turns red
    shot(page, "5-lineage-sev1-open.png")
    page.goto(dagster + "/assets/incidents?view=checks", wait_until="networkidle", timeout=WAIT_MS)
    page.get_by_text("Latest execution").first.wait_for()
    checks = page.inner_text("body")
    shot(page, "6-incidents-check-failing.png")
    assert re.search(r"\d SEV1 and 0 SEV2 open: .*\[SEV1\] busy_not_progressing on run llm-oncall on 2 GPU\(s\)", checks)
    assert "Failed" in checks and f"{board}/incidents/inc-" in checks   # the most urgent incident's board page
    # the hang ends in hour 02: process it; the fold resolves the incidents and the check passes
    process(home, "2026-11-30T02:00:00+00:00", "2026-11-30T03:00:00+00:00", board)
    _incidents_checks(page, dagster, "1 / 1 Passed")
    shot(page, "7-lineage-resolved.png")
    front = open_board(page, board + "/")
    assert "No open incidents." in front and "Run busy but not progressing: run llm-oncall" in front   # recently resolved
    shot(page, "8-now-resolved.png")
