"""Per-site threshold overrides: `GOODPUT_HOME/thresholds.yaml`, merged over each signal's defaults.

    busy_not_progressing:
      min_stall_seconds: 600     # our jobs run 8-minute evaluations with busy GPUs

A name that is not a signal, or a key the signal does not have, is an error that says which.

One reserved section, `serving_slos:`, holds per-endpoint service-level objectives (keys in
SLO_KEYS) that the serving signals compare against instead of their default thresholds:

    serving_slos:
      chat-api: {ttft_p99_seconds: 1.0, itl_p99_seconds: 0.08, max_num_seqs: 256}
"""

from collections.abc import Mapping
from pathlib import Path

import dagster as dg
import yaml

SERVING_SLOS = "serving_slos"
SLO_KEYS = ("ttft_p50_seconds", "ttft_p95_seconds", "ttft_p99_seconds", "itl_p50_seconds", "itl_p95_seconds",
            "itl_p99_seconds", "max_num_seqs", "error_ratio")


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
        return {k: v for k, v in data.items() if k != SERVING_SLOS}

    def serving_slos(self) -> dict[str, dict[str, float]]:
        """Per-endpoint SLOs from the `serving_slos:` section ({} without one); bad keys or values raise."""
        path = Path(self.path)
        if not path.exists():
            return {}
        section = (yaml.safe_load(path.read_text()) or {}).get(SERVING_SLOS) or {}
        slos: dict[str, dict[str, float]] = {}
        for endpoint, objectives in section.items():
            if not isinstance(objectives, dict):
                raise ValueError(f"{path}: {SERVING_SLOS}.{endpoint}: expected `{{slo_key: value}}`; keys: {', '.join(SLO_KEYS)}")
            unknown = sorted(set(objectives) - set(SLO_KEYS))
            if unknown:
                raise ValueError(f"{path}: {SERVING_SLOS}.{endpoint} has no SLO key(s) {', '.join(unknown)}; "
                                 f"known: {', '.join(SLO_KEYS)}")
            try:
                slos[str(endpoint)] = {k: float(v) for k, v in objectives.items()}
            except (TypeError, ValueError):
                raise ValueError(f"{path}: {SERVING_SLOS}.{endpoint}: SLO values must be numbers") from None
        return slos

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
