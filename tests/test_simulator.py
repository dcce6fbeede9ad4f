"""Tests for the cluster simulator: determinism, the raw-zone contract, the physics
the detectors rely on, ground truth and scenario validation."""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from simulator import ScenarioError, load_scenario, scenario_from_dict, simulate

SCENARIOS = Path(__file__).resolve().parents[1] / "simulator" / "scenarios"
SMALL = SCENARIOS / "small.yaml"
DEFAULT = SCENARIOS / "default.yaml"

REQUIRED = {
    "gpu_samples": {
        "time", "host", "gpu_index", "gpu_uuid", "gpu_name", "run_id", "utilization_ratio",
        "memory_used_bytes", "memory_total_bytes", "power_watts", "power_limit_watts",
        "temperature_celsius", "sm_clock_hertz", "throttle_reasons", "ecc_corrected_errors_total",
        "ecc_uncorrected_errors_total", "xid_errors_total", "last_xid", "sm_active_ratio",
        "tensor_active_ratio",
    },
    "training_steps": {
        "time", "run_id", "rank", "world_size", "host", "gpu_index", "step", "loss", "grad_norm",
        "learning_rate", "loss_scale", "tokens", "step_seconds", "data_seconds", "compute_seconds",
        "collective_seconds", "memory_allocated_bytes", "memory_reserved_bytes",
        "memory_inactive_split_bytes", "alloc_retries_total", "ooms_total",
    },
    "lineage": {"time", "event", "run_id"},
}
LINEAGE_FIELDS = {
    "run_started": {"job", "git_sha", "config_hash", "dataset", "world_size", "hosts", "gpus"},
    "checkpoint_saved": {"step", "checkpoint_path", "checkpoint_bytes", "manifest"},
    "run_ended": {"status"},
}
PATH_RE = re.compile(r"^raw/(gpu_samples|training_steps|lineage)/(\d{4}-\d{2}-\d{2})/(\d{2})/([^/]+)\.jsonl$")


def _time(s: str) -> datetime:
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", s), s
    return datetime.fromisoformat(s)


def _reject_constant(token: str):
    raise AssertionError(f"bare {token} token in output")


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _read(root: Path) -> dict[str, list[dict]]:
    """All raw records by source (each with the file it came from)."""
    out: dict[str, list[dict]] = {"gpu_samples": [], "training_steps": [], "lineage": []}
    for path in sorted((root / "raw").rglob("*.jsonl")):
        source = path.relative_to(root / "raw").parts[0]
        for line in path.read_text().splitlines():
            out[source].append(json.loads(line))
    return out


@pytest.fixture(scope="module")
def small():
    return load_scenario(SMALL)


@pytest.fixture(scope="module")
def small_out(small, tmp_path_factory):
    root = tmp_path_factory.mktemp("small")
    summary = simulate(small, root)
    return root, summary, _read(root)


# --------------------------------------------------------------------------- determinism


def test_same_scenario_gives_identical_bytes(small, small_out, tmp_path):
    root, _, _ = small_out
    simulate(small, tmp_path)
    first, second = _tree(root), _tree(tmp_path)
    assert list(first) == list(second)
    assert first == second


def test_different_seed_gives_different_bytes(small, small_out, tmp_path):
    root, _, _ = small_out
    simulate(dataclasses.replace(small, seed=small.seed + 1), tmp_path)
    first, second = _tree(root), _tree(tmp_path)
    assert first["ground_truth.jsonl"] == second["ground_truth.jsonl"]
    assert any(first[k] != second.get(k) for k in first if k.startswith("raw/"))


def test_rerun_into_same_dir_replaces_old_output(small, tmp_path):
    simulate(small, tmp_path)
    stale = tmp_path / "raw" / "gpu_samples" / "1999-01-01" / "00" / "node-9.jsonl"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}\n")
    simulate(small, tmp_path)
    assert not stale.exists()


# --------------------------------------------------------------------------- contract


def test_layout_and_records_follow_the_contract(small, small_out):
    root, summary, _ = small_out
    files = sorted(p for p in (root / "raw").rglob("*") if p.is_file())
    assert len(files) == summary["files"]
    rows = {"gpu_samples": 0, "training_steps": 0, "lineage": 0}
    for path in files:
        rel = path.relative_to(root).as_posix()
        m = PATH_RE.match(rel)
        assert m, rel
        source, day, hour, producer = m.groups()
        text = path.read_text()
        assert text.endswith("\n") and "\n\n" not in text
        times = []
        for line in text.splitlines():
            record = json.loads(line, parse_constant=_reject_constant)
            assert REQUIRED[source] <= set(record), (rel, REQUIRED[source] - set(record))
            t = _time(record["time"])
            assert (t.strftime("%Y-%m-%d"), t.strftime("%H")) == (day, hour), rel
            assert small.start <= t < small.end
            times.append(t)
            if source == "gpu_samples":
                assert record["host"] == producer
            elif source == "training_steps":
                assert f"{record['run_id']}.rank-{record['rank']}" == producer
            else:
                assert record["run_id"] == producer
                assert LINEAGE_FIELDS[record["event"]] <= set(record)
        assert times == sorted(times), rel
        rows[source] += len(times)
    assert rows == summary["rows"]
    assert summary["start"] == "2026-11-30T00:00:00.000Z"
    assert summary["end"] == "2026-11-30T02:00:00.000Z"
    assert summary["faults"] == 1


def test_every_gpu_sampled_every_interval(small, small_out):
    _, _, records = small_out
    by_gpu: dict[tuple, list[datetime]] = {}
    for r in records["gpu_samples"]:
        by_gpu.setdefault((r["host"], r["gpu_index"]), []).append(_time(r["time"]))
    assert sorted(by_gpu) == [("node-0", 0), ("node-0", 1)]
    for times in by_gpu.values():
        assert len(times) == 720  # 2h / 10s
        assert {b - a for a, b in zip(times, times[1:])} == {timedelta(seconds=10)}
    uuids = {(r["host"], r["gpu_index"]): r["gpu_uuid"] for r in records["gpu_samples"]}
    assert len(set(uuids.values())) == 2 and all(u.startswith("GPU-") for u in uuids.values())


# --------------------------------------------------------------------------- physics


def _hang(scenario):
    (fault,) = scenario.faults
    return fault.onset, fault.end


