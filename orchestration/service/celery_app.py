"""The Celery app the deployment's workers run: `celery -A orchestration.service.celery_app worker` (deploy/).

dagster-celery's tasks (`execute_plan`: one step of a run) on an app whose broker and result backend
come from the environment (`GOODPUT_CELERY_BROKER`, `GOODPUT_CELERY_BACKEND`, as the runs' executor
reads them), acknowledging a task only when it has finished: a worker process killed mid-step (SIGKILL,
the OOM killer) puts its task back on the queue, and another worker runs the step again from the
start (a step writes its window in one transaction, so the killed attempt left nothing behind).

A worker host lost whole (powered off: the worker's main process dies with its pool processes) rejects
nothing. Redis hands its unacknowledged step to another worker once the step has been out longer than
the broker's visibility timeout (`GOODPUT_CELERY_VISIBILITY_TIMEOUT`, seconds; docs/deploy.md).
"""

import os
from collections.abc import Mapping

from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_execute_job_task, create_resume_job_task, create_task

# An hour: far longer than the steps measured (the demo's take seconds, ~10 s at most on a loaded machine),
# since a step still running when its visibility timeout passes is handed to a second worker and run twice.
# The price: a lost host's step runs elsewhere an hour (and one sweep) late.
VISIBILITY_TIMEOUT_S = 3600


def broker_transport_options(env: Mapping[str, str] = os.environ) -> dict:
    """The Redis transport's options: the visibility timeout, and a sweep for overdue steps every tenth of
    it, 1-10 s (kombu 5.7's own default sweeps every 100 s, which would dwarf a short timeout).
    Every client that consumes from the broker needs the same value: the shortest one set anywhere wins."""
    timeout = int(env.get("GOODPUT_CELERY_VISIBILITY_TIMEOUT") or VISIBILITY_TIMEOUT_S)
    return {"visibility_timeout": timeout, "unacked_restore_interval": min(10, max(1, timeout // 10)),
            "unacked_restore_throttle": 1}


broker = os.environ.get("GOODPUT_CELERY_BROKER", "redis://127.0.0.1:6379/0")
app = make_app({"broker": broker, "backend": os.environ.get("GOODPUT_CELERY_BACKEND", broker)})
app.conf.update(
    task_acks_late=True,               # acknowledged after the step, not on receipt
    task_reject_on_worker_lost=True,   # a killed worker process requeues its step
    worker_prefetch_multiplier=1,      # a worker holds one step at a time: the others go to idle workers
    worker_deduplicate_successful_tasks=True,   # a step handed out again after it succeeded is not rerun
    broker_transport_options=broker_transport_options(),
    broker_connection_retry_on_startup=True,
)

execute_plan = create_task(app)
execute_job = create_execute_job_task(app)
resume_job = create_resume_job_task(app)
