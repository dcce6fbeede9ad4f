"""Tests for the cluster simulator: determinism, the raw-zone contract, the physics
the detectors rely on, ground truth and scenario validation."""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
from datetime import datetime, timedelta, timezone
from pathlib import Path

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