def test_hang_stops_steps_but_gpus_stay_busy(small, small_out):
    _, _, records = small_out
    onset, end = _hang(small)
    steps = records["training_steps"]
    assert steps and not [r for r in steps if onset <= _time(r["time"]) < end]
    # Progress resumes with the next step number.
    for rank in (0, 1):
        numbers = [r["step"] for r in steps if r["rank"] == rank]
        assert numbers == list(range(1, len(numbers) + 1))
    during = [r for r in records["gpu_samples"] if onset <= _time(r["time"]) < end]
    assert len(during) == 2 * 120
    for r in during:
        assert r["run_id"] == "llm-small"
        assert r["utilization_ratio"] >= 0.9
        assert r["power_watts"] <= 0.5 * r["power_limit_watts"]
        assert r["tensor_active_ratio"] <= 0.05
        assert r["memory_used_bytes"] > 60e9


def test_training_gpus_look_busy(small, small_out):
    _, _, records = small_out
    onset, _ = _hang(small)
    busy = [r for r in records["gpu_samples"]
            if small.start + timedelta(minutes=10) <= _time(r["time"]) < onset and r["utilization_ratio"] > 0.5]
    assert len(busy) > 400
    assert statistics.median(r["power_watts"] / r["power_limit_watts"] for r in busy) == pytest.approx(0.75, abs=0.05)
    assert statistics.median(r["tensor_active_ratio"] for r in busy) == pytest.approx(0.45, abs=0.05)
    assert all(r["ecc_uncorrected_errors_total"] == 0 and r["xid_errors_total"] == 0 for r in busy)


def test_loss_decreases(small_out):
    _, _, records = small_out
    losses = [r["loss"] for r in records["training_steps"] if r["rank"] == 0]
    tenth = len(losses) // 10
    assert statistics.median(losses[-tenth:]) < statistics.median(losses[:tenth])


def test_ranks_are_synchronous_and_seconds_add_up(small_out):
    _, _, records = small_out
    ends: dict[int, list[datetime]] = {}
    for r in records["training_steps"]:
        ends.setdefault(r["step"], []).append(_time(r["time"]))
        parts = r["data_seconds"] + r["compute_seconds"] + r["collective_seconds"]
        assert r["collective_seconds"] >= 0
        assert parts == pytest.approx(r["step_seconds"], abs=1e-5)
    assert all(len(t) == 2 and max(t) - min(t) < timedelta(milliseconds=50) for t in ends.values())


def test_idle_gpus_before_the_run(small, small_out):
    _, _, records = small_out
    run = small.runs[0]
    idle = [r for r in records["gpu_samples"] if _time(r["time"]) < run.start]
    assert len(idle) == 2 * 30
    for r in idle:
        assert r["run_id"] is None
        assert r["utilization_ratio"] == 0
        assert r["memory_used_bytes"] < 1e9
        assert 60 <= r["power_watts"] <= 75


def test_lineage_lifecycle(small, small_out):
    _, _, records = small_out
    events = records["lineage"]
    assert events[0]["event"] == "run_started" and _time(events[0]["time"]) == small.runs[0].start
    assert events[-1]["event"] == "run_ended"
    assert _time(events[-1]["time"]) == small.runs[0].end + small.faults[0].duration
    saves = [e for e in events if e["event"] == "checkpoint_saved"]
    assert [e["step"] for e in saves] == [500, 1000, 1500, 2000, 2500]
    for e in saves:
        assert e["checkpoint_bytes"] == sum(f["bytes"] for f in e["manifest"]["files"])
        assert e["checkpoint_path"] == f"/checkpoints/llm-small/step-{e['step']:06d}"


# --------------------------------------------------------------------------- ground truth


def test_ground_truth_matches_configured_hang(small_out):
    root, _, _ = small_out
    lines = (root / "ground_truth.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{
        "type": "hang",
        "entity": "run:llm-small",
        "onset": "2026-11-30T00:50:00.000Z",
        "end": "2026-11-30T01:10:00.000Z",
        "magnitude": 1.0,
    }]


# --------------------------------------------------------------------------- scenarios


def test_default_scenario_windows():
    s = load_scenario(DEFAULT)
    assert (s.start, s.end) == (datetime(2026, 11, 30, tzinfo=timezone.utc),
                                datetime(2026, 11, 30, 8, tzinfo=timezone.utc))
    windows = {r.id: tuple(t.strftime("%H:%M") for t in s.run_window(r.id)) for r in s.runs}
    assert windows == {"llm-pretrain-a": ("00:30", "07:10"), "llm-finetune-b": ("01:00", "04:00"),
                       "eval-sweep-c": ("05:00", "07:30")}
    assert [(f.type, f.target) for f in s.faults] == [("hang", "run:llm-pretrain-a")]


def _doc() -> dict:
    return yaml.safe_load(SMALL.read_text())


def _error(tmp_path: Path, doc: dict) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def test_unknown_fault_type_lists_known_types(tmp_path):
    doc = _doc()
    doc["faults"][0]["type"] = "gremlins"
    message = _error(tmp_path, doc)
    assert "faults[0].type" in message and "gremlins" in message and "hang" in message


def test_fault_target_unknown_run(tmp_path):
    doc = _doc()
    doc["faults"][0]["target"] = "run:nope"
    message = _error(tmp_path, doc)
    assert "faults[0].target" in message and "nope" in message and "llm-small" in message


def test_missing_field_and_bad_duration(tmp_path):
    doc = _doc()
    del doc["runs"][0]["step_time"]
    assert "runs[0].step_time" in _error(tmp_path, doc)
    doc = _doc()
    doc["duration"] = "2 hours"
    message = _error(tmp_path, doc)
    assert "duration" in message and "1h30m" in message


def test_runs_sharing_a_gpu_are_rejected(tmp_path):
    doc = _doc()
    other = dict(doc["runs"][0], id="other", start="1h", hosts=[0], ranks=1)
    doc["runs"].append(other)
    assert "node-0:0" in _error(tmp_path, doc)


def test_hang_outside_its_run_is_rejected(tmp_path):
    doc = _doc()
    doc["faults"][0]["onset"] = "1m"  # before the run starts at 5m
    assert "faults[0].onset" in _error(tmp_path, doc)


