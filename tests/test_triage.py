"""Triage of serving and quality incidents (assets/triage.py) on hand-built incidents and version
histories: a regression after a promotion, drift on a stable version, infrastructure (a GPU under
the endpoint, the serving layer's capacity, a restart), the lineage each carries, and the hook in
the incidents fold."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from assets import triage
from assets.incidents import INCIDENT_COLUMNS, fold

T0 = pd.Timestamp("2026-11-30 08:00:00")
CKPT = "/checkpoints/train-a/step-003000"


def at(minutes: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(minutes=minutes)


def incident(signal="serving_latency_regression", family="serving", onset=0, last=30, model_version="v2",
             endpoint="chat-api", hosts=("node-1",), run_id=None, gpus=(), triage_class=None, evidence=None, iid=None):
    row = {c: None for c in INCIDENT_COLUMNS}
    row.update({
        "incident_id": iid or f"inc-{signal}-{onset}", "signal": signal, "family": family, "tier": "SEV2",
        "status": "resolved", "onset": at(onset), "opened": at(onset + 3), "last_seen": at(last),
        "entity_type": "endpoint" if family in ("serving", "quality") else "gpu",
        "entity_id": endpoint if family in ("serving", "quality") else (gpus[0] if gpus else "x"),
        "endpoint": endpoint if family in ("serving", "quality") else None, "model_version": model_version,
        "hosts": list(hosts), "gpus": list(gpus), "run_id": run_id, "triage_class": triage_class,
        "playbook": "1. Look.", "evidence": json.dumps(evidence or {}),
    })
    return row


def frame(*rows) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=list(INCIDENT_COLUMNS))


# chat-api served v1 from 08:00, v2 (train-a, step 3000) from its promotion at 10:00
VERSIONS = pd.DataFrame([
    {"endpoint": "chat-api", "model_version": "v1", "served_from": at(0), "served_until": at(120), "promoted_at": pd.NaT,
     "previous_version": None, "run_id": None, "checkpoint_step": None, "checkpoint_path": None, "registered_at": pd.NaT},
    {"endpoint": "chat-api", "model_version": "v2", "served_from": at(120), "served_until": pd.NaT, "promoted_at": at(120),
     "previous_version": "v1", "run_id": "train-a", "checkpoint_step": 3000, "checkpoint_path": CKPT,
     "registered_at": at(115)},
], columns=list(triage.VERSION_COLUMNS))


def one(*rows, versions=VERSIONS, window=triage.WINDOW_SECONDS) -> dict:
    out = triage.apply(frame(*rows), versions, window)
    return out.iloc[-1].to_dict()


def test_regression_right_after_a_promotion_with_lineage():
    got = one(incident(onset=125, last=160))
    assert got["triage_class"] == "regression_after_promotion"
    assert (got["run_id"], got["checkpoint"]) == ("train-a", CKPT)
    evidence = json.loads(got["evidence"])
    assert "promoted to v2" in evidence["triage_reason"] and "(v1) had no serving_latency_regression" in evidence["triage_reason"]
    assert evidence["lineage"] == (f"chat-api serves v2 (since {at(120)}, promoted {at(120)}) <- run train-a "
                                   f"<- checkpoint step 3000 {CKPT}")
    assert got["playbook"].startswith("1. Look.\nTriage: regression_after_promotion: ")


def test_an_onset_a_minute_before_the_promotion_still_counts():
    # minute buckets and rolling windows put the onset a little early; the version is v1's last minute
    assert one(incident(onset=119, last=150, model_version="v2"))["triage_class"] == "regression_after_promotion"


def test_previous_version_with_the_same_incident_is_not_the_promotions_fault():
    before = incident(onset=60, last=90, model_version="v1", iid="inc-old")
    got = one(before, incident(onset=125, last=160))
    assert got["triage_class"] == "undetermined"
    assert "inc-old" in json.loads(got["evidence"])["triage_reason"]


def test_stable_version_is_drift_and_the_window_is_configurable():
    late = incident(onset=300, last=330)   # 3 h after the promotion
    assert one(late)["triage_class"] == "drift_on_stable_version"
    assert one(late, window=4 * 3600)["triage_class"] == "regression_after_promotion"
    got = one(incident(onset=60, last=90, model_version="v1"))      # before any promotion
    assert got["triage_class"] == "drift_on_stable_version"
    assert "no promotion of chat-api within 120 min" in json.loads(got["evidence"])["triage_reason"]


@pytest.mark.parametrize("onset, expected", [(130, "regression_after_promotion"), (400, "drift_on_stable_version")])
def test_quality_incidents_get_the_same_triage(onset, expected):
    got = one(incident(signal="quality_input_drift", family="quality", onset=onset, last=onset + 60))
    assert got["triage_class"] == expected and got["run_id"] == "train-a"


def test_gpu_incident_under_the_endpoint_is_infrastructure():
    gpu = incident(signal="gpu_thermal_throttle", family="gpu", onset=120, last=170, model_version=None,
                   gpus=("node-1:0",), iid="inc-gpu")
    got = one(gpu, incident(onset=125, last=160))
    assert got["triage_class"] == "infrastructure" and "inc-gpu" in json.loads(got["evidence"])["triage_reason"]


@pytest.mark.parametrize("change", [
    {"hosts": ("node-3",)},            # another host
    {"run_id": "train-x"},             # a GPU a training run holds: not the endpoint's
    {"onset": 200, "last": 230},       # after the serving incident ended
])
def test_unrelated_gpu_incidents_do_not_explain_it(change):
    spec = {"signal": "gpu_thermal_throttle", "family": "gpu", "onset": 120, "last": 170, "model_version": None,
            "gpus": ("node-1:0",), "iid": "inc-gpu", **change}
    assert one(incident(**spec), incident(onset=125, last=160))["triage_class"] == "regression_after_promotion"


def test_serving_layer_capacity_is_infrastructure():
    queue = incident(signal="serving_queue_growth", onset=130, last=150, iid="inc-queue")
    latency = incident(signal="serving_latency_slo_breach", onset=131, last=150)
    out = triage.apply(frame(queue, latency), VERSIONS).set_index("signal")
    assert out.loc["serving_queue_growth", "triage_class"] == "infrastructure"
    assert out.loc["serving_latency_slo_breach", "triage_class"] == "infrastructure"
    assert "inc-queue" in json.loads(out.loc["serving_latency_slo_breach", "evidence"])["triage_reason"]
    # a queue on another endpoint explains nothing here
    other = incident(signal="serving_queue_growth", onset=130, last=150, endpoint="search-api", iid="inc-q2")
    assert one(other, latency)["triage_class"] == "regression_after_promotion"


def test_error_rate_with_a_restart_and_no_promotion_is_infrastructure():
    restarted = incident(signal="serving_error_rate", onset=300, last=310, evidence={"counter_resets": 1})
    assert one(restarted)["triage_class"] == "infrastructure"
    # right after a promotion (the deploy restarts the server too), the version is the suspect
    fresh = incident(signal="serving_error_rate", onset=122, last=130, evidence={"counter_resets": 1})
    assert one(fresh)["triage_class"] == "regression_after_promotion"
    assert one(incident(signal="serving_error_rate", onset=300, last=310))["triage_class"] == "drift_on_stable_version"


def test_a_class_set_by_the_detector_is_kept_and_other_families_are_untouched():
    got = one(incident(onset=300, last=330, triage_class="infrastructure"))
    assert got["triage_class"] == "infrastructure" and json.loads(got["evidence"])["triage_reason"] == "set by the detector"
    training = incident(signal="busy_not_progressing", family="training", run_id="llm", model_version=None)
    training["entity_type"], training["entity_id"] = "run", "llm"
    got = one(training)
    assert got["triage_class"] is None and got["playbook"] == "1. Look." and got["evidence"] == "{}"


def test_unknown_version_keeps_what_it_knows():
    got = one(incident(onset=300, last=330, model_version="v9"))
    assert got["run_id"] is None and got["checkpoint"] is None
    assert json.loads(got["evidence"])["lineage"] == "chat-api serves v9; no registration on record"
    assert one(incident(onset=300, last=330), versions=None)["triage_class"] == "drift_on_stable_version"


def test_the_fold_triages_and_does_not_tie_the_endpoint_to_the_training_run():
    from checks.registry import REGISTRY

    def finding(signal, entity_type, entity_id, onset, last, **extra):
        return {"signal": signal, "entity_type": entity_type, "entity_id": entity_id, "partition_start": at(onset).floor("h"),
                "onset": at(onset), "detected_at": at(onset + 3), "last_seen": at(last), "run_id": None, "rank": None,
                "hosts": ["node-1"], "gpus": [], "value": 2.0, "baseline": 1.0, "threshold": 1.3,
                "evidence": json.dumps({"endpoint": "chat-api"}), "endpoint": None, "model_version": None,
                "triage_class": None, "checkpoint": None, "checkpoint_step": None, **extra}

    found = pd.DataFrame([
        finding("serving_latency_regression", "endpoint", "chat-api", 121, 160, endpoint="chat-api", model_version="v2"),
        # the run the version came from is still training, and stalls meanwhile
        finding("busy_not_progressing", "run", "train-a", 125, 150, run_id="train-a", hosts=["node-0"], gpus=["node-0:0"]),
    ])
    marks = pd.DataFrame([{"signal": s, "partition_start": at(0).floor("h") + pd.Timedelta(hours=h),
                           "evaluated_until": at(0).floor("h") + pd.Timedelta(hours=h, minutes=59)}
                          for s in ("serving_latency_regression", "busy_not_progressing") for h in range(4)])
    inc, _ = fold(found, marks, versions=VERSIONS, registry=REGISTRY)
    inc = inc.set_index("signal")
    serving = inc.loc["serving_latency_regression"]
    assert serving["triage_class"] == "regression_after_promotion"
    assert (serving["run_id"], serving["checkpoint"]) == ("train-a", CKPT)
    assert serving["correlation_id"] != inc.loc["busy_not_progressing", "correlation_id"]
    assert inc.loc["busy_not_progressing", "triage_class"] is None


def test_a_promotion_in_the_middle_of_an_hourly_window_is_a_regression_not_drift():
    """v2 promoted at 10:00; the hourly drift finding on v2 covers 09:30-10:29 (onset at the window's
    start, 30 min before the promotion, outside the tolerance): its data is v2's, from 10:00."""
    got = one(incident(signal="input_drift", family="quality", onset=90, last=149))
    assert got["triage_class"] == "regression_after_promotion"
    assert "begins at its promotion" in json.loads(got["evidence"])["triage_reason"]


def test_an_hourly_window_on_a_version_promoted_long_before_stays_drift_on_a_stable_version():
    got = one(incident(signal="input_drift", family="quality", onset=400, last=459))   # v2 since 10:00, onset 14:40
    assert got["triage_class"] == "drift_on_stable_version"
