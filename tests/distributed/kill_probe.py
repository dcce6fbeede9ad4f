"""Imported by a Celery worker at start (`goodput demo --worker-import tests.distributed.kill_probe`):
the first worker process to reach the end of a warehouse transaction's block, its writes done and not
yet committed, SIGKILLs itself there, once (the marker file `GOODPUT_FI_KILL_MARKER` says who died).
A moment the step itself reaches, never a timer: the kill lands mid-step every time."""

import contextlib
import os
import signal

import orchestration.warehouse as warehouse

MARKER = os.environ.get("GOODPUT_FI_KILL_MARKER")
_transaction = warehouse.transaction


@contextlib.contextmanager
def _dying_transaction(con, **frames):
    with _transaction(con, **frames) as inner:
        yield inner
        try:
            fd = os.open(MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, f"{os.getpid()}\n".encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


if MARKER:   # before the assets import it: they bind `transaction` when the first step loads them
    warehouse.transaction = _dying_transaction
