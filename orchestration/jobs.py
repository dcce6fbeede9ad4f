"""Jobs: `detect` ingests an hour, computes its baselines and runs every signal's check on it;
`fold_incidents` folds findings into incidents.

Both run in one process (`in_process_executor`): every step writes the one DuckDB file, so the
`warehouse` pool runs them one at a time anyway, and the multiprocess executor's fresh Python
process per step (~1-2 s of imports each) was most of a quiet tick's cost. The checks on one asset run as
one step (checks/asset_checks.py): 20 steps a detect run, not 52
(BENCHMARKS.md, section "Service").

Past one machine (issue 21, docs/deploy.md): with `GOODPUT_EXECUTOR=celery` in the environment of
every process of the deployment, `detect` hands each step to a Celery worker (dagster-celery; broker
and result backend `GOODPUT_CELERY_BROKER` / `GOODPUT_CELERY_BACKEND`, Redis URLs), so the steps of
several hours run on several machines at once against the shared lake. The fold stays one step.

With shards configured (orchestration/shards.py), `sharded_jobs` replaces `detect` by two jobs:
`detect_shard` (one hour x shard partition: the shard's GPU samples, GPU minutes and per-GPU checks) and
`detect` (one hour: everything else, after every shard of the hour, reading all of them).
"""

import os

import dagster as dg

from orchestration.partitions import hourly
from orchestration.shards import SHARDED_ASSETS, Shard, hour_by_shard, partition_key

DETECT_SHARD = "detect_shard"


def detect_executor() -> dg.ExecutorDefinition:
    """In-process (the embedded default), or Celery workers when the deployment says so."""
    if os.environ.get("GOODPUT_EXECUTOR", "in_process") != "celery":
        return dg.in_process_executor
    from dagster_celery import celery_executor  # only a distributed deployment needs Celery installed

    return celery_executor.configured({
        "broker": {"env": "GOODPUT_CELERY_BROKER"},
        "backend": {"env": "GOODPUT_CELERY_BACKEND"},
        "retries": {"enabled": {}},   # a step's RetryRequested (a lake commit conflict) runs it again
    }, name="celery")


detect_job = dg.define_asset_job(
    "detect",
    selection=dg.AssetSelection.groups("ingest", "baselines", "checkpoints"),
    partitions_def=hourly,
    executor_def=detect_executor(),
    description="Ingest one hour of the raw zone, compute its baselines, audit its checkpoints and run every signal's asset check on it.",
)

incidents_job = dg.define_asset_job(
    "fold_incidents",
    selection=dg.AssetSelection.assets("incidents", "incident_plots"),
    executor_def=dg.in_process_executor,
    description="Fold all findings into incident records (and redraw the plots of runs with open incidents).",
)


def sharded_jobs(shards: tuple[Shard, ...]) -> list:
    """`detect_shard` (hour x shard) and the hour-level `detect`, for a home with shards."""
    sharded = dg.AssetSelection.assets(*SHARDED_ASSETS)
    return [
        dg.define_asset_job(
            DETECT_SHARD,
            selection=sharded,
            partitions_def=hour_by_shard(shards),
            executor_def=detect_executor(),
            description="Ingest one shard's GPU samples of one hour, compute their per-minute series and run the "
                        "per-GPU checks on them.",
        ),
        dg.define_asset_job(
            "detect",
            selection=dg.AssetSelection.groups("ingest", "baselines", "checkpoints") - sharded,
            partitions_def=hourly,
            executor_def=detect_executor(),
            description="Ingest one hour of the raw zone (but the shards' GPU samples), compute its baselines, audit its "
                        "checkpoints and run every signal's asset check that reads more than one host on it, after "
                        "every shard of the hour.",
        ),
    ]


def execute_detect(defs: dg.Definitions, shards: tuple[Shard, ...], key: str, instance: dg.DagsterInstance,
                   **kwargs) -> list[dg.ExecuteInProcessResult]:
    """One hour through `defs`' detect jobs in process (`goodput demo`, backfills, tests): with `shards`, each
    shard's partition first, then the hour, as the raw-zone sensor orders them. Stops at a failed run."""
    results = []
    for shard in shards:
        results.append(defs.resolve_job_def(DETECT_SHARD).execute_in_process(
            partition_key=partition_key(key, shard.name), instance=instance, **kwargs))
        if not results[-1].success:
            return results
    results.append(defs.resolve_job_def(detect_job.name).execute_in_process(partition_key=key, instance=instance, **kwargs))
    return results
