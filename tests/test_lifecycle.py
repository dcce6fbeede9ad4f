"""Incident lifecycle: open -> escalate -> resolve -> reopen as a new episode, grouping of ranks into
one run-level incident, correlation across run and GPU, and deterministic folding (a backfill in
another order gives identical rows, evidence and transitions included)."""

import random

import dagster as dg
import pandas as pd
import pytest

from assets.baselines import training_baselines
from assets.incidents import Lifecycle, fold, incident_id, incidents
from checks.registry import Playbook, Signal, SignalRegistry
from orchestration.storage.warehouse import WarehouseResource
from tests.helpers import LIFECYCLE_T0 as T0
from tests.helpers import _hang, _store, cleared, evaluated, finding, memory_instance, minutes

LIFE = Lifecycle(window_seconds=300, resolve_after_windows=2, escalate_gpu_hours={"SEV2": 2.0, "SEV1": 8.0})


class _TestSignal(Signal):
    """A signal whose playbook is given here (the catalogue holds only real signals)."""

    @property
    def playbook(self) -> Playbook:
        return Playbook(("Look at run {run_id} ranks {ranks} on {gpus}; value {value_max}.",), "test on-call", ("lead",))


def _signal(name, family, entity, tier):
    return _TestSignal(name=name, family=family, entity=entity, tier=tier, owner="platform", title=name.replace("_", " "),
                       description="test", asset="training_steps", inputs=(), query="unused", detector=lambda f, t: f)


REG = SignalRegistry()
for spec in (("slow_run", "training", "run", "SEV3"), ("straggler", "distributed", "rank", "SEV2"),
             ("thermal", "gpu", "gpu", "SEV3")):
    REG.register(_signal(*spec))


GPUS8 = [f"node-0:{i}" for i in range(8)]


def slow(onset, detected, last):
    return finding("slow_run", "run", "llm", onset, detected, last, run_id="llm", hosts=["node-0"], gpus=GPUS8)


def test_open_escalate_resolve_reopen():
    # open: 8 GPUs stalled 10 min = 1.3 GPU-h, under the 2 GPU-h SEV2 threshold: SEV3, open
    found = [slow(0, 5, 10)]
    inc, trans = fold(pd.DataFrame(found), evaluated("slow_run", 10), LIFE, REG, clearings=cleared(found))
    (first,) = inc.to_dict("records")
    assert (first["status"], first["tier"], first["default_tier"], first["episode"]) == ("open", "SEV3", "SEV3", 1)
    assert list(trans["transition"]) == ["opened"] and "catalogue" in first["tier_reason"]
    assert first["incident_id"] == incident_id("slow_run", "llm", minutes(0))

    # update + escalate: findings until 00:30 = 4 GPU-h; SEV2 crossed at 00:15 (2 GPU-h / 8 GPUs)
    found += [slow(0, 15, 20), slow(0, 25, 30)]
    inc, trans = fold(pd.DataFrame(found), evaluated("slow_run", 30), LIFE, REG, clearings=cleared(found))
    (now,) = inc.to_dict("records")
    assert now["incident_id"] == first["incident_id"] and now["status"] == "open"
    assert now["last_seen"] == minutes(30) and now["gpu_hours_at_risk"] == pytest.approx(4.0)
    assert now["tier"] == "SEV2" and now["escalated_at"] == minutes(15)
    assert "escalated from SEV3" in now["tier_reason"] and "reached 2" in now["tier_reason"]
    assert list(zip(trans["transition"], trans["tier"], trans["transition_at"])) == [
        ("opened", "SEV3", minutes(5)), ("escalated", "SEV2", minutes(15))]

    # 5 clean evaluated minutes are not the 2 windows (10 min) resolving needs; unevaluated time never counts
    inc, _ = fold(pd.DataFrame(found), evaluated("slow_run", 35), LIFE, REG, clearings=cleared(found))
    assert inc.loc[0, "status"] == "open"
    # resolve: evaluated and clean through 00:40
    inc, trans = fold(pd.DataFrame(found), evaluated("slow_run", 45), LIFE, REG, clearings=cleared(found))
    (done,) = inc.to_dict("records")
    assert done["status"] == "resolved" and done["resolved"] == minutes(40)
    assert list(trans["transition"]) == ["opened", "escalated", "resolved"]
    # the resolution names the evidence that cleared it, in the record and in the transition
    assert done["resolution"].startswith("cleared at 2026-11-30 00:31:00 on llm: value back under the threshold")
    assert "value back under the threshold" in trans["reason"].iloc[-1]

    # reopen: a finding after the episode ended is a new incident, episode 2, naming the one it reopens
    found += [slow(80, 82, 90)]
    inc, trans = fold(pd.DataFrame(found), evaluated("slow_run", 95), LIFE, REG, clearings=cleared(found))
    assert len(inc) == 2
    old, new = inc.sort_values("onset").to_dict("records")
    assert old["incident_id"] == first["incident_id"] and old["status"] == "resolved"
    assert new["incident_id"] != old["incident_id"] and new["episode"] == 2 and new["previous_incident_id"] == old["incident_id"]
    assert new["status"] == "open" and new["tier"] == "SEV3"     # 8 GPUs x 10 min: a fresh cost
    assert trans[trans["incident_id"] == new["incident_id"]]["transition"].tolist() == ["opened"]


