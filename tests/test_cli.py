"""The `goodput` command as a user runs it: the demo end to end, and one-line errors."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from tests.helpers import copy_home

REPO = Path(__file__).resolve().parent.parent
GOODPUT = [sys.executable, "-m", "orchestration.cli"]


def run(*args, home=None, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("GOODPUT_HOME", "DAGSTER_HOME")}
    return subprocess.run([*GOODPUT, *args], cwd=REPO, env=env, capture_output=True, text=True, **kw)


def test_demo_on_the_small_scenario_reports_the_hang_and_keeps_run_history(small_demo, tmp_path):
    # the session's one small demo (tests/conftest.py: a real `goodput demo` subprocess), on a copy of its home
    home = copy_home(small_demo["home"], tmp_path / "home")
    assert small_demo["status"] == 0, small_demo["terminal"]
    out = small_demo["stdout"]
    assert "Run busy but not progressing: run llm-small" in out and "[SEV1]" in out
    score_line = next(line for line in out.splitlines() if line.strip().startswith("hang"))
    assert score_line.split()[1:5] == ["1", "1", "0", "0"]      # injected, detected, missed, false alarms
    assert (home / "alerts" / "alerts.jsonl").exists()
    # the runs are in the home's persistent instance, where `goodput ui` shows them
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        runs = instance.get_runs()
    assert {r.job_name for r in runs} == {"detect", "fold_incidents"} and len(runs) == 3
    # re-running the demo on its own home works (it resets its data); its first hour holds the hang's onset
    again = run("demo", "--home", str(home), "--scenario", str(REPO / "simulator/scenarios/small.yaml"), "--hours", "1")
    assert again.returncode == 0, again.stderr
    # and `goodput score` re-scores the home
    scored = run("score", "--home", str(home))
    assert scored.returncode == 0 and scored.stdout.split("\n")[1].split()[1:5] == ["1", "1", "0", "0"]


def test_demo_refuses_a_home_with_foreign_data(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    done = run("demo", "--home", str(tmp_path))
    assert done.returncode == 2 and "did not write" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert (tmp_path / "precious.txt").exists()


def test_bad_scenario_is_one_line_and_nonzero(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((REPO / "simulator/scenarios/small.yaml").read_text().replace("type: hang", "type: meteor"))
    done = run("simulate", "--scenario", str(bad), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "meteor" in done.stderr and "hang" in done.stderr


def test_score_without_a_warehouse_says_what_to_do(tmp_path):
    (tmp_path / "ground_truth.jsonl").write_text("")
    done = run("score", "--home", str(tmp_path))
    assert done.returncode == 2 and "goodput demo" in done.stderr
