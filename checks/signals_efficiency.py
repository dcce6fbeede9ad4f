"""The efficiency signals, registered once (see checks/registry.py). They read the per-minute badput
and MFU the `badput` asset writes (`badput_minutes`) and run as checks on that asset."""

from checks import detectors_efficiency as d
from checks.registry import REGISTRY, Signal

REGISTRY.register(Signal(
    name="mfu_drop",
    direction="below",
    family="training",
    entity="run",
    tier="SEV2",
    owner="platform",
    title="Model FLOPs utilization drop",
    description=(
        "The run keeps stepping but its model FLOPs utilization fell persistently below its own "
        "baseline: a kernel, data or parallelism regression. Busy and progressing, only slower; "
        "every hour costs the drop's share of the run's GPUs."
    ),
    asset="badput",
    inputs=("training_steps",),
    query="detect/mfu_drop",
    detector=d.mfu_drop,
    thresholds={
        "min_drop_ratio": 0.08,        # 8 % below the run's own MFU: well beyond minute-median noise (~1 %)
        "z": 4.0,                      # ... and 4 sigmas of its minute-to-minute spread
        "ref_minutes": 120.0,          # baseline = upper quartile of the last 2 hours' stepping minutes
        "min_history_minutes": 20.0,   # quiet until the baseline holds 20 stepping minutes
        "min_minutes": 5.0,            # 5 slow minutes in a row: not a slow batch or a GC pause
        "lookback_minutes": 180.0,
    },
    # runs that log no model FLOPs have no MFU: their slowdowns are step_time_regression's and the
    # distributed signals'; this one is scored on the regressions of runs that do
    fault_types=("mfu_regression",),
))
