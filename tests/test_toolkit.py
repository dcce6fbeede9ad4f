"""The detector toolkit (checks/toolkit.py) and the check's choice of the worst finding (Signal.direction)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from checks.asset_checks import check_result
from checks.registry import REGISTRY
from checks.toolkit import fixed, mark_stretches, num, prepare, rolling, stretch_ids, stretch_total, window_stretches

T0 = pd.Timestamp("2026-11-30 10:00")


def _minutes(flags: list[int], gaps: dict[int, int] | None = None, key: str = "r") -> pd.DataFrame:
    """One entity's rows a minute apart (row i after a gap of gaps[i] minutes), flagged as given."""
    at, t = [], T0
    for i in range(len(flags)):
        t = t + pd.Timedelta(minutes=(gaps or {}).get(i, 1))
        at.append(t)
    return pd.DataFrame({"run_id": key, "minute": at, "tick": [a + pd.Timedelta(minutes=1) for a in at],
                         "in_window": True, "flag": [bool(x) for x in flags]})


# ------------------------------------------------------------------------------- numbers


def test_num_is_json_able_and_none_for_missing():
    assert num(None) is None and num(float("nan")) is None and num(pd.NaT) is None
    assert num(1410.4, 0) == 1410 and isinstance(num(1410.4, 0), int)
    assert num(np.float64(0.123456), 3) == 0.123 and isinstance(num(np.float64(0.1), 3), float)


def test_fixed_formats_a_number_for_a_sentence_and_a_question_mark_for_missing():
    assert fixed(None) == fixed(float("nan")) == "?"
    assert fixed(np.float64(71.6)) == "72" and fixed(-12.46, "+.1f") == "-12.5"


# ------------------------------------------------------------------------------- stretches


def test_a_gap_longer_than_the_bridge_splits_a_stretch_and_an_unflagged_row_ends_it():
    f = _minutes([1, 1, 1, 1, 0, 1], gaps={2: 5})
    ids = stretch_ids(f, f["flag"], 3)
    assert ids.tolist()[:4] == [1, 1, 2, 2] and np.isnan(ids[4]) and ids[5] == 3
    loose = stretch_ids(f, f["flag"], 3, consecutive=False)   # unflagged rows do not end it
    assert loose.tolist()[3] == loose.tolist()[5] == 2


def test_a_stretch_total_runs_within_each_stretch_and_is_nan_outside():
    f = _minutes([1, 1, 0, 1, 1, 1], gaps={4: 5})
    ids = stretch_ids(f, f["flag"], 3)
    counts = stretch_total(f["flag"], ids)
    assert counts.tolist()[:2] == [1.0, 2.0] and np.isnan(counts[2]) and counts.tolist()[3:] == [1.0, 1.0, 2.0]
    steps = stretch_total(pd.Series([10, 20, 99, 5, 5, 5]), ids)
    assert steps.tolist()[:2] == [10.0, 30.0] and steps.tolist()[3:] == [5.0, 5.0, 10.0]


def test_stretches_never_span_two_entities():
    f = pd.concat([_minutes([1, 1], key="a"), _minutes([1, 1], key="b")], ignore_index=True)
    assert stretch_ids(f, f["flag"], 5).tolist() == [1, 1, 2, 2]


def test_an_episode_opens_after_persisting_and_lasts_while_its_looser_condition_holds():
    f = _minutes([0, 1, 1, 1, 0, 0, 0, 1])
    entry = f["flag"]
    sustain = pd.Series([0, 1, 1, 1, 1, 1, 0, 1], dtype=bool)
    marked = mark_stretches(f, "run_id", entry, sustain=sustain, min_minutes=3, time="minute")
    assert marked["_active"].tolist() == [False, False, False, True, True, True, False, False]
    assert mark_stretches(f, "run_id", entry, min_minutes=4, time="minute")["_active"].sum() == 0


def test_lookback_rows_are_never_reported():
    f = _minutes([1, 1, 1, 1])
    f["in_window"] = [False, False, True, True]
    ids = stretch_ids(f, f["flag"], 1)
    ((span, hits),) = list(window_stretches(f, f["flag"], ids))
    assert len(span) == 4 and hits["in_window"].all() and len(hits) == 2
    f["in_window"] = False
    assert list(window_stretches(f, f["flag"], ids)) == []


def test_rolling_windows_are_per_entity_and_exclude_the_current_row():
    f = prepare(pd.concat([_minutes([0] * 3, key="a"), _minutes([0] * 3, key="b")]), "run_id", "minute")
    trailing = rolling(f, pd.Series([1.0, 2.0, 3.0, 10.0, 20.0, 30.0]), 5, "sum")
    assert np.isnan(trailing[0]) and trailing.tolist()[1:3] == [1.0, 3.0]
    assert np.isnan(trailing[3]) and trailing.tolist()[4:] == [10.0, 30.0]


# ------------------------------------------------------------------------------- the worst finding


def _findings(values: list[float], threshold: float, baseline: float | None = None) -> pd.DataFrame:
    return pd.DataFrame([{
        "entity_id": f"node-0:{i}", "onset": T0, "detected_at": T0, "last_seen": T0, "run_id": "r", "rank": None,
        "hosts": ["node-0"], "gpus": [f"node-0:{i}"], "value": v, "baseline": baseline, "threshold": threshold,
        "evidence": {"gpu": f"node-0:{i}"},
    } for i, v in enumerate(values)])


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"host": ["node-0"] * 3, "gpu_index": [0, 1, 2], "run_id": "r",
                         "tick": [T0] * 3, "in_window": True})


@pytest.mark.parametrize(("signal", "values", "threshold", "baseline", "worst"), [
    # flagged below its threshold: the most idle GPU (0.5% busy), not the mildest (8%)
    ("gpu_idle_allocated", [8.0, 0.5, 3.0], 10.0, None, 0.5),
    ("gpu_busy_low_power", [30.0, 12.0, 25.0], 35.0, None, 12.0),
    ("loss_plateau", [0.004, 0.0001, 0.002], 0.005, None, 0.0001),
    # flagged above: the hottest
    ("gpu_xid_error", [1.0, 4.0, 2.0], 1.0, 0.0, 4.0),
    # flagged outside a band: a checkpoint at 14% of its predecessors is worse than one at 1.6x
    ("checkpoint_size_anomaly", [1.6, 0.14, 0.7], 0.5, 1.0, 0.14),
    # a rank's gradient norm at 50% of its peers' (usually 100%) is further off than one at 160%
    ("gradient_skew", [160.0, 50.0, 130.0], 125.0, 100.0, 50.0),
])
def test_the_check_shows_the_finding_furthest_past_its_threshold(signal, values, threshold, baseline, worst):
    spec = REGISTRY.get(signal)
    result = check_result(spec, _frame(), _findings(values, threshold, baseline), dict(spec.thresholds))
    assert result.metadata["value"].value == worst


def test_a_direction_outside_the_known_ones_is_refused():
    from dataclasses import replace
    with pytest.raises(ValueError, match="direction 'sideways'"):
        replace(REGISTRY.get("gpu_idle_allocated"), direction="sideways")
