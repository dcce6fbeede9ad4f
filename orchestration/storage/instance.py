"""The home's Dagster instance: a dead run never keeps the `warehouse` pool slot, a damaged instance is one line.

Dagster frees a step's pool slot when the step ends. A run killed while a step holds the slot
(SIGKILL, the OOM killer, a lost machine) never ends its step, so the slot stays claimed by a dead
run and every later run waits on it without an error. Two things free it:

- Dagster's daemon (`goodput ui` runs one): `run_monitoring.free_slots_after_run_end_seconds` in
  the home's dagster.yaml frees the slots of a run some seconds after the run is marked finished
  (the run worker that dies under the daemon is marked FAILURE by run monitoring).
- Goodput's own check, `free_dead_run_slots`, at the start of every run (the warehouse resource's
  set-up) and in the staleness sensor: a slot claimed by a run that has finished, or whose
  orchestrating process (the one that stored its RUN_START) is gone (a run executed in a process of
  its own, which nobody marks failed), is freed, and a dead run still marked as running is marked
  FAILURE. Each freed slot is one log line.

Whether a process is alive is asked of this machine's /proc only for an instance whose storage is a
local SQLite file (the embedded default: every run of that instance runs on this machine); on a
shared instance (PostgreSQL) run monitoring is what marks dead runs, and the finished-run rule frees
their slots.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from orchestration.config.home import InstanceDamaged  # noqa: F401  (re-exported; the CLI imports it from there)

log = logging.getLogger(__name__)

FINISHED_STATUSES = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
"""A run in one of these has ended (Dagster's own list, from its public status enum)."""

POOL = "warehouse"
"""The Dagster pool every step that writes the warehouse runs in (DuckDB: one writer per file, limit 1)."""


@dataclass(frozen=True)
class FreedSlot:
    run_id: str
    step_key: str | None
    reason: str

    def line(self, pool: str = POOL) -> str:
        step = f" (step {self.step_key})" if self.step_key else ""
        return f"freed the `{pool}` pool slot of run {self.run_id[:8]}{step}: {self.reason}"


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def process_started(pid: int) -> float | None:
    """Epoch seconds when process `pid` started, or None when no such process runs (a zombie is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = stat[stat.rfind(")") + 2:].split()   # the command name may hold spaces: split after it
    if not fields or fields[0] == "Z":
        return None   # a zombie: dead, waiting for its parent to read its status
    boot = _boot_time()
    if boot is None or len(fields) < 20:
        return 0.0   # alive, start unknown
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def process_alive(pid: int, seen_at: float) -> bool:
    """Whether the process that wrote an event at `seen_at` (epoch s) as `pid` still runs: a process
    under that id that started after the event is another one (the id was reused)."""
    started = process_started(pid)
    return started is not None and started <= seen_at + 1.0   # /proc's start time: clock ticks (10 ms)


def _local_storage(instance: dg.DagsterInstance) -> bool:
    from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage

    return isinstance(instance.run_storage, SqliteRunStorage)


def _run_process(instance: dg.DagsterInstance, run_id: str) -> tuple[int, float] | None:
    """(pid, time) of the process orchestrating the run: the one that stored its newest RUN_START (or
    RUN_RESUMED). That process claims the slots and frees them (a step subprocess of the multiprocess
    executor that dies is reported by it), so the slots die with it, not with a step's process."""
    entries = instance.all_logs(run_id, of_type={dg.DagsterEventType.RUN_START, dg.DagsterEventType.RUN_RESUMED})
    started = [(e.dagster_event.pid, e.timestamp) for e in entries if e.dagster_event is not None and e.dagster_event.pid]
    return started[-1] if started else None


def free_dead_run_slots(instance: dg.DagsterInstance | None, pool: str = POOL) -> list[FreedSlot]:
    """Free the pool slots (and queued claims) of runs that have finished or whose process is gone."""
    if instance is None or not instance.event_log_storage.supports_global_concurrency_limits:
        return []
    info = instance.event_log_storage.get_concurrency_info(pool)
    holders: dict[str, str | None] = {slot.run_id: slot.step_key for slot in info.claimed_slots}
    for pending in info.pending_steps:
        holders.setdefault(pending.run_id, None)
    local = _local_storage(instance)
    freed = []
    for run_id, step_key in holders.items():
        record = instance.get_run_record_by_id(run_id)
        if record is None:
            reason = "the run no longer exists"
        elif record.dagster_run.status in FINISHED_STATUSES:
            reason = f"the run ended ({record.dagster_run.status.value})"
        elif not local:
            continue
        else:
            process = _run_process(instance, run_id)
            if process is None or process_alive(*process):
                continue
            reason = f"its process {process[0]} is gone (killed?); the run is marked failed"
            instance.report_run_failed(record.dagster_run, f"Goodput: the run's process {process[0]} is gone; "
                                                           f"its `{pool}` pool slot was freed")
        instance.event_log_storage.free_concurrency_slots_for_run(run_id)
        slot = FreedSlot(run_id, step_key, reason)
        log.warning(slot.line(pool))
        freed.append(slot)
    return freed


def open_instance() -> dg.DagsterInstance:
    """The instance of $DAGSTER_HOME, read once: a damaged database is one line naming it and the way out."""
    home = os.environ.get("DAGSTER_HOME", "$DAGSTER_HOME")
    try:
        instance = dg.DagsterInstance.get()
        instance.get_run_records(limit=1)
        instance.event_log_storage.get_concurrency_info(POOL)
    except Exception as error:   # sqlite3 / SQLAlchemy / schema errors of every kind: all mean "unreadable"
        text = " ".join(str(error).split())[:200]
        raise InstanceDamaged(
            f"the Dagster instance in {home} is damaged ({text}): move that folder aside and run again; Goodput "
            "writes a fresh one (run history is lost; the warehouse and the raw zone are untouched)") from None
    return instance


def fail_dead_runs(instance: dg.DagsterInstance | None) -> list[str]:
    """Mark failed each run still STARTED whose orchestrating process is gone (local storage only:
    a run worker killed with the daemon that launched it holds no pool slot between steps, and
    Dagster's run monitoring cannot check the default launcher's workers). One line per run."""
    if instance is None or not _local_storage(instance):
        return []
    lines = []
    for record in instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]), limit=100):
        process = _run_process(instance, record.dagster_run.run_id)
        if process is None or process_alive(*process):
            continue
        instance.report_run_failed(record.dagster_run, f"Goodput: the run's process {process[0]} is gone (killed?)")
        instance.event_log_storage.free_concurrency_slots_for_run(record.dagster_run.run_id)
        lines.append(f"marked run {record.dagster_run.run_id[:8]} failed: its process {process[0]} is gone")
    for line in lines:
        log.warning(line)
    return lines
