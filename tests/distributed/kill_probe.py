"""Imported by a Celery worker at start (`goodput demo --worker-import tests.distributed.kill_probe`): two
kills, each at the end of a warehouse transaction's block (the step's writes done, not yet committed),
each once. A moment the step itself reaches, never a timer: every kill lands mid-step.

1. A lost pool process: the first worker process to get there SIGKILLs itself. Its worker's main
   process sees it die and puts the step back on the queue at once (`task_reject_on_worker_lost`).
2. A lost host: the first worker process to get there afterwards, in another step, SIGKILLs its whole
   process group: the worker's main process and its pool processes at once, as a host that powers off.
   Nobody rejects the step; Redis hands it to the other worker once its visibility timeout has passed.
   Each worker leads a process group of its own (orchestration/service/distributed.py: `Workers`); the probe
   checks that its parent leads its group before it signals the group, and kills nothing otherwise.

Each kill is claimed by creating its marker file, `GOODPUT_FI_KILL_MARKER` and that name + ".host", which
holds one JSON object: the run, the step, the Celery task id, the worker's name, its pid and its parent's.
"""

import contextlib
import json
import os
import signal

import orchestration.storage.warehouse as warehouse

MARKER = os.environ.get("GOODPUT_FI_KILL_MARKER")
HOST_MARKER = f"{MARKER}.host"
_transaction = warehouse.transaction


def _running() -> dict | None:
    """The Dagster step (run and step key) and Celery task this worker process is running, or None."""
    from celery import current_task
    from dagster._grpc.types import ExecuteStepArgs
    from dagster._serdes import unpack_value

    packed = (current_task.request.kwargs or {}).get("execute_step_args_packed") if current_task else None
    if packed is None:
        return None
    args = unpack_value(packed, as_type=ExecuteStepArgs)
    return {"run": args.run_id, "step": args.step_keys_to_execute[0], "task": current_task.request.id,
            "worker": current_task.request.hostname, "pid": os.getpid(), "worker_pid": os.getppid()}


def _claim(path: str, record: dict) -> bool:
    """Create `path` holding `record`, whole at once (written aside, then linked); False if it exists."""
    aside = f"{path}.{os.getpid()}"
    with open(aside, "w") as f:
        json.dump(record, f)
    try:
        os.link(aside, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(aside)


def _read(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def _dying_transaction(con, **frames):
    with _transaction(con, **frames) as inner:
        yield inner
        here = _running()
        if here is None:
            return
        if _claim(MARKER, {"kill": "pool process", **here}):
            os.kill(os.getpid(), signal.SIGKILL)
        first = _read(MARKER)
        another_step = (first["run"], first["step"]) != (here["run"], here["step"])
        own_group = os.getpgrp() == os.getppid()   # the worker's main process leads this group: only it and its pool
        if another_step and own_group and _claim(HOST_MARKER, {"kill": "host", **here}):
            os.killpg(os.getpgrp(), signal.SIGKILL)


if MARKER:   # before the assets import it: they bind `transaction` when the first step loads them
    warehouse.transaction = _dying_transaction
