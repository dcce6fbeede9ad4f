"""The fault-injection suite's shared home: the small scenario simulated once per session, on a RAM disk
where there is one (the Dagster instance writes every event to SQLite), with one clean detect run of
PARTITION as the reference every faulted run is compared with."""

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from orchestration.config.home import ensure_instance, warehouse_path
from simulator import load_scenario, simulate
from tests.fault_injection.harness import detect, fork_run, tables

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "simulator" / "scenarios" / "small.yaml"
PARTITION = "2026-11-30-00:00"


def pytest_collection_modifyitems(items):
    for item in items:
        if "fault_injection" in str(item.fspath):
            item.add_marker(pytest.mark.fault_injection)


@pytest.fixture(scope="session")
def scratch():
    ram = Path("/dev/shm")
    root = Path(tempfile.mkdtemp(prefix="goodput-fi-", dir=ram if ram.is_dir() else None))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def simulated(scratch) -> Path:
    """The small scenario's raw zone (and checkpoints), never run: copy it to make a home."""
    raw = scratch / "simulated"
    simulate(load_scenario(SMALL), raw)
    return raw


def new_home(simulated: Path, target: Path) -> Path:
    shutil.copytree(simulated, target)
    ensure_instance(target)
    return target


@pytest.fixture(scope="session")
def clean(simulated, scratch) -> dict:
    """A home after one clean detect run of PARTITION: its tables, and how many events and warehouse
    transactions that run reached (the moments the kills choose from)."""
    home = new_home(simulated, scratch / "clean")
    counts = scratch / "clean-counts.json"
    child = fork_run(home, detect(home, PARTITION), counts_file=counts)
    assert child.exit_code == 0, "the clean detect run failed"
    return {"home": home, "tables": tables(warehouse_path(home), home), **json.loads(counts.read_text())}
