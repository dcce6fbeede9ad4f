"""Shared fixtures: a Goodput home with the small simulated scenario, and its resources."""

import shutil
from pathlib import Path

import dagster as dg
import pytest

from orchestration.definitions import resources_for
from simulator import load_scenario, simulate

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "simulator" / "scenarios" / "small.yaml"


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
    with dg.instance_for_test() as inst:
        yield inst


def run_detect(home: Path, partition_key: str, instance) -> dg.ExecuteInProcessResult:
    """Run the real `detect` job (ingest, baselines, every signal's check) on one hour of `home`."""
    from orchestration.definitions import build_definitions

    result = build_definitions(home).resolve_job_def("detect").execute_in_process(
        partition_key=partition_key, instance=instance, raise_on_error=True)
    assert result.success
    return result


def check_evaluation(result: dg.ExecuteInProcessResult, name: str):
    """The evaluation of check `name` in a run's result."""
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return evaluation


def run_with_stderr_on_a_terminal(command: list[str], env: dict, timeout: float = 600) -> tuple[int, str, str]:
    """Run `command` with stderr on a pseudo-terminal (stdout piped), as a person at a terminal sees it.
    Returns (exit status, stdout, what the terminal showed)."""
    import os
    import pty
    import select
    import subprocess
    import time

    master, slave = pty.openpty()
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read()
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, out, seen.decode(errors="replace")
