"""Fault effects, one module per family, each fault type registered once (registry.py). Importing
the package registers them all; ``FAULT_TYPES`` is the registry itself, the one list of faults the
scenario format accepts and the simulator implements."""

from . import badput, checkpoint, cluster, distributed, gpu, quality, serving, training  # noqa: F401  (they register)
from .registry import FaultEffect, Slowdown, effect, effects_with, registered

FAULT_TYPES = registered()

__all__ = ["FAULT_TYPES", "FaultEffect", "Slowdown", "effect", "effects_with", "registered"]
