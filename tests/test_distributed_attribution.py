"""Straggler or network? (issue 17 item 6) Each effect on its own evidence, through the real frames.

Per-rank minutes are written as a synchronous job makes them (every rank's step ends together: a
rank's collective is the transfer time plus its wait for the last rank to arrive) into `rank_minutes`
of an in-memory warehouse; the signals' SQL (`sql/detect/straggler_rank.sql`,
`sql/detect/collective_regression.sql`) builds their frames and the detectors judge them. A straggler
just under its threshold is neither a straggler nor a network regression; a network slowdown is found
during a straggler and after one (whose waits must not have entered its baseline); a straggler is
found during a network slowdown; one host's degraded links name that host.
"""

import duckdb
import numpy as np
import pandas as pd
import pytest

import checks.signals  # noqa: F401
from checks.registry import REGISTRY
from orchestration.storage import sql
from orchestration.storage.warehouse import migrate

T0 = pd.Timestamp("2026-11-30 10:00:00")
START, END = T0, T0 + pd.Timedelta(hours=1)


def minutes(slow=(), net=(), ranks=8, per_host=4, seed=3):
    """rank_minutes rows from T0 - 90 min to T0 + 60 min. `slow` = (from, to, rank, factor) on compute;
    `net` = (from, to, hosts or None for all, factor) on the transfer time."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(-90, 60):
        minute = T0 + pd.Timedelta(minutes=m)
        compute = 1.6 * rng.lognormal(0, 0.005, ranks)
        for a, b, rank, factor in slow:
            if a <= m < b:
                compute[rank] *= factor
        data = 0.02 * rng.lognormal(0, 0.05, ranks)
        transfer = np.full(ranks, 0.35 * rng.lognormal(0, 0.02) * (0.8 if m == -90 else 1.0))   # a quick first minute
        host = np.array([r // per_host for r in range(ranks)])
        for a, b, hosts, factor in net:
            if a <= m < b:
                transfer = np.where(np.isin(host, hosts) if hosts is not None else True, transfer * factor, transfer)
        arrival = data + compute
        collective = transfer + (arrival.max() - arrival)
        for r in range(ranks):
            rows.append({"run_id": "run-a", "rank": r, "host": f"node-{host[r]}", "gpu_index": r % per_host,
                         "minute": minute, "steps_completed": 25, "nonfinite_losses": 0,
                         "step_seconds": float(arrival.max() + transfer.max()), "data_seconds": data[r],
                         "compute_seconds": compute[r], "collective_seconds": collective[r],
                         "compute_seconds_baseline": 1.6, "compute_seconds_mad": 0.008,
                         "baseline_window_minutes": 30, "baseline_minutes": 30})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    migrate(c)
    yield c
    c.close()


def judge(con, rows: pd.DataFrame, signal: str) -> pd.DataFrame:
    con.execute("DELETE FROM rank_minutes")
    con.register("incoming", rows)
    con.execute("INSERT INTO rank_minutes BY NAME SELECT * FROM incoming")
    con.unregister("incoming")
    s = REGISTRY.get(signal)
    frame = sql.frame(con, s.query, {"start": START, "end": END, **s.thresholds})
    return s.detector(frame, dict(s.thresholds))


def test_a_straggler_just_under_its_threshold_is_no_network_regression(con):
    # 1.08x: its peers wait ~0.13 s more per step, every GPU's collective is up ~35%, for 40 minutes
    rows = minutes(slow=[(10, 50, 5, 1.08)])
    assert judge(con, rows, "collective_regression").empty
    assert judge(con, rows, "straggler_rank").empty


def test_the_same_collectives_raised_by_the_network_are_flagged(con):
    # the look-alike's twin: every rank's collective up by the same ~0.13 s, from the transfer itself
    rows = minutes(net=[(10, 50, None, 1.37)])
    (found,) = judge(con, rows, "collective_regression").to_dict("records")
    assert found["onset"] == T0 + pd.Timedelta(minutes=10) and found["evidence"]["scope"] == "every host"
    assert found["evidence"]["rise_pct"] == pytest.approx(37, abs=5)
    assert judge(con, rows, "straggler_rank").empty     # nobody computes slower: no straggler


def test_a_network_slowdown_during_a_straggler_is_found_and_so_is_the_straggler(con):
    rows = minutes(slow=[(-60, 60, 2, 1.5)], net=[(20, 50, None, 1.6)])
    (net,) = judge(con, rows, "collective_regression").to_dict("records")
    assert net["onset"] == T0 + pd.Timedelta(minutes=20) and net["last_seen"] == T0 + pd.Timedelta(minutes=50)
    assert net["evidence"]["wait_seconds"] > 0.5   # the straggler's wait, reported and taken out
    (strag,) = judge(con, rows, "straggler_rank").to_dict("records")
    assert strag["entity_id"] == "run-a/rank-2" and strag["last_seen"] == T0 + pd.Timedelta(minutes=60)


def test_a_network_slowdown_after_a_straggler_is_held_against_a_clean_baseline(con):
    # the straggler (1.5x, 90 min) inflated every peer's collective wait; the baseline must not hold that
    rows = minutes(slow=[(-90, 5, 6, 1.5)], net=[(20, 60, None, 1.4)])
    (net,) = judge(con, rows, "collective_regression").to_dict("records")
    assert net["onset"] == T0 + pd.Timedelta(minutes=20)
    assert net["evidence"]["transfer_baseline_seconds"] == pytest.approx(0.35, rel=0.05)


def test_a_regression_ends_with_the_slowdown_whatever_the_runs_first_minutes_showed(con):
    # the run's first minute was quick (0.8x): a floor taken from it would hold a healthy run "regressed"
    (found,) = judge(con, minutes(net=[(10, 30, None, 1.6)]), "collective_regression").to_dict("records")
    assert found["onset"] == T0 + pd.Timedelta(minutes=10) and found["last_seen"] == T0 + pd.Timedelta(minutes=30)


def test_one_hosts_degraded_links_name_that_host(con):
    rows = minutes(ranks=16, net=[(10, 60, [2], 1.6)])
    (found,) = judge(con, rows, "collective_regression").to_dict("records")
    assert found["hosts"] == ["node-2"] and found["gpus"] == [f"node-2:{g}" for g in range(4)]
