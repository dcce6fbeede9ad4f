"""The Celery app the deployment's workers run: `celery -A orchestration.celery_app worker` (deploy/).

dagster-celery's tasks (`execute_plan`: one step of a run) on an app whose broker and result backend
come from the environment (`GOODPUT_CELERY_BROKER`, `GOODPUT_CELERY_BACKEND`, as the runs' executor
reads them), acknowledging a task only when it has finished: a worker process killed mid-step (SIGKILL,
the OOM killer) puts its task back on the queue, and another worker runs the step again from the
start (a step writes its window in one transaction, so the killed attempt left nothing behind).
"""

import os

from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_execute_job_task, create_resume_job_task, create_task

broker = os.environ.get("GOODPUT_CELERY_BROKER", "redis://127.0.0.1:6379/0")
app = make_app({"broker": broker, "backend": os.environ.get("GOODPUT_CELERY_BACKEND", broker)})
app.conf.update(
    task_acks_late=True,               # acknowledged after the step, not on receipt
    task_reject_on_worker_lost=True,   # a killed worker process requeues its step
    worker_prefetch_multiplier=1,      # a worker holds one step at a time: the others go to idle workers
    broker_connection_retry_on_startup=True,
)

execute_plan = create_task(app)
execute_job = create_execute_job_task(app)
resume_job = create_resume_job_task(app)
