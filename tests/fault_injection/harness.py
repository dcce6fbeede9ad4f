"""The fault-injection harness: runs Goodput's real `detect` job in a real child process and stops it at
an exact moment the run reaches, so that the test can SIGKILL it there (or change the world and let it go on).

A moment is a point the run itself reaches, never a wall-clock delay racing it:
- `after_events=N`: just after the run's N-th event is stored in the Dagster event log;
- `before_commit=K`: inside the K-th warehouse transaction, its writes done and not yet committed;
- `when=predicate(entry)`: just after the first stored event the predicate accepts;
- `at_retry_wait=True`: when the run first waits for a step's retry (the step has given its pool slot back).
The child stops itself there (SIGSTOP); the parent sees it stopped (`waitpid(WUNTRACED)`), so the child
is frozen exactly at that point when the parent acts. The child is forked from the test process, which
has imported Dagster and Goodput already: a kill costs the run, not the imports.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import dagster as dg
import duckdb

# The raw-zone tests' hour (tests/fault_injection/test_raw_zone.py, test_fuzz_raw_zone.py).
HOUR = datetime(2026, 11, 30, 10)
END = datetime(2026, 11, 30, 11)
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


@dataclass
class Child:
    """A forked run: `stopped` when it reached its moment (frozen there), else `exit_code` when it ended."""

    pid: int
    stopped: bool
    exit_code: int | None = None

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        self.stopped, self.exit_code = False, -signal.SIGKILL

    def resume(self) -> int:
        """Let a stopped child go on to its end; returns its exit code (0: the run succeeded)."""
        os.kill(self.pid, signal.SIGCONT)
        return self.wait()

    def wait(self) -> int:
        while True:
            _, status = os.waitpid(self.pid, os.WUNTRACED)
            if os.WIFSTOPPED(status):   # stopped again at a later moment: not asked for here
                os.kill(self.pid, signal.SIGCONT)
                continue
            self.stopped = False
            self.exit_code = os.waitstatus_to_exitcode(status)
            return self.exit_code


def _stop_here() -> None:
    os.kill(os.getpid(), signal.SIGSTOP)


def _install_moments(after_events: int | None, before_commit: int | None,
                     when: Callable[[dg.EventLogEntry], bool] | None, at_retry_wait: bool, counts: dict) -> None:
    """In the child: count events and transactions; stop at the chosen moment."""
    from dagster._core.execution.plan.active import ActiveExecution
    from dagster._core.instance import DagsterInstance

    import orchestration.storage.warehouse as warehouse

    store = DagsterInstance.handle_new_event

    def handle_new_event(self, event, *args, **kwargs):
        result = store(self, event, *args, **kwargs)
        counts["events"] += 1
        if counts["events"] == after_events or (when is not None and not counts.get("fired") and when(event)):
            counts["fired"] = True
            _stop_here()
        return result

    DagsterInstance.handle_new_event = handle_new_event

    if at_retry_wait:
        sleep = ActiveExecution.sleep_til_ready

        def sleep_til_ready(self):
            if not counts.get("waited"):
                counts["waited"] = True
                _stop_here()
            return sleep(self)

        ActiveExecution.sleep_til_ready = sleep_til_ready

    original = warehouse.transaction

    @contextlib.contextmanager
    def transaction(con, **frames):
        with original(con, **frames) as inner:
            yield inner
            counts["commits"] += 1   # the block is done, its COMMIT not yet sent
            if counts["commits"] == before_commit:
                _stop_here()

    for module in list(sys.modules.values()):   # every `from orchestration.storage.warehouse import transaction`
        if getattr(module, "transaction", None) is original:
            module.transaction = transaction


def fork_run(home: Path, run: Callable[[dg.DagsterInstance], bool], *, after_events: int | None = None,
             before_commit: int | None = None, when: Callable[[dg.EventLogEntry], bool] | None = None,
             at_retry_wait: bool = False, counts_file: Path | None = None) -> Child:
    """Fork a child that runs `run(instance)` on `home`'s instance, stopping at the moment asked for."""
    pid = os.fork()
    if pid == 0:   # the child: never returns into pytest
        code = 1
        try:
            os.environ["GOODPUT_HOME"] = str(home)
            os.environ["DAGSTER_HOME"] = str(home / "dagster")
            counts = {"events": 0, "commits": 0}
            _install_moments(after_events, before_commit, when, at_retry_wait, counts)
            with dg.DagsterInstance.get() as instance:
                code = 0 if run(instance) else 1
            if counts_file is not None:
                counts_file.write_text(json.dumps(counts))
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, os.WUNTRACED)
    if os.WIFSTOPPED(status):
        return Child(pid, stopped=True)
    return Child(pid, stopped=False, exit_code=os.waitstatus_to_exitcode(status))


