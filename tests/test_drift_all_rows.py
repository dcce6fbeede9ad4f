"""Drift verdicts are computed over all rows (issue 17 item 9): a shift below the threshold never
flags and one above always flags, on every seed, where a 5,000-row sample flipped verdicts both ways;
the all-rows statistics are evidently's own (normed Wasserstein, Jensen-Shannon) to the last digits;
each verdict states its noise and margin to the threshold."""

from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from assets.drift import DriftConfig, compute_drift, verdicts
from orchestration.storage import sql
from orchestration.storage.warehouse import WarehouseResource, transaction

FIRST = datetime(2026, 11, 30, 0, 0)           # first prediction: reference = 00:10-01:10 (first stable hour)
REFERENCE = FIRST + timedelta(minutes=10)
HOUR = datetime(2026, 11, 30, 2, 0)            # the judged hour
ROWS = 50_000                                  # per side: noise sqrt(2/5e4) = 0.0063 sd, ~3 noise units from 0.1
SEEDS = range(4)
SHIFTS = {"below": 0.08, "above": 0.12}        # in reference standard deviations; the threshold is 0.1

# x ~ Normal(shift, 1) by Box-Muller on a hash of (seed, side, row): deterministic in any thread order
NORMAL = """
INSERT INTO predictions BY NAME
SELECT $from + to_microseconds(CAST(i * 3600000000 // $n AS BIGINT)) AS time, $endpoint AS endpoint,
       'v1' AS model_version, $side || i AS request_id,
       json_object('x', $shift + sqrt(-2 * ln((CAST(hash($seed, $side, i, 1) >> 11 AS DOUBLE) + 0.5) / 9007199254740992))
                                 * cos(2 * pi() * CAST(hash($seed, $side, i, 2) >> 11 AS DOUBLE) / 9007199254740992)) AS features,
       'ok' AS prediction, 0.9 AS confidence, 'test' AS source_file, CAST(i AS INTEGER) AS source_line
FROM range($n) t(i)
"""


def _insert(con, endpoint: str, side: str, start: datetime, n: int, shift: float, seed: int) -> None:
    con.execute(NORMAL, {"from": start, "n": n, "endpoint": endpoint, "side": side, "shift": shift, "seed": seed})


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    """One endpoint per (seed, shift): ROWS reference predictions and ROWS shifted ones in the judged hour."""
    warehouse = WarehouseResource(path=str(tmp_path_factory.mktemp("drift") / "warehouse.duckdb"))
    with warehouse.connect() as con:
        with transaction(con):
            for seed in SEEDS:
                for name, shift in SHIFTS.items():
                    endpoint = f"{name}-{seed}"
                    _insert(con, endpoint, "first-", FIRST, 1, 0.0, seed)
                    _insert(con, endpoint, "ref-", REFERENCE, ROWS, 0.0, seed)
                    _insert(con, endpoint, "cur-", HOUR, ROWS, shift, seed)
        scores = compute_drift(con, HOUR, HOUR + timedelta(hours=1), DriftConfig(), reports=None)
    return scores[scores["column_name"] == "x"].set_index("endpoint")


def test_a_shift_below_the_threshold_never_flags_and_one_above_always_does(shifted):
    assert len(shifted) == 2 * len(SEEDS)
    for seed in SEEDS:
        below, above = shifted.loc[f"below-{seed}"], shifted.loc[f"above-{seed}"]
        assert below["current_rows"] == ROWS and below["method"] == "wasserstein" and below["threshold"] == 0.1
        assert not below["drifted"] and above["drifted"], (seed, below["score"], above["score"])
        # scored on all rows: the score sits at the true shift, within a few noise units
        assert abs(below["score"] - 0.08) < 3 * below["noise"] and abs(above["score"] - 0.12) < 3 * above["noise"]
        # and the verdict states how far it is from flipping: ~ +-0.02 / 0.0063 = 3.2 noise units
        assert below["noise"] == pytest.approx(np.sqrt(2 / ROWS), rel=1e-6)
        assert below["margin"] < -2 and above["margin"] > 2
        assert below["current_sampled"] == 0       # no report asked for: evidently never ran


