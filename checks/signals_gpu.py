"""The gpu signals, registered once (see checks/registry.py).

Each runs on `gpu_baselines` (gpu_minutes), or reads `gpu_samples` for exact event times. Entity
ids are "<host>:<gpu_index>" (the busy-but-low-power signal speaks of the run). Threshold reasons
are in docs/signals.md, "GPU signals".
"""

from checks import clearings as c
from checks import detectors_gpu as d
from checks import detectors_hang
from checks.registry import REGISTRY, Signal

_GPU = {"family": "gpu", "entity": "gpu", "owner": "platform", "asset": "gpu_baselines", "entity_column": "entity_id",
        "live_window": True}
# Judged from each GPU's own rows alone: with shards configured, per hour x shard (checks/sharded.py).
# Not gpu_idle_allocated (it compares a GPU with its run's other GPUs, on any host).
_HOST_LOCAL = {**_GPU, "host_local": True}

REGISTRY.register(Signal(
    name="gpu_xid_fatal",
    tier="SEV1",
    title="Fatal GPU XID error",
    description=(
        "The GPU reported a fatal XID (79 fallen off the bus, 48/94/95 uncorrectable memory error, "
        "74 NVLink, 119/120 GSP, ...): its job is dead or corrupt and the GPU must be drained."
    ),
    inputs=("gpu_samples",),
    query="detect/gpu_xid_error",
    detector=d.gpu_xid_fatal,
    thresholds={"min_xid_increase": 1.0, "lookback_minutes": 60.0},
    fault_types=("xid_error",),
    **_HOST_LOCAL,
))

REGISTRY.register(Signal(
    name="gpu_xid_error",
    tier="SEV2",
    title="GPU XID error",
    description=(
        "The GPU reported a non-fatal XID (13 graphics exception, 31 memory page fault, 43 stopped "
        "channel, ...): usually the application or the driver; the GPU keeps working."
    ),
    inputs=("gpu_samples",),
    query="detect/gpu_xid_error",
    detector=d.gpu_xid_error,
    thresholds={"min_xid_increase": 1.0, "lookback_minutes": 60.0},
    fault_types=("xid_error",),
    **_HOST_LOCAL,
))

REGISTRY.register(Signal(
    name="gpu_ecc_error",
    tier="SEV2",
    title="GPU uncorrectable ECC errors",
    description=(
        "The GPU's uncorrectable ECC errors or uncorrectable remapped rows rose, or a row remap is "
        "pending: its memory is failing and the next reset must apply the remap."
    ),
    inputs=("gpu_samples",),
    query="detect/gpu_ecc_error",
    detector=d.gpu_ecc_error,
    thresholds={"min_uncorrected_increase": 1.0, "lookback_minutes": 60.0},
    fault_types=("ecc_error",),
    **_HOST_LOCAL,
))

REGISTRY.register(Signal(
    name="gpu_row_remap_failure",
    tier="SEV1",
    title="GPU row-remap failure",
    description="The GPU ran out of spare memory rows (row-remap failure): drain it and send it for RMA.",
    inputs=(),
    query="detect/gpu_row_remap_failure",
    detector=d.gpu_row_remap_failure,
    thresholds={"min_minutes": 1.0, "lookback_minutes": 30.0},
    fault_types=("row_remap_failure",),
    **_HOST_LOCAL,
))

REGISTRY.register(Signal(
    name="gpu_thermal_throttle",
    tier="SEV2",
    title="GPU thermal throttling",
    description=(
        "A loaded GPU is slowed by heat (thermal slowdown reasons, clock well below its own "
        "baseline): the rank on it becomes a straggler and the whole run waits."
    ),
    inputs=(),
    query="detect/gpu_throttle",
    detector=d.gpu_thermal_throttle,
    thresholds={
        "min_clock_drop": 0.10,        # SM clock >= 10% below its own baseline
        "min_utilization": 0.5,        # under load
        "hot_celsius": 90.0,           # counts as a thermal reason when the exporter has no reason bits
        "min_minutes": 3.0,
        "min_baseline_minutes": 10.0,
        "max_gap_minutes": 5.0,        # unloaded minutes (a checkpoint pause) bridged within a stretch
        "lookback_minutes": 30.0,
    },
    fault_types=("thermal_throttle",),
    **_HOST_LOCAL,
    clearing=c.clock_back,
))

