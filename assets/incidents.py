"""The incidents asset: folds every finding into incident records a person can act on.

Findings of one signal on one entity belong to one incident while they keep coming; a gap of
more than `resolve_after_seconds` of clean, evaluated time ends the episode, and a later finding
opens a new incident. The fold is a pure function of the findings and evaluation marks, so a
re-run or a backfill reproduces the same incidents with the same ids.
"""

import hashlib
import json

import dagster as dg
import pandas as pd

import checks.signals  # noqa: F401  (registers the signals)
from checks.registry import REGISTRY
from orchestration import sql
from orchestration.warehouse import POOL, WarehouseResource, transaction

INCIDENT_COLUMNS = (
    "incident_id", "signal", "family", "tier", "status", "title", "onset", "opened", "last_seen", "resolved",
    "entity_type", "entity_id", "run_id", "rank", "hosts", "gpus", "endpoint", "model_version", "checkpoint",
    "owner", "playbook", "evidence", "gpu_hours_at_risk", "triage_class", "correlation_id", "findings",
)


def incident_id(signal: str, entity_id: str, onset: pd.Timestamp) -> str:
    key = f"{signal}|{entity_id}|{pd.Timestamp(onset).isoformat()}"
    return "inc-" + hashlib.sha1(key.encode()).hexdigest()[:16]


def _episodes(group: pd.DataFrame, gap: pd.Timedelta):
    start = 0
    rows = group.reset_index(drop=True)
    last_seen = rows.loc[0, "last_seen"]
    for i in range(1, len(rows)):
        if rows.loc[i, "detected_at"] - last_seen > gap:
            yield rows.iloc[start:i]
            start = i
        last_seen = max(last_seen, rows.loc[i, "last_seen"])
    yield rows.iloc[start:]


def fold(findings: pd.DataFrame, watermarks: dict[str, pd.Timestamp], resolve_after_seconds: float) -> pd.DataFrame:
    """Incident records from findings (sorted by signal, entity, detected_at)."""
    gap = pd.Timedelta(seconds=resolve_after_seconds)
    out = []
    for (signal_name, entity_id), group in findings.groupby(["signal", "entity_id"], sort=True):
        signal = REGISTRY.get(signal_name)
        for episode in _episodes(group.sort_values(["detected_at", "partition_start"]), gap):
            onset = episode["onset"].min()
            last_seen = episode["last_seen"].max()
            latest = episode.iloc[-1]
            gpus = sorted(set().union(*episode["gpus"]))
            hosts = sorted(set().union(*episode["hosts"]))
            evidence = json.loads(latest["evidence"]) if isinstance(latest["evidence"], str) else dict(latest["evidence"] or {})
            evidence["value_max"] = float(episode["value"].max())
            watermark = watermarks.get(signal_name)
            resolved = watermark is not None and pd.notna(watermark) and watermark >= last_seen + gap
            gpu_hours = len(gpus) * (last_seen - onset).total_seconds() / 3600
            checkpoint = episode["checkpoint"].dropna().iloc[0] if episode["checkpoint"].notna().any() else None
            facts = {
                **evidence,
                "run_id": latest["run_id"], "entity_id": entity_id,
                "hosts": ", ".join(hosts), "gpus": ", ".join(gpus), "gpu_count": len(gpus),
                "checkpoint": checkpoint or "none recorded", "gpu_hours": round(gpu_hours, 2),
            }
            out.append({
                "incident_id": incident_id(signal_name, entity_id, onset),
                "signal": signal_name,
                "family": signal.family,
                "tier": signal.tier,
                "status": "resolved" if resolved else "open",
                "title": f"{signal.title}: {signal.entity} {entity_id}",
                "onset": onset,
                "opened": episode["detected_at"].min(),
                "last_seen": last_seen,
                "resolved": last_seen + gap if resolved else pd.NaT,
                "entity_type": signal.entity,
                "entity_id": entity_id,
                "run_id": latest["run_id"],
                "rank": None if pd.isna(latest["rank"]) else int(latest["rank"]),
                "hosts": hosts,
                "gpus": gpus,
                "endpoint": None,
                "model_version": None,
                "checkpoint": checkpoint,
                "owner": signal.owner,
                "playbook": signal.playbook.render(facts),
                "evidence": json.dumps(evidence, sort_keys=True, default=str),
                "gpu_hours_at_risk": round(gpu_hours, 3),
                "triage_class": None,
                "correlation_id": None,
                "findings": len(episode),
            })
    return pd.DataFrame(out, columns=list(INCIDENT_COLUMNS))


def incidents_table_md(incidents: pd.DataFrame, limit: int = 20) -> str:
    if incidents.empty:
        return "No incidents."
    lines = ["| tier | status | incident | entity | onset | last seen | GPU-hours | owner |", "|---|---|---|---|---|---|---|---|"]
    ordered = incidents.sort_values(["status", "tier", "opened"], ascending=[False, True, True]).head(limit)
    for r in ordered.itertuples():
        lines.append(f"| {r.tier} | {r.status} | {r.title} | {r.entity_id} | {r.onset} | {r.last_seen} "
                     f"| {r.gpu_hours_at_risk:.2f} | {r.owner} |")
    return "\n".join(lines)


class IncidentsConfig(dg.Config):
    resolve_after_seconds: float = 600.0
    """Clean, evaluated time after the last finding before an incident is resolved."""


@dg.asset(
    deps=["training_steps", "gpu_samples", "lineage_events"],
    group_name="incidents",
    kinds={"duckdb"},
    pool=POOL,
)
def incidents(context: dg.AssetExecutionContext, config: IncidentsConfig, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Severity-tiered incident records folded from every finding: lifecycle (open/resolved), owner,
    playbook with the evidence filled in, lineage (run, hosts, GPUs, last checkpoint) and the
    GPU-hours burned since onset. Re-running reproduces the same incidents with the same ids."""
    with warehouse.connect() as con:
        findings = sql.frame(con, "incidents/findings")
        watermarks = dict(sql.run(con, "incidents/watermarks").fetchall())
        folded = fold(findings, {k: pd.Timestamp(v) for k, v in watermarks.items()}, config.resolve_after_seconds)
        with transaction(con, new_incidents=folded):
            sql.run(con, "incidents/replace")
    open_ = folded[folded["status"] == "open"]
    context.log.info(f"{len(folded)} incident(s), {len(open_)} open, from {len(findings)} finding(s)")
    return dg.MaterializeResult(
        metadata={
            "incidents": len(folded),
            "open": len(open_),
            "findings": len(findings),
            "gpu_hours_at_risk_open": float(open_["gpu_hours_at_risk"].sum()) if not open_.empty else 0.0,
            "open_incidents": dg.MetadataValue.md(incidents_table_md(open_)),
            "recent_incidents": dg.MetadataValue.md(incidents_table_md(folded)),
        }
    )
