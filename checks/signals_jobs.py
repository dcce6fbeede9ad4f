"""Signals of a whole job's fate (checks/detectors_jobs.py): a job that ended without finishing."""

from checks import detectors_jobs as d
from checks.registry import REGISTRY, Signal

REGISTRY.register(Signal(
    name="run_crashed",
    family="distributed",
    entity="run",
    tier="SEV2",
    owner="platform",
    title="Job ended without finishing",
    description=(
        "The job ended with a failure (its run_ended status is not completed, or it logged no end and its "
        "GPUs were all released after its steps stopped): every rank stopped and "
        "its GPUs were released, so no other signal sees it; the run needs a relaunch from its last good "
        "checkpoint. A preemption is the scheduler's decision and is not reported."
    ),
    asset="training_baselines",
    inputs=("gpu_samples", "lineage_events"),
    query="detect/run_crashed",
    detector=d.run_crashed,
    thresholds={
        "oom_minutes": 2.0,             # the allocator fills the card in the last minute or two before an OOM
        "oom_memory_ratio": 0.97,       # of the card's memory: a training job's reservation stays below ~90 %
        "lookback_minutes": 60.0,       # the run's last steps before its end
        # without a run_ended: every GPU of the run reports free this many minutes in a row (a clean
        # exit's launcher writes its end within a minute or two of the processes leaving)
        "released_minutes": 3.0,
    },
    # a dead rank's peers fail at the NCCL timeout: the job ends failed (the rank_dropout incident's sequel)
    fault_types=("job_crash", "job_killed", "rank_dropout"),
    entity_column="run_id",
))
