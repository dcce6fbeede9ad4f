"""Distributed detectors as pure functions on hand-made per-rank / per-run minute frames: a case
each must flag, cases it must not (healthy noise, look-alikes from other faults) and edges (too
little history, two-rank runs, the hour boundary)."""

import numpy as np
import pandas as pd
import pytest

import checks.signals  # noqa: F401
from checks import detectors_distributed as d
from checks.detectors_distributed import loo_median
from checks.registry import REGISTRY
from tests.detector_frames import T0, rank_frame, spans, th

# --- peers' median, the rank left out ---------------------------------------------------------

def test_loo_median_leaves_the_row_out():
    values = pd.Series([1.0, 2.0, 3.0, 10.0, 5.0, 7.0, np.nan])
    groups = [pd.Series(["a", "a", "a", "a", "b", "b", "b"])]
    got = loo_median(values, groups).tolist()
    assert got[:4] == [3.0, 3.0, 2.0, 2.0]          # a: others of 1 -> {2,3,10}: 3; of 10 -> {1,2,3}: 2
    assert got[4:6] == [7.0, 5.0] and np.isnan(got[6])


# --- straggler ---------------------------------------------------------------------------------

THROTTLED_STRAGGLER = {
    "compute_seconds": lambda r: 1.6 * 1.3, "collective_seconds": 0.03,
    "gpu_temperature_celsius": 93.0, "gpu_throttle_reasons": 0x40 | 0x20, "gpu_sm_clock_hertz": 1.4e9,
}
PEERS_WAIT = {"collective_seconds": lambda r: 0.35 + 0.48}


def straggling(rank=3, ranks=8, start=20, end=60, **kw):
    return rank_frame(ranks=ranks, changes=[(start, end, THROTTLED_STRAGGLER, {rank}),
                                            (start, end, PEERS_WAIT, set(range(ranks)) - {rank})], **kw)


def test_straggler_flags_the_slow_rank_and_cites_its_gpu():
    found = d.straggler_rank(straggling(), th("straggler_rank"))
    assert found["entity_id"].tolist() == ["run-a/rank-3"]
    row = found.iloc[0]
    assert row["hosts"] == ["node-0"] and row["gpus"] == ["node-0:3"] and row["rank"] == 3
    # 1.3x on 8 GPUs costs the run ~1.9 GPU-minutes a minute: two minutes are enough (issue 17 item 4)
    assert row["onset"] == T0 + pd.Timedelta(minutes=20) and row["detected_at"] == T0 + pd.Timedelta(minutes=22)
    ev = row["evidence"]
    assert ev["slowdown_pct"] == pytest.approx(30.0, abs=1.0) and ev["run_gpus"] == 8
    assert ev["gpu_minutes_lost"] == pytest.approx(40 * 30 * 0.48 * 8 / 60, rel=0.05)
    assert ev["gpu_throttle_reasons"] == "SW_THERMAL_SLOWDOWN|HW_THERMAL_SLOWDOWN"
    assert ev["gpu_clock_drop_pct"] == pytest.approx(28.9, abs=0.1) and "93 °C" in ev["gpu_layer"]


def test_straggler_in_a_two_rank_run_names_the_slow_one():
    found = d.straggler_rank(straggling(rank=1, ranks=2), th("straggler_rank"))
    assert found["entity_id"].tolist() == ["run-a/rank-1"]


def test_straggler_stays_open_after_its_own_baseline_adapts():
    frame = straggling(start=5, end=60)
    late = frame["minute"] >= T0 + pd.Timedelta(minutes=25)
    frame.loc[late & (frame["rank"] == 3), "compute_seconds_baseline"] = 1.6 * 1.3
    found = d.straggler_rank(frame, th("straggler_rank"))
    assert len(found) == 1 and found.iloc[0]["last_seen"] == T0 + pd.Timedelta(minutes=60)


