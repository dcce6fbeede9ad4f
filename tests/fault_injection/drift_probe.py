"""Scores one fixed pair of prediction samples with evidently as assets/drift.py does and prints, as
JSON, the floats evidently returned ("raw") and the scores drift_scores stores ("stored"). The test
runs it under different PYTHONHASHSEEDs (as two separate runs of one hour are)."""

import json
import sys

import numpy as np
import pandas as pd

import assets.drift as drift


def frames(n: int = 400) -> tuple[pd.DataFrame, pd.DataFrame]:
    """24 categories (a set of 24 strings iterates in a hash-dependent order) and one number."""
    rng = np.random.default_rng(7)
    labels = [f"class-{i:02d}" for i in range(24)]
    skew = np.linspace(1, 3, 24) / np.linspace(1, 3, 24).sum()
    current = pd.DataFrame({"region": rng.choice(labels, n, p=skew), "confidence": rng.beta(5, 2, n)})
    reference = pd.DataFrame({"region": rng.choice(labels, n), "confidence": rng.beta(5, 2, n)})
    return current, reference


if __name__ == "__main__":
    raw: list[float] = []
    rounded = drift.stable

    def recording(value, digits=10):
        raw.append(value)
        return rounded(value, digits)

    drift.stable = recording
    scores, _ = drift.evidently_drift(*frames(), drift.DriftConfig())
    json.dump({"raw": [repr(v) for v in raw], "stored": [repr(v) for v in scores["score"]]}, sys.stdout)