def test_hourly_findings_judged_at_their_newest_evidence_stay_one_episode():
    # an hourly window is judged when its newest data is in: each hour's finding begins where the
    # previous one ended but is detected ~an hour later; the episode continues, opened at the first
    found = [slow(0, 58, 60), slow(60, 118, 120), slow(120, 178, 180)]
    inc, trans = fold(pd.DataFrame(found), evaluated("slow_run", 180), LIFE, REG)
    (one,) = inc.to_dict("records")
    assert (one["onset"], one["opened"], one["last_seen"]) == (minutes(0), minutes(58), minutes(180))
    assert list(trans["transition"])[0] == "opened"
    # a window that begins well after the episode's last flagged time is a new episode
    inc, _ = fold(pd.DataFrame(found + [slow(240, 298, 300)]), evaluated("slow_run", 300), LIFE, REG)
    assert sorted(inc["episode"]) == [1, 2]


def test_costly_on_first_sight_opens_at_the_escalated_tier():
    # onset an hour before detection: 8 GPU-h burned already, SEV1 from the start, no separate escalation
    inc, trans = fold(pd.DataFrame([slow(0, 60, 65)]), evaluated("slow_run", 65), LIFE, REG)
    assert inc.loc[0, "tier"] == "SEV1" and "escalated from SEV2" in inc.loc[0, "tier_reason"]
    assert list(zip(trans["transition"], trans["tier"])) == [("opened", "SEV1")]


def test_many_ranks_fold_into_one_run_incident_correlated_with_the_gpu_under_them():
    ranks = range(64)
    found = [finding("straggler", "rank", f"llm/rank-{r}", 10, 12 + r % 3, 30, run_id="llm", rank=r,
                     hosts=[f"node-{r // 8}"], gpus=[f"node-{r // 8}:{r % 8}"]) for r in ranks]
    found.append(finding("thermal", "gpu", "node-0:3", 8, 9, 28, hosts=["node-0"], gpus=["node-0:3"]))
    found.append(finding("thermal", "gpu", "node-9:0", 8, 9, 28, hosts=["node-9"], gpus=["node-9:0"]))   # unrelated GPU
    marks = pd.concat([evaluated(s, 20) for s in ("straggler", "thermal")])
    inc, _ = fold(pd.DataFrame(found), marks, LIFE, REG)
    assert len(inc) == 3
    run = inc[inc["signal"] == "straggler"].iloc[0]
    assert (run["entity_type"], run["entity_id"], run["run_id"]) == ("run", "llm", "llm")
    assert list(run["ranks"]) == list(ranks) and len(run["members"]) == 64 and run["findings"] == 64
    assert "64 ranks" in run["title"] and "0, 1, 2" in run["playbook"] and len(run["gpus"]) == 64
    gpu3 = inc[inc["entity_id"] == "node-0:3"].iloc[0]
    other = inc[inc["entity_id"] == "node-9:0"].iloc[0]
    assert gpu3["correlation_id"] == run["correlation_id"] and other["correlation_id"] != run["correlation_id"]
    # the correlation is named after the earliest incident of the group (the thermal one, onset 00:08)
    assert run["correlation_id"] == "cor-" + gpu3["incident_id"].removeprefix("inc-")


def test_one_rank_alone_is_still_the_run_incident_with_its_rank():
    found = [finding("straggler", "rank", "llm/rank-5", 10, 12, 20, run_id="llm", rank=5, gpus=["node-0:5"])]
    inc, _ = fold(pd.DataFrame(found), evaluated("straggler", 20), LIFE, REG)
    assert (inc.loc[0, "entity_type"], inc.loc[0, "entity_id"], inc.loc[0, "rank"]) == ("run", "llm", 5)


