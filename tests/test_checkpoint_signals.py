"""Checkpoint signals: the detectors on hand-made frames (a case each must flag and one it must not),
and the whole path through the real `detect` job on a scenario whose checkpoints the simulator
writes and damages, with a known last good checkpoint, a model version registered from a damaged
one and a run whose saves stop.
"""

from __future__ import annotations

import json

import dagster as dg
import pandas as pd
import pytest

from assets.incidents import incidents
from assets.ingest import ingest_assets
from checks.registry import REGISTRY
from orchestration.definitions import resources_for
from orchestration.evaluation.scoring import load_truth, score
from simulator import scenario_from_dict, simulate
from tests.helpers import memory_instance, run_detect

T = pd.Timestamp("2026-11-30 00:00:00")
INTEGRITY = ("checkpoint_file_mismatch", "checkpoint_corrupt", "checkpoint_truncated", "checkpoint_partial_write",
             "checkpoint_shards_incomplete", "checkpoint_path_escape")


# --------------------------------------------------------------------------- the registry


def test_the_checkpoint_family_is_registered_with_tiers_by_cost_of_delay():
    family = {s.name: s for s in REGISTRY if s.family == "checkpoint"}
    assert set(family) == {*INTEGRITY, "checkpoint_overdue", "checkpoint_size_anomaly"}
    assert {family[n].tier for n in INTEGRITY} == {"SEV1"}
    assert family["checkpoint_overdue"].tier == family["checkpoint_size_anomaly"].tier == "SEV2"
    assert family["checkpoint_overdue"].entity == "run"
    assert all(s.asset == "checkpoints" and s.fault_types and s.playbook.steps for s in family.values())


# --------------------------------------------------------------------------- integrity detectors


def _audits(problems: list[list[dict]]) -> pd.DataFrame:
    return pd.DataFrame([{
        "checkpoint": f"r/step-{i:06d}", "path": f"/h/checkpoints/r/step-{i:06d}", "checkpoint_path": f"checkpoints/r/step-{i:06d}",
        "run_id": "r", "step": i, "format": "goodput", "saved_at": T + pd.Timedelta(minutes=10 * i), "tick": T + pd.Timedelta(hours=1),
        "partition_start": T, "is_new": True, "status": "failed" if p else "ok", "files": 5, "bytes": 100,
        "model_versions": "r-step-000002" if i == 2 else None, "problems": p,
        "last_good_checkpoint": "r/step-000001", "last_good_step": 1, "last_step": 40, "steps_since_last_good": 39,
        "gpus": 2, "restart_cost_gpu_hours": 1.25,
    } for i, p in enumerate(problems, 1)])


@pytest.mark.parametrize("signal,kind", [
    ("checkpoint_file_mismatch", "missing"), ("checkpoint_file_mismatch", "extra"),
    ("checkpoint_corrupt", "sha256_mismatch"), ("checkpoint_corrupt", "size_mismatch"),
    ("checkpoint_truncated", "truncated"), ("checkpoint_truncated", "zero_byte"),
    ("checkpoint_partial_write", "partial_write"), ("checkpoint_shards_incomplete", "shards_incomplete"),
    ("checkpoint_path_escape", "path_escape"),
])
def test_each_integrity_detector_flags_its_kind_and_nothing_else(signal, kind):
    s = REGISTRY.get(signal)
    other = "path_escape" if kind != "path_escape" else "missing"
    frame = _audits([[], [{"kind": kind, "file": "a.safetensors", "detail": "x"}], [{"kind": other, "file": "b", "detail": "y"}]])
    found = s.detector(frame, dict(s.thresholds))
    assert list(found["entity_id"]) == ["r/step-000002"]
    f = found.iloc[0]
    assert f["onset"] == T + pd.Timedelta(minutes=20) and f["last_seen"] == T + pd.Timedelta(hours=1)
    assert f["model_version"] == "r-step-000002" and f["checkpoint"] == "checkpoints/r/step-000002"
    ev = f["evidence"]
    assert ev["last_good_checkpoint"] == "r/step-000001" and ev["restart_cost_gpu_hours"] == 1.25
    assert ev["steps_since_last_good"] == 39 and ev["model_versions"] == ["r-step-000002"]
    assert s.detector(_audits([[], []]), dict(s.thresholds)).empty


