"""The model-quality signals: each detector with a case it must flag and one it must not, evidently's
per-column scoring, the simulator's quality faults, and a healthy promotion through the real
`detect` job that must stay quiet."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from assets.drift import DriftConfig, evidently_drift, is_drifted
from checks import detectors_quality as d
from checks.registry import REGISTRY
from simulator import load_scenario, simulate
from simulator.scenario import ScenarioError, scenario_from_dict
from tests.helpers import check_evaluation, memory_instance, run_detect

REPO = Path(__file__).resolve().parent.parent
H = pd.Timestamp("2026-11-30 00:00")
QUALITY_SIGNALS = ("input_drift", "prediction_drift", "confidence_shift", "business_metric_drop")


def thresholds(name: str) -> dict:
    return dict(REGISTRY.get(name).thresholds)


# ----------------------------------------------------------------------------- drift (input, prediction)

def drift_frame(drifted_by_hour: list[int], start_hour: int = 0, partition_hour: int | None = None) -> pd.DataFrame:
    """Hours of one endpoint/version with that many drifted columns each (of 4)."""
    partition_hour = start_hour + len(drifted_by_hour) - 1 if partition_hour is None else partition_hour
    rows = []
    for i, n in enumerate(drifted_by_hour):
        hour = H + pd.Timedelta(hours=start_hour + i)
        rows.append({
            "endpoint": "chat-api", "model_version": "v1", "hour": hour, "tick": hour + pd.Timedelta(hours=1),
            "in_window": start_hour + i >= partition_hour, "columns_scored": 4, "columns_drifted": n,
            "drifted_columns": ["prompt_tokens", "language"][:n],
            "scores": [{"column_name": "prompt_tokens", "method": "wasserstein", "score": 0.9 if n else 0.05, "threshold": 0.15}],
            "top_score": 0.9 if n else 0.05, "top_threshold": 0.15, "report_path": f"reports/drift/chat-api/v1/{i}.html",
            "current_rows": 360, "reference_rows": 380, "current_sampled": 360, "reference_sampled": 380,
            "reference_source": "first_stable", "reference_start": H, "reference_end": H + pd.Timedelta(hours=1),
            "run_id": "llm-serve", "checkpoint": "/checkpoints/llm-serve/step-000400",
        })
    return pd.DataFrame(rows)


@pytest.mark.parametrize("detector", [d.input_drift, d.prediction_drift])
def test_drift_flags_two_drifted_hours_in_a_row(detector):
    found = detector(drift_frame([0, 2, 1]), thresholds("input_drift"))
    assert len(found) == 1
    f = found.iloc[0]
    assert (f["entity_id"], f["endpoint"], f["model_version"]) == ("chat-api", "chat-api", "v1")
    assert f["onset"] == H + pd.Timedelta(hours=1)                     # the first drifted hour
    assert f["detected_at"] == f["last_seen"] == H + pd.Timedelta(hours=3)
    assert (f["evidence"]["training_run"], f["checkpoint"]) == ("llm-serve", "/checkpoints/llm-serve/step-000400")
    assert f["run_id"] is None       # the endpoint's incident, not the training run's
    assert f["evidence"]["report_path"] == "reports/drift/chat-api/v1/2.html" and f["evidence"]["hours_drifted"] == 2


@pytest.mark.parametrize("hours", [[0, 0, 0], [0, 3, 0], [2, 0, 2], []])
def test_drift_does_not_flag_quiet_or_isolated_hours(hours):
    assert d.input_drift(drift_frame(hours) if hours else pd.DataFrame(), thresholds("input_drift")).empty


def test_drift_in_the_lookback_only_is_not_reported_again():
    # drifted at 00-01, clean in the partition (02): the stretch does not reach into the partition
    assert d.input_drift(drift_frame([2, 2, 0]), thresholds("input_drift")).empty


# ----------------------------------------------------------------------------- confidence shift

def confidence_frame(shift: float, n: int = 400, m: int = 400, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ref = rng.beta(5, 2, m)
    cur = np.clip(rng.beta(5, 2, n) - shift, 0, 1)
    return pd.DataFrame([{
        "endpoint": "chat-api", "model_version": "v2", "window_start": H, "tick": H + pd.Timedelta(hours=1),
        "last_time": H + pd.Timedelta(minutes=40),
        "current_rows": n, "current_mean": cur.mean(), "current_sample": cur[:5000].tolist(),
        "reference_rows": m, "reference_mean": ref.mean(), "reference_sample": ref[:5000].tolist(),
        "reference_source": "registered", "reference_start": H - pd.Timedelta(hours=2),
        "reference_end": H - pd.Timedelta(hours=1), "run_id": "llm-serve", "checkpoint": "/ck/step-1",
    }])


def test_confidence_shift_flags_a_lower_confidence():
    found = d.confidence_shift(confidence_frame(0.15), thresholds("confidence_shift"))
    assert len(found) == 1
    e = found.iloc[0]["evidence"]
    assert e["mean_shift"] == pytest.approx(-0.15, abs=0.03) and e["ks_p_value"] < 1e-6
    assert found.iloc[0]["model_version"] == "v2" and found.iloc[0]["baseline"] == pytest.approx(5 / 7, abs=0.03)
    # without the sample's times: known once the newest judged prediction was in
    assert found.iloc[0]["detected_at"] == H + pd.Timedelta(minutes=40)


def _timed_confidences(shift_from_minute: float, shift: float = 0.15, per_minute: int = 8, seed: int = 3):
    """An hour of predictions, `per_minute` a minute, whose confidence drops by `shift` from a minute on."""
    rng = np.random.default_rng(seed)
    times = H + pd.to_timedelta(np.sort(rng.uniform(0, 3600, 60 * per_minute)), unit="s")
    values = rng.beta(5, 2, len(times)) - shift * (times >= H + pd.Timedelta(minutes=shift_from_minute))
    ref = rng.beta(5, 2, 400)
    order = rng.permutation(len(times))     # the SQL's hash order: not time order
    return pd.DataFrame([{
        "endpoint": "chat-api", "model_version": "v2", "window_start": H, "tick": H + pd.Timedelta(hours=1),
        "last_time": times.max(), "current_rows": len(times), "current_mean": values.mean(),
        "current_sample": values[order].tolist(), "current_sample_times": list(times[order]),
        "reference_rows": 400, "reference_mean": ref.mean(), "reference_sample": ref.tolist(),
        "reference_source": "registered", "reference_start": H - pd.Timedelta(hours=2),
        "reference_end": H - pd.Timedelta(hours=1), "run_id": "llm-serve", "checkpoint": "/ck/step-1",
    }])


def test_confidence_shift_is_detected_at_the_minute_the_evidence_was_in():
    # shifted from the window's start: as soon as enough predictions (100) are in, ~13 min at 8 a minute,
    # not at the end of the hour that a late or backfilled run judges at once
    early = d.confidence_shift(_timed_confidences(0), thresholds("confidence_shift")).iloc[0]
    assert H + pd.Timedelta(minutes=12) <= early["detected_at"] <= H + pd.Timedelta(minutes=20)
    # shifted from minute 30 on: never before the shift, and well before the hour's end
    late = d.confidence_shift(_timed_confidences(30), thresholds("confidence_shift")).iloc[0]
    assert H + pd.Timedelta(minutes=31) <= late["detected_at"] <= H + pd.Timedelta(minutes=50)
    assert late["onset"] == H


@pytest.mark.parametrize("frame", [
    confidence_frame(0.0),                          # same distribution
    confidence_frame(0.02, n=200_000, m=200_000),   # significant on a huge window, but too small to matter
    confidence_frame(0.3, n=50),                    # a big move on too few predictions
])
def test_confidence_shift_stays_quiet(frame):
    assert d.confidence_shift(frame, thresholds("confidence_shift")).empty


# ----------------------------------------------------------------------------- business metric

def outcome_frame(rate: float, ref_rate: float = 0.71, labelled: int = 180, ref_labelled: int = 190) -> pd.DataFrame:
    return pd.DataFrame([{
        "endpoint": "chat-api", "model_version": "v2", "window_start": H, "window_end": H + pd.Timedelta(hours=1),
        "current_predictions": 2 * labelled, "current_labelled": labelled, "current_hits": round(rate * labelled),
        "detected_at": H + pd.Timedelta(hours=2), "tick": H + pd.Timedelta(hours=3),
        "reference_labelled": ref_labelled, "reference_hits": round(ref_rate * ref_labelled),
        "reference_source": "registered", "reference_start": H - pd.Timedelta(hours=2),
        "reference_end": H - pd.Timedelta(hours=1), "run_id": "llm-serve", "checkpoint": "/ck/step-1",
    }])


def test_business_metric_drop_flags_a_falling_outcome_rate():
    found = d.business_metric_drop(outcome_frame(0.45), thresholds("business_metric_drop"))
    assert len(found) == 1
    f = found.iloc[0]
    assert f["value"] == pytest.approx(0.26, abs=0.01) and f["evidence"]["p_value"] < 1e-4
    assert f["onset"] == H and f["detected_at"] == H + pd.Timedelta(hours=2)


@pytest.mark.parametrize("frame", [
    outcome_frame(0.69),                            # within noise
    outcome_frame(0.80),                            # better, not worse
    outcome_frame(0.30, labelled=40),               # too few outcomes yet
])
def test_business_metric_drop_stays_quiet(frame):
    assert d.business_metric_drop(frame, thresholds("business_metric_drop")).empty


def test_quality_signals_are_registered_with_tiers_and_faults():
    tiers = {name: REGISTRY.get(name).tier for name in QUALITY_SIGNALS}
    assert tiers == {"input_drift": "SEV3", "prediction_drift": "SEV3", "confidence_shift": "SEV3",
                     "business_metric_drop": "SEV2"}
    for name in QUALITY_SIGNALS:
        s = REGISTRY.get(name)
        assert (s.family, s.entity, s.asset) == ("quality", "endpoint", "drift_reports") and s.fault_types
        assert "{endpoint}" in "".join(s.playbook.steps)


# ----------------------------------------------------------------------------- evidently scoring

def test_evidently_scores_the_moved_column_and_not_the_stable_one():
    rng = np.random.default_rng(3)
    n = 600
    reference = pd.DataFrame({"prompt_tokens": rng.integers(8, 2048, n), "temperature": rng.uniform(0, 1, n),
                              "language": rng.choice(["en", "de", "fr"], n)})
    current = pd.DataFrame({"prompt_tokens": rng.integers(8, 2048, n) * 2, "temperature": rng.uniform(0, 1, n),
                            "language": rng.choice(["en", "de", "fr"], n)})
    scores, snapshot = evidently_drift(current, reference, DriftConfig())
    scores = scores.set_index("column_name")
    assert scores.loc["prompt_tokens", "drifted"] and scores.loc["prompt_tokens", "score"] > 0.5
    assert not scores.loc["temperature", "drifted"] and not scores.loc["language", "drifted"]
    assert dict(scores["column_type"]) == {"prompt_tokens": "num", "temperature": "num", "language": "cat"}
    assert snapshot.dict()["metrics"]


def test_p_value_methods_drift_below_their_threshold_and_distances_above():
    assert is_drifted("ks", "num", 0.001, 0.05) and not is_drifted("ks", "num", 0.3, 0.05)
    assert is_drifted("chisquare", "cat", 0.001, 0.05) and not is_drifted("chisquare", "cat", 0.3, 0.05)
    assert is_drifted("wasserstein", "num", 0.3, 0.15) and not is_drifted("wasserstein", "num", 0.05, 0.15)
    assert is_drifted("jensenshannon", "cat", 0.3, 0.1) and not is_drifted("jensenshannon", "cat", 0.05, 0.1)


# ----------------------------------------------------------------------------- simulator

def scenario(faults, promotions=({"run": "r", "at": "1h"},)):
    return scenario_from_dict({
        "name": "q", "seed": 5, "start": "2026-11-30T00:00:00Z", "duration": "3h",
        "cluster": {"hosts": 1, "gpus_per_host": 1, "sample_interval": "60s"},
        "runs": [{"id": "r", "start": "1m", "duration": "2h", "hosts": [0], "ranks": 1, "step_time": "2s",
                  "loss": {"initial": 8.0, "floor": 2.0, "decay": 0.35, "noise": 0.02}, "checkpoint_interval_steps": 300}],
        "endpoints": [{"name": "api", "model_version": "base", "requests_per_second": 1.0,
                       "ttft_seconds": {"p50": 0.1, "p99": 0.4}, "itl_seconds": {"p50": 0.02, "p99": 0.05},
                       "e2e_seconds": {"p50": 2.0, "p99": 6.0}, "metrics_interval": "60s",
                       "predictions": {"per_minute": 10, "outcome_delay": "10m"}, "promotions": list(promotions)}],
        "faults": faults,
    })


def predictions(home: Path) -> pd.DataFrame:
    import duckdb

    return duckdb.sql(f"""SELECT time, model_version, features.prompt_tokens::INT AS prompt_tokens,
                              features.language::VARCHAR AS language, confidence
                       FROM read_json_auto('{home}/raw/predictions/*/*/*.jsonl')""").df()


def test_simulated_quality_faults_move_what_they_say(tmp_path):
    clean, faulty = tmp_path / "clean", tmp_path / "faulty"
    simulate(scenario([]), clean)
    simulate(scenario([{"type": "input_drift", "target": "endpoint:api", "onset": "2h", "duration": "1h", "magnitude": 1.0},
                       {"type": "bad_promotion", "target": "endpoint:api", "onset": "1h", "duration": "30m", "magnitude": 1.0}]),
             faulty)
    a, b = predictions(clean), predictions(faulty)
    assert len(a) == len(b)
    late = b["time"] >= pd.Timestamp("2026-11-30 02:00")
    assert b.loc[late, "prompt_tokens"].mean() == pytest.approx(2 * a.loc[late, "prompt_tokens"].mean(), rel=0.05)
    assert (b.loc[late, "language"] == "ja").mean() > 0.5 > (a.loc[late, "language"] == "ja").mean()
    bad = (b["time"] >= pd.Timestamp("2026-11-30 01:00")) & (b["time"] < pd.Timestamp("2026-11-30 01:30"))
    assert b.loc[bad, "confidence"].mean() == pytest.approx(0.75 * a.loc[bad, "confidence"].mean(), rel=0.02)
    assert (b.loc[~bad & ~late] == a.loc[~bad & ~late]).all().all()      # untouched outside the faults
    # every hour's lineage file of run r (directory order differs between file systems)
    registered = pd.concat([pd.read_json(path, lines=True)
                            for path in sorted((tmp_path / "faulty" / "raw" / "lineage").rglob("r.jsonl"))])
    reg = registered[registered["event"] == "model_version_registered"].iloc[0]
    # the hour of traffic before the registration, clipped to the scenario's start
    assert pd.Timestamp(reg["reference_end"]) == pd.Timestamp(reg["time"])
    assert pd.Timestamp(reg["reference_start"]) == max(pd.Timestamp(reg["time"]) - pd.Timedelta(hours=1),
                                                       pd.Timestamp("2026-11-30T00:00:00Z"))


def test_a_bad_promotion_must_sit_on_a_promotion(tmp_path):
    bad = scenario([{"type": "bad_promotion", "target": "endpoint:api", "onset": "1h30m", "duration": "30m"}])
    with pytest.raises(ScenarioError, match="not at a promotion"):
        simulate(bad, tmp_path)


# ----------------------------------------------------------------------------- healthy promotion, real job

def test_a_healthy_promotion_raises_no_quality_alarm(tmp_path):
    """serving.yaml: chat-api promotes a new version at 01:00, judged against its registered
    reference (the hour of traffic before); nothing about its quality changed."""
    simulate(load_scenario(REPO / "simulator" / "scenarios" / "serving.yaml"), tmp_path)
    with memory_instance() as instance:
        run_detect(tmp_path, "2026-11-30-00:00", instance)
        result = run_detect(tmp_path, "2026-11-30-01:00", instance)
    for name in QUALITY_SIGNALS:
        assert check_evaluation(result, name).passed, name
    import duckdb

    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        judged = con.execute("SELECT DISTINCT model_version, reference_source FROM drift_history").fetchall()
    # judged, and against the window registered with it (the base version's last hour)
    assert len(judged) == 1 and judged[0][0].startswith("llm-serve-step-") and judged[0][1] == "registered"