def test_json_and_dict_scenarios(tmp_path):
    path = tmp_path / "small.json"
    path.write_text(json.dumps(_doc()))
    assert load_scenario(path) == dataclasses.replace(load_scenario(SMALL), source=str(path))
    assert scenario_from_dict(_doc()).runs[0].gpus == ((0, 0), (0, 1))


def test_run_cut_off_by_span_end_and_hang_in_startup(tmp_path):
    doc = _doc()
    doc["runs"][0].update(start="10m", duration="2h")  # would end after the 2h span
    doc["faults"][0].update(onset="11m", duration="5m")  # inside the 1-3 min startup
    s = scenario_from_dict(doc, source="edge")
    assert s.run_window("llm-small") == (s.runs[0].start, s.end)
    simulate(s, tmp_path / "out")
    records = _read(tmp_path / "out")
    assert [e["event"] for e in records["lineage"]].count("run_ended") == 0
    first = min(_time(r["time"]) for r in records["training_steps"])
    assert first > s.faults[0].end
    last = [r for r in records["gpu_samples"] if _time(r["time"]) >= s.end - timedelta(seconds=10)]
    assert all(r["run_id"] == "llm-small" for r in last)


# =========================================================================== faults.yaml
# Every fault type twice plus healthy runs with ordinary noise. The output is read with DuckDB
# (the warehouse's engine) rather than json.loads: it is ~750k records.

FAULTS = SCENARIOS / "faults.yaml"
NEW_FIELDS = {
    "training_steps": {"nan_iterations_total", "skipped_iterations_total"},
    "gpu_samples": {"remapped_rows_correctable_total", "remapped_rows_uncorrectable_total",
                    "row_remap_pending", "row_remap_failure"},
}
STEP_COLUMNS = {
    "time": "TIMESTAMP", "run_id": "VARCHAR", "rank": "INTEGER", "world_size": "INTEGER",
    "host": "VARCHAR", "gpu_index": "INTEGER", "step": "BIGINT", "loss": "VARCHAR",
    "grad_norm": "VARCHAR", "learning_rate": "DOUBLE", "loss_scale": "DOUBLE", "tokens": "BIGINT",
    "step_seconds": "DOUBLE", "data_seconds": "DOUBLE", "compute_seconds": "DOUBLE",
    "collective_seconds": "DOUBLE", "memory_allocated_bytes": "BIGINT",
    "memory_reserved_bytes": "BIGINT", "memory_inactive_split_bytes": "BIGINT",
    "alloc_retries_total": "BIGINT", "ooms_total": "BIGINT", "nan_iterations_total": "BIGINT",
    "skipped_iterations_total": "BIGINT",
}
GPU_COLUMNS = {
    "time": "TIMESTAMP", "host": "VARCHAR", "gpu_index": "INTEGER", "run_id": "VARCHAR",
    "utilization_ratio": "DOUBLE", "memory_used_bytes": "BIGINT", "power_watts": "DOUBLE",
    "power_limit_watts": "DOUBLE", "temperature_celsius": "DOUBLE", "sm_clock_hertz": "BIGINT",
    "throttle_reasons": "BIGINT", "ecc_corrected_errors_total": "BIGINT",
    "ecc_uncorrected_errors_total": "BIGINT", "xid_errors_total": "BIGINT", "last_xid": "INTEGER",
    "sm_active_ratio": "DOUBLE", "tensor_active_ratio": "DOUBLE",
    "remapped_rows_correctable_total": "BIGINT", "remapped_rows_uncorrectable_total": "BIGINT",
    "row_remap_pending": "BOOLEAN", "row_remap_failure": "BOOLEAN",
}
HEALTHY = ("healthy-pretrain-a", "healthy-finetune-b", "healthy-sweep-c")


@dataclasses.dataclass
class Out:
    root: Path
    scenario: object
    steps: "pd.DataFrame"
    gpus: "pd.DataFrame"
    lineage: list[dict]
    truth: list[dict]

    def fault(self, ftype: str, magnitude: float | None = None, caused: bool = False,
              entity: str | None = None) -> dict:
        hits = [t for t in self.truth if t["type"] == ftype and ("caused_by" in t) == caused
                and (magnitude is None or t["magnitude"] == magnitude)
                and (entity is None or t["entity"] == entity)]
        assert len(hits) == 1, (ftype, magnitude, hits)
        hit = dict(hits[0])
        hit["onset"], hit["end"] = (pd.Timestamp(hit[k]).tz_localize(None) for k in ("onset", "end"))
        return hit

    def run_steps(self, run_id: str, a=None, b=None) -> "pd.DataFrame":
        df = self.steps[self.steps["run_id"] == run_id]
        if a is not None:
            df = df[df["time"] >= a]
        if b is not None:
            df = df[df["time"] < b]
        return df

    def gpu(self, host: str, index: int, a=None, b=None) -> "pd.DataFrame":
        df = self.gpus[(self.gpus["host"] == host) & (self.gpus["gpu_index"] == index)]
        if a is not None:
            df = df[df["time"] >= a]
        if b is not None:
            df = df[df["time"] < b]
        return df


def _load(root: Path, source: str, columns: dict) -> "pd.DataFrame":
    import duckdb

    cols = "{" + ", ".join(f"'{k}': '{v}'" for k, v in columns.items()) + "}"
    pattern = str(root / "raw" / source / "*" / "*" / "*.jsonl")
    with duckdb.connect() as con:
        return con.sql(f"SELECT * FROM read_json('{pattern}', format='newline_delimited', "
                       f"columns={cols})").df()


@pytest.fixture(scope="module")
def faults_out(tmp_path_factory):
    scenario = load_scenario(FAULTS)
    root = tmp_path_factory.mktemp("faults")
    simulate(scenario, root)
    steps = _load(root, "training_steps", STEP_COLUMNS)
    steps["loss_value"] = pd.to_numeric(steps["loss"], errors="coerce")
    steps["grad_value"] = pd.to_numeric(steps["grad_norm"], errors="coerce")
    lineage = [json.loads(line) for p in sorted((root / "raw" / "lineage").rglob("*.jsonl"))
               for line in p.read_text().splitlines()]
    truth = [json.loads(line) for line in (root / "ground_truth.jsonl").read_text().splitlines()]
    return Out(root, scenario, steps, _load(root, "gpu_samples", GPU_COLUMNS), lineage, truth)


def _med(df: "pd.DataFrame", col: str) -> float:
    return float(df[col].median())


