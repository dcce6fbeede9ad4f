"""The training signals, registered once (see checks/registry.py).

Each reads the per-minute baselines the `training_baselines` asset writes (`run_minutes`,
`rank_minutes`) and runs as a check on that asset. The reason for every default threshold is
in docs/signals.md, "Training signals"; windows and lookbacks are thresholds too, so the SQL
gets them as parameters.
"""

from checks import clearings as c
from checks import detectors_training as d
from checks.registry import REGISTRY, Signal

ASSET = "training_baselines"
RUN_SERIES = "detect/training_run_minutes"

# The loss-excursion settings the spike, divergence and plateau detectors share (and the
# grad-norm detector uses, prefixed, to leave loss events to the loss signals).
_LOSS = {
    "ref_minutes": 60.0,            # "recent best" = lowest 5-min median log loss of the last hour
    "min_rise_ratio": 0.05,         # 5 % above it ...
    "z": 8.0,                       # ... and 8 sigmas of the run's own minute-to-minute jitter
    "min_history_minutes": 20.0,    # quiet until the reference holds 20 observed minutes
}

REGISTRY.register(Signal(
    name="non_finite_loss",
    family="training",
    entity="run",
    tier="SEV1",
    owner="model",
    title="Non-finite loss",
    description=(
        "Steps with a NaN or infinite loss (or a rising nan-iterations counter): the update is "
        "garbage or skipped, and the weights may already be poisoned. Every further step is wasted."
    ),
    asset=ASSET,
    inputs=(),
    query=RUN_SERIES,
    detector=d.non_finite_loss,
    thresholds={
        "min_nonfinite_steps": 1.0,
        "bridge_minutes": 10.0,
        "lookback_minutes": 60.0,
    },
    fault_types=("nan_loss",),
))

REGISTRY.register(Signal(
    name="loss_spike",
    family="training",
    entity="run",
    tier="SEV3",
    owner="model",
    title="Loss spike",
    description=(
        "The loss jumped well above the run's recent best and came back down: usually a bad batch "
        "or an optimizer hiccup. Worth a look before it recurs or turns into a divergence."
    ),
    asset=ASSET,
    inputs=(),
    query=RUN_SERIES,
    detector=d.loss_spike,
    thresholds={
        **_LOSS,
        "min_minutes": 2.0,             # elevated for 2 observed minutes at least (not one noisy minute)
        "recovery_fraction": 0.3,       # recovered once 30 % below the stretch's peak excess
        "divergence_minutes": 10.0,     # still up after 10 min without recovering: a divergence instead
        "bridge_minutes": 6.0,
        "lookback_minutes": 150.0,
    },
    fault_types=("loss_spike",),
))

REGISTRY.register(Signal(
    name="loss_divergence",
    family="training",
    entity="run",
    tier="SEV2",
    owner="model",
    title="Loss divergence",
    description=(
        "The loss keeps climbing above the run's recent best and does not recover: the run is "
        "diverging and every further step is likely wasted until it is rolled back."
    ),
    asset=ASSET,
    inputs=(),
    query=RUN_SERIES,
    detector=d.loss_divergence,
    thresholds={
        **_LOSS,
        "recovery_fraction": 0.3,
        "divergence_minutes": 10.0,
        "bridge_minutes": 6.0,
        "lookback_minutes": 150.0,
    },
    fault_types=("loss_divergence",),
))

REGISTRY.register(Signal(
    name="loss_plateau",
    direction="below",
    family="training",
    entity="run",
    tier="SEV2",
    owner="model",
    title="Loss plateau",
    description=(
        "The loss stopped improving although the run's own power-law curve predicts it should: "
        "the GPUs are busy and the model is not learning (data, optimizer state or LR problem)."
    ),
    asset=ASSET,
    inputs=(),
    query=RUN_SERIES,
    detector=d.loss_plateau,
    thresholds={
        **_LOSS,
        "fit_minutes": 90.0,            # power law fitted to the 90 minutes before the window
        "fit_skip_minutes": 20.0,       # leaving out the run's warm-up and the settling after an LR step
        "lr_step_ratio": 0.1,           # an LR drop of > 10 % within a minute starts a new regime
        "min_fit_minutes": 15.0,        # quiet until the fit holds 15 settled minutes
        "window_minutes": 30.0,         # improvement judged over 30 minutes
        "block_minutes": 10.0,          # each end of the window = a 10-minute mean
        "min_predicted_ratio": 0.01,    # the curve must predict >= 1 % improvement (else converged)
        "max_observed_fraction": 0.75,  # flagged when < 75 % of the predicted improvement is seen (and significant)
        "z_fit": 4.0,                   # shortfall >= 4 sigmas of the fit's residual scatter
        "flat_tolerance": 0.5,          # loss within half the predicted improvement of its recent best
        "min_minutes": 5.0,
        "bridge_minutes": 6.0,
        "lookback_minutes": 180.0,
    },
    fault_types=("loss_plateau",),
))

