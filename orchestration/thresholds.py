"""Per-site threshold overrides: `GOODPUT_HOME/thresholds.yaml`, merged over each signal's defaults.

    busy_not_progressing:
      min_stall_seconds: 600     # our jobs run 8-minute evaluations with busy GPUs

A name that is not a signal, or a key the signal does not have, is an error that says which.
"""

from collections.abc import Mapping
from pathlib import Path

import dagster as dg
import yaml


class ThresholdsResource(dg.ConfigurableResource):
    """Threshold overrides from a YAML file (absent file: every signal keeps its defaults)."""

    path: str

    def overrides(self) -> dict[str, dict[str, float]]:
        path = Path(self.path)
        if not path.exists():
            return {}
        data = yaml.safe_load(path.read_text()) or {}
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise ValueError(f"{path}: expected `signal_name: {{threshold: value}}` mappings")
        return data

    def for_signal(self, name: str, defaults: Mapping[str, float]) -> dict[str, float]:
        own = self.overrides().get(name, {})
        unknown = sorted(set(own) - set(defaults))
        if unknown:
            raise ValueError(f"{self.path}: {name} has no threshold(s) {', '.join(unknown)}; known: {', '.join(sorted(defaults))}")
        return {**defaults, **{k: float(v) for k, v in own.items()}}

    def validate(self, known: set[str]) -> None:
        unknown = sorted(set(self.overrides()) - known)
        if unknown:
            raise ValueError(f"{self.path}: unknown signal(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