def _minutes(t, n: float):
    return t + pd.Timedelta(minutes=n)


def test_faults_scenario_is_deterministic(faults_out, faults_embedded):
    """The same bytes in another process: `goodput demo` simulated faults.yaml into the session's shared home
    (tests/conftest.py: faults_embedded) in a subprocess. Under what the simulator writes (the raw zone, the
    checkpoints, the truth files) that home holds the same files, byte for byte: the demo's processing reads
    them and writes beside them (the warehouse, Dagster's folder, reports, alerts)."""
    import hashlib

    def digest(root: Path, tops: set[str]) -> dict[str, str]:
        return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(root.rglob("*")) if p.is_file() and p.relative_to(root).parts[0] in tops}

    tops = {p.name for p in faults_out.root.iterdir()}
    assert {"raw", "checkpoints", "ground_truth.jsonl"} <= tops
    simulated = digest(faults_out.root, tops)
    assert len(simulated) > 100
    assert digest(faults_embedded["demo"].parent / "home", tops) == simulated


def test_faults_scenario_has_every_type_twice_subtle_and_gross(faults_out):
    from simulator import FAULT_TYPES

    injected = [t for t in faults_out.truth if "caused_by" not in t]
    assert len(injected) == len(faults_out.scenario.faults)
    for ftype in (name for name, spec in FAULT_TYPES.items() if spec.family != "cluster"):  # shapes.yaml has those
        mags = sorted(t["magnitude"] for t in injected if t["type"] == ftype)
        assert len(mags) >= 2, ftype
        if ftype not in ("hang", "rank_dropout"):  # their magnitude is not used
            assert mags[0] < mags[-1], ftype
    # Cross-layer effects are in the truth too, named after their cause.
    caused = {(t["type"], t["entity"], t["caused_by"]) for t in faults_out.truth if "caused_by" in t}
    assert ("rank_dropout", "rank:train-c3/rank-5", "xid_error gpu:node-3:5") in caused
    assert ("straggler", "rank:train-c2/rank-4", "thermal_throttle gpu:node-2:4") in caused
    assert len(caused) == 5
    # The GPU- and rank-level entities use the documented formats.
    for t in faults_out.truth:
        assert re.fullmatch(r"run:[\w.-]+|rank:[\w.-]+/rank-\d+|gpu:node-\d+:\d+|endpoint:[\w.-]+"
                            r"|checkpoint:[\w.-]+/step-\d{6}", t["entity"]), t


def test_healthy_runs_are_quiet(faults_out):
    for run_id in HEALTHY:
        steps = faults_out.run_steps(run_id)
        assert steps["loss_value"].notna().all() and not steps["grad_norm"].isin(["NaN", "Infinity"]).any()
        # only an fp16 overflow (a skipped step) leaves the grad norm out
        assert steps["grad_norm"].isna().sum() == steps.groupby("rank")["skipped_iterations_total"].max().sum()
        assert (steps["nan_iterations_total"] == 0).all() and (steps["alloc_retries_total"] == 0).all()
        # fp16 runs overflow now and then (a halving, a skipped step), but never collapse.
        if steps["loss_scale"].notna().any():
            assert steps["loss_scale"].min() >= 32768 and steps["skipped_iterations_total"].max() <= 5
        # the lowest quarter of the run's steps by time: warm-up is noisier but no fault-like spike
        per_step = steps.groupby("step")["loss_value"].median()
        assert (per_step.rolling(50, min_periods=1).max() / per_step.rolling(400, min_periods=1).median()).max() < 1.5
        run = faults_out.scenario.run(run_id)
        gpus = faults_out.gpus[faults_out.gpus["run_id"] == run_id]
        assert (gpus["throttle_reasons"] == 0).all() and (gpus["xid_errors_total"] == 0).all()
        assert not gpus["row_remap_pending"].any() and (gpus["ecc_uncorrected_errors_total"] == 0).all()
        assert {(h, g) for h, g in zip(gpus["host"], gpus["gpu_index"])} == {
            (f"node-{h}", g) for h, g in run.gpus}
    ended = {e["run_id"]: e["status"] for e in faults_out.lineage if e["event"] == "run_ended"}
    assert all(ended[r] == "completed" for r in HEALTHY)


def test_healthy_runs_have_eval_pauses_with_busy_gpus(faults_out):
    for run_id in HEALTHY:
        run = faults_out.scenario.run(run_id)
        steps = faults_out.run_steps(run_id)
        r0 = steps[steps["rank"] == 0].sort_values("step")
        gap = r0["time"].diff().dt.total_seconds()
        after_eval = r0[(r0["step"] - 1) % run.eval_interval_steps == 0]["step"].iloc[1:]
        eval_only = after_eval[(after_eval - 1) % run.checkpoint_interval_steps != 0]
        assert len(eval_only) >= 2, run_id
        pauses = gap[r0["step"].isin(eval_only)]
        assert pauses.between(60, 180 + 3 * run.step_time.total_seconds()).all(), pauses
        # During each pause the run's GPUs are busy evaluating: not idle, not a hang's face.
        for step in eval_only.tolist():
            end = r0[r0["step"] == step]["time"].iloc[0]
            start = r0[r0["step"] == step - 1]["time"].iloc[0]
            g = faults_out.gpus[(faults_out.gpus["run_id"] == run_id)
                                & (faults_out.gpus["time"] > _minutes(start, 0.3))
                                & (faults_out.gpus["time"] < end - pd.Timedelta(seconds=run.step_time.total_seconds() + 10))]
            assert len(g) > 0
            assert g["utilization_ratio"].between(0.7, 0.9).all()
            assert (g["power_watts"] / g["power_limit_watts"]).between(0.55, 0.65).all()
            assert g["tensor_active_ratio"].between(0.2, 0.3).all()


