"""Issue 16 item 1: a run killed while it holds the `warehouse` pool slot does not block the next run."""

import os
import time

import dagster as dg

from orchestration.config.home import DAGSTER_YAML
from orchestration.storage.instance import process_alive
from tests.fault_injection.conftest import PARTITION, new_home
from tests.fault_injection.harness import fork_run, instance_of, materialize


def claimed(instance) -> list[str]:
    return [s.run_id for s in instance.event_log_storage.get_concurrency_info("warehouse").claimed_slots]


def test_a_run_sigkilled_while_holding_the_slot_does_not_block_the_next(simulated, scratch):
    home = new_home(simulated, scratch / "dead-slot")
    started = fork_run(home, materialize(home, ["gpu_samples"], PARTITION),
                       when=lambda e: e.dagster_event is not None and e.dagster_event.event_type_value == "STEP_START")
    assert started.stopped
    instance = instance_of(home)
    (dead,) = [r.dagster_run.run_id for r in instance.get_run_records()]
    assert claimed(instance) == [dead]
    started.kill()

    # The failing case: nothing in Dagster ends the killed run or frees its slot (without a daemon);
    # every later run of the pool would wait on it without an error.
    assert claimed(instance) == [dead]
    assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.STARTED

    after = fork_run(home, materialize(home, ["gpu_samples"], PARTITION))
    assert after.exit_code == 0
    assert claimed(instance) == []
    assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE
    (second,) = [r.dagster_run.run_id for r in instance.get_run_records() if r.dagster_run.run_id != dead]
    said = [e.user_message for e in instance.all_logs(second) if "pool slot of run" in (e.user_message or "")]
    assert said and dead[:8] in said[0] and "is gone" in said[0]   # said so in one line, in the next run's log


def test_the_home_instance_frees_finished_runs_slots_under_the_daemon():
    assert "free_slots_after_run_end_seconds: 30" in DAGSTER_YAML and "run_monitoring:\n  enabled: true" in DAGSTER_YAML


def test_a_reused_process_id_is_not_the_dead_run():
    assert process_alive(os.getpid(), time.time())
    assert not process_alive(os.getpid(), 0.0)   # this process started after an event at 1970: another process
    assert not process_alive(2**22 + 12345, time.time())   # above pid_max: no such process
