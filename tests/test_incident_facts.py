"""Incidents that do not mislead the responder (issue 17 item 8): the cost of a straggler counts the
GPUs of its whole run, and a later, unrelated straggler of the same run is its own episode."""

import json

import pandas as pd

from assets.incidents import Lifecycle, fold
from tests.helpers import evaluated, finding

LIFE = Lifecycle(window_seconds=300, resolve_after_windows=2, escalate_gpu_hours={"SEV2": 8.0, "SEV1": 32.0})


def _straggler(rank, onset, last, run="llm", run_gpus=64):
    f = finding("straggler_rank", "rank", f"{run}/rank-{rank}", onset, onset + 3, last, run_id=run, rank=rank,
                hosts=[f"node-{rank // 8}"], gpus=[f"node-{rank // 8}:{rank % 8}"], value=2.0)
    f["evidence"] = json.dumps({"value": 2.0, "run_gpus": run_gpus})
    return f


def _fold(found, until=240):
    return fold(pd.DataFrame(found), evaluated("straggler_rank", until), LIFE)[0].sort_values("onset").reset_index(drop=True)


def test_a_straggler_on_a_64_gpu_run_costs_the_runs_gpu_hours_and_escalates():
    (big,) = _fold([_straggler(3, 0, 40)]).to_dict("records")
    assert big["gpu_hours_at_risk"] == round(64 * 40 / 60, 3)             # the whole run waits for rank 3
    assert (big["tier"], big["default_tier"]) == ("SEV1", "SEV2") and "reached 32" in big["tier_reason"]
    assert json.loads(big["evidence"])["gpus_at_risk"] == 64 and big["gpus"] == ["node-0:3"]


def test_a_straggler_on_a_small_run_stays_cheap():
    (small,) = _fold([_straggler(3, 0, 40, run="tiny", run_gpus=4)]).to_dict("records")
    assert small["gpu_hours_at_risk"] == round(4 * 40 / 60, 3) and small["tier"] == "SEV2"


def test_an_unrelated_straggler_later_in_the_run_is_a_new_problem_not_a_reopening():
    first, other = _fold([_straggler(3, 0, 20), _straggler(5, 120, 140)]).to_dict("records")
    assert (other["episode"], other["previous_incident_id"]) == (1, None)
    assert first["incident_id"] != other["incident_id"]


def test_the_same_rank_straggling_again_reopens_its_episode():
    first, again = _fold([_straggler(3, 0, 20), _straggler(3, 120, 140)]).to_dict("records")
    assert (again["episode"], again["previous_incident_id"]) == (2, first["incident_id"])


def _gpu_incident(iid, signal, gpu, onset, last):
    t0 = pd.Timestamp("2026-11-30")
    return {"incident_id": iid, "signal": signal, "onset": t0 + pd.Timedelta(minutes=onset),
            "last_seen": t0 + pd.Timedelta(minutes=last), "run_id": None, "gpus": [gpu], "hosts": [gpu.split(":")[0]]}


def test_ecc_errors_and_an_xid_79_on_one_gpu_15_minutes_apart_are_one_event():
    from assets.correlation import correlate, fast_correlate

    frame = pd.DataFrame([
        _gpu_incident("inc-ecc", "gpu_ecc_error", "node-0:3", 0, 2),
        _gpu_incident("inc-xid", "gpu_xid_fatal", "node-0:3", 17, 20),          # same GPU, 15 min later: one event
        _gpu_incident("inc-near", "gpu_xid_fatal", "node-0:4", 17, 20),         # its neighbour: another device
        _gpu_incident("inc-later", "gpu_ecc_error", "node-0:3", 150, 152),      # same GPU, hours later: another event
    ])
    ids = correlate(frame, LIFE.gap)
    assert ids == fast_correlate(frame, LIFE.gap)
    assert ids[0] == ids[1] and len({ids[0], ids[2], ids[3]}) == 3


