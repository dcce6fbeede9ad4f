"""Goodput cluster simulator: a deterministic synthetic raw zone for a GPU cluster that trains and
serves models.

``load_scenario`` reads and validates a scenario file (see docs/scenario.md); ``simulate`` writes
the raw zone (gpu_samples, training_steps, lineage and, with endpoints, serving_metrics, predictions
and prediction_outcomes), real checkpoint files where a run asks for them, and the ground truth of
the injected faults. ``FAULT_TYPES`` is the fault-effect registry (simulator/faults/): the one list
of fault types the scenario format accepts and the simulator implements.
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