def test_the_all_rows_scores_are_evidentlys_statistics(tmp_path):
    """sql/quality/drift_stats.sql against evidently's own stattest functions on the same full data."""
    from evidently.legacy.calculations.stattests.jensenshannon import _jensenshannon
    from evidently.legacy.calculations.stattests.wasserstein_distance_norm import _wasserstein_distance_norm
    from evidently.legacy.core import ColumnType

    rng = np.random.default_rng(7)
    n_ref, n_cur = 1500, 1100
    frames = {
        "ref-": pd.DataFrame({"tokens": rng.integers(8, 2048, n_ref), "temp": rng.random(n_ref).round(3),
                              "lang": rng.choice(["en", "de", "fr"], n_ref, p=[0.6, 0.3, 0.1]),
                              "prediction": rng.choice(["pos", "neg"], n_ref), "confidence": rng.random(n_ref)}),
        "cur-": pd.DataFrame({"tokens": (rng.integers(8, 2048, n_cur) * 1.2).astype(int), "temp": rng.random(n_cur).round(3),
                              "lang": rng.choice(["en", "de", "ja"], n_cur, p=[0.5, 0.3, 0.2]),
                              "prediction": rng.choice(["pos", "neg"], n_cur, p=[0.7, 0.3]), "confidence": rng.random(n_cur)}),
    }
    warehouse = WarehouseResource(path=str(tmp_path / "warehouse.duckdb"))
    with warehouse.connect() as con:
        for (side, frame), start in zip(frames.items(), (REFERENCE, HOUR)):
            rows = frame.assign(time=[start + timedelta(seconds=2 * i) for i in range(len(frame))],
                                endpoint="api", model_version="v1", request_id=[f"{side}{i}" for i in range(len(frame))],
                                features=frame[["tokens", "temp", "lang"]].apply(lambda r: r.to_json(), axis=1),
                                source_file="test", source_line=range(len(frame)))
            con.register("new_rows", rows.drop(columns=["tokens", "temp", "lang"]))
            con.execute("INSERT INTO predictions BY NAME SELECT * REPLACE (CAST(features AS JSON) AS features) FROM new_rows")
            con.unregister("new_rows")
        stats = sql.frame(con, "quality/drift_stats", {
            "endpoint": "api", "version": "v1", "current_start": HOUR, "current_end": HOUR + timedelta(hours=1),
            "reference_start": REFERENCE, "reference_end": REFERENCE + timedelta(hours=1), "reference_version": None})
    stats = stats.set_index("column_name")
    ref, cur = frames["ref-"], frames["cur-"]
    for column in ("tokens", "temp", "confidence"):
        expected, _ = _wasserstein_distance_norm(ref[column], cur[column], ColumnType.Numerical, 0.1)
        assert stats.loc[column, "column_type"] == "num"
        assert stats.loc[column, "score"] == pytest.approx(expected, rel=1e-9)
        assert stats.loc[column, "current_mean"] == pytest.approx(cur[column].mean(), rel=1e-9)
    for column in ("lang", "prediction"):
        expected, _ = _jensenshannon(ref[column], cur[column], ColumnType.Categorical, 0.1)
        assert stats.loc[column, "column_type"] == "cat"
        assert stats.loc[column, "score"] == pytest.approx(expected, rel=1e-9)
    assert (stats["n"] == n_cur).all() and (stats["m"] == n_ref).all()


def test_verdict_noise_floor_and_margin_on_a_small_window():
    """350 rows a side: a distance of 0.15 is below the noise-raised threshold (3 x 0.0756 = 0.227)."""
    stats = pd.DataFrame({"column_name": ["x", "c"], "column_type": ["num", "cat"], "n": [350, 350], "m": [350, 350],
                          "score": [0.15, 0.30], "current_mean": [1.0, None], "reference_mean": [0.9, None]})
    out = verdicts(stats, DriftConfig()).set_index("column_name")
    noise = np.sqrt(2 / 350)
    assert out.loc["x", "threshold"] == pytest.approx(3 * noise) and not out.loc["x", "drifted"]
    assert out.loc["x", "margin"] == pytest.approx((0.15 - 3 * noise) / noise, rel=1e-9)
    assert out.loc["c", "threshold"] == pytest.approx(2 * noise) and out.loc["c", "drifted"]
    assert out.loc["c", "margin"] > 0


def test_a_method_the_warehouse_does_not_compute_is_a_one_line_error(tmp_path):
    warehouse = WarehouseResource(path=str(tmp_path / "warehouse.duckdb"))
    with warehouse.connect() as con, pytest.raises(ValueError, match="num_method 'ks' is not computed.*set num_method: wasserstein"):
        compute_drift(con, HOUR, HOUR + timedelta(hours=1), DriftConfig(num_method="ks"), reports=None)
