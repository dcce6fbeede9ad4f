"""The fault-effect registry is the one list of fault types: the scenario loader accepts exactly the
registered names, each registered effect acts somewhere in the simulator, the docs describe each,
and an unknown type is a one-line error that lists the known ones."""

import dataclasses
import re
from pathlib import Path

import pytest

from simulator import FAULT_TYPES, ScenarioError, scenario_from_dict
from simulator.faults import FaultEffect, registered
from simulator.faults.registry import register
from simulator.schema import FaultDoc

DOCS = Path(__file__).resolve().parent.parent / "docs" / "scenario.md"
HOOKS = ("kills", "slowdown", "gpu_state", "gpu", "gpu_temperature", "memory_growth", "series", "rank_steps",
         "checkpoint", "serving", "serving_requests", "quality", "run_gpu", "host_clock", "telemetry")
FLAGS = ("stalls_run", "skips_saves", "weights_only", "holds_spare_gpu", "whole_job")


def _doc(fault_type: str) -> dict:
    return {"seed": 1, "start": "2026-11-30T00:00:00Z", "duration": "1h",
            "cluster": {"hosts": 1, "gpus_per_host": 2},
            "runs": [{"id": "r", "start": "5m", "duration": "30m", "hosts": [0], "step_time": "2s",
                      "loss": {"initial": 10, "floor": 2, "decay": 0.5, "noise": 0.01}}],
            "faults": [{"type": fault_type, "target": "run:r", "onset": "10m", "duration": "5m"}]}


def test_the_loader_accepts_exactly_the_registered_fault_types():
    assert FAULT_TYPES is registered()
    for name in FAULT_TYPES:
        assert FaultDoc.model_validate({"type": name, "target": "run:r", "onset": "1m", "duration": "1m"}).type == name
    with pytest.raises(ValueError):
        FaultDoc.model_validate({"type": "gremlins", "target": "run:r", "onset": "1m", "duration": "1m"})


def test_every_registered_fault_type_acts_somewhere():
    fields = {f.name for f in dataclasses.fields(FaultEffect)}
    for name, spec in FAULT_TYPES.items():
        acts = [h for h in HOOKS if h in fields and getattr(spec, h) is not None]
        acts += [f for f in FLAGS if getattr(spec, f)]
        assert acts, f"{name} is registered but has no effect"
        assert spec.family and spec.target_kinds and spec.description


def test_the_docs_describe_every_registered_fault_type_and_no_other():
    text = DOCS.read_text()
    table = set(re.findall(r"^\| `([a-z_]+)` \|", text.split("### Fault types", 1)[1].split("\n## ", 1)[0], re.M))
    assert table - {"gpu_samples", "training_steps", "lineage"} <= set(FAULT_TYPES)
    for name in FAULT_TYPES:
        assert f"`{name}`" in text, f"docs/scenario.md does not describe {name}"


def test_an_unknown_fault_type_is_one_line_naming_the_file_the_field_and_the_known_types():
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(_doc("gremlins"), source="s.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("s.yaml: faults[0].type: unknown fault type 'gremlins'; use one of: ")
    assert all(name in message for name in FAULT_TYPES)


def test_a_registered_type_loads_and_a_second_registration_is_refused():
    assert scenario_from_dict(_doc("loss_spike")).faults[0].type == "loss_spike"
    with pytest.raises(ValueError, match="registered twice"):
        register(FaultEffect("loss_spike", "training", ("run",), "again"))