def test_healthy_warmup_is_noisier_and_lr_drops_without_a_spike(faults_out):
    run = faults_out.scenario.run("healthy-pretrain-a")
    steps = faults_out.run_steps(run.id)
    r0 = steps[steps["rank"] == 0].set_index("step").sort_index()
    rel = np.log(r0["loss_value"]).diff().abs()
    assert rel.loc[2:200].median() > 2 * rel.loc[3000:5000].median()
    assert r0["grad_value"].loc[1:100].median() > 1.5 * r0["grad_value"].loc[1000:1500].median()
    drop = run.learning_rate.drop_at_step
    assert r0.loc[drop, "learning_rate"] == pytest.approx(r0.loc[drop - 1, "learning_rate"] * 0.3, rel=0.01)
    before, after = r0["loss_value"].loc[drop - 300:drop - 1], r0["loss_value"].loc[drop:drop + 600]
    assert after.max() < before.max() * 1.05 and after.median() < before.median()
    # ranks disagree a little on local grad norms
    step = steps[steps["step"] == 3000]
    assert step["grad_value"].nunique() == run.ranks and step["grad_value"].std() / step["grad_value"].mean() < 0.1


# --------------------------------------------------------------------------- training faults


def test_nan_loss(faults_out):
    for magnitude in (0.05, 1.0):
        f = faults_out.fault("nan_loss", magnitude)
        run_id = f["entity"].split(":", 1)[1]
        during = faults_out.run_steps(run_id, f["onset"], f["end"])
        before = faults_out.run_steps(run_id, None, f["onset"])
        nonfinite = during[during["loss_value"].isna() | np.isinf(during["loss_value"])]
        assert before["loss_value"].notna().all() and (before["nan_iterations_total"] == 0).all()
        share = nonfinite["step"].nunique() / during["step"].nunique()
        assert share == pytest.approx(magnitude, abs=0.03)
        assert set(nonfinite["loss"]) <= {"NaN", "Infinity"}
        assert nonfinite.groupby("step")["rank"].count().eq(8).all()  # all ranks
        assert nonfinite["grad_norm"].eq("NaN").all()
        last = faults_out.run_steps(run_id, f["end"]).iloc[0]
        assert last["nan_iterations_total"] == nonfinite["step"].nunique()
    assert "Infinity" in set(faults_out.run_steps("train-c3")["loss"])


def test_loss_spike_recovers_and_divergence_does_not(faults_out):
    for magnitude in (0.25, 2.0):
        f = faults_out.fault("loss_spike", magnitude)
        run_id = f["entity"].split(":", 1)[1]
        before = _med(faults_out.run_steps(run_id, _minutes(f["onset"], -5), f["onset"]), "loss_value")
        first = _med(faults_out.run_steps(run_id, f["onset"], _minutes(f["onset"], 0.5)), "loss_value")
        late = _med(faults_out.run_steps(run_id, _minutes(f["end"], -3), f["end"]), "loss_value")
        after = _med(faults_out.run_steps(run_id, f["end"], _minutes(f["end"], 3)), "loss_value")
        assert first / before == pytest.approx(1 + 2 * magnitude, rel=0.1)
        assert late / after == pytest.approx(1.0, abs=0.02)  # back on the curve
        grad_before = _med(faults_out.run_steps(run_id, _minutes(f["onset"], -5), f["onset"]), "grad_value")
        grad_first = _med(faults_out.run_steps(run_id, f["onset"], _minutes(f["onset"], 0.5)), "grad_value")
        assert grad_first > grad_before * (1 + magnitude)
    for magnitude in (0.3, 1.5):
        f = faults_out.fault("loss_divergence", magnitude)
        run_id = f["entity"].split(":", 1)[1]
        before = _med(faults_out.run_steps(run_id, _minutes(f["onset"], -5), f["onset"]), "loss_value")
        quarters = [_med(faults_out.run_steps(run_id, _minutes(f["onset"], q * 10), _minutes(f["onset"], q * 10 + 2)),
                         "loss_value") for q in range(4)]
        last = _med(faults_out.run_steps(run_id, _minutes(f["end"], -2), f["end"]), "loss_value")
        assert quarters == sorted(quarters)  # rising all the way
        assert last / before == pytest.approx(1 + 3 * magnitude, rel=0.1)


def test_loss_plateau_stops_improvement_the_curve_predicts(faults_out):
    for magnitude in (0.6, 1.0):
        f = faults_out.fault("loss_plateau", magnitude)
        run = faults_out.scenario.run(f["entity"].split(":", 1)[1])
        steps = faults_out.run_steps(run.id)

        def at(t, steps=steps):
            return _med(steps[(steps["time"] >= _minutes(t, -2)) & (steps["time"] < t)], "loss_value")

        k0 = steps[steps["time"] < f["onset"]]["step"].max()
        k1 = steps[steps["time"] < f["end"]]["step"].max()
        curve = run.loss
        predicted = [curve.floor + (curve.initial - curve.floor) * (1 + k / curve.s0) ** -curve.decay for k in (k0, k1)]
        observed = at(f["end"]) - at(f["onset"])
        expected = predicted[1] - predicted[0]
        assert expected < -0.2  # the curve promised a clear improvement (loss noise is ~2 %)
        assert observed == pytest.approx((1 - magnitude) * expected, abs=0.1)
        if magnitude == 1.0:
            assert abs(observed) < 0.05  # it stays at its onset value


def test_step_time_regression_is_a_data_change_point(faults_out):
    for magnitude in (0.15, 0.8):
        f = faults_out.fault("step_time_regression", magnitude)
        run_id = f["entity"].split(":", 1)[1]
        before = faults_out.run_steps(run_id, _minutes(f["onset"], -20), f["onset"])
        during = faults_out.run_steps(run_id, f["onset"], f["end"])
        assert _med(during, "step_seconds") / _med(before, "step_seconds") == pytest.approx(1 + magnitude, rel=0.05)
        assert _med(during, "data_seconds") - _med(before, "data_seconds") == pytest.approx(2.0 * magnitude, rel=0.05)
        assert _med(during, "compute_seconds") == pytest.approx(_med(before, "compute_seconds"), rel=0.02)
        # persistent: every minute of the fault is slow, on every rank
        minutes = during.groupby([during["time"].dt.floor("min"), "rank"])["step_seconds"].median()
        assert (minutes > _med(before, "step_seconds") * (1 + magnitude / 2)).all()


def test_grad_norm_spike_is_a_short_burst(faults_out):
    for magnitude in (0.2, 1.0):
        f = faults_out.fault("grad_norm_spike", magnitude)
        run_id = f["entity"].split(":", 1)[1]
        before = faults_out.run_steps(run_id, _minutes(f["onset"], -10), f["onset"])
        during = faults_out.run_steps(run_id, f["onset"], f["end"])
        after = faults_out.run_steps(run_id, _minutes(f["end"], 1), _minutes(f["end"], 10))
        assert _med(during, "grad_value") / _med(before, "grad_value") == pytest.approx(5 + 20 * magnitude, rel=0.15)
        assert _med(after, "grad_value") / _med(before, "grad_value") == pytest.approx(1.0, abs=0.1)
        assert _med(during, "loss_value") / _med(before, "loss_value") == pytest.approx(1.0, abs=0.03)