REGISTRY.register(Signal(
    name="gpu_power_throttle",
    tier="SEV2",
    title="GPU power throttling",
    description=(
        "A loaded GPU is held back by its power cap or the hardware power brake with its clock well "
        "below its own baseline: the rank on it becomes a straggler and the whole run waits."
    ),
    inputs=(),
    query="detect/gpu_throttle",
    detector=d.gpu_power_throttle,
    thresholds={
        "min_clock_drop": 0.10,
        "min_utilization": 0.5,
        "min_minutes": 3.0,
        "min_baseline_minutes": 10.0,
        "max_gap_minutes": 5.0,        # unloaded minutes (a checkpoint pause) bridged within a stretch
        "lookback_minutes": 30.0,
    },
    fault_types=("power_throttle",),
    **_HOST_LOCAL,
    clearing=c.clock_back,
))

REGISTRY.register(Signal(
    name="gpu_idle_allocated",
    direction="below",
    tier="SEV3",
    title="GPU allocated but idle",
    description="A GPU held by a run sits idle while the run's other GPUs work: an allocated GPU-hour wasted.",
    inputs=(),
    query="detect/gpu_idle_allocated",
    detector=d.gpu_idle_allocated,
    thresholds={
        "max_utilization": 0.2,        # idle: a CUDA context, at most a stray kernel (a rank computes at >0.9)
        "min_others_utilization": 0.5, # while the run's other GPUs work
        "min_minutes": 10.0,           # longer than any eval or checkpoint pause
        "lookback_minutes": 30.0,
    },
    fault_types=("idle_allocated",),
    **_GPU,
))

REGISTRY.register(Signal(
    name="gpu_busy_low_power",
    direction="below",
    family="gpu",
    entity="run",
    tier="SEV1",
    owner="platform",
    title="GPUs busy at low power",
    description=(
        "A run's GPUs show ~100% utilization while drawing little power with idle tensor pipes: "
        "NCCL kernels spinning in a collective that will not complete (a hang or a dead peer)."
    ),
    asset="gpu_baselines",
    inputs=(),
    query="detect/gpu_busy_low_power",
    detector=detectors_hang.gpu_busy_low_power,
    thresholds={
        "min_utilization": 0.9,        # "busy" as nvidia-smi sees it
        "max_power_ratio": 0.5,        # under half the power limit (training draws 65-85%)
        "max_tensor_active": 0.05,     # tensor pipes idle (training: 0.3-0.6), when profiled
        "max_power_drop": 0.7,         # entering: power <= 70% of the GPU's own trailing power (when it worked)
        # without loaded history: physics. NCCL spin ~15-25% of the limit, idle ~10%; any kernel doing work
        # at full utilization (memory-bound included) draws >= ~40% and keeps most SMs active
        "max_cold_power_ratio": 0.3,
        "max_spin_sm_active": 0.5,     # a spin kernel occupies a few SMs (one block per NCCL channel)
        "min_share": 0.5,              # of the run's held GPUs
        "min_minutes": 3.0,
        # sooner when the step log agrees: every held GPU at a spin's draw and no step for this many
        # of the run's own logging intervals (and none in the minute)
        "fast_min_minutes": 2.0,
        "stall_log_intervals": 3.0,
        "lookback_minutes": 30.0,
    },
    fault_types=("hang", "rank_dropout"),
    entity_column="run_id",
    clearing=c.gpus_working,
    live_window=True,
))
