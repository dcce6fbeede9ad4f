"""Goodput cluster simulator: deterministic synthetic raw zone for a GPU training cluster.

``load_scenario`` reads and validates a scenario file (see docs/scenario.md);
``simulate`` writes the raw zone (gpu_samples, training_steps, lineage) and a
ground-truth list of injected faults for it.
"""

from .scenario import FAULT_TYPES, Scenario, ScenarioError, load_scenario, scenario_from_dict
from .simulate import SERVING_SOURCES, SOURCES, simulate

__all__ = [
    "FAULT_TYPES",
    "SERVING_SOURCES",
    "SOURCES",
    "Scenario",
    "ScenarioError",
    "load_scenario",
    "scenario_from_dict",
    "simulate",
]
