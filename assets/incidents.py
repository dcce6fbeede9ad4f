"""The incidents asset: folds the findings into incident records (assets/incident_fold.py says how),
only the (signal, entity) groups that changed (assets/incidents_incremental.py), and stores them."""

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
from assets.incidents_incremental import fold_incrementally
from checks.incident_checks import open_gpu_hours_at_risk
from checks.registry import REGISTRY
from orchestration.storage import sql
from orchestration.storage.warehouse import POOL, WarehouseResource


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
# ... mapped to none of their partitions. The fold reads what changed since its marks (fold_marks), never "every
# hour". With Dagster's default mapping (every partition), each fold recorded its inputs' data versions by
# listing every partition of all nine inputs: an idle fold cost 0.5-0.7 CPU-s at 96 hours and 2.0-2.2 at 16,848
# (BENCHMARKS.md section 48). The lineage edges stay. A backfill therefore does not order the fold after its
# hours: `goodput_service` folds once a backfill is done (orchestration/sensors/service.py).
FOLD_DEPS = [dg.AssetDep(name, partition_mapping=dg.SpecificPartitionsPartitionMapping([])) for name in CHECKED_ASSETS]


@dg.asset(
    deps=FOLD_DEPS,
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
        # only what changed since the last fold is folded, correlated, triaged and stored (issue 15)
        versions = sql.frame(con, "incidents/serving_versions")
        counts = fold_incrementally(con, config.lifecycle(), versions, config.triage_window_seconds)
        summary = sql.frame(con, "incidents_incremental/summary").iloc[0]
        open_ = sql.frame(con, "incidents_incremental/open_incidents")
        recent = sql.frame(con, "incidents_incremental/recent_incidents")
        gpu_hours_open = open_gpu_hours_at_risk(con)   # each correlated group once (sql/views)
    context.log.info(f"{summary['incidents']} incident(s), {summary['open']} open, {summary['escalations']} escalation(s), "
                     f"from {summary['findings']} finding(s) ({counts['groups_folded']} of {summary['groups']} group(s) folded, "
                     f"{counts['incidents_written']} incident(s) written)")
    return dg.MaterializeResult(
        metadata={
            "incidents": int(summary["incidents"]),
            "open": int(summary["open"]),
            "findings": int(summary["findings"]),
            "groups_folded": counts["groups_folded"],
            "groups_kept": int(summary["groups"]) - counts["groups_folded"],
            "incidents_written": counts["incidents_written"],
            "transitions": int(summary["transitions"]),
            "gpu_hours_at_risk_open": gpu_hours_open,
            "open_incidents": dg.MetadataValue.md(incidents_table_md(open_)),
            "recent_incidents": dg.MetadataValue.md(incidents_table_md(recent)),
        }
    )
