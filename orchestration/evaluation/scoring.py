"""Scores incidents against a ground-truth file of injected faults.

A fault is detected when an incident of a signal meant for its type (`Signal.fault_types`) names
the same entity (or a part of it: a rank or GPU of the faulty run) and overlaps the fault's time
span, give or take `tolerance_seconds`. Detection delay is the incident's `opened` (the data time
at which the evidence first crossed the threshold) minus the fault's onset. An incident that
matches no fault is a false alarm, counted under its signal's fault types. Coverage is the share
of a fault's span [onset, end) during which an incident that caught it was open: from the incident's
onset until it resolved (still open: to the end of the fault), the union over its incidents. 1.0
means one open incident from onset to end; a fault resolved while it lasted, or caught late, scores less.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

import checks.signals  # noqa: F401  (registers the signals)
from checks.registry import REGISTRY
from orchestration.storage import sql
from orchestration.storage.warehouse import warehouse_for

# Fault shapes an operator should NOT be paged for: what they should see instead. They have no signal;
# an incident on their entity during them that matches no other fault is a false alarm they caused.
EXPECTED_QUIET = {
    "preemption": "no incident: the scheduler's own decision (run_ended preempted; a requeue resumes it)",
    "clock_skew": "no incident: a host's clock off by seconds must not read as a straggler or a silence",
    "telemetry_gap": "no incident: the GPUs without samples are 'not judged' (judgements), not healthy",
}

SCORE_COLUMNS = ("fault_type", "injected", "detected", "missed", "incidents", "false_alarms",
                 "precision", "recall", "delay_median_s", "delay_p95_s", "coverage_mean", "coverage_min")


def opened_incidents(home: Path) -> tuple[pd.DataFrame, dict[str, int]]:
    """Every incident's `opened` transition in `home`'s warehouse (what is scored), and the ingested row counts."""
    with warehouse_for(home).connect(read_only=True, wait_seconds=30) as con:
        incidents = sql.frame(con, "alerts/transitions")
        incidents = incidents[incidents["transition"] == "opened"]
        counts = dict(sql.run(con, "ingest/row_counts").fetchall())
    return incidents, counts


def load_truth(path: Path) -> pd.DataFrame:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    truth = pd.DataFrame(rows, columns=["type", "entity", "onset", "end", "magnitude"])
    for col in ("onset", "end"):
        truth[col] = pd.to_datetime(truth[col], utc=True).dt.tz_localize(None)
    return truth


def _entity_matches(incident: pd.Series, entity: str) -> bool:
    """Whether an incident speaks of the fault's entity: the same one, or the run, rank or GPU of it.

    run:R     an incident on R, or on any rank or GPU of R (its run_id is R);
    rank:R/rank-N   an incident on that rank, or a run-level incident of R naming rank N or no rank;
    gpu:H:G   an incident on that GPU, or on the rank running on it (its gpus list it).
    """
    kind, _, name = entity.partition(":")
    if incident["entity_type"] == kind and incident["entity_id"] == name:
        return True
    if kind == "run":
        return incident["run_id"] == name
    if kind == "rank":
        run, _, rank = name.rpartition("/rank-")
        if incident["run_id"] != run or incident["entity_type"] != "run":
            return False
        # a run-level incident naming its ranks must name this one; one naming none (the whole run
        # stuck, as when a rank dies and its peers spin) speaks of every rank
        ranks = incident.get("ranks")
        named = [int(r) for r in ranks] if ranks is not None and len(ranks) else []
        return not named or int(rank) in named
    if kind == "gpu":
        gpus = incident.get("gpus")
        return gpus is not None and name in list(gpus)
    if kind == "host":   # a host-wide fault: an incident naming one of the host's GPUs (or the host)
        gpus, hosts = incident.get("gpus"), incident.get("hosts")
        return (gpus is not None and any(str(g).startswith(f"{name}:") for g in gpus)) or (
            hosts is not None and name in list(hosts))
    return False


def match(truth: pd.DataFrame, incidents: pd.DataFrame, tolerance_seconds: float = 600.0,
          registry=REGISTRY) -> pd.DataFrame:
    """One row per fault: the incidents that caught it, and the delay of the first.

    `registry` maps fault types to signals (`for_fault`, iteration); the benchmark passes the
    baseline rules' own (bench/baseline.py) to score generic threshold alerts the same way.
    """
    tol = pd.Timedelta(seconds=tolerance_seconds)
    rows = []
    for fault in truth.itertuples():
        signals = {s.name for s in registry.for_fault(fault.type)}
        hits = incidents[
            incidents["signal"].isin(signals)
            & (incidents["onset"] <= fault.end + tol)
            & (incidents["last_seen"] >= fault.onset - tol)
        ]
        if not hits.empty:
            hits = hits[[_entity_matches(inc, fault.entity) for _, inc in hits.iterrows()]]
        first = hits["opened"].min() if not hits.empty else pd.NaT
        rows.append({
            "type": fault.type, "entity": fault.entity, "onset": fault.onset, "end": fault.end,
            "incident_ids": sorted(hits["incident_id"]), "detected": not hits.empty,
            "delay_s": (first - fault.onset).total_seconds() if not hits.empty else np.nan,
        })
    return pd.DataFrame(rows, columns=["type", "entity", "onset", "end", "incident_ids", "detected", "delay_s"])


def _covered(fault, incidents: pd.DataFrame) -> float:
    """The share of the fault's span during which one of `incidents` was open (onset to resolved)."""
    start, end = fault.onset, fault.end
    if end <= start:
        return 1.0 if not incidents.empty else 0.0
    resolved = incidents["resolved"] if "resolved" in incidents.columns else pd.Series(pd.NaT, index=incidents.index)
    spans = sorted((max(start, pd.Timestamp(o)), min(end, pd.Timestamp(r) if pd.notna(r) else end))
                   for o, r in zip(incidents["onset"], resolved))
    total, reach = pd.Timedelta(0), start
    for s, e in spans:
        s = max(s, reach)
        if e > s:
            total += e - s
            reach = e
    return total / (end - start)


