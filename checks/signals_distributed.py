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
    live_window=True,
    entity="rank",
    tier="SEV2",
    owner="platform",
    title="Straggler rank",
    description=(
        "One rank (or a few) computes slower than its peers in the same minutes while the others "
        "wait for it in collectives; every step of the run pays for it. Opened by GPU-time lost, kept "
        "open while the imbalance lasts. The finding names the host and GPU and what that GPU reported "
        "(temperature, throttle reasons, clocks, power, XID)."
    ),
    asset="training_baselines",
    inputs=("gpu_baselines",),
    query="detect/straggler_rank",
    detector=d.straggler_rank,
    thresholds={
        "min_peer_ratio": 1.10,        # enter: >=10% slower than the peers' median compute that minute
        "exit_peer_ratio": 1.05,       # stay open while >=5% slower (hysteresis: no flapping at the threshold)
        "min_wait_share": 0.5,         # peers' collective exceeds its own by >= half its extra compute
        "min_minutes": 3.0,            # consecutive minutes before opening, whatever the cost
        "min_short_minutes": 2.0,      # or this many (never one: one noisy minute) when they cost enough:
        "min_lost_gpu_minutes": 1.0,   #   GPU-minutes the run lost waiting (extra compute x steps x GPUs)
        "min_short_steps": 10.0,       #   over this many steps (slow-step runs: a few steps are not an episode)
        "min_baseline_minutes": 10.0,  # own history that tells a large slow group that slowed down from one built so
        "clear_minutes": 10.0,         # a dip shorter than this does not end it; the clearing needs as long in step
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
    live_window=True,
    entity="run",
    tier="SEV2",
    owner="platform",
    title="Collective latency regression",
    description=(
        "The run's communication time (its collectives with the wait for the slowest rank taken out) "
        "rises persistently above its baseline, on every host or on one: the network or NCCL path "
        "degraded. A straggler only makes its peers wait, so it neither raises it nor hides it."
    ),
    asset="training_baselines",
    inputs=("gpu_baselines",),
    query="detect/collective_regression",
    detector=d.collective_regression,
    thresholds={
        "min_rise": 1.15,              # transfer time >= 1.15 x its trailing median
        "min_z": 3.0,                  # and 3 robust SDs above it
        "min_rel_spread": 0.02,        # MAD floor: 2% of the baseline
        "min_minutes": 5.0,
        "min_baseline_minutes": 15.0,
        "max_gap_minutes": 5.0,        # minutes without steps (eval pause) that do not break a stretch
        "window_minutes": 30.0,        # trailing window of the transfer-time baseline (as the baselines')
        "lookback_minutes": 120.0,
    },
    # one host's slow link slows every collective of the runs with a rank on it (the incident names their GPUs)
    fault_types=("collective_regression", "host_network_degraded"),
    clearing=c.collective_back,
))

REGISTRY.register(Signal(
    name="rank_dropout",
    family="distributed",
    live_window=True,
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
    direction="outside",                # flagged either way: the worst is the furthest from its usual ratio
    family="distributed",
    live_window=True,
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
