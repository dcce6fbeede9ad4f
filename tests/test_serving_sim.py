"""The serving scenario feeds every ingest path: serving metrics, predictions, late outcomes, model
lineage and real checkpoint files with manifests, through the real `detect` job."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from orchestration.definitions import resources_for
from simulator import ScenarioError, load_scenario, scenario_from_dict, simulate
from sources.client import MANIFEST_NAME, file_manifest
from sources.mapping import PrometheusConfig
from tests.helpers import REPO, memory_instance, run_ingest

SERVING = REPO / "simulator" / "scenarios" / "serving.yaml"
HOURS = ("2026-11-30-00:00", "2026-11-30-01:00")


@pytest.fixture(scope="module")
def serving_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("serving")
    simulate(load_scenario(SERVING), home)
    return home


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """A reader written from the format's spec (u64 LE header size, JSON header, raw bytes)."""
    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    header.pop("__metadata__", None)
    body = data[8 + size:]
    assert max(t["data_offsets"][1] for t in header.values()) == len(body)
    return {name: np.frombuffer(body[t["data_offsets"][0]:t["data_offsets"][1]], dtype="<f4").reshape(t["shape"])
            for name, t in header.items() if t["dtype"] == "F32"}


def test_serving_scenario_lands_in_the_warehouse_without_quarantine(serving_home, tmp_path):

    with memory_instance() as instance:
        for key in HOURS:
            run_ingest(serving_home, key, instance)   # what lands: the ingest assets
    with resources_for(serving_home)["warehouse"].connect(read_only=True) as con:
        def one(query):
            return con.execute(query).fetchone()

        assert one("SELECT count(*) FROM quarantine")[0] == 0
        n, endpoints, versions, p50, p99 = one(
            "SELECT count(*), count(DISTINCT endpoint), count(DISTINCT model_version), "
            "median(ttft_p50_seconds), median(ttft_p99_seconds) FROM serving_metrics")
        assert n == 240 and endpoints == 1 and versions == 2      # 2 h at 30 s; base, then the promoted one
        assert 0.14 < p50 < 0.17 and 0.55 < p99 < 0.7            # the scenario's lognormal (0.15 / 0.6 s)
        assert one("SELECT count(*) FROM serving_metrics WHERE request_success_total IS NULL "
                   "OR kv_cache_usage_ratio IS NULL OR e2e_latency_p95_seconds IS NULL")[0] == 0
        predictions, with_features = one(
            "SELECT count(*), count(*) FILTER (WHERE features->>'language' IS NOT NULL) FROM predictions")
        assert predictions > 500 and with_features == predictions
        outcomes, late_min = one("SELECT count(*), min(o.time - p.time) FROM prediction_outcomes o "
                                 "JOIN predictions p USING (request_id)")
        assert outcomes > 50
        assert late_min.total_seconds() >= 20 * 60             # outcome_delay 40m x0.5 at least
        joined = one("SELECT count(outcome) FROM predictions_with_outcomes")[0]
        assert joined == outcomes
        events = dict(con.execute("SELECT event, count(*) FROM lineage_events GROUP BY event").fetchall())
        assert events["model_version_registered"] == 1 and events["model_version_promoted"] == 1
        assert events["checkpoint_saved"] >= 5
        promoted = one("SELECT model_version, endpoint FROM lineage_events WHERE event = 'model_version_promoted'")
        assert promoted == ("llm-serve-step-001600", "chat-api")
        paths = [r[0] for r in con.execute(
            "SELECT payload->>'checkpoint_path' FROM lineage_events WHERE event = 'checkpoint_saved'").fetchall()]
        manifests = [json.loads(r[0]) for r in con.execute(
            "SELECT payload->'manifest' FROM lineage_events WHERE event = 'checkpoint_saved' ORDER BY time").fetchall()]
    # The checkpoints the lineage names exist, and their files match both manifests.
    for path, manifest in zip(sorted(paths), manifests):
        folder = serving_home / path
        assert folder.is_dir(), path
        assert file_manifest(folder) == manifest
        on_disk = json.loads((folder / MANIFEST_NAME).read_text())
        assert on_disk["files"] == manifest["files"]
        for entry in manifest["files"]:
            data = (folder / entry["path"]).read_bytes()
            assert len(data) == entry["bytes"] < 4096 and hashlib.sha256(data).hexdigest() == entry["sha256"]
        shard = read_safetensors(folder / "model_rank000.safetensors")
        assert shard["embed.weight"].shape == (16, 8) and np.isfinite(shard["embed.weight"]).all()


