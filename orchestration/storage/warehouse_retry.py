"""Commit conflicts of the lake backend: retried with backoff, counted, never a failed run.

DuckLake writers commit optimistically; when two commit overlapping changes at once, the second gets
a conflict and its transaction is rolled back whole (nothing partial lands). Two ways to try again:

- `retry_conflicts(n)(fn)`: re-run `fn` in place (tenacity: exponential backoff with jitter, at most
  `n` retries) when it raises a conflict; for a writer whose whole transaction is `fn`
  (`WarehouseResource.write`, the migrations, the concurrency test's writers).
- `WarehouseConflict`: a conflict inside a Dagster step. It is a `dg.RetryRequested`: Dagster runs
  the step again after a jittered backoff (each step writes its window idempotently: delete and
  insert), and the run fails only after `conflict_retries` retries of that step.

Every retry is one warning line and adds to this process's count, `conflict_retries()`; a step's
retries are in the run's event log as well (STEP_UP_FOR_RETRY, with the conflict's text).
"""

from __future__ import annotations

import logging
import random
import threading

import dagster as dg
import duckdb
import tenacity

log = logging.getLogger(__name__)
_lock = threading.Lock()
_count = {"retries": 0}


def is_conflict(error: BaseException) -> bool:
    """A commit conflict: another writer committed a change that this transaction overlaps."""
    return isinstance(error, duckdb.Error) and "conflict" in str(error).lower()


def conflict_retries() -> int:
    """How many conflict retries this process has made (in place and as step retries)."""
    return _count["retries"]


def _counted(retry_state: tenacity.RetryCallState) -> None:
    with _lock:
        _count["retries"] += 1
    error = retry_state.outcome.exception() if retry_state.outcome else None
    log.warning("warehouse: commit conflict (%s); retry %d in %.2fs", " ".join(str(error).split())[:160],
                retry_state.attempt_number, retry_state.next_action.sleep if retry_state.next_action else 0.0)


def retry_conflicts(retries: int, initial: float = 0.05, maximum: float = 5.0):
    """A decorator: re-run the function on a commit conflict, up to `retries` times, backing off."""
    return tenacity.retry(retry=tenacity.retry_if_exception(is_conflict), stop=tenacity.stop_after_attempt(retries + 1),
                          wait=tenacity.wait_random_exponential(multiplier=initial, max=maximum),
                          before_sleep=_counted, reraise=True)


class WarehouseConflict(dg.RetryRequested):
    """A step's write met a lake commit conflict (rolled back whole): Dagster runs the step again."""

    def __init__(self, message: str, max_retries: int, seconds_to_wait: float):
        dg.RetryRequested.__init__(self, max_retries=max_retries, seconds_to_wait=seconds_to_wait)
        self.args = (message,)

    @classmethod
    def after(cls, error: BaseException, max_retries: int) -> WarehouseConflict:
        with _lock:
            _count["retries"] += 1
        wait = random.uniform(0.2, 2.0)   # jitter: two steps that collided do not collide again in step
        text = " ".join(str(error).split())[:200]
        log.warning("warehouse: commit conflict in a step (%s); the step is retried in %.1fs", text, wait)
        return cls(f"lake commit conflict, rolled back whole; the step is retried in {wait:.1f}s: {text}",
                   max_retries=max_retries, seconds_to_wait=wait)
