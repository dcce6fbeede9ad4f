"""Model-quality faults (target ``endpoint:<name>``): effects on the prediction log and its
outcomes. A prediction is right when ``hit`` (its uniform draw) is below its chance of being right,
so a lower chance makes the same predictions wrong more often."""

from __future__ import annotations

import numpy as np

from ..common import epoch_ms, iso, stream
from .registry import FaultEffect, register

LANGUAGES = ("en", "de", "fr", "ja", "es")


def _input_drift(fr, f, k, on, lo):
    if not on.any():
        return
    m = f.magnitude
    rng = stream(fr.scenario.seed, "quality-fault", fr.endpoint.name, k)
    fr.prompt_tokens[on] = np.clip(np.round(fr.prompt_tokens[on] * (1.0 + m)), 8, 32768).astype(fr.prompt_tokens.dtype)
    fr.language[on & (rng.uniform(size=len(fr.t)) < m / 2)] = LANGUAGES.index("ja")
    fr.temperature[on] = np.round(np.clip(fr.temperature[on] + 0.3 * m, 0.0, 1.0), 2)


def _bad_promotion(fr, f, k, on, lo):
    if not any(abs(at - lo) < 1.0 for at, _ in fr.versions):
        raise fr.fail("faults", f"bad_promotion on {f.target} at {iso(epoch_ms(f.onset))} "
                      "is not at a promotion of the endpoint", "set its onset to a promotion's 'at'")
    if not on.any():
        return
    fr.correct[on] = fr.hit[on] < fr.confidence[on] * (1.0 - 0.4 * f.magnitude)
    fr.confidence[on] = np.round(fr.confidence[on] * (1.0 - 0.25 * f.magnitude), 4)


def _confidence_shift(fr, f, k, on, lo):
    if on.any():
        fr.confidence[on] = np.round(fr.confidence[on] * (1.0 - 0.3 * f.magnitude), 4)


def _business_drop(fr, f, k, on, lo):
    if on.any():
        fr.correct[on] = fr.hit[on] < fr.confidence[on] * (1.0 - 0.5 * f.magnitude)


register(FaultEffect(
    "input_drift", "quality", ("endpoint",),
    "the inputs of the version served move: prompt_tokens x(1 + magnitude), a share (magnitude / 2) of "
    "requests switch to language 'ja', temperature +0.3 x magnitude; predictions and outcomes unchanged",
    quality=_input_drift))
register(FaultEffect(
    "bad_promotion", "quality", ("endpoint",),
    "the version promoted at the onset (an endpoint promotion must be at the onset) is worse until the end: "
    "confidence x(1 - 0.25 x magnitude), outcome rate x(1 - 0.4 x magnitude)", max_magnitude=1.0,
    quality=_bad_promotion))
register(FaultEffect(
    "confidence_shift", "quality", ("endpoint",),
    "prediction confidence x(1 - 0.3 x magnitude); which predictions are right is unchanged",
    max_magnitude=1.0, quality=_confidence_shift))
register(FaultEffect(
    "business_metric_drop", "quality", ("endpoint",),
    "outcomes match the prediction x(1 - 0.5 x magnitude) as often; inputs, predictions and confidence "
    "unchanged (a change downstream, or a failure the model cannot see)", max_magnitude=1.0,
    quality=_business_drop))