def test_serving_metrics_have_the_prometheus_pull_shape(serving_home):
    """Same keys, in the same order, as sources.prometheus.pull_serving_metrics writes."""
    line = next((serving_home / "raw" / "serving_metrics").rglob("*.jsonl")).read_text().splitlines()[0]
    record = json.loads(line)
    quantiles = [f"{p}_p{round(q * 100)}_seconds" for p in ("ttft", "itl", "e2e_latency")
                 for q in PrometheusConfig().serving.quantiles]
    assert list(record) == ["time", "endpoint", "model_version", "host", *quantiles, "requests_waiting",
                            "requests_running", "kv_cache_usage_ratio", "request_success_total",
                            "request_failure_total", "preemptions_total"]


def test_serving_output_is_deterministic(serving_home, tmp_path):
    simulate(load_scenario(SERVING), tmp_path)
    for folder in ("raw", "checkpoints"):
        ours = {p.relative_to(tmp_path / folder): p.read_bytes() for p in (tmp_path / folder).rglob("*") if p.is_file()}
        theirs = {p.relative_to(serving_home / folder): p.read_bytes()
                  for p in (serving_home / folder).rglob("*") if p.is_file()}
        assert ours == theirs


def test_torch_format_writes_loadable_files_or_raw_tensors(tmp_path):
    doc = _doc(checkpoints={"format": "torch"})
    simulate(scenario_from_dict(doc), tmp_path)
    folder = tmp_path / "checkpoints" / "r" / "step-000400"
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    assert manifest["files"] == file_manifest(folder)["files"]
    # torch.save's zip layout, written without torch (checked by the audit's zip reader either way)
    import zipfile
    assert "archive/data.pkl" in zipfile.ZipFile(folder / "model_rank000.pt").namelist()
    try:
        import torch
    except ImportError:
        return
    state = torch.load(folder / "model_rank000.pt")
    assert tuple(state["embed.weight"].shape) == (16, 8)


def _doc(checkpoints=None, **endpoint):
    run = {"id": "r", "start": "1m", "duration": "50m", "hosts": [0], "ranks": 1, "step_time": "2s",
           "loss": {"initial": 8.0, "floor": 2.0, "decay": 0.3, "noise": 0.02},
           "checkpoint_interval_steps": 400, "checkpoint_bytes": 1 << 20}
    if checkpoints is not None:
        run["checkpoints"] = checkpoints
    doc = {"seed": 1, "start": "2026-11-30T00:00:00Z", "duration": "1h",
           "cluster": {"hosts": 1, "gpus_per_host": 1}, "runs": [run]}
    if endpoint:
        doc["endpoints"] = [{"name": "ep", "requests_per_second": 1.0, "ttft_seconds": {"p50": 0.1, "p99": 0.5},
                             "itl_seconds": {"p50": 0.02, "p99": 0.05}, "e2e_seconds": {"p50": 2, "p99": 8},
                             **endpoint}]
    return doc


@pytest.mark.parametrize("doc, field, problem", [
    (_doc(checkpoints={"format": "onnx"}), "runs[0].checkpoints.format", "unknown checkpoint format"),
    (_doc(checkpoints={"dir": "../x"}), "runs[0].checkpoints.dir", "'..'"),
    (_doc(ttft_seconds={"p50": 0.5, "p99": 0.1}), "endpoints[0].ttft_seconds.p99", "not above p50"),
    (_doc(promotions=[{"run": "nope", "at": "30m"}]), "endpoints[0].promotions[0].run", "unknown run id"),
    (_doc(promotions=[{"run": "r", "at": "2h"}]), "endpoints[0].promotions[0].at", "after the scenario ends"),
    (_doc(host=3), "endpoints[0].host", "does not exist"),
    (_doc(kv_cache_usage=1.5), "endpoints[0].kv_cache_usage", "not a ratio"),
    (_doc(predictions={"outcome_share": 2}), "endpoints[0].predictions.outcome_share", "above 1"),
    (_doc(colour="red"), "endpoints[0].colour", "unknown field"),
])
def test_bad_serving_sections_fail_with_the_field(doc, field, problem):
    with pytest.raises(ScenarioError) as caught:
        scenario_from_dict(doc, source="s.yaml")
    assert str(caught.value).startswith(f"s.yaml: {field}: ") and problem in str(caught.value)


def test_promotion_before_any_checkpoint_fails_at_simulation(tmp_path):
    # the run starts at 1m and checkpoints every 400 steps (~14 min): nothing is saved by 5m
    scenario = scenario_from_dict(_doc(promotions=[{"run": "r", "at": "5m"}]), source="s.yaml")
    with pytest.raises(ScenarioError, match=r"^s.yaml: endpoints\[0\].promotions\[0\].at: run 'r' has saved no checkpoint"):
        simulate(scenario, tmp_path)