def test_straggler_stays_open_across_an_evaluation_pause():
    # no step records for 2 minutes (no rows), and the own baseline has caught up by then
    frame = straggling(start=5, end=60)
    frame.loc[(frame["minute"] >= T0 + pd.Timedelta(minutes=25)) & (frame["rank"] == 3), "compute_seconds_baseline"] = 2.08
    frame = frame[~frame["minute"].between(T0 + pd.Timedelta(minutes=30), T0 + pd.Timedelta(minutes=31))]
    found = d.straggler_rank(frame, th("straggler_rank"))
    assert len(found) == 1 and found.iloc[0]["last_seen"] == T0 + pd.Timedelta(minutes=60)


def built(frame, which, factor):
    """`frame` whose ranks `which` have always computed `factor` x (their own baselines say so)."""
    return frame.assign(compute_seconds_baseline=np.where(frame["rank"].isin(which), 1.6 * factor, 1.6))


# --- issue 17 item 3: a standing imbalance is one episode, judged against the peers -------------

def test_per_worker_step_times_without_the_breakdown_are_judged():
    # an importer that has only each worker's step time (no compute/collective split)
    frame = spans((10, 60, 2.5, {3})).assign(step_seconds=lambda f: f["compute_seconds"] + 0.4,
                                             compute_seconds=np.nan, collective_seconds=np.nan)
    assert d.straggler_rank(frame, th("straggler_rank"))["entity_id"].tolist() == ["run-a/rank-3"]


def test_a_straggler_slow_since_before_the_history_began_is_flagged():
    # its own baseline is the slow state: only its peers show it (the old self-change rule never opened)
    frame = spans((-30, 60, 2.5, {3})).assign(compute_seconds_baseline=lambda f: np.where(f["rank"] == 3, 4.0, 1.6))
    found = d.straggler_rank(frame, th("straggler_rank"))
    assert found["entity_id"].tolist() == ["run-a/rank-3"] and found.iloc[0]["last_seen"] == T0 + pd.Timedelta(minutes=60)


def test_a_one_minute_dip_does_not_end_a_standing_straggler():
    frame = spans((-30, 30, 3.0, {3}), (31, 60, 3.0, {3}))        # in step with its peers for minute 30 only
    found = d.straggler_rank(frame, th("straggler_rank"))
    assert len(found) == 1 and found.iloc[0]["last_seen"] == T0 + pd.Timedelta(minutes=60)


def synced(frame):
    """Collectives as a synchronous all-reduce makes them: each rank waits for the slowest one."""
    slowest = frame.groupby("minute")["compute_seconds"].transform("max")
    return frame.assign(collective_seconds=0.35 + slowest - frame["compute_seconds"])


def test_five_stragglers_of_sixteen_ranks_stay_flagged_throughout():
    # five workers 2.5-4x slower than their peers for the whole window (the real trace's shape), with dips
    frame = rank_frame(ranks=16)
    for r, f in zip((1, 4, 7, 10, 13), (2.5, 3.0, 3.5, 4.0, 2.5)):
        frame.loc[frame["rank"] == r, "compute_seconds"] *= f
    dip = frame["minute"].isin([T0 + pd.Timedelta(minutes=m) for m in (12, 40, 41)]) & frame["rank"].isin([4, 10])
    frame.loc[dip, "compute_seconds"] = 1.6
    frame = synced(frame)
    found = d.straggler_rank(frame, th("straggler_rank"))
    assert sorted(found["entity_id"]) == [f"run-a/rank-{r}" for r in (1, 10, 13, 4, 7)]
    assert (found["last_seen"] == T0 + pd.Timedelta(minutes=60)).all() and len(found) == 5


def test_a_host_whose_ranks_slow_down_mid_run_is_flagged():
    # half the job (node-1's four ranks) is too many for "a few", but they slowed against their own history
    frame = spans((20, 60, 1.4, {4, 5, 6, 7}))
    found = d.straggler_rank(frame, th("straggler_rank"))
    assert sorted(found["entity_id"]) == [f"run-a/rank-{r}" for r in (4, 5, 6, 7)]
    assert set(found["hosts"].map(tuple)) == {("node-1",)}


