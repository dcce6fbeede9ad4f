"""Hysteresis for standing faults (issue 17 item 3): entry by cost, exit only after sustained health.

`hysteresis.persisted` (duration, or duration and cost), `hysteresis.bridge_dips` and
`episodes.clearings(..., clear_minutes=...)` on the straggler's frames: a straggler that dips back in
step for a minute records no clearing (its incident cannot resolve, and the detector joins the two
sides into one stretch); one that stays in step for `clear_minutes` does; one whose run ends clears.
"""

import pandas as pd

from checks import episodes, hysteresis
from checks.detectors_distributed import straggler_rank
from checks.registry import REGISTRY
from tests.detector_frames import T0, spans, th

SIGNAL = REGISTRY.get("straggler_rank")
CLEAR = SIGNAL.thresholds["clear_minutes"]


def clear(frame, found, clear_minutes=CLEAR):
    ids = episodes.entity_ids(frame, "rank", "entity_id")
    none = pd.DataFrame(columns=["entity_id", "onset", "last_seen", "reference"])
    return episodes.clearings(frame, ids, found, none, SIGNAL.clearing, SIGNAL.name, "rank", T0,
                              clear_minutes=clear_minutes)


def test_a_dip_at_the_end_of_the_frame_records_no_clearing_yet():
    frame = spans((0, 57, 3.0, {3}))                       # back in step for the frame's last 3 minutes
    found = straggler_rank(frame, th("straggler_rank"))
    assert found.iloc[0]["last_seen"] == T0 + pd.Timedelta(minutes=57)
    assert clear(frame, found).empty
    # the undecided episode is carried into the next partition (open_episodes' grace covers it)
    assert frame["tick"].max() - found.iloc[0]["last_seen"] < pd.Timedelta(minutes=episodes.GRACE_MINUTES)
    # without hysteresis the first clean minute would have cleared it
    assert clear(frame, found, clear_minutes=0)["cleared_at"].tolist() == [T0 + pd.Timedelta(minutes=58)]


def test_a_straggler_in_step_for_the_clearing_time_is_cleared_with_the_evidence():
    frame = spans((0, 40, 3.0, {3}))
    found = straggler_rank(frame, th("straggler_rank"))
    (row,) = clear(frame, found).to_dict("records")
    assert row["cleared_at"] == T0 + pd.Timedelta(minutes=41) and row["entity_id"] == "run-a/rank-3"
    assert "in step with its peers" in row["evidence"]["why"] and row["evidence"]["clean_minutes"] == 20


def test_a_straggler_whose_run_ends_is_cleared():
    frame = spans((0, 50, 3.0, {3}))
    frame = frame[frame["minute"] < T0 + pd.Timedelta(minutes=52)]
    other = spans(seed=4).assign(run_id="run-b")               # the frame runs on with another run
    frame = pd.concat([frame, other], ignore_index=True)
    found = straggler_rank(frame, th("straggler_rank"))
    assert clear(frame, found)["entity_id"].tolist() == ["run-a/rank-3"]


def test_persisted_trades_duration_against_cost():
    f = pd.DataFrame({"key": "a", "tick": [T0 + pd.Timedelta(minutes=m) for m in range(6)]})
    entry = pd.Series([True, True, False, True, False, True])
    cost = pd.Series([1.0, 1.0, 0.0, 5.0, 0.0, 0.5])
    got = hysteresis.persisted(f, "key", entry, cost, min_minutes=3, min_short_minutes=2, min_cost=1.5, max_gap_minutes=1)
    assert got.tolist() == [False, True, False, False, False, False]   # 2 minutes costing 2.0; one minute never


def test_bridge_dips_joins_short_dips_only():
    ticks = [T0 + pd.Timedelta(minutes=m) for m in range(30)]
    on = [m < 8 or 10 <= m < 15 or m >= 27 for m in range(30)]   # dips of 2 and 12 minutes
    f = pd.DataFrame({"key": "a", "tick": ticks, "_active": on, "_stretch": [0] * 8 + [-1] * 2 + [1] * 5 + [-1] * 12 + [2] * 3})
    out = hysteresis.bridge_dips(f, "key", clear_minutes=10, max_gap_minutes=5)
    assert out["_active"].tolist() == [m < 15 or m >= 27 for m in range(30)]
    assert out["_stretch"].iloc[0] == out["_stretch"].iloc[14] != out["_stretch"].iloc[27]