REGISTRY.register(Signal(
    name="step_time_regression",
    family="training",
    entity="run",
    tier="SEV2",
    owner="platform",
    title="Step-time regression",
    description=(
        "The run's typical step got persistently slower (throughput dropped) in its own data or "
        "compute time: a change point, not a slow step or a pause. Every hour costs the slowdown's "
        "share of the run's GPUs."
    ),
    asset=ASSET,
    inputs=(),
    query=RUN_SERIES,
    detector=d.step_time_regression,
    thresholds={
        "min_increase_ratio": 0.08,     # 8 % slower than the run's reference step ...
        "z": 6.0,                       # ... and 6 sigmas of its minute-median noise
        "ref_minutes": 120.0,           # reference = best trailing median of the last 2 hours
        "min_history_minutes": 15.0,
        "min_minutes": 5.0,             # 5 slow minutes in a row: not a GC pause or a slow batch
        "max_collective_share": 0.5,    # extra time mostly collective wait: a straggler/network (distributed)
        "decompose_minutes": 30.0,      # data/compute/collective before the change, for the evidence
        "bridge_minutes": 6.0,
        "lookback_minutes": 180.0,
    },
    # a kernel regression slows the run's own compute; a data-loader stall its data time (the evidence's data_seconds_change)
    fault_types=("step_time_regression", "mfu_regression", "data_stall"),
    clearing=c.step_time_back,
))

REGISTRY.register(Signal(
    name="grad_norm_spike",
    family="training",
    entity="run",
    tier="SEV3",
    owner="model",
    title="Gradient-norm spike",
    description=(
        "The gradient norm jumped far above its trailing baseline for a sustained burst of steps "
        "while the loss held: an early warning of instability (bad data, LR too high)."
    ),
    asset=ASSET,
    inputs=(),
    query=RUN_SERIES,
    detector=d.grad_norm_spike,
    thresholds={
        "min_ratio": 3.0,               # the minute's median grad norm >= 3x its trailing median ...
        "z": 6.0,                       # ... and 6 robust sigmas of log grad norm above it
        "min_sigma": 0.05,              # floor on that sigma (5 %), so a very smooth baseline is not over-trusted
        "min_steps": 3.0,               # the burst spans 3 steps at least
        "min_history_minutes": 15.0,
        "bridge_minutes": 6.0,
        **{f"loss_{k}": v for k, v in _LOSS.items()},
        "lookback_minutes": 90.0,
    },
    fault_types=("grad_norm_spike",),
))

REGISTRY.register(Signal(
    name="loss_scale_collapse",
    direction="below",
    family="training",
    entity="run",
    tier="SEV2",
    owner="model",
    title="Loss-scale collapse",
    description=(
        "Mixed precision's dynamic loss scale is collapsing (fp16): overflow after overflow halves "
        "it and iterations are skipped; the run stops learning and is about to produce NaNs."
    ),
    asset=ASSET,
    inputs=(),
    query=RUN_SERIES,
    detector=d.loss_scale_collapse,
    thresholds={
        "floor_scale": 1.0,             # at or below 1 the scale no longer protects fp16 gradients
        "min_drop_factor": 256.0,       # 8 halvings below the trailing median
        "ref_minutes": 60.0,
        "min_history_minutes": 10.0,    # past the start-up search down from 2^32
        "skip_window_minutes": 10.0,
        "min_skipped": 1.0,             # and iterations are being skipped (where the run reports them)
        "min_minutes": 2.0,
        "bridge_minutes": 6.0,
        "lookback_minutes": 90.0,
    },
    fault_types=("loss_scale_collapse",),
))

REGISTRY.register(Signal(
    name="memory_fragmentation",
    family="training",
    entity="run",
    tier="SEV2",
    owner="platform",
    title="Memory fragmentation",
    description=(
        "The caching allocator holds ever more memory it cannot use (reserved minus allocated "
        "growing, inactive split blocks, alloc retries): throughput suffers and an OOM is coming."
    ),
    asset=ASSET,
    inputs=("gpu_samples",),
    query="detect/memory_fragmentation",
    detector=d.memory_fragmentation,
    thresholds={
        "window_minutes": 60.0,         # growth vs the lowest gap of the last hour
        "min_growth_gib": 0.5,          # 0.5 GiB more held-but-unused memory ...
        "z": 8.0,                       # ... and 8 sigmas of the gap's minute-to-minute jitter
        "min_retries": 1.0,             # with alloc retries in the window, or
        "min_inactive_share": 0.25,     # inactive split bytes making up a quarter of the growth, or
        "large_growth_gib": 4.0,        # a growth this large on its own
        "warmup_minutes": 5.0,          # the allocator settles during a run's first minutes
        "min_history_minutes": 15.0,
        "min_minutes": 5.0,
        "bridge_minutes": 6.0,
        "lookback_minutes": 90.0,
    },
    fault_types=("memory_fragmentation",),
))
