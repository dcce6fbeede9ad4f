"""Shared fixtures: a Goodput home with the small simulated scenario, and its resources."""

from pathlib import Path

import dagster as dg
import pytest

from orchestration.definitions import resources_for
from simulator import load_scenario, simulate

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "simulator" / "scenarios" / "small.yaml"


@pytest.fixture
def small_home(tmp_path) -> Path:
    """A fresh home holding the small scenario's raw zone (1 host x 2 GPUs, 2 h, one 20-min hang)."""
    simulate(load_scenario(SMALL), tmp_path)
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