def test_loss_scale_collapse(faults_out):
    for magnitude in (0.2, 1.0):
        f = faults_out.fault("loss_scale_collapse", magnitude)
        run_id = f["entity"].split(":", 1)[1]
        before = faults_out.run_steps(run_id, _minutes(f["onset"], -10), f["onset"])
        during = faults_out.run_steps(run_id, f["onset"], f["end"])
        r0 = during[during["rank"] == 0].sort_values("step")
        assert before["loss_scale"].min() >= 32768 and r0["loss_scale"].iloc[-1] <= 1.0
        halvings = (r0["loss_scale"].diff() < 0).sum()
        assert halvings >= 15  # 65536 -> 1
        skipped = r0["skipped_iterations_total"].iloc[-1] - before["skipped_iterations_total"].max()
        assert skipped >= halvings and skipped == pytest.approx(min(1.0, magnitude / 2) * len(r0), rel=0.25)
        assert r0[r0["skipped_iterations_total"].diff() > 0]["grad_norm"].isna().all()  # no norm on a skip
    with pytest.raises(ScenarioError, match="fp16"):
        doc = yaml.safe_load(FAULTS.read_text())
        doc["faults"] = [{"type": "loss_scale_collapse", "target": "run:train-c2", "onset": "1h",
                          "duration": "10m", "magnitude": 1.0}]
        scenario_from_dict(doc)


def test_memory_fragmentation(faults_out):
    for magnitude in (0.3, 1.0):
        f = faults_out.fault("memory_fragmentation", magnitude)
        run_id = f["entity"].split(":", 1)[1]
        during = faults_out.run_steps(run_id, f["onset"], f["end"])
        r0 = during[during["rank"] == 0]
        gap = r0["memory_reserved_bytes"] - r0["memory_allocated_bytes"]
        growth = gap.iloc[-50:].median() - gap.iloc[:50].median()
        assert growth == pytest.approx(magnitude * 10e9, rel=0.15)
        inactive = r0["memory_inactive_split_bytes"]
        assert inactive.iloc[-50:].median() > inactive.iloc[:50].median() + magnitude * 5e9
        retries = r0["alloc_retries_total"].to_numpy()
        half = len(retries) // 2
        assert retries[-1] - retries[half] > 2 * (retries[half] - retries[0]) > 0  # more and more often
        # the GPU's memory follows the reservation
        gpu = faults_out.gpu("node-4", 0, f["onset"], f["end"])
        assert gpu["memory_used_bytes"].iloc[-6:].median() - gpu["memory_used_bytes"].iloc[:6].median() > magnitude * 8e9


# --------------------------------------------------------------------------- distributed faults


def _rank_of(entity: str) -> tuple[str, int]:
    run_id, rank = entity.split(":", 1)[1].rsplit("/rank-", 1)
    return run_id, int(rank)


def test_straggler_slows_its_compute_and_peers_wait(faults_out):
    for magnitude in (0.15, 1.0):
        f = faults_out.fault("straggler", magnitude)
        run_id, rank = _rank_of(f["entity"])
        before = faults_out.run_steps(run_id, _minutes(f["onset"], -20), f["onset"])
        during = faults_out.run_steps(run_id, f["onset"], f["end"])
        me, peers = during[during["rank"] == rank], during[during["rank"] != rank]
        assert _med(me, "compute_seconds") / _med(before, "compute_seconds") == pytest.approx(1 + magnitude, rel=0.03)
        assert _med(peers, "compute_seconds") == pytest.approx(_med(before, "compute_seconds"), rel=0.02)
        extra = _med(me, "compute_seconds") - _med(before, "compute_seconds")
        assert _med(peers, "collective_seconds") - _med(before, "collective_seconds") == pytest.approx(extra, rel=0.1)
        assert _med(me, "collective_seconds") == pytest.approx(_med(before, "collective_seconds"), rel=0.1)
        assert _med(during, "step_seconds") - _med(before, "step_seconds") == pytest.approx(extra, rel=0.1)


def test_collective_regression(faults_out):
    for magnitude in (0.25, 1.5):
        f = faults_out.fault("collective_regression", magnitude)
        run_id = f["entity"].split(":", 1)[1]
        before = faults_out.run_steps(run_id, _minutes(f["onset"], -20), f["onset"])
        during = faults_out.run_steps(run_id, f["onset"], f["end"])
        ratio = during.groupby("rank")["collective_seconds"].median() / before.groupby("rank")["collective_seconds"].median()
        assert ratio.between(1 + 1.6 * magnitude, 1 + 2.4 * magnitude).all()
        assert _med(during, "step_seconds") > _med(before, "step_seconds") * (1 + 0.3 * magnitude)
        assert _med(during, "compute_seconds") == pytest.approx(_med(before, "compute_seconds"), rel=0.02)


def test_rank_dropout_stops_records_idles_its_gpu_and_fails_the_run(faults_out):
    dropouts = [faults_out.fault("rank_dropout", 1.0, caused=True)] + [
        faults_out.fault("rank_dropout", entity=t["entity"]) for t in faults_out.truth
        if t["type"] == "rank_dropout" and "caused_by" not in t]
    assert len(dropouts) == 3
    for f in dropouts:
        run_id, rank = _rank_of(f["entity"])
        run = faults_out.scenario.run(run_id)
        steps = faults_out.run_steps(run_id)
        assert steps["time"].max() < f["onset"]  # nobody completes a step after the death
        assert steps.groupby("rank")["step"].max().nunique() == 1
        host, index = run.gpus[rank]
        lost = f.get("caused_by", "").startswith("xid_error")
        mine = faults_out.gpu(f"node-{host}", index, f["onset"], f["end"])
        assert mine["run_id"].isna().all()
        if not lost:
            assert (mine["utilization_ratio"] == 0).all() and (mine["memory_used_bytes"] < 1e9).all()
        for h, g in run.gpus:
            if (h, g) == (host, index):
                continue
            spin = faults_out.gpu(f"node-{h}", g, _minutes(f["onset"], 0.2), f["end"])
            assert (spin["run_id"] == run_id).all() and (spin["utilization_ratio"] >= 0.9).all()
            assert ((spin["power_watts"] / spin["power_limit_watts"]) < 0.5).all()
            assert (spin["tensor_active_ratio"] < 0.05).all()
            later = faults_out.gpu(f"node-{h}", g, f["end"], _minutes(f["end"], 5))
            assert later["run_id"].isna().all() and (later["utilization_ratio"] == 0).all()
        ended = [e for e in faults_out.lineage if e["run_id"] == run_id and e["event"] == "run_ended"]
        assert [(e["status"], pd.Timestamp(e["time"]).tz_localize(None)) for e in ended] == [("failed", f["end"])]
    # the survivors give up at the NCCL timeout, or when the fault ends if that comes first
    assert sorted(f["end"] - f["onset"] for f in dropouts) == [
        pd.Timedelta(minutes=5), pd.Timedelta(minutes=10), pd.Timedelta(minutes=10)]


