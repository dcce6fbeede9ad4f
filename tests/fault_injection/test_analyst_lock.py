"""Issue 16 item 5: an analyst's session holding the warehouse does not fail scheduled runs: the writing
step waits without the pool slot, the message names the holder, and the step retries until it succeeds.

The holder is a real second process that opens the file and holds it until the test releases it; the
run is stopped at the exact moment it first waits for the step's retry (no timing)."""

import signal
import subprocess
import sys

import dagster as dg

from orchestration.cli import main
from orchestration.config.home import warehouse_path
from tests.fault_injection.conftest import PARTITION, new_home
from tests.fault_injection.harness import fork_run, instance_of, materialize, materialize_now, step_messages

# Released on a signal, not on its stdin closing: the forked run inherits the pipes' ends.
HOLD = """import duckdb, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
print("holding", flush=True)
signal.sigwait({signal.SIGUSR1})   # until the test says
con.close()
"""


def hold(path, mode: str) -> subprocess.Popen:
    script = path.parent / "analyst_session.py"   # its name is in the holder's command line
    script.write_text(HOLD)
    holder = subprocess.Popen([sys.executable, str(script), str(path), mode], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "holding"
    return holder


def release(holder: subprocess.Popen) -> None:
    holder.send_signal(signal.SIGUSR1)
    assert holder.wait() == 0


def test_a_read_only_session_makes_the_step_wait_without_the_slot_and_retry(simulated, scratch):
    home = new_home(simulated, scratch / "analyst-lock")
    assert materialize_now(home, ["gpu_samples"], PARTITION).success   # the warehouse exists
    holder = hold(warehouse_path(home), "ro")
    try:
        child = fork_run(home, materialize(home, ["training_steps"], PARTITION, lock_wait_seconds=0.2,
                                           lock_retry_seconds=0.2, lock_retries=1000), at_retry_wait=True)
        assert child.stopped, f"the run ended (exit {child.exit_code}) instead of waiting for a retry"
        instance = instance_of(home)
        (run,) = [r.dagster_run for r in instance.get_run_records()]
        assert run.status == dg.DagsterRunStatus.STARTED          # alive, not failed
        assert instance.event_log_storage.get_concurrency_info("warehouse").claimed_slots == []   # slot given back
        messages = step_messages(instance, run.run_id, "STEP_UP_FOR_RETRY")   # one or more tries so far
        message = messages[-1]
        assert f"PID {holder.pid}" in message and "analyst_session.py" in message   # names the real holder
        assert "a Goodput run is writing" not in message          # the old text blamed the wrong holder
    finally:
        release(holder)
    assert child.resume() == 0
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.SUCCESS


def test_goodput_sql_names_the_process_that_holds_the_write_lock(simulated, scratch, capsys, monkeypatch):
    home = new_home(simulated, scratch / "writer-lock")
    monkeypatch.setenv("GOODPUT_HOME", str(home))          # `goodput sql` points both at the home: restored after
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    assert materialize_now(home, ["gpu_samples"], PARTITION).success
    holder = hold(warehouse_path(home), "rw")
    capsys.readouterr()   # the set-up run's log
    try:
        assert main(["sql", "--home", str(home), "--timeout", "0", "SELECT 1"]) == 2
    finally:
        release(holder)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"PID {holder.pid}" in err and str(warehouse_path(home)) in err