def _tables(warehouse):
    with warehouse.connect(read_only=True) as con:
        return (con.execute("SELECT * FROM incidents ORDER BY incident_id").df(),
                con.execute("SELECT * FROM incident_transitions ORDER BY incident_id, seq").df())


def test_a_backfill_in_any_partition_order_gives_identical_rows(tmp_path):
    # three hours, two episodes spanning partitions; stored in hour order in one warehouse, shuffled in another
    found = pd.DataFrame([_hang(50, 55, 59), _hang(50, 60, 70), _hang(130, 136, 150)])
    marks = evaluated("busy_not_progressing", 179)
    results = []
    for name, order in (("in-order", [0, 1, 2]), ("shuffled", [2, 0, 1])):
        warehouse = WarehouseResource(path=str(tmp_path / f"{name}.duckdb"))
        starts = sorted(found["partition_start"].unique())
        for i in order:
            _store(warehouse, found[found["partition_start"] == starts[i]], marks)
        with memory_instance() as instance:
            for _ in range(2):   # re-running the fold changes nothing either
                assert dg.materialize([incidents], resources={"warehouse": warehouse}, instance=instance).success
                results.append(_tables(warehouse))
    first_inc, first_trans = results[0]
    assert len(first_inc) == 2 and sorted(first_inc["episode"]) == [1, 2]
    assert set(first_inc["status"]) == {"resolved"} and len(first_trans) == 4
    for inc, trans in results[1:]:
        pd.testing.assert_frame_equal(first_inc, inc)
        pd.testing.assert_frame_equal(first_trans, trans)


def test_fold_ignores_the_order_findings_arrive_in():
    found = [slow(0, 5, 10), slow(0, 15, 20), slow(0, 25, 30), slow(80, 82, 90)] + [
        finding("straggler", "rank", f"llm/rank-{r}", 10, 12 + r % 3, 30, run_id="llm", rank=r, gpus=[f"node-0:{r}"])
        for r in range(8)]
    marks = pd.concat([evaluated(s, 120) for s in ("slow_run", "straggler")])
    base_inc, base_trans = fold(pd.DataFrame(found), marks, LIFE, REG, clearings=cleared(found))
    for seed in range(3):
        shuffled = found[:]
        random.Random(seed).shuffle(shuffled)
        inc, trans = fold(pd.DataFrame(shuffled), marks.sample(frac=1, random_state=seed), LIFE, REG,
                          clearings=cleared(shuffled).sample(frac=1, random_state=seed))
        pd.testing.assert_frame_equal(base_inc, inc)
        pd.testing.assert_frame_equal(base_trans, trans)


def test_rerunning_the_small_scenarios_backfill_in_another_order_gives_identical_incidents(small_home, instance):
    """The real path: simulated raw zone -> ingest -> the hang check -> fold; then the whole backfill
    again, hours reversed, and the fold again: identical incident and transition rows, evidence included."""
    from assets.ingest import ingest_assets
    from checks.asset_checks import build_check
    from checks.registry import REGISTRY
    from orchestration.definitions import resources_for

    hang_check = [build_check(REGISTRY.get("busy_not_progressing"))]
    resources = resources_for(small_home)
    results = []
    for hours in (("2026-11-30-00:00", "2026-11-30-01:00"), ("2026-11-30-01:00", "2026-11-30-00:00")):
        for key in hours:
            assert dg.materialize([*ingest_assets, training_baselines, *hang_check], resources=resources, partition_key=key,
                                  instance=instance).success
        assert dg.materialize([incidents, *ingest_assets], selection=[incidents.key], resources=resources,
                              instance=instance).success
        results.append(_tables(resources["warehouse"]))
    (inc, trans), (inc2, trans2) = results
    assert len(inc) == 1 and inc.loc[0, "status"] == "resolved" and inc.loc[0, "episode"] == 1
    assert list(trans["transition"]) == ["opened", "resolved"]
    assert inc.loc[0, "tier_reason"].startswith("SEV1: the catalogue's tier")
    pd.testing.assert_frame_equal(inc, inc2)
    pd.testing.assert_frame_equal(trans, trans2)


