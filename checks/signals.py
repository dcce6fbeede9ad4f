"""The signals Goodput knows, registered once. Each names its SQL, its detector and its defaults.

Importing this module registers every signal: the skeleton's here, the rest by family in
checks/signals_<family>.py (imported at the bottom).
"""

from checks import clearings as c
from checks import detectors
from checks.registry import REGISTRY, Signal

REGISTRY.register(Signal(
    name="busy_not_progressing",
    family="training",
    entity="run",
    tier="SEV1",
    owner="platform",
    title="Run busy but not progressing",
    description=(
        "The run's GPUs stay busy while it completes no training step: a hung collective, a "
        "deadlock or a stuck data path. The GPUs burn hours and the run makes no progress."
    ),
    asset="training_steps",
    inputs=("gpu_samples", "lineage_events", "training_baselines"),   # step_ends: the baselines write it
    query="detect/busy_not_progressing",
    detector=detectors.busy_not_progressing,
    thresholds={
        "min_stall_seconds": 300.0,     # several minutes: longer than a checkpoint save or a GC pause
        "stall_factor": 20.0,           # and many of the run's own step intervals
        "min_utilization": 0.8,         # GPUs busy (NCCL kernels spin at ~100% while stuck)
        "util_window_seconds": 300.0,
        "lookback_seconds": 6 * 3600.0,
    },
    # a dead rank (or a GPU fallen off the bus) leaves its peers spinning in the collective: a stall too
    fault_types=("hang", "rank_dropout"),
    clearing=c.steps_resumed,
    live_window=True,
))

# The families' modules register on import; keep this at the bottom (they may use the above).
from checks import (  # noqa: E402, F401
    signals_checkpoint,
    signals_distributed,
    signals_efficiency,  # badput and MFU
    signals_gpu,
    signals_jobs,  # a job that ended without finishing
    signals_quality,
    signals_serving,
    signals_training,
)

# Every signal has its playbook entry and every entry its signal: a one-line ConfigError now, not a
# KeyError when an incident first needs it.
REGISTRY.check_playbooks()