def test_hysteresis_keeps_a_straggler_that_wavers_around_the_entry_threshold():
    # entered at 1.3x, then 1.07-1.12x: below the entry ratio half the time, above the exit ratio always
    wave = [(m, m + 1, 1.07 if m % 2 else 1.12, {3}) for m in range(25, 60)]
    found = d.straggler_rank(spans((15, 25, 1.3, {3}), *wave), th("straggler_rank"))
    assert len(found) == 1 and found.iloc[0]["last_seen"] == T0 + pd.Timedelta(minutes=60)


def test_a_dip_longer_than_the_clearing_time_ends_the_episode():
    found = d.straggler_rank(spans((5, 20, 2.0, {3}), (35, 60, 2.0, {3})), th("straggler_rank"))
    assert len(found) == 2 and found["last_seen"].tolist() == [T0 + pd.Timedelta(minutes=20), T0 + pd.Timedelta(minutes=60)]


# --- issue 17 item 4: severity and duration trade off by GPU-time lost --------------------------

@pytest.mark.parametrize("ranks,factor", [(8, 1.3), (4, 1.3), (4, 2.4), (2, 1.6), (16, 1.3)])
def test_a_short_severe_straggler_is_flagged(ranks, factor):
    found = d.straggler_rank(spans((20, 22, factor, {1}), ranks=ranks), th("straggler_rank"))
    assert found["entity_id"].tolist() == ["run-a/rank-1"]
    assert found.iloc[0]["detected_at"] == T0 + pd.Timedelta(minutes=22)
    assert found.iloc[0]["evidence"]["gpu_minutes_lost"] >= th("straggler_rank")["min_lost_gpu_minutes"]


@pytest.mark.parametrize("frame", [
    rank_frame(),                                                                           # healthy jitter
    rank_frame(changes=[(20, 60, {"compute_seconds": lambda r: r["compute_seconds"] * 1.4}, set(range(8)))]),  # all slower
    built(spans((-30, 60, 1.3, {0, 2, 4, 6})), {0, 2, 4, 6}, 1.3),                         # half the job slower: its build
    built(spans((-30, 60, 1.3, {1, 4, 6})), {1, 4, 6}, 1.3),                                # a third of it: still its build
    spans((20, 21, 3.0, {3})),                                                              # one noisy minute, however slow
    spans((20, 22, 1.12, {3}), ranks=4),                                                    # 2 mild minutes: under the cost
    spans((20, 22, 1.5, {3}), ranks=64).assign(steps_completed=2),                          # 2 minutes of 2 steps: samples
    spans((20, 60, 1.07, {3})),                                                             # under the entry ratio
    rank_frame(changes=[(20, 60, {"compute_seconds": 1.6 * 1.3}, {3})]),                    # slower but nobody waits
    rank_frame(ranks=1),                                                                    # no peers
])
def test_straggler_quiet(frame):
    assert d.straggler_rank(frame, th("straggler_rank")).empty


# --- collective regression ---------------------------------------------------------------------