def test_a_throttling_gpu_and_the_straggling_rank_on_it_share_a_correlation_id(tmp_path, instance):
    """Real detectors on a simulated thermal throttle of node-0:3: the rank on it straggles. The
    straggler is a run-level incident naming the rank; the GPU's incident is correlated with it."""
    from assets.baselines import gpu_baselines, training_baselines
    from assets.ingest import ingest_assets
    from checks.asset_checks import build_check
    from checks.registry import REGISTRY
    from orchestration.definitions import resources_for
    from simulator import scenario_from_dict, simulate

    loss = {"initial": 9.0, "floor": 2.1, "decay": 0.35, "noise": 0.02}
    simulate(scenario_from_dict({
        "name": "thermal", "seed": 5, "start": "2026-11-30T00:00:00Z", "duration": "2h",
        "cluster": {"hosts": 2, "gpus_per_host": 4},
        "runs": [{"id": "llm", "start": "5m", "duration": "1h50m", "hosts": [0, 1], "ranks": 8, "step_time": "2s",
                  "loss": loss, "checkpoint_interval_steps": 500}],
        "faults": [{"type": "thermal_throttle", "target": "gpu:node-0:3", "onset": "50m", "duration": "30m", "magnitude": 1.0}],
    }), tmp_path)
    wanted = {"straggler_rank", "gpu_thermal_throttle"}
    chosen = [build_check(REGISTRY.get(name)) for name in sorted(wanted)]
    resources = resources_for(tmp_path)
    for key in ("2026-11-30-00:00", "2026-11-30-01:00"):
        assert dg.materialize([*ingest_assets, gpu_baselines, training_baselines, *chosen], resources=resources,
                              partition_key=key, instance=instance).success
    assert dg.materialize([incidents], resources={"warehouse": resources["warehouse"]}, instance=instance).success
    inc, _ = _tables(resources["warehouse"])
    straggler = inc[inc["signal"] == "straggler_rank"]
    thermal = inc[inc["signal"] == "gpu_thermal_throttle"]
    assert len(straggler) == 1 and len(thermal) == 1
    s, t = straggler.iloc[0], thermal.iloc[0]
    assert (s["entity_type"], s["entity_id"], list(s["ranks"]), s["rank"]) == ("run", "llm", [3], 3)
    assert list(s["members"]) == ["llm/rank-3"] and list(s["gpus"]) == ["node-0:3"]
    assert (t["entity_type"], t["entity_id"]) == ("gpu", "node-0:3")
    assert s["correlation_id"] == t["correlation_id"]


def test_an_incident_at_the_end_of_a_run_resolves_once_later_hours_are_evaluated():
    # the run stops at 00:58; hour 01 has nothing to evaluate for this signal (no evaluated_until)
    found = pd.DataFrame([slow(40, 45, 58)])
    marks = pd.DataFrame([
        {"signal": "slow_run", "partition_start": T0, "evaluated_until": minutes(58)},
        {"signal": "slow_run", "partition_start": minutes(60), "evaluated_until": pd.NaT},
    ])
    # the run left the series at 00:58: its check records that as the clearing
    gone = cleared(found.to_dict("records"), after_minutes=0)
    inc, _ = fold(found, marks, LIFE, REG, clearings=gone)
    assert inc.loc[0, "status"] == "open"        # nothing says time has moved past hour 01 yet
    later = pd.concat([marks, pd.DataFrame([{"signal": "thermal", "partition_start": minutes(120),
                                             "evaluated_until": minutes(130)}])])
    inc, trans = fold(found, later, LIFE, REG, clearings=gone)
    assert inc.loc[0, "status"] == "resolved" and trans["transition"].iloc[-1] == "resolved"


def test_clean_windows_without_clearing_evidence_do_not_resolve():
    """A resolution needs evidence that the fault is over: clean evaluated windows alone (the check saw
    nothing after the onset left its lookback) leave the incident open; the clearing resolves it."""
    found = [slow(0, 5, 30)]
    inc, trans = fold(pd.DataFrame(found), evaluated("slow_run", 120), LIFE, REG)
    assert inc.loc[0, "status"] == "open" and pd.isna(inc.loc[0, "resolved"]) and inc.loc[0, "resolution"] is None
    assert list(trans["transition"]) == ["opened", "escalated"]
    # a clearing from before the episode's last finding is not evidence that it ended
    early = cleared([slow(0, 5, 20)])
    inc, _ = fold(pd.DataFrame(found), evaluated("slow_run", 120), LIFE, REG, clearings=early)
    assert inc.loc[0, "status"] == "open"
    inc, trans = fold(pd.DataFrame(found), evaluated("slow_run", 120), LIFE, REG, clearings=cleared(found, 3))
    assert inc.loc[0, "status"] == "resolved" and inc.loc[0, "resolved"] == minutes(40)
    assert "00:33:00" in inc.loc[0, "resolution"] and trans["transition"].iloc[-1] == "resolved"