def coverage(truth: pd.DataFrame, incidents: pd.DataFrame, tolerance_seconds: float = 600.0,
             registry=REGISTRY) -> pd.DataFrame:
    """One row per fault: the share of its span covered by an open incident that caught it (0 if missed)."""
    matched = match(truth, incidents, tolerance_seconds, registry)
    by_id = incidents.set_index("incident_id") if not incidents.empty else incidents
    rows = []
    for fault in matched.itertuples():
        mine = by_id.loc[list(fault.incident_ids)] if fault.incident_ids else by_id.iloc[0:0]
        rows.append({"type": fault.type, "entity": fault.entity, "onset": fault.onset, "end": fault.end,
                     "coverage": _covered(fault, mine) if len(mine) else 0.0, "incidents": len(mine)})
    return pd.DataFrame(rows, columns=["type", "entity", "onset", "end", "coverage", "incidents"])


def score(truth: pd.DataFrame, incidents: pd.DataFrame, tolerance_seconds: float = 600.0,
          registry=REGISTRY) -> pd.DataFrame:
    """Per fault type: injected, detected, missed, incidents, false alarms, precision, recall, delay."""
    matched = match(truth, incidents, tolerance_seconds, registry)
    covered = coverage(truth, incidents, tolerance_seconds, registry)
    true_ids = set().union(*matched["incident_ids"]) if not matched.empty else set()
    types = sorted(set(truth["type"]) | {t for s in registry for t in s.fault_types if s.name in set(incidents["signal"])})
    rows = []
    for fault_type in types:
        faults = matched[matched["type"] == fault_type]
        signals = {s.name for s in registry.for_fault(fault_type)}
        mine = incidents[incidents["signal"].isin(signals)]
        false_alarms = int((~mine["incident_id"].isin(true_ids)).sum())
        delays = faults["delay_s"].dropna()
        detected = int(faults["detected"].sum())
        rows.append({
            "fault_type": fault_type,
            "injected": len(faults),
            "detected": detected,
            "missed": len(faults) - detected,
            "incidents": len(mine),
            "false_alarms": false_alarms,
            "precision": (len(mine) - false_alarms) / len(mine) if len(mine) else np.nan,
            "recall": detected / len(faults) if len(faults) else np.nan,
            "delay_median_s": float(delays.median()) if not delays.empty else np.nan,
            "delay_p95_s": float(delays.quantile(0.95)) if not delays.empty else np.nan,
            "coverage_mean": float(covered.loc[covered["type"] == fault_type, "coverage"].mean()) if len(faults) else np.nan,
            "coverage_min": float(covered.loc[covered["type"] == fault_type, "coverage"].min()) if len(faults) else np.nan,
        })
    for i, row in enumerate(rows):
        if row["fault_type"] in EXPECTED_QUIET:
            rows[i] = {**row, **_quiet_row(truth[truth["type"] == row["fault_type"]], incidents, true_ids,
                                           pd.Timedelta(seconds=tolerance_seconds))}
    table = pd.DataFrame(rows, columns=list(SCORE_COLUMNS))
    # a type nobody injected is worth a row only when it raised false alarms
    return table[(table["injected"] > 0) | (table["false_alarms"] > 0)].reset_index(drop=True)


def _quiet_row(faults: pd.DataFrame, incidents: pd.DataFrame, true_ids: set, tol: pd.Timedelta) -> dict:
    """An expected-quiet type's scores: nothing to detect (recall, precision, delays n/a); its false
    alarms are the incidents on its entity during it (give or take the tolerance) that match no fault."""
    loose = incidents[~incidents["incident_id"].isin(true_ids)] if not incidents.empty else incidents
    caused = set()
    for fault in faults.itertuples():
        near = loose[(loose["onset"] <= fault.end + tol) & (loose["last_seen"] >= fault.onset - tol)] if len(loose) else loose
        caused |= {inc["incident_id"] for _, inc in near.iterrows() if _entity_matches(inc, fault.entity)}
    return {"detected": 0, "missed": 0, "incidents": len(caused), "false_alarms": len(caused),
            "precision": np.nan, "recall": np.nan, "delay_median_s": np.nan, "delay_p95_s": np.nan,
            "coverage_mean": np.nan, "coverage_min": np.nan}
