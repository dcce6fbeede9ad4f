"""The distributed signals, registered once (see checks/registry.py).

Each runs on `training_baselines` (rank_minutes / run_minutes) and reads `gpu_baselines` for the
cross-layer evidence. Threshold reasons are in docs/signals.md, "Distributed signals".
"""

from checks import clearings as c
from checks import detectors_distributed as d
from checks.registry import REGISTRY, Signal

REGISTRY.register(Signal(
    name="straggler_rank",
    family="distributed",
    entity="rank",
    tier="SEV2",
    owner="platform",
    title="Straggler rank",
    description=(
        "One rank computes persistently slower than its peers and its own history while the others "
        "wait for it in collectives; every step of the run pays for it. The finding names the host "
        "and GPU and what that GPU reported (temperature, throttle reasons, clocks, power, XID)."
    ),
    asset="training_baselines",
    inputs=("gpu_baselines",),
    query="detect/straggler_rank",
    detector=d.straggler_rank,
    thresholds={
        "min_peer_ratio": 1.10,        # >=10% slower than the peers' median compute
        "min_self_ratio": 1.10,        # and >=10% slower than its own trailing median
        "min_self_z": 4.0,             # and 4 robust SDs above it
        "min_rel_spread": 0.01,        # MAD floor: 1% of the baseline (the simulator's ranks are ~0.3% apart)
        "min_wait_share": 0.5,         # peers' collective exceeds its own by >= half its extra compute
        "min_minutes": 3.0,            # consecutive minutes before opening
        "min_baseline_minutes": 10.0,  # minutes of own history needed
        "max_gap_minutes": 5.0,        # minutes without steps (eval pause) that do not break a stretch
        "lookback_minutes": 60.0,      # frame reaches back this far (persistence, onset)
    },
    fault_types=("straggler", "thermal_throttle", "power_throttle"),
    entity_column="entity_id",
    clearing=c.in_step_with_peers,
))

REGISTRY.register(Signal(
    name="collective_regression",
    family="distributed",
    entity="run",
    tier="SEV2",
    owner="platform",
    title="Collective latency regression",
    description=(
        "The run's collective (all-reduce) time rises persistently above its baseline on every rank "
        "while compute stays flat and no rank is a straggler: the network or NCCL path degraded."
    ),
    asset="training_baselines",
    inputs=("gpu_baselines",),
    query="detect/collective_regression",
    detector=d.collective_regression,
    thresholds={
        "min_rise": 1.15,              # collective >= 1.15 x its trailing median
        "min_z": 3.0,                  # and 3 robust SDs above it
        "min_rel_spread": 0.02,        # MAD floor: 2% of the baseline
        "max_compute_change": 0.10,    # the run's median compute within 10% of its baseline
        "max_compute_outlier": 1.10,   # slowest rank's compute within 10% of the median rank's
        "min_minutes": 5.0,
        "min_baseline_minutes": 15.0,
        "max_gap_minutes": 5.0,        # minutes without steps (eval pause) that do not break a stretch
        "window_minutes": 30.0,        # trailing window of the compute baseline (as the baselines')
        "lookback_minutes": 120.0,
    },
    fault_types=("collective_regression",),
    clearing=c.collective_back,
))

REGISTRY.register(Signal(
    name="rank_dropout",
    family="distributed",
    entity="rank",
    tier="SEV1",
    owner="platform",
    title="Rank dropped out",
    description=(
        "A rank stopped reporting steps while its peers go on, or while the run still holds its "
        "peers' GPUs but not its own: the process died (crash, OOM kill, XID 79). The peers block in "
        "the next collective until the NCCL timeout, burning every GPU of the run."
    ),
    asset="training_baselines",
    inputs=("gpu_baselines", "lineage_events"),
    query="detect/rank_dropout",
    detector=d.rank_dropout,
    thresholds={
        "min_silence_seconds": 120.0,  # longer than a checkpoint save (20-60 s)
        "silence_factor": 10.0,        # and 10 of the run's step intervals
        "min_minutes": 2.0,
        "lookback_minutes": 60.0,
    },
    fault_types=("rank_dropout", "xid_error"),
    entity_column="entity_id",
    clearing=c.rank_rejoined,
))

REGISTRY.register(Signal(
    name="gradient_skew",
    family="distributed",
    entity="rank",
    tier="SEV2",
    owner="model",
    title="Gradient skew",
    description=(
        "A rank's local gradient norm stays off its peers' median, relative to its usual ratio: a "
        "bad data shard, a corrupted replica or a numerics fault on one GPU."
    ),
    asset="training_baselines",
    inputs=(),
    query="detect/gradient_skew",
    detector=d.gradient_skew,
    thresholds={
        "min_ratio": 1.25,             # >= 1.25 x (or <= 1/1.25 x) the peers' median, vs its usual ratio
        "min_peers": 2.0,              # with one peer, which of the two is off is unknowable
        "max_gap_minutes": 5.0,        # minutes without steps (eval pause) that do not break a stretch
        "min_minutes": 5.0,
        "min_baseline_minutes": 10.0,
        "lookback_minutes": 60.0,
    },
    fault_types=("gradient_skew",),
    entity_column="entity_id",
))
