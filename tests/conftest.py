"""Shared fixtures: a Goodput home with the small simulated scenario, its resources, and a Dagster
instance. Helpers the test modules share live in tests/helpers.py."""

import shutil
from pathlib import Path

import pytest

from orchestration.definitions import resources_for
from simulator import load_scenario, simulate
from tests.helpers import SMALL, built_once, memory_instance, run_with_stderr_on_a_terminal


@pytest.fixture(scope="session")
def small_raw_zone(tmp_path_factory) -> Path:
    """The small scenario simulated once per session (the simulator is deterministic): a template."""
    template = tmp_path_factory.mktemp("small-template")
    simulate(load_scenario(SMALL), template)
    return template


@pytest.fixture
def small_home(tmp_path, small_raw_zone) -> Path:
    """A fresh home holding the small scenario's raw zone (1 host x 2 GPUs, 2 h, one 20-min hang)."""
    shutil.copytree(small_raw_zone, tmp_path, dirs_exist_ok=True, symlinks=True)
    return tmp_path


@pytest.fixture
def resources(small_home):
    return resources_for(small_home)


@pytest.fixture
def instance():
    """A fresh in-memory Dagster instance per test (tests/helpers.py: memory_instance)."""
    with memory_instance() as inst:
        yield inst


@pytest.fixture(scope="session")
def small_demo(tmp_path_factory) -> dict:
    """`goodput demo` on the small scenario, run once per test session for every xdist worker (as a
    person runs it: stderr on a terminal, stdout piped): {"status", "stdout", "terminal", "home"}.
    The home is shared: copy it (tests/helpers.py: copy_home) before running anything that writes to it."""
    import os
    import sys

    def build(folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("GOODPUT_HOME", "DAGSTER_HOME")}
        status, out, terminal = run_with_stderr_on_a_terminal(
            [sys.executable, "-m", "orchestration.cli", "demo", "--home", str(folder / "home"), "--scenario", str(SMALL)], env)
        (folder / "status").write_text(str(status))
        (folder / "stdout").write_text(out)
        (folder / "terminal").write_text(terminal)

    folder = built_once(tmp_path_factory, "small-demo", build)
    return {"status": int((folder / "status").read_text()), "stdout": (folder / "stdout").read_text(),
            "terminal": (folder / "terminal").read_text(), "home": folder / "home"}



@pytest.fixture(scope="session")
def quality_first_hours(tmp_path_factory):
    """quality.yaml through the real `detect` job, hours 00-02 (chat-base's reference is 00:10-01:10,
    input drift from 01:15), once per worker for tests/test_drift.py and tests/test_triage_e2e.py:
    {"home", "snapshot", "results", "instance"}. "snapshot" is a copy
    of the home after hour 02, never written again; "home" and "instance" go on to later hours
    (test_triage_e2e), in order, as one run of the schedule would."""
    from tests.helpers import QUALITY, copy_home, run_detect

    home = tmp_path_factory.mktemp("quality") / "home"
    simulate(load_scenario(QUALITY), home)
    with memory_instance() as instance:
        results = {hour: run_detect(home, f"2026-11-30-{hour:02d}:00", instance) for hour in range(3)}
        snapshot = copy_home(home, tmp_path_factory.mktemp("quality-snapshot") / "home")
        yield {"home": home, "snapshot": snapshot, "results": results, "instance": instance}


# `slow` (over ~20 s of CPU, measured with --durations=0 under `.ci/run`): every test that uses one of these
# scenario-sized fixtures (whichever runs first builds it), and these tests by node id prefix.
SLOW_FIXTURES = {"small_demo", "quality_first_hours", "detected", "inference", "processed", "folded", "serving_home",
                 "shapes", "oncall", "ui", "embedded", "distributed"}
SLOW_TESTS = (
    "tests/test_replay.py::test_replay_under_the_real_sensor", "tests/test_replay.py::test_replay_grows_checkpoints",
    "tests/test_end_to_end.py::test_small_scenario_yields", "tests/test_end_to_end.py::test_check_reports_evidence",
    "tests/test_end_to_end.py::test_alert_sensor_delivers_once", "tests/test_baselines.py::test_a_partition_reads",
    "tests/test_baselines.py::test_run_minutes_follow", "tests/test_quality_signals.py::test_a_healthy_promotion",
    "tests/test_bench_quick.py::test_scale_quick", "tests/test_bench_quick.py::test_detection_quick",
    "tests/test_bench_quick.py::test_tick_quick", "tests/test_bench_quick.py::test_backfill_quick",
    "tests/test_real_gpu_capture.py", "tests/test_wheel.py", "tests/test_serving_signals.py::test_a_full_day",
    "tests/fault_injection/test_sigkill.py", "tests/fault_injection/test_drift_determinism.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or item.nodeid.startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
