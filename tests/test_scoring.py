"""The scorer: matching incidents to injected faults by signal, entity and time."""

import pandas as pd

from orchestration.evaluation.scoring import score

T = pd.Timestamp("2026-11-30 03:10:00")


def incident(iid, entity="llm-a", onset=T, opened=T + pd.Timedelta("5min"), last_seen=T + pd.Timedelta("40min")):
    return {"incident_id": iid, "signal": "busy_not_progressing", "entity_type": "run", "entity_id": entity,
            "run_id": entity, "onset": onset, "opened": opened, "last_seen": last_seen}


def truth(entity="run:llm-a"):
    return pd.DataFrame([{"type": "hang", "entity": entity, "onset": T, "end": T + pd.Timedelta("40min"), "magnitude": 1.0}])


def test_detected_with_delay_and_no_false_alarm():
    table = score(truth(), pd.DataFrame([incident("i1")])).set_index("fault_type")
    assert table.loc["hang", "detected"] == 1 and table.loc["hang", "false_alarms"] == 0
    assert table.loc["hang", "delay_median_s"] == 300.0
    assert table.loc["hang", "precision"] == 1.0 and table.loc["hang", "recall"] == 1.0


def test_wrong_entity_or_time_is_a_miss_and_a_false_alarm():
    far = T + pd.Timedelta("5h")
    incidents = pd.DataFrame([incident("i1", entity="llm-b"), incident("i2", onset=far, opened=far, last_seen=far)])
    table = score(truth(), incidents).set_index("fault_type")
    assert table.loc["hang", "missed"] == 1 and table.loc["hang", "false_alarms"] == 2
    assert table.loc["hang", "precision"] == 0.0


def test_false_alarms_counted_without_any_fault():
    empty_truth = truth().iloc[0:0]
    table = score(empty_truth, pd.DataFrame([incident("i1")])).set_index("fault_type")
    assert table.loc["hang", "false_alarms"] == 1 and table.loc["hang", "injected"] == 0


def test_rank_and_gpu_faults_match_the_incidents_that_name_them():
    from orchestration.evaluation.scoring import _entity_matches

    rank_incident = pd.Series({"entity_type": "rank", "entity_id": "llm-a/rank-3", "run_id": "llm-a", "rank": 3,
                               "gpus": ["node-0:3"]})
    run_incident = pd.Series({"entity_type": "run", "entity_id": "llm-a", "run_id": "llm-a", "rank": None,
                              "ranks": [3, 5], "gpus": ["node-0:3", "node-0:5"]})
    stuck_run = pd.Series({"entity_type": "run", "entity_id": "llm-a", "run_id": "llm-a", "rank": None,
                           "ranks": [], "gpus": ["node-0:3", "node-0:5"]})
    assert _entity_matches(rank_incident, "rank:llm-a/rank-3")
    assert _entity_matches(rank_incident, "gpu:node-0:3")        # a throttled GPU shows as its rank straggling
    assert _entity_matches(rank_incident, "run:llm-a")
    assert _entity_matches(run_incident, "rank:llm-a/rank-5")
    assert not _entity_matches(rank_incident, "rank:llm-a/rank-4")
    assert not _entity_matches(rank_incident, "gpu:node-1:3")
    assert not _entity_matches(run_incident, "rank:llm-b/rank-3")
    assert not _entity_matches(run_incident, "rank:llm-a/rank-4")   # names other ranks
    assert _entity_matches(stuck_run, "rank:llm-a/rank-4")          # the whole run stuck: every rank


def test_coverage_is_the_share_of_the_fault_an_incident_was_open():
    from orchestration.evaluation.scoring import coverage

    long = pd.DataFrame([{"type": "hang", "entity": "run:llm-a", "onset": T, "end": T + pd.Timedelta("3h"), "magnitude": 1.0}])
    held = incident("i1", last_seen=T + pd.Timedelta("3h")) | {"resolved": T + pd.Timedelta("3h10min")}
    assert coverage(long, pd.DataFrame([held]))["coverage"].tolist() == [1.0]
    still_open = incident("i1", last_seen=T + pd.Timedelta("2h")) | {"resolved": pd.NaT}
    assert coverage(long, pd.DataFrame([still_open]))["coverage"].tolist() == [1.0]
    # resolved after an hour while the hang went on, reopened 90 minutes later: half the fault uncovered
    early = incident("i1", last_seen=T + pd.Timedelta("50min")) | {"resolved": T + pd.Timedelta("1h")}
    later = incident("i2", onset=T + pd.Timedelta("2h30min"), opened=T + pd.Timedelta("2h35min"),
                     last_seen=T + pd.Timedelta("3h")) | {"resolved": T + pd.Timedelta("3h10min")}
    (row,) = coverage(long, pd.DataFrame([early, later])).to_dict("records")
    assert row["coverage"] == 0.5 and row["incidents"] == 2
    table = score(long, pd.DataFrame([early, later])).set_index("fault_type")
    assert table.loc["hang", "coverage_mean"] == 0.5 and table.loc["hang", "recall"] == 1.0
    assert coverage(long, pd.DataFrame([incident("i3", entity="llm-b")]))["coverage"].tolist() == [0.0]
