"""Shared fixtures: a Goodput home with the small simulated scenario, its resources, and a Dagster
instance. Helpers the test modules share live in tests/helpers.py."""

import os
import shutil
from pathlib import Path
from unittest import mock

import pytest

from orchestration.definitions import resources_for
from simulator import load_scenario, simulate
from tests.helpers import SMALL, built_once, check_and_fold, memory_instance, run_with_stderr_on_a_terminal

# One DuckDB thread a query in every process the tests start (unless the caller's environment says otherwise):
# `-n 4` runs four test processes on CI's two cores, and a query spread over both cores competes with the
# others while its threads cost CPU of their own (the suite: 6-17% less CPU, BENCHMARKS.md section 35).
# docs/service.md, "A busy host"; tests/test_duckdb_threads.py sets and unsets it where it tests it.
os.environ.setdefault("GOODPUT_DUCKDB_THREADS", "1")


@pytest.fixture(autouse=True)
def _environment_restored():
    """`goodput` commands called in process (`orchestration.cli.main`) point GOODPUT_HOME and DAGSTER_HOME
    at their home (`use_home`): the environment is put back after each test, so no later test, nor a
    subprocess it starts, runs on an earlier test's home."""
    with mock.patch.dict(os.environ):
        yield


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
def faults_embedded(tmp_path_factory) -> dict:
    """faults.yaml through the embedded stack once per test session, for every xdist worker (tests/helpers.py:
    FAULTS_*): `goodput demo --hours FAULTS_DEMO_HOURS` as a person runs it, its warehouse copied aside
    ("demo": the embedded run tests/distributed/test_distributed_stack.py compares the distributed one with),
    then the same home's hours up to FAULTS_FOLD_HOURS through the real `detect` job in process ("warehouse":
    the findings tests/test_fold_incremental.py folds). Both read-only: copy before writing."""
    import subprocess
    import sys

    from orchestration.definitions import build_definitions
    from orchestration.partitions import hour_keys
    from tests.helpers import FAULTS, FAULTS_DEMO_HOURS, FAULTS_FOLD_HOURS, REPO

    def build(folder: Path) -> None:
        home = folder / "home"
        env = {k: v for k, v in os.environ.items() if k not in ("GOODPUT_HOME", "DAGSTER_HOME")}
        done = subprocess.run([sys.executable, "-m", "orchestration.cli", "demo", "--home", str(home), "--scenario",
                               str(FAULTS), "--hours", str(FAULTS_DEMO_HOURS)], capture_output=True, text=True, cwd=REPO,
                              env={**env, "PYTHONPATH": str(REPO)})
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        for suffix in ("", ".wal"):   # closed: no WAL is left, but copy one if it were
            if (home / f"warehouse.duckdb{suffix}").exists():
                shutil.copy(home / f"warehouse.duckdb{suffix}", folder / f"demo.duckdb{suffix}")
        scenario = load_scenario(FAULTS)
        detect = build_definitions(home).resolve_job_def("detect")
        quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
        with memory_instance() as instance:
            for key in hour_keys(scenario.start, scenario.end)[FAULTS_DEMO_HOURS:FAULTS_FOLD_HOURS]:
                assert detect.execute_in_process(partition_key=key, instance=instance, run_config=quiet).success

    folder = built_once(tmp_path_factory, "faults-embedded", build)
    return {"demo": folder / "demo.duckdb", "warehouse": folder / "home" / "warehouse.duckdb"}


@pytest.fixture(scope="session")
def quality_first_hours(tmp_path_factory) -> dict:
    """quality.yaml through the real `detect` job once per test session, for every xdist worker (tests/test_drift.py
    and tests/test_triage_e2e.py land on different workers under --dist loadfile): hours 00-02 (chat-base's
    reference is 00:10-01:10, input drift from 01:15), a copy of the home taken then ("snapshot") with those
    runs' check evaluations and materializations ("results": tests/helpers.py RecordedRun), then hours 03-06
    and the incidents fold on the same home and instance, in order, as one run of the schedule would ("home").
    {"snapshot", "results", "home"}, all read-only: copy before writing."""
    import dagster as dg

    from assets.incidents import incidents
    from assets.ingest import ingest_assets
    from tests.helpers import QUALITY, RecordedRun, copy_home, run_detect

    def build(folder: Path) -> None:
        home = folder / "home"
        simulate(load_scenario(QUALITY), home)
        with memory_instance() as instance:
            for hour in range(7):
                result = run_detect(home, f"2026-11-30-{hour:02d}:00", instance)
                if hour < 3:
                    RecordedRun.record(result, folder / f"hour-{hour:02d}.json")
                if hour == 2:
                    copy_home(home, folder / "snapshot")
            assert dg.materialize([incidents, *ingest_assets], selection=[incidents.key], resources=resources_for(home),
                                  instance=instance).success

    folder = built_once(tmp_path_factory, "quality-first-hours", build)
    return {"snapshot": folder / "snapshot", "home": folder / "home",
            "results": {hour: RecordedRun(folder / f"hour-{hour:02d}.json") for hour in range(3)}}


