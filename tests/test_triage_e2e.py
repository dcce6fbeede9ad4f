"""Triage on a scenario with both a drift on a stable version and a bad promotion, through the real
Dagster jobs (`detect` per hour, then the incidents fold): each quality incident has the right triage
class and the right lineage (model version -> training run -> checkpoint), and the scoring matches
the injected faults."""

from pathlib import Path

import pandas as pd
import pytest

from orchestration.definitions import resources_for
from orchestration.evaluation.scoring import load_truth, score
from tests.helpers import copy_home

REPO = Path(__file__).resolve().parent.parent
QUALITY = REPO / "simulator" / "scenarios" / "quality.yaml"
BASE, PROMOTED_AT = "chat-base", pd.Timestamp("2026-11-30 04:00")


@pytest.fixture(scope="module")
def folded(quality_first_hours, tmp_path_factory):
    """quality.yaml's hours 00-06 through `detect` in order, then the fold (the session's, tests/conftest.py:
    quality_first_hours, built once for this file and tests/test_drift.py), on a copy of that home."""
    home = copy_home(quality_first_hours["home"], tmp_path_factory.mktemp("triage") / "home")
    with resources_for(home)["warehouse"].connect(read_only=True) as con:
        found = con.execute("SELECT * FROM incidents WHERE family = 'quality' ORDER BY onset, signal").df()
        promoted = con.execute("""SELECT model_version, run_id, step, checkpoint_path FROM lineage_events
                                  WHERE event = 'model_version_registered'""").df()
    return home, found, promoted


def test_drift_on_the_stable_version_is_triaged_as_drift(folded):
    _, found, _ = folded
    drift = found[found["model_version"] == BASE]
    assert list(drift["signal"]) == ["input_drift"]
    inc = drift.iloc[0]
    assert inc["triage_class"] == "drift_on_stable_version"
    assert (inc["entity_type"], inc["entity_id"], inc["endpoint"]) == ("endpoint", "chat-api", "chat-api")
    assert inc["onset"] == pd.Timestamp("2026-11-30 01:00")          # the hour the drift began (01:15)
    assert inc["tier"] == "SEV3" and inc["owner"] == "model"
    # chat-base was serving before the lineage begins: no registration, so no run or checkpoint
    assert pd.isna(inc["checkpoint"]) or inc["checkpoint"] is None


def test_the_bad_promotion_is_triaged_as_a_regression_with_its_lineage(folded):
    _, found, promoted = folded
    (version,) = promoted["model_version"]
    after = found[found["model_version"] == version]
    # the new version's confidence and outcome rate fell right after its promotion; its inputs did not move
    assert set(after["signal"]) == {"confidence_shift", "prediction_drift", "business_metric_drop"}
    assert (after["triage_class"] == "regression_after_promotion").all(), after[["signal", "triage_class"]]
    assert (after["onset"] >= PROMOTED_AT).all() and (after["onset"] < PROMOTED_AT + pd.Timedelta(hours=1)).all()
    reg = promoted.iloc[0]
    assert version == f"llm-serve-step-{int(reg['step']):06d}"
    for inc in after.itertuples():
        # version -> run -> checkpoint: the registration's run and checkpoint
        assert (inc.endpoint, inc.run_id, inc.checkpoint) == ("chat-api", reg["run_id"], reg["checkpoint_path"])
        assert f"checkpoint {reg['checkpoint_path']}" in inc.playbook or reg["checkpoint_path"] in inc.playbook
        assert "regression_after_promotion" in inc.playbook
    tiers = dict(zip(after["signal"], after["tier"]))
    assert tiers == {"confidence_shift": "SEV3", "prediction_drift": "SEV3", "business_metric_drop": "SEV2"}
    # each opens once its evidence is in: after the promotion, never stamped at its window's start
    assert (after["opened"] > PROMOTED_AT).all(), after[["signal", "opened"]]
    # outcomes arrive late: the drop is known only once the judged predictions' outcomes have come in
    drop = after[after["signal"] == "business_metric_drop"].iloc[0]
    assert drop["opened"] > drop["onset"] + pd.Timedelta(hours=1)


def test_scoring_matches_both_faults(folded):
    home, found, _ = folded
    table = score(load_truth(home / "ground_truth.jsonl"), found).set_index("fault_type")
    assert table.loc["input_drift", "recall"] == 1.0
    assert table.loc["bad_promotion", "recall"] == 1.0


def test_goodput_report_shows_the_drift_of_the_runs_model_versions(folded, tmp_path):
    from board.app import Board
    from orchestration.storage import sql

    home, _, _ = folded
    with resources_for(home)["warehouse"].connect(read_only=True) as con:
        drift = sql.frame(con, "quality/run_drift", {"run_id": "llm-serve"})
    # the version registered from llm-serve, judged from its promotion on
    assert not drift.empty and drift["model_version"].str.startswith("llm-serve-step-").all()
    assert drift["drifted"].any() and (drift["hour"] >= PROMOTED_AT).all()
    status, page = Board(home, dagster_url=None, root="http://127.0.0.1:3001").run_page("llm-serve", inline_plotly=True)
    assert status == 200 and "model versions: drift score per column and hour" in page