def test_gradient_skew(faults_out):
    for magnitude in (0.3, 2.0):
        f = faults_out.fault("gradient_skew", magnitude)
        run_id, rank = _rank_of(f["entity"])
        during = faults_out.run_steps(run_id, f["onset"], f["end"])
        before = faults_out.run_steps(run_id, _minutes(f["onset"], -20), f["onset"])
        for df, expected in ((during, 1 + magnitude), (before, 1.0)):
            mine = df[df["rank"] == rank].set_index("step")["grad_value"]
            peers = df[df["rank"] != rank].groupby("step")["grad_value"].median()
            assert (mine / peers).median() == pytest.approx(expected, rel=0.05)


# --------------------------------------------------------------------------- GPU faults


def _gpu_of(entity: str) -> tuple[str, int]:
    host, index = entity.split(":", 1)[1].rsplit(":", 1)
    return host, int(index)


def test_xid_errors(faults_out):
    app = faults_out.fault("xid_error", 0.5)
    g = faults_out.gpu(*_gpu_of(app["entity"]))
    assert (g[g["time"] < app["onset"]]["xid_errors_total"] == 0).all()
    after = g[g["time"] >= app["onset"]]
    assert (after["xid_errors_total"] >= 1).all() and set(after["last_xid"]) <= {13, 31, 43}
    assert after["utilization_ratio"].iloc[:30].median() > 0.9  # the run goes on
    bus = faults_out.fault("xid_error", 1.0)
    g = faults_out.gpu(*_gpu_of(bus["entity"]))
    lost = g[(g["time"] >= bus["onset"]) & (g["time"] < bus["end"])]
    assert len(lost) == 240 and (lost["last_xid"] == 79).all() and (lost["xid_errors_total"] == 1).all()
    for col in ("utilization_ratio", "power_watts", "temperature_celsius", "memory_used_bytes", "run_id"):
        assert lost[col].isna().all(), col
    back = g[g["time"] >= bus["end"]]
    assert back["utilization_ratio"].notna().all() and back["run_id"].isna().all()


def test_ecc_and_row_remap(faults_out):
    for magnitude in (1.0, 8.0):
        f = faults_out.fault("ecc_error", magnitude)
        g = faults_out.gpu(*_gpu_of(f["entity"]))
        pre, inside = g[g["time"] < f["onset"]], g[(g["time"] >= f["onset"]) & (g["time"] < f["end"])]
        post = g[g["time"] >= f["end"]]
        assert (pre["ecc_uncorrected_errors_total"] == 0).all() and not pre["row_remap_pending"].any()
        assert (inside["ecc_uncorrected_errors_total"] == round(magnitude)).all()
        assert inside["ecc_corrected_errors_total"].is_monotonic_increasing
        assert inside["ecc_corrected_errors_total"].iloc[-1] > inside["ecc_corrected_errors_total"].iloc[0]
        assert (inside["remapped_rows_uncorrectable_total"] == round(magnitude)).all() and inside["row_remap_pending"].all()
        assert not post["row_remap_pending"].any() and (post["ecc_uncorrected_errors_total"] == round(magnitude)).all()
    for magnitude in (1.0, 4.0):
        f = faults_out.fault("row_remap_failure", magnitude)
        g = faults_out.gpu(*_gpu_of(f["entity"]))
        inside = g[(g["time"] >= f["onset"]) & (g["time"] < f["end"])]
        assert inside["row_remap_failure"].all() and not g[g["time"] < f["onset"]]["row_remap_failure"].any()
        assert (inside["remapped_rows_correctable_total"] == magnitude).all()


def _throttle_case(faults_out, ftype: str, magnitude: float):
    f = faults_out.fault(ftype, magnitude)
    host, index = _gpu_of(f["entity"])
    before = faults_out.gpu(host, index, _minutes(f["onset"], -10), f["onset"])
    during = faults_out.gpu(host, index, _minutes(f["onset"], 1.5), f["end"])
    during = during[during["utilization_ratio"] > 0.5]  # not in a checkpoint pause
    effect = next(t for t in faults_out.truth if t.get("caused_by") == f"{ftype} {f['entity']}")
    run_id, rank = _rank_of(effect["entity"])
    steps_before = faults_out.run_steps(run_id, _minutes(f["onset"], -10), f["onset"])
    steps_during = faults_out.run_steps(run_id, _minutes(f["onset"], 1.5), f["end"])
    slow = _med(steps_during[steps_during["rank"] == rank], "compute_seconds") / _med(steps_before, "compute_seconds")
    clock = _med(during, "sm_clock_hertz") / _med(before, "sm_clock_hertz")
    return f, before, during, clock, slow, effect


def test_thermal_throttle_heats_slows_the_clock_and_its_rank(faults_out):
    for magnitude, hw in ((0.3, False), (1.0, True)):
        f, before, during, clock, slow, effect = _throttle_case(faults_out, "thermal_throttle", magnitude)
        assert during["temperature_celsius"].between(87, 96).all() and before["temperature_celsius"].max() < 80
        assert ((during["throttle_reasons"] & 0x20) != 0).all()
        assert ((during["throttle_reasons"] & 0x40) != 0).all() == hw
        assert 0.5 <= clock <= 0.8 and clock == pytest.approx(1 - (0.2 + 0.3 * magnitude), abs=0.02)
        assert slow == pytest.approx(1 / clock, rel=0.05)  # the rank on it becomes a straggler
        assert effect["type"] == "straggler" and effect["magnitude"] == pytest.approx(slow - 1, abs=0.05)