@pytest.fixture(scope="session")
def small_folded(tmp_path_factory) -> Path:
    """The small scenario's two hours through ingest, the training baselines and every signal's check (the
    assets materialized, not the detect job), then the incidents fold, once per test session for every xdist
    worker (tests/test_board.py and tests/test_report.py land on different workers). Read-only: copy it
    (tests/helpers.py: copy_home) to write."""
    def build(folder: Path) -> None:
        simulate(load_scenario(SMALL), folder / "home")
        with memory_instance() as instance:
            check_and_fold(resources_for(folder / "home"), instance, ("2026-11-30-00:00", "2026-11-30-01:00"))

    return built_once(tmp_path_factory, "small-folded", build) / "home"


@pytest.fixture(scope="session")
def shards_unsharded(tmp_path_factory) -> Path:
    """tests/fixtures/shards.yaml detected hour by hour and folded in one unsharded home, once per test session
    for every xdist worker: the reference tests/test_shards.py's embedded shards must equal. Read-only: copy to
    write."""
    from tests.helpers import SHARDS, SHARDS_HOURS, detect_and_fold

    def build(folder: Path) -> None:
        simulate(load_scenario(SHARDS), folder / "home")
        detect_and_fold(folder / "home", SHARDS_HOURS)

    return built_once(tmp_path_factory, "shards-unsharded", build) / "home"


# `slow` (over ~20 s of CPU, measured with --durations=0 under `.ci/run`): every test that uses one of these
# scenario-sized fixtures (whichever runs first builds it), and these tests by node id prefix.
SLOW_FIXTURES = {"small_demo", "small_folded", "quality_first_hours", "faults_embedded", "inference", "processed", "folded", "serving_home",
                 "shapes", "oncall", "ui", "embedded", "distributed", "sharded_homes",
                 "shards_unsharded"}
SLOW_TESTS = (
    "tests/test_replay.py::test_replay_under_the_real_sensor", "tests/test_replay.py::test_replay_grows_checkpoints",
    "tests/test_end_to_end.py::test_small_scenario_yields", "tests/test_end_to_end.py::test_check_reports_evidence",
    "tests/test_end_to_end.py::test_alert_sensor_delivers_once", "tests/test_baselines.py::test_a_partition_reads",
    "tests/test_baselines.py::test_run_minutes_follow", "tests/test_quality_signals.py::test_a_healthy_promotion",
    "tests/test_bench_quick.py::test_scale_quick", "tests/test_bench_quick.py::test_detection_quick",
    "tests/test_bench_quick.py::test_backfill_quick",
    "tests/test_real_gpu_capture.py", "tests/test_wheel.py", "tests/test_serving_signals.py::test_a_full_day",
    "tests/fault_injection/test_sigkill.py", "tests/fault_injection/test_drift_determinism.py",
    "tests/test_checks_windowed.py::test_live_windows_judge",
)


# The heaviest files, heaviest first (wall seconds of setup + call under `.ci/run`, measured per test on
# 2 cores; BENCHMARKS.md section 33): CI hands whole files to the xdist workers in this order
# (`--no-loadscope-reorder`: xdist would otherwise start the files with the most tests first, and the
# one-test files that run longest, the daemon's above all, would end alone on one worker). Longest first keeps
# the workers' ends close. test_fold_incremental.py builds the session's faults_embedded that
# test_distributed_stack.py reads only after its own distributed run.
HEAVIEST_FIRST = (
    "tests/test_daemon_restart.py",                  # 208 s, a quarter of it CPU: the daemon's sensor intervals
    "tests/test_fold_incremental.py",                # 87
    "tests/distributed/test_distributed_stack.py",   # 114
    "tests/test_replay.py",                          # 84
    "tests/test_board_browser.py",                   # 71
    "tests/test_serving_signals.py",                 # 67
    "tests/test_drift.py",                           # 60
    "tests/test_end_to_end.py",                      # 48
    "tests/test_ui_browser.py",                      # 46
    "tests/test_bench_quick.py",                     # 45
    "tests/test_progress.py",                        # 40
    "tests/test_alerting.py", "tests/test_simulator.py", "tests/test_wheel.py", "tests/test_cli.py",   # ~30
    "tests/test_detectors_training.py", "tests/test_baselines.py", "tests/fault_injection/test_sigkill.py",
    "tests/test_checkpoint_signals.py", "tests/test_checks_windowed.py",   # ~26
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or item.nodeid.startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)

    def path(item) -> str:
        return item.nodeid.split("::", 1)[0]

    rank: dict[str, tuple[int, int]] = {}   # a file's place: listed, then holding a slow test, then the rest
    for item in items:
        here = (0, HEAVIEST_FIRST.index(path(item))) if path(item) in HEAVIEST_FIRST else (
            1 if item.get_closest_marker("slow") else 2, 0)
        rank[path(item)] = min(rank.get(path(item), here), here)
    items.sort(key=lambda item: rank[path(item)])   # stable: files and their tests keep their order otherwise
