"""Issue 15: a daemon killed and restarted mid-stream loses and duplicates nothing.

The real `dagster-daemon` (subprocess, its own process group: its code server and the run workers
it launches die with it) runs the home's Definitions on the small scenario (2 hours, 1 host x 2 GPUs,
a 20-minute hang), shifted to the hours around the latest past midnight (two day folders; every hour
a past partition, at any time of day). Raw data arrives in three stages, each an append: A = the
first half of hour 0's lines; B = the rest of hour 0 and half of hour 1; C = the rest. The daemon is
SIGKILLed (whole group) as soon as the run storage shows a detect run of stage A started (or already
done), and stage B lands in that moment; a new daemon then drains B and C. Asserted from the run
storage, the warehouse and the alert journal:

- every hour's final data version has exactly one successful detect run; no (hour, version) has
  two, and no run key is used twice (a killed run is failed and its hour redone under a new key);
- the incidents equal those of an uninterrupted, in-process run over the final raw zone;
- every alert was delivered once (no (sink, key) delivered twice) and nothing is left pending
  (grouping may carry a member's transition inside its group's notification, docs/alerting.md).

Every wait polls observable state (run records, the journal); the bound only guards against a hang.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.tags import RUN_KEY_TAG

from orchestration.alerting.resource import alerting_resource_for
from orchestration.config.home import dagster_home, ensure_instance, raw_root
from orchestration.sensors.alerts import incident_transitions
from orchestration.sensors.raw import IN_FLIGHT, PARTITION_TAG
from orchestration.storage import raw_watch
from orchestration.storage.raw_zone import VERSION_TAG
from orchestration.storage.warehouse import WarehouseBusy, warehouse_for
from simulator import load_scenario, simulate
from tests.helpers import memory_instance

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "simulator" / "scenarios" / "small.yaml"
BOUND_S = 1200.0
"""Only against a hang: every wait ends on observable state long before this."""
pytestmark = pytest.mark.fault_injection   # a kill: `pytest -m fault_injection` runs it with the SIGKILL suite

INCIDENT_COLUMNS = "incident_id, signal, tier, status, onset, opened, last_seen, resolved, entity_type, entity_id, run_id"


def shifted_scenario(folder: Path) -> Path:
    """small.yaml's two hours on either side of the latest midnight that is at least an hour past: recent days,
    partitions in the past, whatever the time of day. The hours are in two day folders (`<day>/23`, `<day+1>/00`),
    which stage A and B must land in time order, not in the order of the folders' hour names."""
    midnight = (datetime.now(timezone.utc) - timedelta(hours=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    start = midnight - timedelta(hours=1)
    text = SMALL.read_text().replace('start: "2026-11-30T00:00:00Z"', f'start: "{start:%Y-%m-%dT%H:%M:%SZ}"')
    assert start.strftime("%Y-%m-%dT%H") in text
    path = folder / "small_now.yaml"
    path.write_text(text)
    return path


def land(full: Path, home: Path, fractions: tuple[float, float]) -> None:
    """Append to `home`'s raw zone up to `fractions[i]` of the lines of hour i of `full`'s (never shrinks)."""
    hours = sorted({(p.parent.parent.name, p.parent.name) for p in raw_root(full).rglob("*.jsonl")})   # (day, hour)
    for source in sorted(raw_root(full).rglob("*.jsonl")):
        lines = source.read_bytes().splitlines(keepends=True)
        hour = hours.index((source.parent.parent.name, source.parent.name))
        data = b"".join(lines[: int(len(lines) * fractions[hour])])
        target = raw_root(home) / source.relative_to(raw_root(full))
        have = target.stat().st_size if target.exists() else 0
        if len(data) > have:
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "ab") as out:
                out.write(data[have:])


def versions(home: Path) -> dict[str, str]:
    """hour partition -> the data version the raw-zone sensor tags its run with."""
    root = raw_root(home)
    return {k: raw_watch.version(f) for k, f in raw_watch.by_hour(raw_watch.scan_days(root, raw_watch.day_folders(root))).items()}


def start_daemon(home: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GOODPUT_HOME": str(home), "DAGSTER_HOME": str(dagster_home(home))}
    with open(log, "a") as out:
        return subprocess.Popen([sys.executable, "-m", "dagster._daemon", "run", "-w", str(REPO / "workspace.yaml")],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def kill_group(daemon: subprocess.Popen) -> None:
    try:
        os.killpg(daemon.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    daemon.wait()


def until(what: str, check, daemon: subprocess.Popen, log: Path):
    deadline = time.monotonic() + BOUND_S
    while not (value := check()):
        assert daemon.poll() is None, f"the daemon exited ({daemon.returncode}) before {what}; see {log}"
        assert time.monotonic() < deadline, f"{what}: not reached in {BOUND_S:.0f} s; see {log}"
        time.sleep(1.0)
    return value


def detect_runs(instance, status=None) -> list:
    return [r.dagster_run for r in instance.get_run_records(dg.RunsFilter(job_name="detect"))
            if status is None or r.dagster_run.status == status]


def delivered(home: Path) -> list[tuple[str, str]]:
    journal = home / "alerts" / "attempts.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()] if journal.exists() else []
    return [(r["sink"], r["dedup_key"]) for r in records if r.get("outcome") == "delivered"]


def pending(home: Path) -> list:
    """What the alert pass would still send (the sensor's own test: every active sink finished)."""
    alerting = alerting_resource_for(home)
    return alerting.pending(incident_transitions(warehouse_for(home)) + alerting.monitor_alerts())


def incidents(home: Path) -> list[tuple]:
    with warehouse_for(home).connect(read_only=True, wait_seconds=60) as con:
        return con.execute(f"SELECT {INCIDENT_COLUMNS} FROM incidents ORDER BY incident_id").fetchall()


def drained(home: Path, instance) -> bool:
    """Every hour's current data detected, the fold after it done, nothing in flight, no alert pending."""
    runs = [r.dagster_run for r in instance.get_run_records()]
    if any(r.status in IN_FLIGHT for r in runs):
        return False
    done = {(r.tags.get(PARTITION_TAG), r.tags.get(VERSION_TAG)) for r in runs
            if r.job_name == "detect" and r.status == dg.DagsterRunStatus.SUCCESS}
    if not set(versions(home).items()) <= done:
        return False
    records = {r.dagster_run.run_id: r for r in instance.get_run_records()}
    last_detect = max(records[r.run_id].end_time for r in runs if r.job_name == "detect" and r.status == dg.DagsterRunStatus.SUCCESS)
    if not any(r.job_name == "fold_incidents" and r.status == dg.DagsterRunStatus.SUCCESS
               and records[r.run_id].start_time >= last_detect for r in runs):
        return False
    try:
        return not pending(home)
    except WarehouseBusy:   # a run is writing: ask again
        return False


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("daemon-full")
    simulate(load_scenario(shifted_scenario(folder)), folder)
    return folder


@pytest.fixture(scope="module")
def reference(full, tmp_path_factory) -> list[tuple]:
    """The incidents of an uninterrupted run: each hour's final data detected once, then one fold, in process."""
    from orchestration.definitions import build_definitions

    home = tmp_path_factory.mktemp("daemon-reference")
    shutil.copytree(raw_root(full), raw_root(home))
    defs = build_definitions(home)
    with memory_instance() as instance:
        for hour in sorted(versions(home)):
            assert defs.resolve_job_def("detect").execute_in_process(partition_key=hour, instance=instance).success
        assert defs.resolve_job_def("fold_incidents").execute_in_process(instance=instance).success
    return incidents(home)


def test_a_daemon_killed_mid_stream_loses_and_duplicates_nothing(full, reference):
    ram = Path("/dev/shm")   # the instance fsyncs every event to SQLite: a RAM disk where there is one
    home = Path(tempfile.mkdtemp(prefix="goodput-daemon-", dir=ram if ram.is_dir() else None)) / "home"
    log = home.parent / "daemon.log"
    ensure_instance(home)
    land(full, home, (0.5, 0.0))
    instance = dg.DagsterInstance.from_config(str(dagster_home(home)))
    daemon = start_daemon(home, log)
    try:
        until("a detect run of stage A started", lambda: [r for r in detect_runs(instance) if r.status in (
            dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.SUCCESS)], daemon, log)
        land(full, home, (1.0, 0.5))   # new data lands while the daemon dies
        kill_group(daemon)
        daemon = start_daemon(home, log)
        until("stage B drained", lambda: drained(home, instance), daemon, log)
        land(full, home, (1.0, 1.0))
        until("stage C drained", lambda: drained(home, instance), daemon, log)
    finally:
        kill_group(daemon)

    final = versions(home)
    assert len(final) == 2
    succeeded = [(r.tags[PARTITION_TAG], r.tags[VERSION_TAG]) for r in detect_runs(instance, dg.DagsterRunStatus.SUCCESS)]
    assert len(succeeded) == len(set(succeeded)), f"an (hour, data version) detected twice: {sorted(succeeded)}"
    assert set(final.items()) <= set(succeeded), "an hour's final data was never detected"
    keys = [r.dagster_run.tags[RUN_KEY_TAG] for r in instance.get_run_records() if RUN_KEY_TAG in r.dagster_run.tags]
    assert len(keys) == len(set(keys)), f"a run key used twice: {sorted(keys)}"
    assert incidents(home) == reference
    sent = delivered(home)
    assert len(sent) == len(set(sent)), f"an alert delivered twice: {sorted(sent)}"
    assert any(key.endswith(":opened") and key.startswith("inc-") for _sink, key in sent)   # the hang was paged
    assert pending(home) == []
    shutil.rmtree(home.parent, ignore_errors=True)
