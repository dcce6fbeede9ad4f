"""Progress on a terminal, one plain line elsewhere once a wait passes 2 s: the Ticker, the warehouse's
lock wait, and `goodput simulate` / `demo` / `sql` / `report` under a real pty and piped."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestration.progress import CLEAR, Ticker
from tests.helpers import run_with_stderr_on_a_terminal

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "simulator" / "scenarios" / "small.yaml"
GOODPUT = [sys.executable, "-m", "orchestration.cli"]


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("GOODPUT_HOME", "DAGSTER_HOME")}


def run_on_a_terminal(*args) -> tuple[int, str, str]:
    """Run goodput with stderr on a pseudo-terminal (stdout piped); returns (status, stdout, terminal)."""
    return run_with_stderr_on_a_terminal([*GOODPUT, *args], _env())


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_ticker_off_a_terminal_says_one_plain_line_once_the_work_lasts_two_seconds():
    stream, clock = io.StringIO(), FakeClock()
    with Ticker(total=3, stream=stream, interval=3600, clock=clock) as ticker:  # ticked by hand, not by its thread
        ticker.update("detect 2026-11-30-00:00")
        ticker.tick()
        clock.now += 1.9
        ticker.tick()
        assert stream.getvalue() == ""                 # short work stays silent
        clock.now += 0.6
        ticker.tick()
        ticker.update("detect 2026-11-30-01:00")
        clock.now += 30
        ticker.tick()
    assert stream.getvalue() == "goodput: waiting for detect 2026-11-30-00:00 (2s so far)\n"   # one line, no control codes


def test_a_wait_below_the_cli_says_what_it_waits_for_once_and_only_when_announced():
    from orchestration import progress

    stream, clock = io.StringIO(), FakeClock()
    notice = progress.WaitNotice("the warehouse /w.duckdb", stream, clock=clock)
    notice.poll()
    clock.now += 2.0
    notice.poll()
    notice.poll()
    assert stream.getvalue() == "goodput: waiting for the warehouse /w.duckdb (2s so far)\n"
    assert progress.WaitNotice("x", None, clock=clock).poll() is False   # no hook installed: a Dagster run stays quiet
    # under a Ticker that drew a live line, the wait stays quiet; the Ticker shows it
    quiet = io.StringIO()
    with Ticker(stream=quiet, enabled=True, interval=3600) as ticker:
        ticker.update("waiting for a writing run")
        inner = progress.WaitNotice("the warehouse", quiet, clock=clock)
        clock.now += 5
        assert inner.poll() is False


def test_ticker_draws_counts_and_clears_on_a_terminal():
    stream = io.StringIO()
    with Ticker(total=4, stream=stream, interval=0.01, enabled=True) as ticker:
        ticker.update("detect 2026-11-30-00:00")
        ticker.step()
        ticker.update("detect 2026-11-30-01:00")
        time.sleep(0.05)
        assert ticker.line().startswith("[2/4]  detect 2026-11-30-01:00") and "left" in ticker.line()
    text = stream.getvalue()
    assert "[1/4]  detect 2026-11-30-00:00" in text and "[2/4]  detect 2026-11-30-01:00" in text
    assert text.endswith(CLEAR)  # leaves the terminal clean


def test_simulate_shows_progress_on_a_terminal_and_nothing_in_a_pipe(tmp_path):
    status, out, terminal = run_on_a_terminal("simulate", "--scenario", str(SMALL), "--out", str(tmp_path / "a"))
    assert status == 0 and out.startswith("simulated small:")
    assert "simulating small" in terminal and CLEAR in terminal
    piped = subprocess.run([*GOODPUT, "simulate", "--scenario", str(SMALL), "--out", str(tmp_path / "b")],
                           cwd=REPO, env=_env(), capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stdout == out.replace(str(tmp_path / "a"), str(tmp_path / "b"))
    # piped: no live line; a simulation longer than 2 s says so in one plain line
    assert piped.stderr in ("", "goodput: waiting for simulating small (2s so far)\n"), piped.stderr


def test_demo_backfill_shows_partition_progress_on_a_terminal(small_demo):
    # the session's one small demo (tests/conftest.py), run with stderr on a pty as here
    status, out, terminal = small_demo["status"], small_demo["stdout"], small_demo["terminal"]
    assert status == 0, terminal
    assert "[1/2]  detect 2026-11-30-00:00" in terminal and "folding incidents" in terminal
    # stdout keeps the demo's own lines, whatever the terminal shows
    assert "  [ 1/2] detect 2026-11-30-00:00" in out and "Incidents (" in out and CLEAR not in out


def test_sql_says_it_is_waiting_for_the_lock_on_a_terminal(tmp_path):
    from orchestration.storage.warehouse import WarehouseResource
    from tests.helpers import HOLDER

    with WarehouseResource(path=str(tmp_path / "warehouse.duckdb")).connect():
        pass
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "warehouse.duckdb")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        status, out, terminal = run_on_a_terminal("sql", "--home", str(tmp_path), "--timeout", "2", "SELECT 1")
    finally:
        holder.kill()
        holder.wait()
    assert status == 2 and out == ""
    assert "waiting for a writing run to release the warehouse (up to 2s)" in terminal
    assert "stayed locked by a writing run for 2s" in terminal  # the one-line error, on the same terminal


@pytest.mark.parametrize("command", [["sql", "SELECT 1"], ["report", "llm-small"]])
def test_a_piped_command_waiting_for_the_lock_says_so_in_one_line(tmp_path, command):
    from orchestration.storage.warehouse import WarehouseResource
    from tests.helpers import HOLDER

    with WarehouseResource(path=str(tmp_path / "warehouse.duckdb")).connect():
        pass
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "warehouse.duckdb")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        done = subprocess.run([*GOODPUT, command[0], "--home", str(tmp_path), "--timeout", "3", *command[1:]], cwd=REPO,
                              env=_env(), capture_output=True, text=True, timeout=300)
    finally:
        holder.kill()
        holder.wait()
    waits = [line for line in done.stderr.splitlines() if line.startswith("goodput: waiting for")]
    assert done.returncode == 2 and len(waits) == 1, done.stderr
    assert "write lock" in waits[0] or "release the warehouse" in waits[0]
    assert "stayed locked by a writing run for 3s" in done.stderr
