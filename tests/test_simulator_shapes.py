"""The cluster shapes of issue 17 in the simulator's raw output (simulator/scenarios/shapes.yaml,
docs/scenario.md "Cluster shapes"): each test reads the files the simulator wrote and asserts the
shape is there, with a look-alike where one is cheap (the other job, host or time)."""

from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from simulator import ScenarioError, load_scenario, scenario_from_dict, simulate

SHAPES = Path(__file__).resolve().parent.parent / "simulator" / "scenarios" / "shapes.yaml"
T0 = pd.Timestamp("2026-11-30T00:00:00")


def _minute(m: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(minutes=m)


def _read(root: Path, source: str) -> pd.DataFrame:
    files = sorted((root / "raw" / source).rglob("*.jsonl"))
    frame = pd.concat([pd.read_json(f, lines=True, convert_dates=False) for f in files], ignore_index=True)
    frame["time"] = pd.to_datetime(frame["time"], utc=True).dt.tz_localize(None)
    return frame


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    root = tmp_path_factory.mktemp("shapes")
    simulate(load_scenario(SHAPES), root)
    return {s: _read(root, s) for s in ("gpu_samples", "training_steps", "lineage", "predictions")}


def test_two_jobs_share_a_node(out):
    steps = out["training_steps"]
    assert set(steps.loc[steps["run_id"] == "shared-a", "host"]) == {"node-0"}
    assert set(steps.loc[steps["run_id"] == "shared-b", "host"]) == {"node-0"}
    g = out["gpu_samples"]
    at = g[(g["host"] == "node-0") & (g["time"] >= _minute(10)) & (g["time"] < _minute(11))]
    assert dict(at.groupby("gpu_index")["run_id"].agg(lambda s: set(s))) == {
        0: {"shared-a"}, 1: {"shared-a"}, 2: {"shared-b"}, 3: {"shared-b"}}


def test_a_preempted_job_is_requeued_with_the_same_run_id(out):
    lineage = out["lineage"][out["lineage"]["run_id"] == "shared-b"]
    assert list(lineage.loc[lineage["event"] == "run_started", "time"]) == [_minute(3), _minute(22)]
    ended = lineage[lineage["event"] == "run_ended"]
    assert list(ended["status"]) == ["preempted", "completed"] and ended["time"].iloc[0] == _minute(20)
    steps = out["training_steps"][(out["training_steps"]["run_id"] == "shared-b") & (out["training_steps"]["rank"] == 0)]
    assert steps[(steps["time"] >= _minute(20)) & (steps["time"] < _minute(22))].empty       # nothing while queued
    resumed = steps[steps["time"] >= _minute(22)]["step"]
    saved = lineage[(lineage["event"] == "checkpoint_saved") & (lineage["time"] < _minute(20))]["step"].max()
    assert resumed.min() == saved + 1                                                          # from its checkpoint
    g = out["gpu_samples"]
    queued = g[(g["host"] == "node-0") & g["gpu_index"].isin([2, 3]) & (g["time"] >= _minute(20.5))
               & (g["time"] < _minute(22))]
    assert queued["run_id"].isna().all() and (queued["utilization_ratio"] == 0).all()


def test_a_run_can_log_every_nth_step(out):
    steps = out["training_steps"]
    logged = steps[(steps["run_id"] == "shared-a") & (steps["rank"] == 0)].sort_values("step")["step"]
    assert (logged % 10 == 0).all() and set(logged.diff().dropna()) == {10}
    other = steps[(steps["run_id"] == "wide") & (steps["rank"] == 0)].sort_values("step")["step"]
    assert set(other.diff().dropna()) == {1}                                                   # the look-alike logs each


def test_a_job_wide_out_of_memory_crash(out):
    steps = out["training_steps"]
    wide = steps[steps["run_id"] == "wide"]
    node2 = wide[wide["host"] == "node-2"]                                   # node-1's clock is ahead: read node-2's
    assert node2["time"].max() < _minute(45) and node2["rank"].nunique() == 4
    assert node2["time"].max() > _minute(44)
    ended = out["lineage"][(out["lineage"]["run_id"] == "wide") & (out["lineage"]["event"] == "run_ended")]
    assert list(ended["status"]) == ["failed"] and ended["time"].iloc[0] == _minute(45)
    g = out["gpu_samples"]
    after = g[g["host"].isin(["node-1", "node-2"]) & (g["time"] >= _minute(47)) & (g["time"] < _minute(58))]
    assert after["run_id"].isna().all()                                      # every GPU free at once
    last_minute = g[(g["host"] == "node-2") & (g["time"] >= _minute(44.5)) & (g["time"] < _minute(45))]
    before = g[(g["host"] == "node-2") & (g["time"] >= _minute(40)) & (g["time"] < _minute(43))]
    assert last_minute["memory_used_bytes"].max() > 0.97 * last_minute["memory_total_bytes"].max()
    assert before["memory_used_bytes"].max() < 0.9 * before["memory_total_bytes"].max()


def test_a_data_loader_stall_leaves_the_gpus_idle(out):
    steps = out["training_steps"]
    a = steps[(steps["run_id"] == "shared-a") & (steps["rank"] == 0)]
    stall = a[(a["time"] >= _minute(16)) & (a["time"] < _minute(24))]
    calm = a[(a["time"] >= _minute(6)) & (a["time"] < _minute(14))]
    assert stall["data_seconds"].median() == pytest.approx(2.0, rel=0.1)                 # magnitude 1 x the 2 s step
    assert calm["data_seconds"].median() < 0.1
    g = out["gpu_samples"]
    gpu0 = g[(g["host"] == "node-0") & (g["gpu_index"] == 0)]
    during = gpu0[(gpu0["time"] >= _minute(16)) & (gpu0["time"] < _minute(24))]
    before = gpu0[(gpu0["time"] >= _minute(6)) & (gpu0["time"] < _minute(14)) & (gpu0["utilization_ratio"] > 0.5)]
    assert during["utilization_ratio"].median() == pytest.approx(before["utilization_ratio"].median() / 2, rel=0.1)
    b = g[(g["host"] == "node-0") & (g["gpu_index"] == 2) & (g["time"] >= _minute(16)) & (g["time"] < _minute(19))]
    assert b["utilization_ratio"].median() > 0.9                                          # the job beside it is busy


def test_one_hosts_network_degrading_slows_the_runs_collectives(out):
    steps = out["training_steps"]
    wide = steps[(steps["run_id"] == "wide") & (steps["host"] == "node-2")]
    during = wide[(wide["time"] >= _minute(11)) & (wide["time"] < _minute(19))]["collective_seconds"].median()
    before = wide[(wide["time"] >= _minute(4)) & (wide["time"] < _minute(9))]["collective_seconds"].median()
    assert during == pytest.approx(2.0 * before, rel=0.15)                                 # x(1 + 2 x 0.5)
    a = steps[(steps["run_id"] == "shared-a") & (steps["time"] >= _minute(11)) & (steps["time"] < _minute(14))]
    assert a["collective_seconds"].median() < 1.2 * before                                 # a run elsewhere: unchanged


def test_a_telemetry_gap_writes_no_samples(out):
    g = out["gpu_samples"]
    node2 = g[g["host"] == "node-2"]
    assert node2[(node2["time"] >= _minute(30)) & (node2["time"] < _minute(35))].empty
    assert len(node2[(node2["time"] >= _minute(25)) & (node2["time"] < _minute(30))]) == 4 * 30
    assert len(node2[(node2["time"] >= _minute(35)) & (node2["time"] < _minute(40))]) == 4 * 30
    node0 = g[g["host"] == "node-0"]
    assert len(node0[(node0["time"] >= _minute(30)) & (node0["time"] < _minute(35))]) == 4 * 30


def test_a_skewed_hosts_timestamps_are_shifted(out):
    steps = out["training_steps"]
    wide = steps[(steps["run_id"] == "wide") & (steps["time"] < _minute(40))]
    by_host = wide.groupby(["step", "host"])["time"].min().unstack()
    shift = (by_host["node-1"] - by_host["node-2"]).dt.total_seconds()
    assert shift.median() == pytest.approx(90.0, abs=0.05)                # the same synchronous step, 90 s apart
    a = steps[steps["run_id"] == "shared-a"].groupby("step")["time"].agg(lambda t: (t.max() - t.min()).total_seconds())
    assert a.max() < 0.05                                                 # an unskewed run's ranks agree
    g = out["gpu_samples"]
    first = g.groupby("host")["time"].min()
    assert first["node-1"] >= T0 + pd.Timedelta(seconds=90) > first["node-2"]


def test_canary_traffic_is_split_between_two_versions(out):
    p = out["predictions"]
    before, after = p[p["time"] < _minute(40)], p[p["time"] >= _minute(40)]
    assert set(before["model_version"]) == {"chat-base"}
    shares = after["model_version"].value_counts(normalize=True)
    assert len(shares) == 2 and shares["chat-base"] == pytest.approx(0.8, abs=0.08)
    canary = next(v for v in shares.index if v != "chat-base")
    assert canary.startswith("shared-a-step-")
    lineage = out["lineage"]
    assert (lineage["event"] == "model_version_registered").sum() == 1
    assert "model_version_promoted" not in set(lineage["event"])


def test_a_cluster_can_mix_gpu_models(out):
    g = out["gpu_samples"]
    names = g.groupby("host")["gpu_name"].agg(lambda s: set(s))
    assert names["node-2"] == {"NVIDIA A100-SXM4-80GB"} and names["node-1"] == {"NVIDIA H100 80GB HBM3"}
    assert set(g.loc[g["host"] == "node-2", "power_limit_watts"].dropna()) == {400.0}
    busy = g[(g["host"] == "node-2") & (g["time"] >= _minute(10)) & (g["time"] < _minute(20))]
    assert busy["power_watts"].max() <= 400.0


@pytest.mark.parametrize("change, field, problem", [
    (lambda d: d["runs"][0].update(gpu_indices=[0, 4]), "runs[0].gpu_indices[1]", "does not exist"),
    (lambda d: d["runs"][0].update(log_every_steps=0), "runs[0].log_every_steps", "too small"),
    (lambda d: d["faults"][0].update(target="host:node-9"), "faults[0].target", "does not exist"),
    (lambda d: d["faults"][0].update(target="run:wide"), "faults[0].target", "cannot target"),
    (lambda d: d["endpoints"][0]["canary"].update(share=1.5), "endpoints[0].canary.share", "share of 1.5"),
    (lambda d: d["cluster"]["host_gpus"].update({7: {}}), "cluster.host_gpus.7", "does not exist"),
])
def test_bad_shape_fields_are_one_line_errors(change, field, problem):
    import yaml

    doc = yaml.safe_load(SHAPES.read_text())
    change(doc)
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(doc, source="shapes.yaml")
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"shapes.yaml: {field}: ") and problem in message, message


def test_shapes_yaml_has_every_cluster_shape():
    from simulator import FAULT_TYPES

    cluster = {name for name, spec in FAULT_TYPES.items() if spec.family == "cluster"}
    assert {f.type for f in load_scenario(SHAPES).faults} == cluster


def test_whole_job_kills_free_the_gpus_at_the_onset():
    s = load_scenario(SHAPES)
    failure = s.failure("wide")
    assert failure.death == failure.fail == s.start + timedelta(minutes=45)