def collective_frame(minutes=60, lookback=60, changes=(), seed=1):
    """Per run and minute, as sql/detect/collective_regression.sql gives it: the transfer time (collective
    less the wait for the slowest rank) at 0.35 s with its trailing baseline, on two hosts."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(-lookback, minutes):
        minute = T0 + pd.Timedelta(minutes=m)
        transfer = 0.35 * rng.lognormal(0, 0.03)
        row = {"run_id": "run-a", "minute": minute, "tick": minute + pd.Timedelta(minutes=1), "in_window": minute >= T0,
               "ranks_reporting": 8, "transfer_seconds": transfer, "collective_seconds": transfer + 0.01,
               "wait_seconds": 0.01, "slowest_host": "node-1", "fastest_host_transfer_seconds": transfer * 0.98,
               "transfer_seconds_baseline": 0.35, "transfer_seconds_mad": 0.007, "transfer_baseline_floor": 0.35,
               "compute_seconds": 1.6 * rng.lognormal(0, 0.003), "compute_seconds_baseline": 1.6,
               "baseline_minutes": 30, "compute_outlier_ratio": 1.01, "hosts": ["node-0", "node-1"],
               "gpus": ["node-0:0", "node-1:0"]}
        for start, end, values in changes:
            if start <= m < end:
                row.update({k: (v(row) if callable(v) else v) for k, v in values.items()})
        rows.append(row)
    return pd.DataFrame(rows)


SLOW_NET = {"transfer_seconds": lambda r: r["transfer_seconds"] * 1.6,
            "fastest_host_transfer_seconds": lambda r: r["fastest_host_transfer_seconds"] * 1.6}


def test_collective_regression_flags_the_run():
    found = d.collective_regression(collective_frame(changes=[(20, 60, SLOW_NET)]), th("collective_regression"))
    assert len(found) == 1
    row = found.iloc[0]
    assert row["entity_id"] == "run-a" and row["detected_at"] == T0 + pd.Timedelta(minutes=25)
    assert row["evidence"]["rise_pct"] == pytest.approx(60, abs=6) and row["gpus"] == ["node-0:0", "node-1:0"]
    assert row["evidence"]["scope"] == "every host"


def test_one_hosts_degraded_links_name_that_host():
    one = {"transfer_seconds": lambda r: r["transfer_seconds"] * 1.6, "slowest_host": "node-0"}
    row = d.collective_regression(collective_frame(changes=[(20, 60, one)]), th("collective_regression")).iloc[0]
    assert row["hosts"] == ["node-0"] and row["gpus"] == ["node-0:0"] and row["evidence"]["scope"] == "host node-0"


def test_collective_regression_stays_open_as_the_baseline_drifts_up():
    frame = collective_frame(changes=[(20, 60, SLOW_NET), (36, 60, {"transfer_seconds_baseline": 0.56})])
    found = d.collective_regression(frame, th("collective_regression"))
    assert len(found) == 1 and found.iloc[0]["last_seen"] == T0 + pd.Timedelta(minutes=60)


def test_a_network_slowdown_during_a_straggler_is_flagged():
    # the straggler's peers wait (collective up, compute outlier 1.5), and the transfer time rises too
    straggler = {"collective_seconds": lambda r: r["collective_seconds"] + 0.8, "wait_seconds": 0.8,
                 "compute_outlier_ratio": 1.5}
    found = d.collective_regression(collective_frame(changes=[(0, 60, straggler), (20, 60, SLOW_NET)]),
                                    th("collective_regression"))
    assert len(found) == 1 and found.iloc[0]["onset"] == T0 + pd.Timedelta(minutes=20)


@pytest.mark.parametrize("changes", [
    [],                                                                                   # healthy
    [(20, 60, {"collective_seconds": lambda r: r["collective_seconds"] + 0.5, "wait_seconds": 0.5,
               "compute_outlier_ratio": 1.09})],                                          # peers wait for a 1.09x rank
    [(20, 60, {"compute_seconds": 1.6 * 1.4})],                                           # compute rose: not the network
    [(20, 23, SLOW_NET)],                                                                 # 3 minutes
    [(20, 60, {**SLOW_NET, "baseline_minutes": 8})],                                      # too little history
    [(m, m + 1, {"transfer_seconds": 0.35 * 2.5}) for m in range(0, 60, 7)],             # single slow steps
])
def test_collective_regression_quiet(changes):
    assert d.collective_regression(collective_frame(changes=changes), th("collective_regression")).empty


# --- rank dropout ------------------------------------------------------------------------------

def frozen(at):
    """Rows whose last step stays at minute `at` (the rank stopped there)."""
    return {"last_step_time": lambda r: T0 + pd.Timedelta(minutes=at, seconds=31),
            "steps_completed": 0}


def test_dropout_names_the_rank_whose_gpu_left_while_peers_spin():
    released = {"gpu_held": False, "gpu_run_id": None, "gpu_utilization": 0.0, "gpus_held": 3}
    frame = rank_frame(ranks=4, changes=[
        (20, 40, {**frozen(20), "run_last_step_time": lambda r: T0 + pd.Timedelta(minutes=20, seconds=33)}, {0, 1, 2, 3}),
        (21, 40, released, {2}), (21, 40, {"gpus_held": 3}, {0, 1, 3}),
    ])
    found = d.rank_dropout(frame, th("rank_dropout"))
    assert found["entity_id"].tolist() == ["run-a/rank-2"]
    row = found.iloc[0]
    assert row["onset"] == T0 + pd.Timedelta(minutes=20, seconds=31)
    assert row["gpus"] == ["node-0:2"] and row["evidence"]["gpu_state"] == "GPU released by the run"
    assert row["detected_at"] <= T0 + pd.Timedelta(minutes=24)


def test_dropout_after_an_xid_79_cites_it():
    gone = {"gpu_held": False, "gpu_run_id": None, "gpu_samples": 0, "gpu_utilization": None, "gpu_last_xid": 79}
    frame = rank_frame(ranks=4, changes=[
        (20, 40, {**frozen(20), "run_last_step_time": lambda r: T0 + pd.Timedelta(minutes=20, seconds=33)}, {0, 1, 2, 3}),
        (20, 40, gone, {1}), (20, 40, {"gpus_held": 3}, {0, 2, 3}),
    ])
    found = d.rank_dropout(frame, th("rank_dropout"))
    assert found["entity_id"].tolist() == ["run-a/rank-1"]
    assert found.iloc[0]["evidence"]["gpu_last_xid"] == 79
    assert "fallen off the bus" in found.iloc[0]["evidence"]["gpu_state"]


def test_dropout_while_peers_go_on():
    frame = rank_frame(ranks=4, changes=[(20, 60, frozen(20), {3})])
    found = d.rank_dropout(frame, th("rank_dropout"))
    assert found["entity_id"].tolist() == ["run-a/rank-3"] and found.iloc[0]["evidence"]["peers_progressing"]


@pytest.mark.parametrize("changes", [
    [],                                                                                     # healthy
    [(20, 23, {**frozen(20), "run_last_step_time": lambda r: T0 + pd.Timedelta(minutes=20, seconds=31)},
      {0, 1, 2, 3})],                                                                       # 3-min eval pause, GPUs held
    [(20, 60, {**frozen(20), "run_last_step_time": lambda r: T0 + pd.Timedelta(minutes=20, seconds=31)},
      {0, 1, 2, 3})],                                                                       # a hang: every GPU still held
    [(20, 60, {**frozen(20), "run_last_step_time": lambda r: T0 + pd.Timedelta(minutes=20, seconds=31),
               "gpu_held": False, "gpu_run_id": None, "gpus_held": 0}, {0, 1, 2, 3})],     # run ended: all released
    [(20, 60, {**frozen(20), "run_last_step_time": lambda r: T0 + pd.Timedelta(minutes=20, seconds=31),
               "host": None, "gpu_index": None, "gpu_held": False, "gpus_held": 0}, {0, 1, 2, 3})],  # GPU unknown
])
def test_dropout_quiet(changes):
    assert d.rank_dropout(rank_frame(ranks=4, changes=changes), th("rank_dropout")).empty


def test_dropout_waits_for_many_step_intervals_on_slow_runs():
    # 60-s steps: 2.5 min without a step is only 2.5 steps
    frame = rank_frame(ranks=4, changes=[(-30, 60, {"step_interval_seconds": 60.0}, {0, 1, 2, 3}), (20, 23, frozen(20), {3})])
    assert d.rank_dropout(frame, th("rank_dropout")).empty


# --- gradient skew -----------------------------------------------------------------------------

SKEWED = {"grad_norm": lambda r: r["grad_norm"] * 1.6}


def test_gradient_skew_flags_the_rank():
    found = d.gradient_skew(rank_frame(changes=[(20, 60, SKEWED, {5})]), th("gradient_skew"))
    assert found["entity_id"].tolist() == ["run-a/rank-5"]
    ev = found.iloc[0]["evidence"]
    assert ev["ratio_to_peers"] == pytest.approx(1.6, abs=0.05) and ev["direction"] == "higher"


def test_gradient_skew_low_side_too():
    frame = rank_frame(changes=[(20, 60, {"grad_norm": lambda r: r["grad_norm"] * 0.5}, {0})])
    assert d.gradient_skew(frame, th("gradient_skew"))["entity_id"].tolist() == ["run-a/rank-0"]


@pytest.mark.parametrize("frame", [
    rank_frame(),                                                                           # healthy
    rank_frame(changes=[(20, 30, {"grad_norm": lambda r: r["grad_norm"] * 20}, set(range(8)))]),  # run-wide spike
    rank_frame(changes=[(-30, 60, {"grad_norm": 1.5, "grad_norm_ratio_baseline": 1.5}, {2})]),    # always higher
    rank_frame(ranks=2, changes=[(20, 60, SKEWED, {1})]),                                   # two ranks: unknowable
    rank_frame(changes=[(20, 60, {"grad_norm": float("nan")}, set(range(8)))]),             # non-finite everywhere
    rank_frame(changes=[(20, 60, SKEWED, {5})]).assign(baseline_minutes=3),                 # too little history
    rank_frame(changes=[(20, 23, SKEWED, {5})]),                                            # 3 minutes
])
def test_gradient_skew_quiet(frame):
    assert d.gradient_skew(frame, th("gradient_skew")).empty


def test_empty_frames_give_no_findings():
    for name in ("straggler_rank", "rank_dropout", "gradient_skew"):
        signal = REGISTRY.get(name)
        assert signal.detector(rank_frame().iloc[0:0], signal.thresholds).empty
    assert d.collective_regression(collective_frame().iloc[0:0], th("collective_regression")).empty


def test_rank_dropout_reads_a_runs_history_only_as_far_back_as_a_silent_rank_needs():
    """rank_dropout's frame holds every rank of the run since its (re)start, with its true last step, also one
    silent for hours; it reads back past the hour before its lookback only for a run not all of whose ranks
    (0 .. world size - 1) reported in that hour (sql/detect/rank_dropout.sql: near, whole, far)."""
    from orchestration.storage import sql
    from tests.detector_frames import warehouse_of

    def minutes(first, last):
        return pd.date_range(first, last, freq="min")

    rows, world = [], []
    for run, ranks in (("run-whole", range(4)), ("run-gap", range(3))):
        for rank in ranks:
            for m in minutes("2026-11-30 07:00", "2026-11-30 10:59"):
                if run == "run-whole" and rank == 2 and m >= pd.Timestamp("2026-11-30 09:00"):
                    break   # silent through the lookback: its last step is the hour before's
                rows.append((run, rank, f"node-{rank}", m))
        world += [{"run_id": run, "minute": m, "world_size": 4, "ranks_reporting": 4, "steps_completed": 1,
                   "nonfinite_losses": 0, "baseline_window_minutes": 30, "baseline_minutes": 30}
                  for m in minutes("2026-11-30 07:00", "2026-11-30 10:59")]
    rows += [("run-gap", 3, "node-9", m) for m in minutes("2026-11-30 05:00", "2026-11-30 05:30")]   # silent since 05:30
    rank_minutes = pd.DataFrame([{"run_id": r, "rank": k, "host": h, "gpu_index": k, "minute": m, "steps_completed": 1,
                                  "last_step_time": m + pd.Timedelta(seconds=50), "nonfinite_losses": 0,
                                  "baseline_window_minutes": 30, "baseline_minutes": 30} for r, k, h, m in rows])
    started = pd.DataFrame([{"event": "run_started", "run_id": r, "time": pd.Timestamp("2026-11-30 04:00"), "payload": "{}",
                             "source_file": "x", "source_line": i} for i, r in enumerate(("run-whole", "run-gap"))])
    with warehouse_of(rank_minutes=rank_minutes, run_minutes=pd.DataFrame(world), lineage_events=started) as con:
        frame = sql.frame(con, "detect/rank_dropout", {"start": T0, "end": T0 + pd.Timedelta(hours=1),
                                                       **th("rank_dropout")})
    first = frame[frame["in_window"]].sort_values("minute").groupby("entity_id").first()
    assert set(first.index) == {f"{r}/rank-{k}" for r in ("run-whole", "run-gap") for k in range(4)}
    assert first.loc["run-gap/rank-3", "last_step_time"] == pd.Timestamp("2026-11-30 05:30:50")   # far back
    assert first.loc["run-gap/rank-3", "host"] == "node-9"
    assert first.loc["run-whole/rank-2", "last_step_time"] == pd.Timestamp("2026-11-30 08:59:50")  # the hour before