def detect(home: Path, partition: str) -> Callable[[dg.DagsterInstance], bool]:
    """The real `detect` job of `home` on one hour, as `goodput demo` runs it."""
    def run(instance: dg.DagsterInstance) -> bool:
        from orchestration.definitions import build_definitions

        job = build_definitions(home).resolve_job_def("detect")
        return job.execute_in_process(partition_key=partition, instance=instance, run_config=QUIET,
                                      raise_on_error=False).success
    return run


def instance_of(home: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(home / "dagster"))


# Columns that hold the wall clock of the write, not data: they differ between any two runs.
WALL_CLOCK = {"checkpoint_audits": ("audited_at",)}


def tables(path: Path, home: Path | None = None) -> dict[str, list[tuple]]:
    """Every table of a warehouse, its rows as sorted tuples of their text forms (NaN == NaN), the
    home's own path written as `<home>` (so that two homes compare) and wall-clock columns left out."""
    con = duckdb.connect(str(path), read_only=True)
    prefix = str(home) if home is not None else None
    try:
        names = [n for (n,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT temporary ORDER BY table_name").fetchall()]
        out = {}
        for name in names:
            skip = WALL_CLOCK.get(name)
            select = f'SELECT * EXCLUDE ({", ".join(skip)}) FROM "{name}"' if skip else f'SELECT * FROM "{name}"'
            rows = (tuple(repr(v) for v in row) for row in con.execute(select).fetchall())
            if prefix:
                rows = (tuple(v.replace(prefix, "<home>") for v in row) for row in rows)
            out[name] = sorted(rows)
        return out
    finally:
        con.close()


def differences(a: dict[str, list[tuple]], b: dict[str, list[tuple]]) -> list[str]:
    """Tables that differ between two `tables()` snapshots, with their row counts."""
    out = []
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            out.append(f"{name}: {len(a.get(name) or [])} vs {len(b.get(name) or [])} rows")
    return out


def materialize(home: Path, assets: list[str], partition: str, **warehouse_config) -> Callable[[dg.DagsterInstance], bool]:
    """Some assets of `home`'s definitions materialized for one hour (a run with one writing step each),
    with the warehouse resource configured by `warehouse_config` (lock waits, say)."""
    def run(instance: dg.DagsterInstance) -> bool:
        return materialize_now(home, assets, partition, instance, **warehouse_config).success
    return run


def materialize_now(home: Path, assets: list[str], partition: str, instance: dg.DagsterInstance | None = None,
                    **warehouse_config) -> dg.ExecuteInProcessResult:
    from orchestration.config.home import warehouse_path
    from orchestration.definitions import build_definitions, resources_for
    from orchestration.storage.warehouse import WarehouseResource

    keys = {dg.AssetKey(a) for a in assets}
    specs = [a for a in build_definitions(home).assets if keys & set(getattr(a, "keys", ()))]
    resources = {**resources_for(home), "warehouse": WarehouseResource(path=str(warehouse_path(home)), **warehouse_config)}
    return dg.materialize(specs, partition_key=partition, instance=instance, resources=resources,
                          selection=list(keys), raise_on_error=False)


def step_messages(instance: dg.DagsterInstance, run_id: str, event_type: str) -> list[str]:
    """The error messages (with their causes) of a run's events of one type (STEP_FAILURE, STEP_UP_FOR_RETRY...)."""
    out = []
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or event.event_type_value != event_type:
            continue
        error = getattr(event.event_specific_data, "error", None)
        text = []
        while error is not None:
            text.append(error.message)
            error = error.cause
        out.append(" | ".join(text))
    return out


def only_run(instance: dg.DagsterInstance, status=None) -> str:
    records = instance.get_run_records(dg.RunsFilter(statuses=[status]) if status else None)
    return records[0].dagster_run.run_id
