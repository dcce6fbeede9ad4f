"""The serving signals, registered once (see checks/registry.py).

Each runs on `serving_baselines` (serving_minutes: per-endpoint minute series with trailing
medians, and the endpoint SLOs from `serving_slos:` in thresholds.yaml). Entity ids are endpoint
names; findings carry the endpoint and the model version serving it, and the incidents fold adds
the version's lineage (run, checkpoint) and a triage class (assets/triage.py). Threshold and tier
reasons are in docs/signals.md, "Serving signals".
"""

from checks import clearings as c
from checks import detectors_serving as d
from checks.registry import REGISTRY, Signal

_SERVING = {"family": "serving", "entity": "endpoint", "asset": "serving_baselines", "inputs": ("serving_metrics",),
            "query": "detect/serving_minutes", "entity_column": "endpoint"}

REGISTRY.register(Signal(
    name="serving_latency_regression",
    tier="SEV3",
    owner="platform",
    title="Serving latency regression",
    description=(
        "Time to first token or inter-token latency (p50/p95/p99) of an endpoint is well above its own "
        "rolling baseline for minutes: a slower model version, engine config or kernel, still inside the SLO."
    ),
    detector=d.serving_latency_regression,
    thresholds={
        "min_ratio": 1.3,               # 30% slower: scrape noise is ~5%, a day's load curve moves a 2-h median <10%
        "sustain_ratio": 1.15,          # stays open while the minute is still clearly slow
        "window_minutes": 5.0,          # current level: median of the last 5 minutes
        "min_minutes": 3.0,
        "min_baseline_minutes": 30.0,   # half an hour of history before judging
        "lookback_minutes": 30.0,
    },
    # a saturated queue makes every request wait: TTFT rises with it
    fault_types=("latency_regression", "queue_saturation"),
    **_SERVING,
    clearing=c.latency_near_baseline,
))

REGISTRY.register(Signal(
    name="serving_latency_slo_breach",
    tier="SEV2",
    owner="platform",
    title="Serving latency SLO breach",
    description=(
        "An endpoint's TTFT or inter-token latency quantile is above its SLO (per endpoint in "
        "thresholds.yaml `serving_slos:`, else the defaults) for minutes: users wait longer than promised."
    ),
    detector=d.serving_latency_slo_breach,
    thresholds={
        "ttft_p99_slo_seconds": 1.5,    # interactive chat: first token within 1.5 s for 99% of requests
        "itl_p99_slo_seconds": 0.15,    # ~7 tokens/s at the p99: slower reads as stutter
        "min_minutes": 5.0,             # a 5-minute burn, not one slow scrape
        "lookback_minutes": 15.0,
    },
    fault_types=("latency_regression", "queue_saturation"),
    **_SERVING,
    clearing=c.latency_back,
))

REGISTRY.register(Signal(
    name="serving_queue_growth",
    tier="SEV2",
    owner="platform",
    title="Serving queue growing",
    description=(
        "Requests waiting for an endpoint keep rising over a quarter hour (not one spike): arrivals exceed "
        "what the replicas serve, and every queued request's time to first token grows with the queue."
    ),
    detector=d.serving_queue_growth,
    thresholds={
        "window_minutes": 15.0,
        "level_minutes": 3.0,           # level = median of 3 minutes: one spike does not move it
        "min_increase": 10.0,           # requests more waiting than a window ago ...
        "min_growth_factor": 2.0,       # ... and at least 2 x (usual queue + 1)
        "min_rank_correlation": 0.6,    # the window's minutes rise with time
        "min_minutes": 2.0,
        "lookback_minutes": 40.0,
    },
    fault_types=("queue_saturation",),
    **_SERVING,
))

REGISTRY.register(Signal(
    name="serving_batch_saturation",
    tier="SEV3",
    owner="platform",
    title="Serving batch saturated",
    description=(
        "An endpoint's engine runs full for minutes: KV-cache usage near 100%, running requests at the "
        "configured max_num_seqs, or sequences preempted every minute (vLLM preempts only when the KV cache "
        "cannot grow a sequence, and throws away its prefill work). No headroom is left; the next load "
        "step queues or preempts more."
    ),
    detector=d.serving_batch_saturation,
    thresholds={
        "kv_cache_full_ratio": 0.95,    # vLLM preempts sequences once the cache cannot grow them
        "running_full_ratio": 0.98,     # of max_num_seqs (when configured per endpoint)
        "min_preemptions_per_minute": 1.0,   # a healthy engine preempts none: one a minute, every minute
        "min_minutes": 5.0,
        "lookback_minutes": 15.0,
    },
    fault_types=("queue_saturation",),
    **_SERVING,
))

REGISTRY.register(Signal(
    name="serving_error_rate",
    tier="SEV2",
    owner="platform",
    title="Serving error rate",
    description=(
        "The failed share of an endpoint's requests is above its SLO, or well above both 5% and its own "
        "baseline, for minutes: users get errors instead of answers."
    ),
    detector=d.serving_error_rate,
    thresholds={
        "min_error_ratio": 0.05,
        "baseline_factor": 5.0,         # and 5 x the endpoint's usual failed share
        "window_minutes": 3.0,          # pooled over 3 minutes ...
        "min_requests": 50.0,           # ... of at least 50 requests (a ratio of 3 requests is noise)
        "min_minutes": 2.0,
        "lookback_minutes": 15.0,
    },
    fault_types=("error_burst",),
    **_SERVING,
))