def test_an_xid_79_names_the_run_its_gpu_was_allocated_to_and_an_idle_gpu_names_none(tmp_path):
    from tests.detector_frames import counter_findings, samples

    def fell_off(gpu, run):
        """Samples name `run` until the XID 79 at 20 min (on a minute boundary); after it the GPU is off the bus (no run known)."""
        frame = samples("n", gpu, xid_errors_total=lambda s: 0 if s < 1200 else 1,
                        last_xid=lambda s: None if s < 1200 else 79)
        return frame.assign(run_id=[run if t < pd.Timestamp("2026-11-30 10:20:00") else None for t in frame["time"]])

    found = counter_findings(tmp_path, "gpu_xid_fatal", [fell_off(3, "llm"), fell_off(4, None)]).set_index("entity_id")
    assert found.loc["n:3", "run_id"] == "llm"          # filled from the allocation
    assert found.loc["n:4", "run_id"] is None           # a GPU no run held: none to name


def _checkpoint_warehouse(tmp_path, status_1200):
    """train-x saved step 600 (audit ok) and step 1200 (audit `status_1200`), then lost rank 3."""
    from orchestration.storage.warehouse import WarehouseResource

    t0 = pd.Timestamp("2026-11-30")
    events = pd.DataFrame([{"time": t0 + pd.Timedelta(minutes=m), "event": "checkpoint_saved", "run_id": "train-x",
                            "step": step, "checkpoint_path": f"checkpoints/train-x/step-{step:06d}", "payload": "{}",
                            "source_file": "t", "source_line": i} for i, (m, step) in enumerate([(10, 600), (30, 1200)])])
    audits = pd.DataFrame([{"partition_start": t0, "checkpoint": f"train-x/step-{step:06d}",
                            "path": f"/h/checkpoints/train-x/step-{step:06d}",
                            "recorded_path": f"checkpoints/train-x/step-{step:06d}", "run_id": "train-x", "step": step,
                            "format": "safetensors", "saved_at": t0, "is_new": True, "source": "both", "status": status,
                            "files": 2, "bytes": 10, "files_hashed": 2, "bytes_hashed": 10, "problems": 0,
                            "audited_at": t0} for step, status in ((600, "ok"), (1200, status_1200))])
    found = pd.DataFrame([finding("rank_dropout", "rank", "train-x/rank-3", 45, 47, 55, run_id="train-x", rank=3,
                                  hosts=["node-0"], gpus=["node-0:3"])]).drop(columns=["checkpoint_step"])
    warehouse = WarehouseResource(path=str(tmp_path / f"w-{status_1200}.duckdb"))
    with warehouse.connect() as con:
        for table, frame in (("lineage_events", events), ("checkpoint_audits", audits), ("findings", found)):
            con.register("rows", frame)
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM rows")
            con.unregister("rows")
        from orchestration.storage import sql
        return sql.frame(con, "incidents/findings")["checkpoint"].iloc[0]


def test_the_dropout_names_the_last_checkpoint_that_passed_its_audit_not_the_corrupt_one(tmp_path):
    assert _checkpoint_warehouse(tmp_path, "failed") == "checkpoints/train-x/step-000600"
    assert _checkpoint_warehouse(tmp_path, "ok") == "checkpoints/train-x/step-001200"       # the look-alike


def test_the_check_records_how_many_gpus_a_flagged_ranks_run_holds():
    from checks.asset_checks import with_run_gpus
    from checks.episodes import entity_ids

    frame = pd.DataFrame({"run_id": ["big"] * 64 + ["small"] * 4, "rank": list(range(64)) + list(range(4))})
    found = pd.DataFrame({"run_id": ["big", "small"], "evidence": [{"value": 2.0}, {"value": 2.0}]})
    out = with_run_gpus(found, frame, entity_ids(frame, "rank", "entity_id"))
    assert [e["run_gpus"] for e in out["evidence"]] == [64, 4]


def test_a_passed_checkpoint_is_named_before_a_newer_one_never_audited(tmp_path):
    assert _checkpoint_warehouse(tmp_path, "not_audited") == "checkpoints/train-x/step-000600"   # a passed one first
