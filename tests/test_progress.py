"""Progress on a terminal, silence elsewhere: the Ticker, and `goodput simulate` / `goodput demo` under a real pty."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

from orchestration.progress import CLEAR, Ticker
from tests.conftest import run_with_stderr_on_a_terminal

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "simulator" / "scenarios" / "small.yaml"
GOODPUT = [sys.executable, "-m", "orchestration.cli"]


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("GOODPUT_HOME", "DAGSTER_HOME")}


def run_on_a_terminal(*args) -> tuple[int, str, str]:
    """Run goodput with stderr on a pseudo-terminal (stdout piped); returns (status, stdout, terminal)."""
    return run_with_stderr_on_a_terminal([*GOODPUT, *args], _env())


def test_ticker_is_silent_off_a_terminal():
    stream = io.StringIO()
    with Ticker(total=3, stream=stream, interval=0.01) as ticker:
        ticker.update("working")
        time.sleep(0.05)
        ticker.step()
    assert stream.getvalue() == ""


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
    assert piped.returncode == 0 and piped.stderr == "" and piped.stdout == out.replace(str(tmp_path / "a"), str(tmp_path / "b"))


def test_demo_backfill_shows_partition_progress_on_a_terminal(tmp_path):
    status, out, terminal = run_on_a_terminal("demo", "--home", str(tmp_path / "home"), "--scenario", str(SMALL))
    assert status == 0, terminal
    assert "[1/2]  detect 2026-11-30-00:00" in terminal and "folding incidents" in terminal
    # stdout keeps the demo's own lines, whatever the terminal shows
    assert "  [ 1/2] detect 2026-11-30-00:00" in out and "Incidents (" in out and CLEAR not in out


def test_sql_says_it_is_waiting_for_the_lock_on_a_terminal(tmp_path):
    from orchestration.warehouse import WarehouseResource
    from tests.test_sql_cli import HOLDER

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
