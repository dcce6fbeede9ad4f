"""Episodes carried across partitions (checks/episodes.py), on small hand-made frames: an open episode
goes on while the fault's own condition holds, its healthy reference is held, and a clearing is
recorded only when the evidence says the fault is over."""

import pandas as pd

from checks import episodes
from checks.detectors_distributed import collective_regression
from checks.detectors_gpu import gpu_thermal_throttle, mark_stretches
from checks.registry import REGISTRY

START = pd.Timestamp("2026-11-30 03:00")


def ticks(n, before=30):
    return [START + pd.Timedelta(minutes=m) for m in range(-before + 1, n - before + 1)]


def throttle_frame(hot_minutes, n=90, before=30):
    """One GPU, 30 lookback minutes + an hour: thermal bits while `hot_minutes(i)`; the clock's trailing
    baseline has long since followed the throttled clock (the fault began hours ago)."""
    rows = []
    for i, t in enumerate(ticks(n, before)):
        hot = hot_minutes(i)
        rows.append({"host": "node-3", "gpu_index": 1, "gpu_uuid": "GPU-x", "minute": t - pd.Timedelta(minutes=1),
                     "tick": t, "in_window": t > START, "run_id": "r", "samples": 6, "utilization_ratio": 0.97,
                     "throttle_reasons": 0x20 if hot else 0, "sm_clock_hertz": 1.0e9 if hot else 1.98e9,
                     "sm_clock_baseline": 1.0e9, "baseline_minutes": 30, "temperature_celsius": 93 if hot else 70,
                     "power_watts": 300.0, "power_limit_watts": 700.0})
    return pd.DataFrame(rows)


THERMAL = dict(REGISTRY.get("gpu_thermal_throttle").thresholds)


def carried(entity, last_seen, onset, reference=None):
    return pd.DataFrame([{"entity_id": entity, "onset": onset, "last_seen": last_seen, "reference": reference}])


def test_a_long_throttle_is_lost_without_its_carried_episode_and_continues_with_it():
    frame = throttle_frame(lambda i: True)                 # throttled for the whole frame, and long before
    assert gpu_thermal_throttle(frame, THERMAL).empty       # the clock baseline absorbed it: entry never holds
    ids = episodes.entity_ids(frame, "gpu", "entity_id")
    assert set(ids) == {"node-3:1"}
    onset = START - pd.Timedelta(hours=2)
    found = gpu_thermal_throttle(episodes.with_open_episodes(frame, ids, carried("node-3:1", START, onset)), THERMAL)
    assert len(found) == 1 and found.loc[0, "last_seen"] == frame["tick"].max()
    found = episodes.carried_onsets(found, carried("node-3:1", START, onset))
    assert found.loc[0, "onset"] == onset                   # the episode keeps its true onset
    # still throttled at the frame's end: no clearing
    gone = episodes.clearings(frame, ids, found, carried("node-3:1", START, onset), None, "gpu_thermal_throttle", "gpu", START)
    assert gone.empty


def test_the_throttle_ending_records_the_clearing_with_what_it_showed():
    frame = throttle_frame(lambda i: i < 50)                # cools down 20 minutes into the hour
    ids = episodes.entity_ids(frame, "gpu", "entity_id")
    carry = carried("node-3:1", START, START - pd.Timedelta(hours=2))
    found = gpu_thermal_throttle(episodes.with_open_episodes(frame, ids, carry), THERMAL)
    assert len(found) == 1 and found.loc[0, "last_seen"] == START + pd.Timedelta(minutes=20)
    describe = REGISTRY.get("gpu_thermal_throttle").clearing
    (clear,) = episodes.clearings(frame, ids, found, carry, describe, "gpu_thermal_throttle", "gpu", START).to_dict("records")
    assert clear["cleared_at"] == START + pd.Timedelta(minutes=21) and clear["last_seen"] == found.loc[0, "last_seen"]
    assert "throttle reasons none" in clear["evidence"]["why"] and clear["evidence"]["sm_clock_mhz"] == 1980


def test_an_episode_that_ended_before_the_hour_is_not_continued():
    # carried, but the GPU was already cool at the boundary: the sustain condition does not hold there
    frame = throttle_frame(lambda i: i >= 60)               # a NEW short throttle 30 minutes into the hour
    ids = episodes.entity_ids(frame, "gpu", "entity_id")
    seeded = mark_stretches(episodes.with_open_episodes(frame, ids, carried("node-3:1", START, START)).assign(
        entity_id=ids), "entity_id", pd.Series(False, index=frame.index), sustain=frame["throttle_reasons"].gt(0))
    assert not seeded["_active"].any()