def test_power_throttle_caps_power_and_slows_its_rank(faults_out):
    for magnitude, bit in ((0.3, 0x4), (1.0, 0x80)):
        f, before, during, clock, slow, effect = _throttle_case(faults_out, "power_throttle", magnitude)
        assert ((during["throttle_reasons"] & bit) != 0).all()
        assert 0.6 <= clock <= 0.85
        ratio = during["power_watts"] / during["power_limit_watts"]
        if bit == 0x4:  # pinned at the lowered enforced limit
            assert ratio.between(0.95, 1.0).all() and during["power_limit_watts"].max() < 700
        else:  # brake: the limit is unchanged, the draw far below it
            assert (during["power_limit_watts"] == 700).all() and ratio.max() < 0.35
        assert during["power_watts"].max() < before["power_watts"].median() * 0.7
        assert slow == pytest.approx(1 / clock, rel=0.05)


def test_idle_allocated(faults_out):
    for magnitude in (0.4, 1.0):
        f = faults_out.fault("idle_allocated", magnitude)
        host, index = _gpu_of(f["entity"])
        g = faults_out.gpu(host, index, f["onset"], f["end"])
        run_id = g["run_id"].iloc[0]
        assert (g["run_id"] == run_id).all() and g["memory_used_bytes"].between(0.8e9, 1.2e9).all()
        assert g["utilization_ratio"].max() < 0.25 and (g["power_watts"] < 100).all()
        assert (g["tensor_active_ratio"] == 0).all()
        peers = faults_out.gpus[(faults_out.gpus["host"] == host) & (faults_out.gpus["gpu_index"] != index)
                                & (faults_out.gpus["time"] >= f["onset"]) & (faults_out.gpus["time"] < f["end"])]
        assert (peers["run_id"] == run_id).all() and peers["utilization_ratio"].median() > 0.9
        outside = faults_out.gpu(host, index, _minutes(f["end"], 1), _minutes(f["end"], 10))
        assert outside["run_id"].isna().all()


def test_hangs_keep_their_hardware_face(faults_out):
    for f in [t for t in faults_out.truth if t["type"] == "hang"]:
        onset, end = (pd.Timestamp(f[k]).tz_localize(None) for k in ("onset", "end"))
        run_id = f["entity"].split(":", 1)[1]
        assert faults_out.run_steps(run_id, onset, end).empty
        g = faults_out.gpus[(faults_out.gpus["run_id"] == run_id) & (faults_out.gpus["time"] >= onset)
                            & (faults_out.gpus["time"] < end)]
        assert len(g) > 0 and (g["utilization_ratio"] >= 0.97).all() and (g["tensor_active_ratio"] <= 0.02).all()
        assert ((g["power_watts"] / g["power_limit_watts"]).between(0.16, 0.20)).all()   # the real capture: 0.17


def test_bundled_scenarios_keep_new_fields_at_zero(small_out):
    _, _, records = small_out
    for source, fields in NEW_FIELDS.items():
        for r in records[source]:
            assert all(r[k] in (0, False) for k in fields), r


# --------------------------------------------------------------------------- fault validation


@pytest.mark.parametrize(("fault", "message"), [
    ({"type": "straggler", "target": "rank:llm-small/rank-2"}, "no rank 2"),
    ({"type": "straggler", "target": "run:llm-small"}, "rank:<run id>/rank-<r>"),
    ({"type": "xid_error", "target": "gpu:node-1:0"}, "does not exist"),
    ({"type": "ecc_error", "target": "gpu:node-0"}, "gpu:node-<h>:<gpu index>"),
    ({"type": "thermal_throttle", "target": "gpu:node-0:0", "onset": "1m"}, "no run's rank uses"),
    ({"type": "idle_allocated", "target": "gpu:node-0:1"}, "not a spare GPU"),
    ({"type": "nan_loss", "target": "run:llm-small", "magnitude": 1.5}, "at most 1.0"),
    ({"type": "loss_spike", "target": "run:llm-small", "onset": "1h59m"}, "outside run"),
    ({"type": "loss_scale_collapse", "target": "run:llm-small"}, "needs an fp16 run"),
])
def test_bad_faults_are_rejected(tmp_path, fault, message):
    doc = _doc()
    doc["faults"] = [{"onset": "20m", "duration": "5m", **fault}]
    assert message in _error(tmp_path, doc)


def test_a_run_is_killed_once(tmp_path):
    doc = _doc()
    doc["faults"] = [{"type": "rank_dropout", "target": f"rank:llm-small/rank-{r}", "onset": m,
                      "duration": "5m"} for r, m in ((0, "20m"), (1, "30m"))]
    assert "already killed" in _error(tmp_path, doc)


def test_serving_sections_leave_the_training_sources_untouched(tmp_path):
    """An endpoint (with predictions) is opt-in: the GPU samples and step records of a scenario do
    not change when one is added, and without one no serving folder is written."""
    doc = yaml.safe_load(SMALL.read_text())
    simulate(scenario_from_dict(doc), tmp_path / "plain")
    doc["endpoints"] = [{"name": "ep", "requests_per_second": 2.0, "ttft_seconds": {"p50": 0.1, "p99": 0.4},
                         "itl_seconds": {"p50": 0.02, "p99": 0.05}, "e2e_seconds": {"p50": 2.0, "p99": 6.0},
                         "predictions": {"per_minute": 2}}]
    summary = simulate(scenario_from_dict(doc), tmp_path / "served")
    assert summary["rows"]["serving_metrics"] == 240 and summary["rows"]["predictions"] > 0
    for source in ("gpu_samples", "training_steps", "lineage"):
        plain = {p.relative_to(tmp_path / "plain"): p.read_bytes() for p in (tmp_path / "plain" / "raw" / source).rglob("*.jsonl")}
        served = {p.relative_to(tmp_path / "served"): p.read_bytes() for p in (tmp_path / "served" / "raw" / source).rglob("*.jsonl")}
        assert plain == served, source
    assert not (tmp_path / "plain" / "raw" / "serving_metrics").exists()