# --------------------------------------------------------------------------- overdue


def _progress(saves_at_steps: list[int], last_step: int, step_seconds: float = 2.0) -> pd.DataFrame:
    """Minute rows of a run stepping every `step_seconds`, having saved at `saves_at_steps` (interval 300)."""
    rows = []
    per_minute = int(60 / step_seconds)
    for m in range(last_step // per_minute):
        step = (m + 1) * per_minute
        at = T + pd.Timedelta(seconds=step * step_seconds)
        done = [s for s in saves_at_steps if s <= step]
        gaps = [b - a for a, b in zip(done, done[1:])]
        rows.append({
            "run_id": "r", "minute": T + pd.Timedelta(minutes=m), "tick": T + pd.Timedelta(minutes=m + 1), "in_window": True,
            "step": step, "last_step_at": at,
            "last_saved_at": T + pd.Timedelta(seconds=done[-1] * step_seconds) if done else pd.NaT,
            "last_saved_step": done[-1] if done else None,
            "interval_steps": float(pd.Series(gaps).median()) if gaps else None,
            "interval_seconds": float(pd.Series(gaps).median()) * step_seconds if gaps else None,
            "saves": len(done), "gpus": 8,
        })
    return pd.DataFrame(rows)


def test_overdue_flags_a_run_that_stopped_saving_and_not_one_that_saves():
    s = REGISTRY.get("checkpoint_overdue")
    healthy = _progress(list(range(300, 3001, 300)), 3000)
    assert s.detector(healthy, dict(s.thresholds)).empty
    stopped = _progress([300, 600, 900], 3000)           # saves stop after step 900
    (f,) = s.detector(stopped, dict(s.thresholds)).to_dict("records")
    assert f["entity_id"] == "r"
    # due at step 1200 (its own 300-step interval); flagged from 1.5 intervals past the last save
    assert f["onset"] == T + pd.Timedelta(seconds=1200 * 2)
    assert f["detected_at"] == T + pd.Timedelta(seconds=1350 * 2)
    assert f["evidence"]["interval_steps"] == 300 and f["evidence"]["last_saved_step"] == 900
    assert f["evidence"]["restart_cost_gpu_hours"] == pytest.approx(8 * (3000 - 900) * 2 / 3600, abs=1e-3)


def test_overdue_needs_the_runs_own_interval_and_ignores_a_stalled_run():
    s = REGISTRY.get("checkpoint_overdue")
    assert s.detector(_progress([300], 3000), dict(s.thresholds)).empty      # one save: no interval yet
    hung = _progress([300, 600], 700)
    hung = pd.concat([hung, hung.tail(1).assign(minute=T + pd.Timedelta(hours=2), last_step_at=T + pd.Timedelta(hours=2))])
    assert s.detector(hung, dict(s.thresholds)).empty                       # no steps: the hang signal's job


# --------------------------------------------------------------------------- size


def test_size_anomaly_flags_a_much_smaller_checkpoint_not_ordinary_jitter():
    s = REGISTRY.get("checkpoint_size_anomaly")
    frame = pd.DataFrame([
        {"checkpoint": "r/step-000500", "checkpoint_path": "c/r/step-000500", "run_id": "r", "step": 500,
         "saved_at": T, "tick": T, "checkpoint_bytes": 98e9 * 0.995, "baseline_bytes": 98e9, "predecessors": 4,
         "model_versions": None},
        {"checkpoint": "r/step-000600", "checkpoint_path": "c/r/step-000600", "run_id": "r", "step": 600,
         "saved_at": T, "tick": T, "checkpoint_bytes": 14e9, "baseline_bytes": 98e9, "predecessors": 5,
         "model_versions": "v1,v2"},
        {"checkpoint": "r/step-000100", "checkpoint_path": "c/r/step-000100", "run_id": "r", "step": 100,
         "saved_at": T, "tick": T, "checkpoint_bytes": 1e9, "baseline_bytes": 98e9, "predecessors": 1,
         "model_versions": None},
    ])
    (f,) = s.detector(frame, dict(s.thresholds)).to_dict("records")
    assert f["entity_id"] == "r/step-000600" and f["value"] == pytest.approx(1 / 7)
    assert f["model_version"] == "v1,v2" and f["evidence"]["model_versions"] == ["v1", "v2"]


# --------------------------------------------------------------------------- end to end


def _doc(faults: list[dict] | None = None) -> dict:
    return {
        "name": "checkpoints", "seed": 11, "start": "2026-11-30T00:00:00Z", "duration": "2h",
        "cluster": {"hosts": 2, "gpus_per_host": 2, "sample_interval": "30s"},
        "runs": [
            {"id": "r", "start": "5m", "duration": "100m", "hosts": [0], "ranks": 2, "step_time": "2s",
             "loss": {"initial": 8.0, "floor": 2.0, "decay": 0.3, "noise": 0.02},
             "checkpoint_interval_steps": 300, "checkpoints": {"format": "safetensors"}},
            {"id": "q", "start": "5m", "duration": "100m", "hosts": [1], "ranks": 2, "step_time": "2s",
             "loss": {"initial": 8.0, "floor": 2.0, "decay": 0.3, "noise": 0.02},
             "checkpoint_interval_steps": 300, "checkpoints": {"format": "torch"}},
        ],
        "endpoints": [{"name": "chat", "host": 1, "model_version": "base", "requests_per_second": 1.0,
                       "ttft_seconds": {"p50": 0.15, "p99": 0.6}, "itl_seconds": {"p50": 0.025, "p99": 0.06},
                       "e2e_seconds": {"p50": 4.0, "p99": 12.0}, "metrics_interval": "60s",
                       "promotions": [{"run": "r", "at": "1h50m"}]}],
        "faults": faults or [],
    }


DAMAGE = {  # step of run r -> fault type (applied after the save)
    300: "checkpoint_path_escape", 600: "checkpoint_partial_write", 900: "checkpoint_truncated",
    1200: "checkpoint_missing_shard", 1800: "checkpoint_weights_only", 2400: "checkpoint_bit_flip",
    2700: "checkpoint_bit_flip",
}


@pytest.fixture(scope="module")
def processed(tmp_path_factory):
    """The scenario run through the real detect job twice per hour (the second audit of unchanged
    files must hash nothing) and folded; returns (home, warehouse resource)."""
    dry = tmp_path_factory.mktemp("dry")
    simulate(scenario_from_dict(_doc()), dry)
    saves = {}
    for line in (dry / "raw" / "lineage").rglob("r.jsonl"):
        for rec in map(json.loads, line.read_text().splitlines()):
            if rec["event"] == "checkpoint_saved":
                saves[rec["step"]] = pd.Timestamp(rec["time"]).tz_convert(None)
    start = pd.Timestamp("2026-11-30 00:00:00")

    def offset(t):
        return f"{int((t - start).total_seconds())}s"

    faults = [{"type": t, "target": f"checkpoint:r/step-{s:06d}", "onset": offset(saves[s]), "duration": "10m"}
              for s, t in DAMAGE.items()]
    # q's saves fail silently from 30 to 70 minutes
    faults.append({"type": "checkpoint_overdue", "target": "run:q", "onset": "30m", "duration": "40m"})
    home = tmp_path_factory.mktemp("checkpoints")
    simulate(scenario_from_dict(_doc(faults)), home)
    resources = resources_for(home)
    hashed, evaluations = {}, {}
    with memory_instance() as instance:
        for key in ("2026-11-30-00:00", "2026-11-30-01:00"):
            result = run_detect(home, key, instance)
            evaluations[key] = {e.check_name: e for e in result.get_asset_check_evaluations()}
            first = _q(resources, f"SELECT sum(files_hashed) FROM checkpoint_audits WHERE partition_start = '{key[:10]} {key[11:]}'")
            run_detect(home, key, instance)   # the schedule re-runs the hour in progress every 5 minutes
            second = _q(resources, f"SELECT sum(files_hashed) FROM checkpoint_audits WHERE partition_start = '{key[:10]} {key[11:]}'")
            hashed[key] = (int(first.iloc[0, 0]), int(second.iloc[0, 0]))
        assert dg.materialize([incidents, *ingest_assets], selection=[incidents.key], resources=resources,
                              instance=instance).success
    return home, resources, hashed, saves, evaluations


def _q(resources, query):
    with resources["warehouse"].connect(read_only=True) as con:
        return con.execute(query).df()


def test_every_damaged_checkpoint_raises_its_incident_and_nothing_else_is_flagged(processed):
    home, resources, _, _, _ = processed
    found = _q(resources, "SELECT * FROM incidents WHERE family = 'checkpoint'")
    by = {(r.signal, r.entity_id) for r in found.itertuples()}
    assert by == {
        ("checkpoint_path_escape", "r/step-000300"), ("checkpoint_partial_write", "r/step-000600"),
        ("checkpoint_truncated", "r/step-000900"), ("checkpoint_corrupt", "r/step-000900"),
        ("checkpoint_file_mismatch", "r/step-001200"), ("checkpoint_size_anomaly", "r/step-001800"),
        ("checkpoint_corrupt", "r/step-002400"), ("checkpoint_corrupt", "r/step-002700"),
        ("checkpoint_overdue", "q"),
    }
    assert (found[found["signal"].isin(INTEGRITY)]["tier"] == "SEV1").all()
    assert "{" not in "".join(found["playbook"])
    table = score(load_truth(home / "ground_truth.jsonl"), _q(resources, "SELECT * FROM incidents")).set_index("fault_type")
    for fault_type in set(DAMAGE.values()) | {"checkpoint_overdue"}:
        assert table.loc[fault_type, "recall"] == 1.0, fault_type
        assert table.loc[fault_type, "false_alarms"] == 0, fault_type
    # the torch-format checkpoints of q were audited (real torch.save zips) and pass
    audits = _q(resources, "SELECT DISTINCT checkpoint, status, format FROM checkpoint_audits WHERE run_id = 'q'")
    assert len(audits) >= 4 and set(audits["status"]) == {"ok"} and set(audits["format"]) == {"goodput"}
    assert _q(resources, "SELECT count(*) FROM checkpoint_problems WHERE kind = 'path_escape' AND file LIKE '%passwd%'").iloc[0, 0] >= 1


def test_restart_cost_in_the_incident_is_from_the_last_good_checkpoint(processed):
    home, resources, _, saves, _ = processed
    inc = _q(resources, "SELECT * FROM incidents WHERE signal = 'checkpoint_corrupt' AND entity_id = 'r/step-002700'").iloc[0]
    ev = json.loads(inc["evidence"])
    # 2400 and 2700 are bit-flipped: the newest checkpoint passing every audit is 2100
    assert ev["last_good_checkpoint"] == "r/step-002100" and ev["last_good_step"] == 2100
    facts = _q(resources, """SELECT max(step) AS last_step, max(time) AS last_at,
                                    (SELECT max(time) FROM training_steps WHERE run_id = 'r' AND step = 2100) AS done
                             FROM training_steps WHERE run_id = 'r' AND time < '2026-11-30 02:00:00'""").iloc[0]
    assert ev["steps_since_last_good"] == facts["last_step"] - 2100
    assert ev["restart_cost_gpu_hours"] == pytest.approx(2 * (facts["last_at"] - facts["done"]).total_seconds() / 3600, abs=1e-3)
    assert "r/step-002100" in inc["playbook"] and f"{ev['restart_cost_gpu_hours']} GPU-hours" in inc["playbook"]
    status = _q(resources, "SELECT * FROM checkpoint_status WHERE run_id = 'r'").iloc[0]
    assert status["last_good_checkpoint"] == "checkpoints/r/step-002100" and status["failed_checkpoints"] == 6  # 300 .. 1200, 2400, 2700
    assert status["restart_cost_last_good_gpu_hours"] == pytest.approx(ev["restart_cost_gpu_hours"], abs=1e-3)
    assert status["last_checkpoint_audit"] == "failed"


def test_an_incident_on_a_checkpoint_names_the_model_versions_built_on_it(processed):
    _, resources, _, _, _ = processed
    registered = _q(resources, "SELECT model_version, checkpoint_path FROM lineage_events WHERE event = 'model_version_registered'")
    assert list(registered["checkpoint_path"]) == ["checkpoints/r/step-002700"]
    inc = _q(resources, "SELECT * FROM incidents WHERE signal = 'checkpoint_corrupt' AND entity_id = 'r/step-002700'").iloc[0]
    version = registered["model_version"].iloc[0]
    assert inc["model_version"] == version and inc["checkpoint"] == "checkpoints/r/step-002700"
    assert json.loads(inc["evidence"])["model_versions"] == [version] and version in inc["playbook"]
    other = _q(resources, "SELECT model_version FROM incidents WHERE signal = 'checkpoint_corrupt' AND entity_id = 'r/step-002400'")
    assert other["model_version"].isna().all()


def test_a_second_audit_of_unchanged_files_hashes_nothing(processed):
    _, _, hashed, _, _ = processed
    for key, (first, second) in hashed.items():
        assert first > 0 and second == 0, key


def test_only_checkpoints_under_the_configured_roots_are_read(tmp_path):
    """A lineage path outside every root is recorded as not audited (a claim, never opened); a
    checkpoint on disk that lineage does not know is audited in the hour of its files' mtime."""
    from datetime import datetime, timezone

    from assets.checkpoints import CheckpointsConfig, audit_partition
    from sources.checkpoint_audit import HashCache
    from tests.helpers import goodput_checkpoint

    home = tmp_path / "home"
    goodput_checkpoint(home / "checkpoints" / "r" / "step-000100")
    goodput_checkpoint(tmp_path / "elsewhere" / "step-000200")
    goodput_checkpoint(home / "extra-root" / "s" / "step-000300")
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    hour = now.replace(minute=0, second=0, microsecond=0)
    saved = pd.DataFrame([
        {"run_id": "r", "step": 100, "checkpoint_path": "checkpoints/r/step-000100", "saved_at": hour, "recorded_bytes": 1,
         "manifest": None, "is_new": True, "newest_before": None, "model_versions": None},
        {"run_id": "r", "step": 200, "checkpoint_path": str(tmp_path / "elsewhere" / "step-000200"), "saved_at": hour,
         "recorded_bytes": 1, "manifest": None, "is_new": True, "newest_before": None, "model_versions": None},
    ])
    lineage = {"saved": saved, "horizon": None, "known": list(saved["checkpoint_path"])}
    audits, problems = audit_partition(lineage, home, CheckpointsConfig(roots=["checkpoints", "extra-root"]),
                                       hour, hour + pd.Timedelta(hours=1), HashCache())
    got = {r.checkpoint: (r.status, r.source) for r in audits.itertuples()}
    assert got == {"r/step-000100": ("ok", "both"), "r/step-000200": ("not_audited", "lineage"),
                   "r1/step-000300": ("ok", "disk")}  # its own manifest names run r1
    assert problems.empty


def test_the_checks_report_pass_fail_severity_and_evidence(processed):
    evaluations = processed[4]["2026-11-30-01:00"]
    corrupt = evaluations["checkpoint_corrupt"]
    assert not corrupt.passed and corrupt.severity == dg.AssetCheckSeverity.ERROR
    meta = corrupt.metadata
    assert "r/step-002400" in meta["offending"].value and "r/step-002700" in meta["offending"].value
    assert meta["evidence"].value["last_good_checkpoint"] == "r/step-002100"
    assert meta["entities_evaluated"].value >= 4
    assert evaluations["checkpoint_partial_write"].passed            # 600 is not among the hour's audits
    overdue = processed[4]["2026-11-30-00:00"]["checkpoint_overdue"]
    assert not overdue.passed and overdue.severity == dg.AssetCheckSeverity.WARN