def test_a_gpu_that_left_the_series_is_cleared_as_gone():
    frame = throttle_frame(lambda i: True)
    other = frame.assign(gpu_index=0)
    frame = pd.concat([frame[frame["tick"] <= START + pd.Timedelta(minutes=5)], other], ignore_index=True)
    ids = episodes.entity_ids(frame, "gpu", "entity_id")
    carry = carried("node-3:1", START, START - pd.Timedelta(hours=1))
    found = gpu_thermal_throttle(episodes.with_open_episodes(frame, ids, carry), THERMAL)
    mine = found[found["entity_id"] == "node-3:1"]
    (clear,) = episodes.clearings(frame, ids, mine, carry, None, "gpu_thermal_throttle", "gpu", START).to_dict("records")
    assert clear["cleared_at"] == clear["last_seen"] == START + pd.Timedelta(minutes=5)
    assert "left the signal's series" in clear["evidence"]["why"]


def collective_frame(n=180, before=120, regressed=lambda i: True, baseline=0.8):
    """One run: collectives at 0.8 s for hours (a regression from 0.4 s whose trailing baseline and
    floor have long followed it)."""
    rows = []
    for i, t in enumerate(ticks(n, before)):
        value = baseline if regressed(i) else 0.4
        rows.append({"run_id": "coll", "minute": t - pd.Timedelta(minutes=1), "tick": t, "in_window": t > START,
                     "ranks_reporting": 2, "collective_seconds": value, "transfer_seconds": value, "wait_seconds": 0.0,
                     "transfer_seconds_baseline": baseline, "transfer_seconds_mad": 0.01,
                     "transfer_baseline_floor": baseline, "compute_seconds": 3.0,
                     "compute_seconds_baseline": 3.0, "baseline_minutes": 30, "compute_outlier_ratio": 1.0,
                     "hosts": ["node-5"], "gpus": ["node-5:0", "node-5:1"]})
    return pd.DataFrame(rows)


def test_a_collective_regression_is_held_against_the_reference_it_opened_with():
    thresholds = dict(REGISTRY.get("collective_regression").thresholds)
    frame = collective_frame()
    assert collective_regression(frame, thresholds).empty   # its own baseline is the fault now
    ids = episodes.entity_ids(frame, "run", "run_id")
    carry = carried("coll", START, START - pd.Timedelta(hours=4), reference=0.4)
    found = collective_regression(episodes.with_open_episodes(frame, ids, carry), thresholds)
    assert len(found) == 1 and found.loc[0, "last_seen"] == frame["tick"].max()
    assert found.loc[0, "evidence"]["held_reference"] == 0.4 and found.loc[0, "value"] == 200.0
    # the network recovers at 03:30: the episode ends there, and the clearing says so
    frame = collective_frame(regressed=lambda i: i < 150)
    found = collective_regression(episodes.with_open_episodes(frame, ids, carry), thresholds)
    assert found.loc[0, "last_seen"] == START + pd.Timedelta(minutes=30)
    (clear,) = episodes.clearings(frame, ids, found, carry, REGISTRY.get("collective_regression").clearing,
                                  "collective_regression", "run", START).to_dict("records")
    assert clear["cleared_at"] == START + pd.Timedelta(minutes=31) and "0.4 s" in clear["evidence"]["why"]


def test_entity_ids_name_gpus_and_ranks_as_findings_do():
    gpu = pd.DataFrame({"host": ["node-0", "node-1"], "gpu_index": [3, 0]})
    assert list(episodes.entity_ids(gpu, "gpu", "entity_id")) == ["node-0:3", "node-1:0"]
    ranks = pd.DataFrame({"run_id": ["llm"], "rank": [7]})
    assert list(episodes.entity_ids(ranks, "rank", "entity_id")) == ["llm/rank-7"]
    assert list(episodes.entity_ids(pd.DataFrame({"endpoint": ["chat"]}), "endpoint", "endpoint")) == ["chat"]


def test_joined_ids_are_the_row_by_row_concatenation_with_missing_values_spelled_as_pandas_does():
    import numpy as np

    from checks.episodes import joined_ids

    rng = np.random.default_rng(7)
    for trial in range(60):
        n = int(rng.integers(0, 40))
        index = rng.permutation(n) + 3   # an index of its own, kept
        hosts = pd.Series(rng.choice(["node-1", "node-2", "gpu-host-10"], n), index=index, dtype=object)
        gpus = pd.Series(rng.integers(0, 8, n), index=index)
        if n and trial % 4 == 0:
            hosts.iloc[0] = None
        if n and trial % 5 == 0:
            gpus = gpus.astype(float)
            gpus.iloc[-1] = np.nan
        expected = hosts.astype(str) + ":" + gpus.astype(str)
        pd.testing.assert_series_equal(joined_ids(hosts, ":", gpus), expected)
