"""The Incident page: one incident told whole. Tier and why; onset, opened, resolved in UTC; lineage
(run, hosts, ranks, GPUs, the checkpoint to restart from, model version, endpoint); the evidence with
units; the playbook with the evidence filled in; transitions and deliveries; correlated incidents; and
links to the Dagster check evaluation that flagged it and the runs that evaluated it."""

from __future__ import annotations

from urllib.parse import quote

import checks.signals  # noqa: F401  (registers the signals)
from board import db, fmt
from checks.registry import REGISTRY

INCIDENTS_CHECK = "no_open_sev1_sev2"   # checks/incident_checks.py


def dagster_links(dagster_url: str | None, incident: dict, findings: list[dict]) -> list[tuple[str, str]]:
    """(label, URL) of the Dagster pages behind an incident: its signal's check evaluations, the runs of
    the partitions that flagged it, and the incidents asset's own check."""
    if not dagster_url:
        return []
    base = dagster_url.rstrip("/")
    links = []
    if incident["family"] != "monitor" and incident["signal"] in {s.name for s in REGISTRY}:
        signal = REGISTRY.get(incident["signal"])
        links.append((f"check {signal.name} on {signal.asset} (evaluations, failing ones red)",
                      f"{base}/assets/{signal.asset}?view=checks&checkDetail={signal.name}"))
    for partition in sorted({f["partition_start"].strftime("%Y-%m-%d-%H:00") for f in findings})[-3:]:
        links.append((f"detect run of partition {partition}", f"{base}/runs?q%5B%5D={quote('tag:dagster/partition=' + partition)}"))
    links.append(("the incidents asset and its check", f"{base}/assets/incidents?view=checks&checkDetail={INCIDENTS_CHECK}"))
    run_url = incident.get("dagster_run_url")
    if run_url:
        links.append(("the Dagster run that failed", run_url))
    return links


def context(con, incident_id: str, dagster_url: str | None) -> dict | None:
    incident = db.one(con, "incident", {"incident_id": incident_id})
    if incident is None:
        return None
    params = {"incident_id": incident_id, "correlation_id": incident.get("correlation_id") or ""}
    findings = db.records(con, "findings", params)
    if incident["family"] == "monitor":
        run = con.execute("SELECT any_value(dagster_run_url) FROM monitor_alerts WHERE incident_id = $i",
                          {"i": incident_id}).fetchone()
        incident["dagster_run_url"] = run[0] if run else None
    return {
        "i": incident,
        "evidence": fmt.evidence_rows(incident.get("evidence")),
        "transitions": db.records(con, "transitions", params),
        "deliveries": db.records(con, "deliveries", params),
        "correlated": db.records(con, "correlated", params) if incident.get("correlation_id") else [],
        "findings": findings,
        "dagster_links": dagster_links(dagster_url, incident, findings),
    }
