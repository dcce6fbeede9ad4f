"""Serving signals: detectors on hand-made minute frames (a case each must flag and cases it must
not), their SQL on a real warehouse (counter resets, SLOs from thresholds.yaml), a full simulated
day of diurnal load that must stay quiet, each serving fault flagged by its signal, and the
inference scenario through the real `detect` job and incidents fold (lineage and triage)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml

import checks.signals  # noqa: F401
from checks import detectors_serving as d
from checks.asset_checks import evaluate
from checks.registry import REGISTRY
from orchestration.config.thresholds import ThresholdsResource
from orchestration.storage import sql
from orchestration.storage.warehouse import WarehouseResource
from simulator import load_scenario, scenario_from_dict, simulate
from tests.helpers import REPO, check_evaluation, memory_instance, run_detect

T0 = pd.Timestamp("2026-11-30 10:00:00")      # the partition's start
SERVING_SIGNALS = [s.name for s in REGISTRY if s.family == "serving"]
INFERENCE = REPO / "simulator" / "scenarios" / "inference.yaml"


def th(name, **over):
    return {**REGISTRY.get(name).thresholds, **over}


def frame(minutes=60, lookback=40, changes=(), endpoint="chat-api"):
    """One endpoint's minutes from T0 - lookback to T0 + minutes, healthy at steady load, with
    `changes`: (from_minute, to_minute, {column: value or f(minute index)}) over [from, to)."""
    rows = []
    for m in range(-lookback, minutes):
        minute = T0 + pd.Timedelta(minutes=m)
        row = {
            "endpoint": endpoint, "minute": minute, "tick": minute + pd.Timedelta(minutes=1), "in_window": m >= 0,
            "model_version": "v1", "host": "node-1", "scrapes": 2,
            "ttft_p50_seconds": 0.15, "ttft_p95_seconds": 0.4, "ttft_p99_seconds": 0.6,
            "itl_p50_seconds": 0.025, "itl_p95_seconds": 0.05, "itl_p99_seconds": 0.06,
            "ttft_p50_baseline": 0.15, "ttft_p95_baseline": 0.4, "ttft_p99_baseline": 0.6,
            "itl_p50_baseline": 0.025, "itl_p95_baseline": 0.05, "itl_p99_baseline": 0.06,
            "requests_waiting": 1.5, "requests_waiting_max": 3.0, "requests_waiting_baseline": 1.5,
            "requests_running": 18.0, "requests_running_max": 20.0, "kv_cache_usage_ratio": 0.4,
            "kv_cache_usage_ratio_max": 0.45, "requests": 240.0, "failures": 2.0, "counter_resets": 0,
            "preemptions": 0.0,
            "requests_per_second": 4.0, "requests_per_second_baseline": 4.0, "error_ratio": 2 / 240,
            "error_ratio_baseline": 0.01, "baseline_minutes": 120,
            **{f"slo_{m}_seconds": None for m in d.LATENCY}, "slo_max_num_seqs": None, "slo_error_ratio": None,
        }
        for start, end, values in changes:
            if start <= m < end:
                row.update({k: (v(m) if callable(v) else v) for k, v in values.items()})
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ latency regression


def test_latency_regression_flags_a_step_against_the_baseline_with_onset_and_evidence():
    slow = {"ttft_p99_seconds": 0.6 * 1.6, "ttft_p95_seconds": 0.4 * 1.6, "model_version": "v2"}
    found = d.serving_latency_regression(frame(changes=[(10, 60, slow)]), th("serving_latency_regression"))
    (f,) = found.to_dict("records")
    assert f["entity_id"] == f["endpoint"] == "chat-api" and f["model_version"] == "v2"
    assert f["onset"] == T0 + pd.Timedelta(minutes=10)
    assert T0 + pd.Timedelta(minutes=12) <= f["detected_at"] <= T0 + pd.Timedelta(minutes=15)
    assert f["value"] == pytest.approx(1.6) and f["hosts"] == ["node-1"]
    assert f["evidence"]["regressed_quantiles"] == "ttft_p95 x1.60, ttft_p99 x1.60"


@pytest.mark.parametrize("changes", [
    [],                                                                   # steady
    [(10, 60, {"ttft_p99_seconds": 0.6 * 1.2, "itl_p99_seconds": 0.06 * 1.2})],   # 20% slower: under 1.3
    [(20, 22, {"ttft_p99_seconds": 3.0})],                                # two slow minutes: the median holds
    [(0, 60, {"ttft_p99_seconds": 2.0, "baseline_minutes": 10})],        # no history to judge against yet
])
def test_latency_regression_quiet(changes):
    assert d.serving_latency_regression(frame(changes=changes), th("serving_latency_regression")).empty


def test_latency_regression_stays_open_while_the_baseline_catches_up():
    # the trailing median drifts up under a long regression: the entry ratio falls under 1.3, the
    # minute stays 1.2 x, the stretch stays open
    slow = {"itl_p50_seconds": 0.04, "itl_p50_baseline": lambda m: 0.025 if m < 30 else 0.033}
    (f,) = d.serving_latency_regression(frame(changes=[(10, 60, slow)]), th("serving_latency_regression")).to_dict("records")
    assert f["last_seen"] == T0 + pd.Timedelta(minutes=60)


def test_endpoints_are_judged_each_against_its_own_baseline():
    slow = frame(changes=[(10, 60, {"itl_p95_seconds": 0.08})])
    fast = frame(endpoint="search-api", changes=[(-40, 60, {"itl_p95_seconds": 0.08, "itl_p95_baseline": 0.08})])
    both = pd.concat([fast, slow], ignore_index=True).sample(frac=1.0, random_state=1)   # any row order
    found = d.serving_latency_regression(both, th("serving_latency_regression"))
    assert list(found["entity_id"]) == ["chat-api"] and found.iloc[0]["evidence"]["worst_quantile"] == "itl_p95"


# ------------------------------------------------------------------------------ SLO breach


def test_slo_breach_uses_the_default_and_needs_five_minutes():
    name = "serving_latency_slo_breach"
    over = {"ttft_p99_seconds": 1.8}
    assert d.serving_latency_slo_breach(frame(changes=[(10, 14, over)]), th(name)).empty     # 4 minutes
    (f,) = d.serving_latency_slo_breach(frame(changes=[(10, 16, over)]), th(name)).to_dict("records")
    assert f["threshold"] == 1.5 and f["value"] == 1.8 and f["evidence"]["slo_source"] == "signal default"
    assert f["onset"] == T0 + pd.Timedelta(minutes=10)


def test_slo_breach_per_endpoint_objective_wins():
    name = "serving_latency_slo_breach"
    tight = {"slo_ttft_p95_seconds": 0.3}          # this endpoint promises p95 TTFT under 300 ms
    (f,) = d.serving_latency_slo_breach(frame(changes=[(-40, 60, tight)]), th(name)).to_dict("records")
    assert f["threshold"] == 0.3 and f["evidence"]["worst_quantile"] == "ttft_p95"
    assert f["evidence"]["slo_source"] == "serving_slos"
    loose = {"slo_ttft_p99_seconds": 5.0, "ttft_p99_seconds": 1.8}   # a batch endpoint: 5 s is fine
    assert d.serving_latency_slo_breach(frame(changes=[(-40, 60, loose)]), th(name)).empty


# ------------------------------------------------------------------------------ queue growth


def test_queue_growth_flags_a_steady_rise():
    rising = {"requests_waiting": lambda m: 1.5 + 4.0 * (m - 10), "requests_waiting_max": lambda m: 3 + 4.0 * (m - 10)}
    (f,) = d.serving_queue_growth(frame(changes=[(10, 40, rising)]), th("serving_queue_growth")).to_dict("records")
    assert T0 + pd.Timedelta(minutes=8) <= f["onset"] <= T0 + pd.Timedelta(minutes=14)
    assert f["detected_at"] <= T0 + pd.Timedelta(minutes=18)
    assert f["evidence"]["trend_rank_correlation"] >= 0.6 and f["value"] >= 100


@pytest.mark.parametrize("changes", [
    [],
    [(20, 21, {"requests_waiting": 80.0, "requests_waiting_max": 150.0})],           # one spike
    [(20, 22, {"requests_waiting": 80.0})],                                          # two: still no trend
    [(0, 60, {"requests_waiting": lambda m: 1.5 + 0.05 * m})],                       # slow climb (+3 in an hour)
    [(0, 60, {"requests_waiting": lambda m: 6.0 + (m % 2) * 8})],                    # noisy but flat
])
def test_queue_growth_quiet(changes):
    assert d.serving_queue_growth(frame(changes=changes), th("serving_queue_growth")).empty


# ------------------------------------------------------------------------------ batch saturation


def test_batch_saturation_by_kv_cache_and_by_max_num_seqs():
    name = "serving_batch_saturation"
    (f,) = d.serving_batch_saturation(frame(changes=[(10, 20, {"kv_cache_usage_ratio": 0.97})]), th(name)).to_dict("records")
    assert f["evidence"]["full_by"] == "kv_cache" and f["value"] == pytest.approx(0.97)
    capped = [(-40, 60, {"slo_max_num_seqs": 64.0}), (10, 20, {"requests_running": 64.0})]
    (f,) = d.serving_batch_saturation(frame(changes=capped), th(name)).to_dict("records")
    assert f["evidence"]["full_by"] == "max_num_seqs" and f["evidence"]["max_num_seqs"] == 64


def test_batch_saturation_by_preemptions_alone():
    # the KV-cache gauge reads 0.9 (each preemption frees blocks) and no max_num_seqs is configured:
    # only the preemption counter shows the engine outgrowing its cache, every minute for 10 minutes
    name = "serving_batch_saturation"
    busy = [(10, 20, {"kv_cache_usage_ratio": 0.9, "kv_cache_usage_ratio_max": 0.94,
                      "preemptions": lambda m: 2.0 + m % 3})]
    (f,) = d.serving_batch_saturation(frame(changes=busy), th(name)).to_dict("records")
    assert f["evidence"]["full_by"] == "preemptions" and f["evidence"]["max_num_seqs"] == "not configured"
    assert f["evidence"]["preemptions"] == sum(2.0 + m % 3 for m in range(10, 20))
    assert f["value"] == 4.0 and f["threshold"] == 1.0
    assert f["onset"] == T0 + pd.Timedelta(minutes=10) and f["detected_at"] == T0 + pd.Timedelta(minutes=15)
    # with the cache full too, both are named, and the value is the cache's
    both = [(10, 20, {"kv_cache_usage_ratio": 0.97, "preemptions": 3.0})]
    (f,) = d.serving_batch_saturation(frame(changes=both), th(name)).to_dict("records")
    assert f["evidence"]["full_by"] == "kv_cache, preemptions" and f["evidence"]["preemptions"] == 30
    assert f["value"] == pytest.approx(0.97)


def test_batch_saturation_without_a_preemption_counter_says_so():
    unknown = [(-40, 60, {"preemptions": None}), (10, 20, {"kv_cache_usage_ratio": 0.97})]
    (f,) = d.serving_batch_saturation(frame(changes=unknown), th("serving_batch_saturation")).to_dict("records")
    assert f["evidence"]["full_by"] == "kv_cache" and f["evidence"]["preemptions"] == "not pulled"


@pytest.mark.parametrize("changes", [
    [(10, 20, {"kv_cache_usage_ratio": 0.9})],                         # busy, not full
    [(10, 13, {"kv_cache_usage_ratio": 0.97})],                        # 3 minutes full
    [(10, 30, {"requests_running": 64.0})],                            # no max_num_seqs configured
    [(10, 11, {"preemptions": 40.0})],                                 # one minute of preemptions (a burst)
    [(10, 30, {"preemptions": lambda m: 3.0 if m % 2 else 0.0})],      # every other minute: never 5 in a row
    [(5, 9, {"preemptions": 2.0}), (10, 14, {"preemptions": 2.0})],   # 4 minutes, a quiet one, 4 more
    [(10, 30, {"preemptions": 0.5})],                                  # under one a minute
])
def test_batch_saturation_quiet(changes):
    assert d.serving_batch_saturation(frame(changes=changes), th("serving_batch_saturation")).empty


# ------------------------------------------------------------------------------ error rate


def test_error_rate_flags_a_burst():
    (f,) = d.serving_error_rate(frame(changes=[(10, 20, {"failures": 36.0})]), th("serving_error_rate")).to_dict("records")
    assert f["value"] == pytest.approx(0.15) and f["threshold"] == pytest.approx(0.05)
    assert T0 + pd.Timedelta(minutes=9) <= f["onset"] <= T0 + pd.Timedelta(minutes=11)


@pytest.mark.parametrize("changes", [
    [(10, 20, {"failures": 7.0})],                                         # 3%: under 5%
    [(10, 20, {"requests": 6.0, "failures": 3.0})],                        # 50% of 6 requests/min: too few
    [(-40, 60, {"error_ratio_baseline": 0.04, "failures": 12.0})],         # 5% where 4% is usual: under 5x
])
def test_error_rate_quiet(changes):
    assert d.serving_error_rate(frame(changes=changes), th("serving_error_rate")).empty


def test_error_rate_slo_is_a_hard_limit():
    changes = [(-40, 60, {"slo_error_ratio": 0.02}), (10, 20, {"failures": 7.0})]
    (f,) = d.serving_error_rate(frame(changes=changes), th("serving_error_rate")).to_dict("records")
    assert f["threshold"] == 0.02 and f["evidence"]["limit_source"] == "serving_slos"


# ------------------------------------------------------------------------------ SQL on a real warehouse


def _load_serving(con, root: Path) -> None:
    con.execute(
        "INSERT INTO serving_metrics BY NAME SELECT * EXCLUDE (filename), filename AS source_file, 1 AS source_line "
        "FROM read_json($p, format='newline_delimited', filename=true)",
        {"p": str(root / "raw" / "serving_metrics" / "*" / "*" / "*.jsonl")})


def _evaluate_hours(con, start: pd.Timestamp, hours: int, window_minutes: int = 120) -> pd.DataFrame:
    """serving_minutes and every serving signal over `hours` partitions from `start`: all findings."""
    out = []
    for h in range(hours):
        a, b = start + pd.Timedelta(hours=h), start + pd.Timedelta(hours=h + 1)
        sql.run(con, "baselines/serving_minutes", {"start": a.to_pydatetime(), "end": b.to_pydatetime(),
                                                   "window_minutes": window_minutes})
        for name in SERVING_SIGNALS:
            _, found = evaluate(con, REGISTRY.get(name), a.to_pydatetime(), b.to_pydatetime())
            out.append(found.assign(signal=name))
    rows = [r for f in out for r in f.to_dict("records")]
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["signal", "onset", "value", "threshold"])


def test_counter_resets_are_increases_from_zero(tmp_path):
    rows = [  # a restart at 10:02:00: both counters start again from 0
        ("10:00:00", 1000, 10), ("10:00:30", 1120, 11), ("10:01:00", 1240, 12), ("10:01:30", 1360, 13),
        ("10:02:00", 100, 30), ("10:02:30", 220, 31), ("10:03:00", 340, 32),
    ]
    with WarehouseResource(path=str(tmp_path / "w.duckdb")).connect() as con:
        for t, ok, failed in rows:
            con.execute("INSERT INTO serving_metrics (time, endpoint, request_success_total, request_failure_total, "
                        "source_file, source_line) VALUES ($t, 'ep', $ok, $failed, 'f', 1)",
                        {"t": pd.Timestamp(f"2026-11-30 {t}").to_pydatetime(), "ok": ok, "failed": failed})
        sql.run(con, "baselines/serving_minutes", {"start": T0.to_pydatetime(), "end": (T0 + pd.Timedelta(hours=1)).to_pydatetime(),
                                                   "window_minutes": 120})
        got = con.execute("SELECT minute, requests, failures, counter_resets FROM serving_minutes ORDER BY minute").df()
    # 10:00:00 has no previous scrape; at 10:02:00 the counters went down: what they hold is new
    assert got["requests"].tolist() == [121.0, 242.0, 251.0, 121.0]
    assert got["failures"].tolist() == [1.0, 2.0, 31.0, 1.0]
    assert got["counter_resets"].tolist() == [0, 0, 1, 0] and (got["requests"].dropna() >= 0).all()


def test_preemption_counter_resets_count_as_the_new_value(tmp_path):
    rows = [  # the server restarts at 10:02:00 (every counter from 0); the preemption counter alone
              # goes down again at 10:03:30; the 10:04 minute has no preemption counter (not exported)
        ("10:00:00", 1000, 10, 50), ("10:00:30", 1120, 11, 53), ("10:01:00", 1240, 12, 53), ("10:01:30", 1360, 13, 60),
        ("10:02:00", 100, 30, 4), ("10:02:30", 220, 31, 6), ("10:03:00", 340, 32, 9), ("10:03:30", 460, 33, 2),
        ("10:04:00", 580, 34, None),
    ]
    with WarehouseResource(path=str(tmp_path / "w.duckdb")).connect() as con:
        for t, ok, failed, preempted in rows:
            con.execute("INSERT INTO serving_metrics (time, endpoint, request_success_total, request_failure_total, "
                        "preemptions_total, source_file, source_line) VALUES ($t, 'ep', $ok, $failed, $p, 'f', 1)",
                        {"t": pd.Timestamp(f"2026-11-30 {t}").to_pydatetime(), "ok": ok, "failed": failed, "p": preempted})
        sql.run(con, "baselines/serving_minutes", {"start": T0.to_pydatetime(), "end": (T0 + pd.Timedelta(hours=1)).to_pydatetime(),
                                                   "window_minutes": 120})
        got = con.execute("SELECT minute, preemptions, counter_resets FROM serving_minutes ORDER BY minute").df()
        seen = sql.run(con, "detect/serving_minutes", {"start": T0.to_pydatetime(), "end": (T0 + pd.Timedelta(hours=1)).to_pydatetime(),
                                                        "lookback_minutes": 0}).df()
    # 10:00: 3 (the first scrape has no previous); 10:01: 0 + 7; 10:02: 4 (restart) + 2; 10:03: 3 + 2 (its own reset)
    assert got["preemptions"].tolist()[:4] == [3.0, 7.0, 6.0, 5.0] and pd.isna(got["preemptions"].iloc[4])
    assert got["counter_resets"].tolist() == [0, 0, 1, 0, 0]   # the request counters' resets only, as before
    assert seen["preemptions"].tolist()[:4] == [3.0, 7.0, 6.0, 5.0]      # the detectors see the column


def _endpoint_doc(duration="4h", start="2026-11-30T08:00:00Z", faults=(), amplitude=0.5, predictions=False):
    doc = {"seed": 5, "start": start, "duration": duration, "cluster": {"hosts": 1, "gpus_per_host": 1, "sample_interval": "60s"},
           "runs": [{"id": "r", "start": "1m", "duration": "20m", "hosts": [0], "ranks": 1, "step_time": "2s",
                     "loss": {"initial": 8.0, "floor": 2.0, "decay": 0.3, "noise": 0.02}}],
           "endpoints": [{"name": "chat-api", "host": 0, "requests_per_second": 4.0, "failure_ratio": 0.01,
                          "ttft_seconds": {"p50": 0.15, "p99": 0.6}, "itl_seconds": {"p50": 0.025, "p99": 0.06},
                          "e2e_seconds": {"p50": 4.0, "p99": 12.0}, "requests_waiting": 1.5, "kv_cache_usage": 0.4,
                          "metrics_interval": "30s", "diurnal": {"amplitude": amplitude, "peak_hour": 14}}],
           "faults": list(faults)}
    if predictions:
        doc["endpoints"][0]["predictions"] = {"per_minute": 2}
    return doc


def test_a_full_day_of_diurnal_load_is_quiet(tmp_path):
    """A day at x0.4 .. x1.6 the mean rate (peak 14:00 UTC): queue x16 and latency x2 between trough
    and peak, over hours. Not one serving finding, the peak included."""
    simulate(scenario_from_dict(_endpoint_doc(duration="24h", start="2026-11-30T00:00:00Z", amplitude=0.6)), tmp_path)
    with WarehouseResource(path=str(tmp_path / "w.duckdb")).connect() as con:
        _load_serving(con, tmp_path)
        found = _evaluate_hours(con, pd.Timestamp("2026-11-30 00:00"), 24)
        peak, trough = con.execute(
            "SELECT max(requests_per_second), min(requests_per_second) FROM serving_minutes").fetchone()
        peak_waiting = con.execute("SELECT avg(requests_waiting) FROM serving_minutes WHERE hour(minute) = 14").fetchone()[0]
        trough_waiting = con.execute("SELECT avg(requests_waiting) FROM serving_minutes WHERE hour(minute) = 2").fetchone()[0]
    assert peak > 3 * trough and peak_waiting > 8 * trough_waiting     # the curve is really there
    assert found.empty, found[["signal", "onset", "value", "threshold"]]


@pytest.mark.parametrize("fault, signals", [
    ({"type": "latency_regression", "magnitude": 0.5}, {"serving_latency_regression"}),
    ({"type": "latency_regression", "magnitude": 2.0}, {"serving_latency_regression", "serving_latency_slo_breach"}),
    ({"type": "queue_saturation", "magnitude": 0.05},
     {"serving_queue_growth", "serving_batch_saturation", "serving_latency_regression", "serving_latency_slo_breach"}),
    ({"type": "error_burst", "magnitude": 0.1}, {"serving_error_rate"}),
])
def test_each_serving_fault_is_flagged_by_its_signals_and_only_in_its_window(tmp_path, fault, signals):
    onset = pd.Timestamp("2026-11-30 10:30")
    doc = _endpoint_doc(faults=[{**fault, "target": "endpoint:chat-api", "onset": "2h30m", "duration": "20m"}])
    simulate(scenario_from_dict(doc), tmp_path)
    with WarehouseResource(path=str(tmp_path / "w.duckdb")).connect() as con:
        _load_serving(con, tmp_path)
        found = _evaluate_hours(con, pd.Timestamp("2026-11-30 08:00"), 4)
    assert set(found["signal"]) == signals
    for name in signals:
        assert REGISTRY.get(name).fault_types and fault["type"] in REGISTRY.get(name).fault_types
    assert (found["onset"] >= onset - pd.Timedelta(minutes=3)).all()
    assert (found["onset"] <= onset + pd.Timedelta(minutes=5)).all()
    assert (found["detected_at"] <= onset + pd.Timedelta(minutes=8)).all()
    assert (found["last_seen"] <= onset + pd.Timedelta(minutes=25)).all()
    for evidence in found.loc[found["signal"] == "serving_batch_saturation", "evidence"]:
        assert evidence["full_by"] == "kv_cache, preemptions" and evidence["preemptions"] > 0


def test_simulated_preemptions_grow_only_under_queue_saturation_and_a_restart_resets_them(tmp_path):
    faults = [{"type": "queue_saturation", "target": "endpoint:chat-api", "onset": "1h", "duration": "20m", "magnitude": 0.05},
              {"type": "error_burst", "target": "endpoint:chat-api", "onset": "2h", "duration": "10m", "magnitude": 0.1}]
    simulate(scenario_from_dict(_endpoint_doc(duration="3h", faults=faults)), tmp_path)
    lines = [line for p in sorted((tmp_path / "raw" / "serving_metrics").rglob("*.jsonl")) for line in p.read_text().splitlines()]
    rows = pd.DataFrame([json.loads(line) for line in lines])
    total = rows.set_index(pd.to_datetime(rows["time"]).dt.tz_localize(None))["preemptions_total"]
    saturated, restart = pd.Timestamp("2026-11-30 09:00"), pd.Timestamp("2026-11-30 10:00")
    healthy = total[total.index < saturated]
    assert (healthy == 0.0).all() and all('"preemptions_total":0.0' in line for line in lines[:len(healthy)])
    during = total[(total.index >= saturated) & (total.index < saturated + pd.Timedelta(minutes=20))]
    assert during.is_monotonic_increasing and 1.0 <= during.iloc[-1] / 20 <= 10.0     # a few a minute
    held = total[(total.index >= saturated + pd.Timedelta(minutes=20)) & (total.index < restart)]
    assert (held == during.iloc[-1]).all()                        # the queue drained: no more preemptions
    assert (total[total.index >= restart] == 0.0).all()           # the restart reset the counter


def test_serving_slos_come_from_thresholds_yaml(tmp_path):
    from assets.serving import serving_baselines

    (tmp_path / "thresholds.yaml").write_text(yaml.safe_dump({
        "serving_latency_slo_breach": {"min_minutes": 3},
        "serving_slos": {"chat-api": {"ttft_p99_seconds": 0.5, "max_num_seqs": 64}}}))
    resource = ThresholdsResource(path=str(tmp_path / "thresholds.yaml"))
    assert resource.serving_slos() == {"chat-api": {"ttft_p99_seconds": 0.5, "max_num_seqs": 64.0}}
    assert resource.for_signal("serving_latency_slo_breach", REGISTRY.get("serving_latency_slo_breach").thresholds)["min_minutes"] == 3
    resource.validate({s.name for s in REGISTRY})      # the section is not taken for a signal
    simulate(scenario_from_dict(_endpoint_doc(duration="2h")), tmp_path)
    warehouse = WarehouseResource(path=str(tmp_path / "w.duckdb"))
    with warehouse.connect() as con:
        _load_serving(con, tmp_path)
    result = dg.materialize([serving_baselines], partition_key="2026-11-30-09:00",
                            resources={"warehouse": warehouse, "thresholds": resource})
    assert result.success
    with warehouse.connect() as con:
        assert con.execute("SELECT endpoint, ttft_p99_seconds, max_num_seqs, itl_p99_seconds FROM serving_slos").fetchall() == [
            ("chat-api", 0.5, 64.0, None)]
        _, found = evaluate(con, REGISTRY.get("serving_latency_slo_breach"), pd.Timestamp("2026-11-30 09:00").to_pydatetime(),
                            pd.Timestamp("2026-11-30 10:00").to_pydatetime())
    # p99 TTFT ~0.6-0.7 s in the morning: over this endpoint's 0.5 s objective all hour
    assert len(found) == 1 and found.iloc[0]["threshold"] == 0.5


@pytest.mark.parametrize("text, error", [
    ("serving_slos: {chat-api: {ttft_p99: 1}}", "has no SLO key(s) ttft_p99"),
    ("serving_slos: {chat-api: 1.0}", "expected `{slo_key: value}`"),
    ("serving_slos: {chat-api: {ttft_p99_seconds: fast}}", "ttft_p99_seconds: Input should be a valid number"),
])
def test_bad_slo_config_is_one_clear_line(tmp_path, text, error):
    (tmp_path / "thresholds.yaml").write_text(text)
    with pytest.raises(ValueError, match="serving_slos") as info:
        ThresholdsResource(path=str(tmp_path / "thresholds.yaml")).serving_slos()
    assert error in str(info.value) and "\n" not in str(info.value)


# ------------------------------------------------------------------------------ the real detect job


@pytest.fixture(scope="module")
def inference(tmp_path_factory):
    """inference.yaml (6 h, a promotion at 10:00, three serving faults) through the real detect job
    hour by hour, then the incidents fold."""
    from assets.incidents import incidents
    from assets.ingest import ingest_assets
    from orchestration.definitions import resources_for

    home = tmp_path_factory.mktemp("inference")
    simulate(load_scenario(INFERENCE), home)
    results = {}
    with memory_instance() as instance:
        for h in range(8, 14):
            key = f"2026-11-30-{h:02d}:00"
            results[key] = run_detect(home, key, instance)
        resources = resources_for(home)
        assert dg.materialize([incidents, *ingest_assets], selection=[incidents.key], resources=resources,
                              instance=instance).success
    with resources["warehouse"].connect(read_only=True) as con:
        found = con.execute("SELECT * FROM incidents ORDER BY onset, signal").df()
        versions = con.execute("SELECT * FROM serving_versions").df()
        registered = con.execute("SELECT model_version, run_id, step, checkpoint_path FROM lineage_events "
                                 "WHERE event = 'model_version_registered'").fetchone()
    return {"home": home, "results": results, "incidents": found, "versions": versions, "registered": registered}


def test_inference_scenario_serving_incidents_lineage_and_triage(inference):
    from orchestration.evaluation.scoring import load_truth, score

    found = inference["incidents"]
    serving = found[found["family"] == "serving"]
    version, run_id, step, checkpoint = inference["registered"]
    assert (version, run_id, step) == ("llm-train-step-003000", "llm-train", 3000)
    # the promoted version is slower: one regression, right at the promotion, triaged as caused by it
    (reg,) = serving[(serving["signal"] == "serving_latency_regression")
                     & (serving["onset"] < pd.Timestamp("2026-11-30 11:00"))].to_dict("records")
    assert abs(reg["onset"] - pd.Timestamp("2026-11-30 10:00")) <= pd.Timedelta(minutes=2)
    assert reg["triage_class"] == "regression_after_promotion"
    assert (reg["model_version"], reg["run_id"], reg["checkpoint"]) == (version, run_id, checkpoint)
    assert "chat-base" in reg["playbook"] and f"run {run_id}" in reg["playbook"] and "{" not in reg["playbook"]
    # the queue saturation (11:20-11:40): capacity signals, and the latency they cause, are infrastructure
    saturation = serving[(serving["onset"] >= pd.Timestamp("2026-11-30 11:15")) & (serving["onset"] < pd.Timestamp("2026-11-30 12:00"))]
    assert {"serving_queue_growth", "serving_batch_saturation"} <= set(saturation["signal"])
    assert set(saturation["triage_class"]) == {"infrastructure"}
    # the error burst after a restart, 2 h 40 min after the promotion: infrastructure
    (err,) = serving[serving["signal"] == "serving_error_rate"].to_dict("records")
    assert err["triage_class"] == "infrastructure" and "restarted" in err["evidence"]
    assert (serving["endpoint"] == "chat-api").all() and (serving["entity_type"] == "endpoint").all()
    # every serving fault caught, and no serving false alarm over a morning of rising load
    table = score(load_truth(inference["home"] / "ground_truth.jsonl"), found).set_index("fault_type")
    for ftype in ("latency_regression", "queue_saturation", "error_burst"):
        assert table.loc[ftype, "recall"] == 1.0 and table.loc[ftype, "false_alarms"] == 0, table.loc[ftype]
    # the view: chat-base served until the promotion, then the registered version, with its lineage
    v = inference["versions"].set_index("model_version")
    assert v.loc["chat-base", "served_until"] == v.loc[version, "promoted_at"] == pd.Timestamp("2026-11-30 10:00")
    assert v.loc[version, "previous_version"] == "chat-base" and v.loc[version, "checkpoint_path"] == checkpoint


def test_serving_check_reports_evidence_as_metadata(inference):
    evaluation = check_evaluation(inference["results"]["2026-11-30-12:00"], "serving_error_rate")
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
    meta = evaluation.metadata
    assert meta["value"].value >= 0.2 and 0.05 <= meta["threshold"].value < 0.1   # max(5%, 5 x its ~1% baseline)
    assert "chat-api" in meta["offending"].value
    quiet = check_evaluation(inference["results"]["2026-11-30-09:00"], "serving_queue_growth")
    assert quiet.passed and quiet.metadata["entities_evaluated"].value == 1
