"""The incidents asset: folds the findings into incident records (assets/incident_fold.py says how),
only the (signal, entity) groups that changed (assets/incidents_incremental.py), and stores them."""

from pathlib import Path

import dagster as dg

from assets import triage
from assets.incident_fold import (  # noqa: F401  (the fold's names, re-exported for callers of this module)
    INCIDENT_COLUMNS,
    TRANSITION_COLUMNS,
    Lifecycle,
    clearing_entity,
    evaluated_spans,
    finish,
    fold,
    fold_group,
    fold_groups,
    incident_entity,
    incident_id,
    incidents_table_md,
)
from assets.incidents_incremental import fold_incrementally, store
from checks.incident_checks import open_gpu_hours_at_risk
from checks.registry import REGISTRY
from orchestration import sql
from orchestration.sinks import AlertJournal, journal_path, mirror_journal
from orchestration.warehouse import POOL, WarehouseResource


class IncidentsConfig(dg.Config):
    window_seconds: float = 300.0
    """Length of one evaluation window: the unit in which clean windows after the last finding are counted."""
    resolve_after_windows: int = 2
    """Clean, evaluated windows after the last finding before an incident is resolved."""
    escalate_to_sev2_gpu_hours: float = 8.0
    """GPU-hours at risk from which an incident is at least SEV2."""
    escalate_to_sev1_gpu_hours: float = 32.0
    """GPU-hours at risk from which an incident is at least SEV1."""
    triage_window_seconds: float = triage.WINDOW_SECONDS
    """A serving or quality incident whose onset is at most this long after a promotion of its
    endpoint is a candidate regression after that promotion (assets/triage.py)."""

    def lifecycle(self) -> Lifecycle:
        return Lifecycle(self.window_seconds, self.resolve_after_windows,
                         {"SEV2": self.escalate_to_sev2_gpu_hours, "SEV1": self.escalate_to_sev1_gpu_hours})


# the lineage shows what the incidents come from: every asset a signal's check runs on, and the ingest
CHECKED_ASSETS = sorted({"training_steps", "gpu_samples", "lineage_events"} | {signal.asset for signal in REGISTRY})


@dg.asset(
    deps=CHECKED_ASSETS,
    group_name="incidents",
    kinds={"duckdb"},
    pool=POOL,
)
def incidents(context: dg.AssetExecutionContext, config: IncidentsConfig, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Severity-tiered incident records folded from every finding: lifecycle (open, escalated,
    resolved, reopened as a new episode), tier and why, owner, playbook with the evidence filled in,
    lineage (run, ranks, hosts, GPUs, last checkpoint), GPU-hours burned since onset and a
    correlation id. Re-running reproduces the same incidents with the same ids."""
    with warehouse.connect() as con:
        # only the (signal, entity) groups whose findings, clearings or resolution changed are folded (issue 15)
        versions = sql.frame(con, "incidents/serving_versions")
        folded, transitions, counts = fold_incrementally(con, config.lifecycle(), versions, config.triage_window_seconds)
        store(con, folded, transitions, counts.pop("_state"))
        # the fold holds the write lock anyway: log delivery attempts a sensor could not mirror
        mirrored = mirror_journal(con, AlertJournal(journal_path(Path(warehouse.path).parent)))
        gpu_hours_open = open_gpu_hours_at_risk(con)   # each correlated group once (sql/views)
    open_ = folded[folded["status"] == "open"]
    escalated = int((transitions["transition"] == "escalated").sum()) if not transitions.empty else 0
    context.log.info(f"{len(folded)} incident(s), {len(open_)} open, {escalated} escalation(s), from {counts['findings']} finding(s)"
                     f" ({counts['groups_folded']} of {counts['groups']} group(s) folded)")
    return dg.MaterializeResult(
        metadata={
            "incidents": len(folded),
            "open": len(open_),
            "findings": counts["findings"],
            "groups_folded": counts["groups_folded"],
            "groups_kept": counts["groups_kept"],
            "transitions": len(transitions),
            "alert_attempts_logged": mirrored,
            "gpu_hours_at_risk_open": gpu_hours_open,
            "open_incidents": dg.MetadataValue.md(incidents_table_md(open_)),
            "recent_incidents": dg.MetadataValue.md(incidents_table_md(folded)),
        }
    )
