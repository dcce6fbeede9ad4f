"""The model-quality signals, registered once (see checks/registry.py).

Input and prediction drift read the drift history the `drift_reports` asset writes with evidently
(sql/migrations/008_quality.sql); confidence shift and the business-metric drop read the prediction
log directly. Every one judges a model version against its reference window (the window registered
with the version, else its first stable hour after promotion). The entity is the endpoint; findings
carry the endpoint, model version, training run and checkpoint. Threshold reasons are in
docs/signals.md, "Quality signals".
"""

from checks import detectors_quality as d
from checks.registry import REGISTRY, Signal

_QUALITY = {"family": "quality", "entity": "endpoint", "asset": "drift_reports", "entity_column": "endpoint"}
# The reference window (sql/migrations/008_quality.sql version_references): warm-up after a promotion
# left out, then one hour of the version's own traffic, unless the registration names a window.
_REFERENCE = {"settle_minutes": 10.0, "reference_minutes": 60.0}

REGISTRY.register(Signal(
    name="input_drift",
    tier="SEV3",
    owner="model",
    title="Input drift",
    description=(
        "The features an endpoint receives moved away from its model version's reference window "
        "(evidently: Wasserstein / Jensen-Shannon per column) for hours on end: the model now answers "
        "questions it was not validated on."
    ),
    inputs=("predictions", "lineage_events"),
    query="detect/quality_drift",
    query_params={"kind": "input"},
    detector=d.input_drift,
    thresholds={"min_drifted_columns": 1.0, "min_hours": 2.0, "lookback_hours": 3.0},
    fault_types=("input_drift",),
    **_QUALITY,
))

REGISTRY.register(Signal(
    name="prediction_drift",
    tier="SEV3",
    owner="model",
    title="Prediction drift",
    description=(
        "The predicted labels or confidences of a model version moved away from its reference window "
        "(evidently) for hours on end: the model behaves differently than when it was validated."
    ),
    inputs=("predictions", "lineage_events"),
    query="detect/quality_drift",
    query_params={"kind": "prediction"},
    detector=d.prediction_drift,
    thresholds={"min_drifted_columns": 1.0, "min_hours": 2.0, "lookback_hours": 3.0},
    fault_types=("bad_promotion", "confidence_shift"),
    **_QUALITY,
))

REGISTRY.register(Signal(
    name="confidence_shift",
    tier="SEV3",
    owner="model",
    title="Prediction confidence shift",
    description=(
        "The distribution of a model version's prediction confidence moved against its reference "
        "window (KS test and a mean shift): a silent sign of a worse model or of unfamiliar inputs."
    ),
    inputs=("predictions", "lineage_events"),
    query="detect/quality_confidence_shift",
    detector=d.confidence_shift,
    thresholds={"max_p_value": 0.001, "min_mean_shift": 0.05, "min_rows": 100.0, "min_reference_rows": 100.0,
                "max_rows": 5000.0, **_REFERENCE},
    fault_types=("confidence_shift", "bad_promotion"),
    **_QUALITY,
))

REGISTRY.register(Signal(
    name="business_metric_drop",
    tier="SEV2",
    owner="product",
    title="Business metric drop",
    description=(
        "The outcome rate (late-arriving outcomes that match the prediction) of a model version fell "
        "against its reference window: users get wrong answers now, measured, not inferred."
    ),
    inputs=("predictions", "prediction_outcomes", "lineage_events"),
    query="detect/quality_business_metric",
    detector=d.business_metric_drop,
    thresholds={"min_drop": 0.08, "max_p_value": 0.001, "min_labelled": 100.0, "outcome_wait_minutes": 120.0,
                **_REFERENCE},
    fault_types=("business_metric_drop", "bad_promotion"),
    **_QUALITY,
))
