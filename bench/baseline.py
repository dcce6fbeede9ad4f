"""The baseline a user would otherwise have: generic threshold alerts evaluated on Goodput's warehouse.

These are the rules GPU dashboards ship or operators write by hand (DCGM-exporter / Grafana style
`expr` + `for:`), not Goodput's detectors. Each lives in `sql/bench/` and produces incident-like
rows (signal, entity, run, GPUs, onset, opened, last seen) that `orchestration.evaluation.scoring` scores
exactly as it scores Goodput's incidents; `BASELINE` plays the role of the signal registry there,
naming the fault types each rule is credited for. The crediting is generous on purpose: a rule
gets a fault whenever an operator would plausibly say "that alert is how we catch it".

| rule | condition | fires after | credited for |
|------|-----------|-------------|--------------|
| `baseline_util_low_10m` | utilization < 10 % on a GPU a run holds | 10 min | hang, rank_dropout, idle_allocated, step_time_regression |
| `baseline_util_low_any_10m` | the same on any GPU, as dashboards ship it | 10 min | the same (scored apart) |
| `baseline_memory_95` | GPU memory used > 95 % of the card | 5 min | memory_fragmentation |
| `baseline_temp_85` | GPU temperature > 85 °C | 5 min | thermal_throttle |
| `baseline_any_xid` | the XID counter rose | at once | xid_error, ecc_error, row_remap_failure |
| `baseline_no_log_10m` | a training job wrote no step record (NCCL timeout) | 10 min | hang, rank_dropout |
| `baseline_p99_slo` | an endpoint's p99 time to first token above its SLO (1.5 s) | 5 min | every serving and quality fault type |
| `baseline_mfu_low_10m` | a run's model FLOPs utilization below a fixed 35 % | 10 min | mfu_regression |

Faults no generic rule speaks to (loss plateau/spike/divergence, NaN loss, loss-scale collapse,
grad-norm spike, gradient skew, straggler, collective regression, power throttle) are scored with
no baseline signal: recall 0 by construction, which is the honest answer for threshold alerts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import duckdb
import pandas as pd

from orchestration.storage import sql

INCIDENT_COLUMNS = ("incident_id", "signal", "entity_type", "entity_id", "run_id", "ranks", "gpus",
                    "onset", "opened", "last_seen")


@dataclass(frozen=True)
class BaselineRule:
    name: str
    condition: str
    fault_types: tuple[str, ...]


def _serving_fault_types() -> tuple[str, ...]:
    """Fault types the simulator can inject on a serving endpoint (a p99 alert is credited for all of them)."""
    from simulator.scenario import FAULT_TYPES

    return tuple(sorted(n for n, t in FAULT_TYPES.items() if "endpoint" in getattr(t, "target_kinds", ())))


class BaselineRules:
    """The baseline rules, shaped like `checks.registry.SignalRegistry` for `orchestration.evaluation.scoring`."""

    def __init__(self, rules: list[BaselineRule]) -> None:
        self._rules = {r.name: r for r in rules}

    def __iter__(self) -> Iterator[BaselineRule]:
        return iter(sorted(self._rules.values(), key=lambda r: r.name))

    def __len__(self) -> int:
        return len(self._rules)

    def get(self, name: str) -> BaselineRule:
        return self._rules[name]

    def for_fault(self, fault_type: str) -> list[BaselineRule]:
        return [r for r in self if fault_type in r.fault_types]


BASELINE = BaselineRules([
    BaselineRule("baseline_util_low_10m", "GPU utilization < 10% for 10 min on a GPU held by a run",
                 ("hang", "rank_dropout", "idle_allocated", "step_time_regression")),
    BaselineRule("baseline_memory_95", "GPU memory used > 95% for 5 min", ("memory_fragmentation",)),
    BaselineRule("baseline_temp_85", "GPU temperature > 85 C for 5 min", ("thermal_throttle",)),
    BaselineRule("baseline_any_xid", "any XID counter increase", ("xid_error", "ecc_error", "row_remap_failure")),
    BaselineRule("baseline_no_log_10m", "training job with no step record for 10 min (NCCL default timeout)",
                 ("hang", "rank_dropout")),
    BaselineRule("baseline_p99_slo", "serving p99 time to first token > 1.5 s (the SLO) for 5 min", _serving_fault_types()),
    BaselineRule("baseline_mfu_low_10m", "run MFU < 35% for 10 min (a fixed floor on the MFU the trainer reports)",
                 ("mfu_regression",)),
])
# The util rule as dashboards ship it, on every GPU: it also fires on GPUs idle between runs. Scored
# apart (its own false-alarm column), so that the main baseline is the operator-tuned one.
DASHBOARD_UTIL = BaselineRules([
    BaselineRule("baseline_util_low_any_10m", "GPU utilization < 10% for 10 min on any GPU (dashboard default)",
                 ("hang", "rank_dropout", "idle_allocated", "step_time_regression")),
])


@dataclass(frozen=True)
class Thresholds:
    """The rules' knobs; the defaults are the values dashboards and runbooks commonly use."""

    util_below: float = 0.10
    util_for_minutes: int = 10
    memory_above: float = 0.95
    memory_for_minutes: int = 5
    temp_above: float = 85.0
    temp_for_minutes: int = 5
    xid_firing_minutes: int = 5
    silence_minutes: int = 10
    slo_seconds: float = 1.5   # the TTFT p99 objective Goodput's serving signals default to
    slo_for_minutes: int = 5
    max_gap_seconds: float = 60.0   # a longer gap between samples ends a stretch (missed scrapes)
    mfu_below: float = 0.35         # a common "healthy large-model training" floor (35-45 % MFU on H100 bf16)
    mfu_for_minutes: int = 10
    mfu_max_gap_minutes: int = 5    # checkpoint saves and evaluations leave minutes without steps


def evaluate(con: duckdb.DuckDBPyConnection, thresholds: Thresholds = Thresholds()) -> pd.DataFrame:
    """Every baseline alert over the whole warehouse, as incident-like rows (the scorer's columns)."""
    t = thresholds
    frames = [
        sql.frame(con, "bench/baseline_gpu_thresholds", {
            "util_below": t.util_below, "util_for_minutes": t.util_for_minutes,
            "memory_above": t.memory_above, "memory_for_minutes": t.memory_for_minutes,
            "temp_above": t.temp_above, "temp_for_minutes": t.temp_for_minutes,
            "max_gap_seconds": t.max_gap_seconds}),
        sql.frame(con, "bench/baseline_any_xid", {"firing_minutes": t.xid_firing_minutes}),
        sql.frame(con, "bench/baseline_no_log", {"silence_minutes": t.silence_minutes}),
        sql.frame(con, "bench/baseline_p99_slo", {"slo_seconds": t.slo_seconds, "for_minutes": t.slo_for_minutes,
                                                   "max_gap_seconds": t.max_gap_seconds}),
        sql.frame(con, "bench/baseline_mfu_low", {"mfu_below": t.mfu_below, "mfu_for_minutes": t.mfu_for_minutes,
                                                  "max_gap_minutes": t.mfu_max_gap_minutes}),
    ]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=list(INCIDENT_COLUMNS))
    alerts = pd.concat(frames, ignore_index=True)
    alerts["ranks"] = [[] for _ in range(len(alerts))]
    alerts["gpus"] = [list(g) if g is not None else [] for g in alerts["gpus"]]
    alerts["incident_id"] = [f"{r.signal}:{r.entity_id}:{r.onset:%Y%m%dT%H%M%S}" for r in alerts.itertuples()]
    return alerts[list(INCIDENT_COLUMNS)]
