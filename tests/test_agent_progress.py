"""Progress for slow start-ups: `goodput agent`'s per-GPU discovery and the bench scripts draw a status
line on a terminal and stay silent when stderr is not one."""

import io
import os
import subprocess
import sys
from pathlib import Path

from orchestration.commands.agent import _discovery
from orchestration.progress import Ticker
from sources.nvml_agent import NvmlAgent
from tests.helpers import FakeGpu, make_fake_nvml, run_with_stderr_on_a_terminal

REPO = Path(__file__).resolve().parent.parent
AGENT_BENCH = [sys.executable, "bench/agent_cpu.py", "--samples", "5", "--gpus", "3"]


def test_agent_reports_each_gpu_as_it_opens_them():
    seen = []
    agent = NvmlAgent(make_fake_nvml([FakeGpu(i) for i in range(3)]), host="h")
    agent.open(progress=lambda index, count, what: seen.append((index, count, what)))
    assert seen == [(0, 3, "opening GPU 0"), (1, 3, "opening GPU 1"), (2, 3, "opening GPU 2"),
                    (3, 3, "registering for XID events")]
    agent.close()


def test_agent_discovery_line_counts_gpus_on_a_terminal():
    stream = io.StringIO()
    agent = NvmlAgent(make_fake_nvml([FakeGpu(i) for i in range(4)]), host="h")
    with Ticker(stream=stream, enabled=True, interval=60) as ticker:
        agent.open(progress=lambda index, count, what: _discovery(ticker, index, count, what))
    agent.close()
    drawn = stream.getvalue()
    assert "[1/4]  agent: opening GPU 0" in drawn and "[4/4]  agent: opening GPU 3" in drawn
    assert "agent: registering for XID events" in drawn


def test_bench_script_is_silent_off_a_terminal_and_draws_on_one():
    env = {k: v for k, v in os.environ.items() if k != "GOODPUT_HOME"}
    piped = subprocess.run(AGENT_BENCH, cwd=REPO, env=env, capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == "" and "ms per sample" in piped.stdout

    status, out, seen = run_with_stderr_on_a_terminal(AGENT_BENCH, env, timeout=120)
    assert status == 0 and "ms per sample" in out
    assert "opening GPU 2" in seen
