"""The incident fold: every finding into incident records a person can act on (a pure function).

Lifecycle (all in data time, so a backfill in any partition order gives identical rows and ids):

- open: the first finding of a signal on an entity opens an episode. Findings on the ranks of one
  run group into ONE run-level incident that lists the ranks, not one incident per rank.
- update: later findings extend the episode (last seen, latest evidence, GPU-hours at risk).
- escalate: the tier rises above the signal's default when the GPU-hours burned since onset cross
  configurable thresholds; each escalation is a transition, and the tier's reason is recorded.
- resolve: on evidence that the fault is over. The signal's check records a clearing (table
  `clearings`, checks/episodes.py: steps resumed, the clock is back, the rank rejoined its peers, the
  run released its GPUs) after the episode's last finding, and `resolve_after_windows` clean windows
  have passed since, i.e. that much time after the last finding that the signal has evaluated (the
  `evaluations` table) without flagging the entity. The clearing is the incident's `resolution`;
  clean windows without one leave the incident open (a check that cannot see the entity cannot say
  its fault is over).
- reopen: a finding after the episode ended opens a new incident (next episode, new id) that
  names the episode it reopens.

Incidents on the same run, GPU or host at overlapping times share a correlation id (a straggling
rank and the throttling GPU under it). The fold is a pure function of findings, clearings and
evaluation marks; `fold_group` folds one (signal, entity) group on its own (an incremental fold
picks the groups with new findings or clearings and calls it); the asset (assets/incidents.py)
replaces `incidents` and `incident_transitions` in one transaction.
"""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

import checks.signals  # noqa: F401  (registers the signals)
from assets import triage
from assets.correlation import correlate
from checks.registry import REGISTRY, TIERS, SignalRegistry

INCIDENT_COLUMNS = (
    "incident_id", "signal", "family", "tier", "status", "title", "onset", "opened", "last_seen", "resolved",
    "entity_type", "entity_id", "run_id", "rank", "hosts", "gpus", "endpoint", "model_version", "checkpoint",
    "owner", "playbook", "evidence", "gpu_hours_at_risk", "triage_class", "correlation_id", "findings",
    "default_tier", "tier_reason", "escalated_at", "episode", "previous_incident_id", "ranks", "members",
    "resolution",
)
TRANSITION_COLUMNS = ("incident_id", "seq", "transition", "transition_at", "tier", "reason", "gpu_hours_at_risk")


@dataclass(frozen=True)
class Lifecycle:
    """How findings become incidents: window length, clean windows to resolve, escalation by cost."""

    window_seconds: float = 300.0
    resolve_after_windows: int = 2
    # tier -> GPU-hours at risk from which an incident is at least that tier
    escalate_gpu_hours: Mapping[str, float] = field(default_factory=lambda: {"SEV2": 8.0, "SEV1": 32.0})

    @property
    def gap(self) -> pd.Timedelta:
        return pd.Timedelta(seconds=self.window_seconds * self.resolve_after_windows)


def incident_id(signal: str, entity_id: str, onset: pd.Timestamp) -> str:
    key = f"{signal}|{entity_id}|{pd.Timestamp(onset).isoformat()}"
    return "inc-" + hashlib.sha1(key.encode()).hexdigest()[:16]


def _severity(tier: str) -> int:
    return TIERS.index(tier)   # 0 = SEV1, the most urgent


def incident_entity(finding) -> tuple[str, str]:
    """The entity an incident speaks of: a rank's findings fold into their run's incident."""
    if finding["entity_type"] == "rank" and isinstance(finding["run_id"], str) and finding["run_id"]:
        return "run", finding["run_id"]
    return finding["entity_type"], finding["entity_id"]


def _episodes(group: pd.DataFrame, gap: pd.Timedelta):
    """Split one entity's findings (sorted by detection) where nothing was flagged for longer than `gap`.

    A finding flags [onset, last_seen]: one that says its problem began while the previous ones were
    still flagged (or within `gap` after) continues their episode, however late it was detected (an
    hourly quality window is judged at its newest evidence, an hour after the previous window's)."""
    rows = group.reset_index(drop=True)
    start = 0
    last_seen = rows.loc[0, "last_seen"]
    for i in range(1, len(rows)):
        if rows.loc[i, "onset"] - last_seen > gap:
            yield rows.iloc[start:i]
            start = i
        last_seen = max(last_seen, rows.loc[i, "last_seen"])
    yield rows.iloc[start:]


PARTITION = pd.Timedelta(hours=1)   # orchestration/partitions.py: one partition per UTC hour


def evaluated_spans(evaluations: pd.DataFrame, window_seconds: float,
                    horizon=None) -> dict[str, list[tuple[pd.Timestamp, pd.Timestamp]]]:
    """Per signal, the merged stretches of data time it has evaluated ([partition start, evaluated until]).

    A partition evaluated with nothing to look at (no entity: the run ended) has no `evaluated_until`;
    it counts as evaluated and clean for its whole hour once some signal has evaluated data past its
    end, so an incident at the end of a run still resolves. `horizon`: the latest `evaluated_until` of
    every mark, when `evaluations` holds only some (the incremental fold reads those near its groups)."""
    spans: dict[str, list[tuple[pd.Timestamp, pd.Timestamp]]] = {}
    if evaluations.empty:
        return spans
    slack = pd.Timedelta(seconds=window_seconds)   # a partition evaluated to its last tick abuts the next one
    horizon = evaluations["evaluated_until"].max() if horizon is None else horizon
    marks = evaluations.copy()
    empty = marks["evaluated_until"].isna()
    if pd.notna(horizon):
        past = empty & (marks["partition_start"] + PARTITION <= horizon)
        marks.loc[past, "evaluated_until"] = marks.loc[past, "partition_start"] + PARTITION
    marks = marks.dropna(subset=["evaluated_until"]).sort_values(["signal", "partition_start"])
    for signal, rows in marks.groupby("signal", sort=True):
        merged: list[list[pd.Timestamp]] = []
        for r in rows.itertuples():
            start, end = pd.Timestamp(r.partition_start), pd.Timestamp(r.evaluated_until)
            if merged and start <= merged[-1][1] + slack:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        spans[signal] = [(s, e) for s, e in merged]
    return spans


def _clean_through(spans, since: pd.Timestamp, until: pd.Timestamp) -> bool:
    return any(s <= since and e >= until for s, e in spans)


def _tier_history(default: str, onset, opened, last_seen, gpu_count: int, lifecycle: Lifecycle, signal_name: str):
    """(tier at opening, its reason, [(at, tier, reason)] escalations after opening), all from the cost:
    GPU-hours at risk = GPUs x time since onset, crossing each threshold at a known data time."""
    tier, reason = default, f"{default}: the catalogue's tier for {signal_name} (cost of delay)"
    escalations: list[tuple[pd.Timestamp, str, str]] = []
    if gpu_count <= 0:
        return tier, reason, escalations
    crossings = sorted(
        (onset + pd.Timedelta(hours=threshold / gpu_count), target, float(threshold))
        for target, threshold in lifecycle.escalate_gpu_hours.items()
        if _severity(target) < _severity(default)
    )
    current = default
    for at, target, threshold in crossings:
        if at > last_seen or _severity(target) >= _severity(current):
            continue
        why = (f"{target}: escalated from {current} as GPU-hours at risk reached {threshold:g} "
               f"({gpu_count} GPU(s) since onset {onset:%Y-%m-%d %H:%M:%S}, threshold {threshold:g} GPU-h)")
        current = target
        if at <= opened:
            tier, reason = target, why     # already that costly when first seen: it opens at that tier
        else:
            escalations.append((at, target, why))
    return tier, reason, escalations


def clearing_entity(entity_type: str, entity_id: str) -> tuple[str, str]:
    """The incident entity a clearing speaks of (a rank's clearing belongs to its run's incident)."""
    if entity_type == "rank" and "/rank-" in entity_id:
        return "run", entity_id.rpartition("/rank-")[0]
    return entity_type, entity_id


def fold(findings: pd.DataFrame, evaluations: pd.DataFrame, lifecycle: Lifecycle = Lifecycle(),
         registry: SignalRegistry = REGISTRY, versions: pd.DataFrame | None = None,
         triage_window_seconds: float = triage.WINDOW_SECONDS,
         clearings: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(incidents, transitions) from findings, clearings (the evidence that a fault is over; none
    given: nothing resolves) and evaluation marks (and the endpoints' version history,
    `serving_versions`, for the triage of serving and quality incidents); deterministic in its inputs."""
    incidents, transitions = fold_groups(findings, evaluations, lifecycle, registry, clearings)
    return finish(incidents, lifecycle, versions, triage_window_seconds), transitions


def fold_groups(findings: pd.DataFrame, evaluations: pd.DataFrame, lifecycle: Lifecycle = Lifecycle(),
                registry: SignalRegistry = REGISTRY, clearings: pd.DataFrame | None = None,
                horizon=None, earlier: Mapping | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-(signal, entity) part of the fold: each group's incidents (not yet correlated or
    triaged) and transitions; a group's rows depend on its findings, its clearings and its signal's
    evaluations only (assets/incidents_incremental.py folds only the groups that changed, from the
    first episode a change can reach: `earlier` gives, per group key, the episodes before it)."""
    spans = evaluated_spans(evaluations, lifecycle.window_seconds, horizon)
    incidents, transitions = [], []
    if findings.empty:
        return pd.DataFrame(columns=list(INCIDENT_COLUMNS)), pd.DataFrame(columns=list(TRANSITION_COLUMNS))
    findings = findings.copy()
    keys = [incident_entity(f) for f in findings.to_dict("records")]
    findings["incident_entity_type"] = [k[0] for k in keys]
    findings["incident_entity_id"] = [k[1] for k in keys]
    cleared = _clearings_by_group(clearings)
    for (signal_name, entity_type, entity_id), group in findings.groupby(
            ["signal", "incident_entity_type", "incident_entity_id"], sort=True):
        inc, trans = fold_group(registry.get(signal_name), entity_type, entity_id, group,
                                spans.get(signal_name, []), cleared.get((signal_name, entity_type, entity_id)), lifecycle,
                                (earlier or {}).get((signal_name, entity_type, entity_id)))
        incidents.extend(inc)
        transitions.extend(trans)
    return pd.DataFrame(incidents, columns=list(INCIDENT_COLUMNS)), pd.DataFrame(transitions, columns=list(TRANSITION_COLUMNS))


def finish(incidents: pd.DataFrame, lifecycle: Lifecycle, versions: pd.DataFrame | None = None,
           triage_window_seconds: float = triage.WINDOW_SECONDS, correlation=None) -> pd.DataFrame:
    """Correlate every group's incidents, then triage the serving and quality ones (both need them all)."""
    if incidents.empty:
        return incidents
    out = incidents.copy()
    out["correlation_id"] = (correlation or correlate)(out, lifecycle.gap)
    # after correlating: the version's training run must not tie a serving incident to that run's own
    return triage.apply(out, versions, triage_window_seconds)


def _clearings_by_group(clearings: pd.DataFrame | None) -> dict[tuple[str, str, str], pd.DataFrame]:
    if clearings is None or clearings.empty:
        return {}
    c = clearings.copy()
    keys = [clearing_entity(t, str(e)) for t, e in zip(c["entity_type"], c["entity_id"])]
    c["incident_entity_type"] = [k[0] for k in keys]
    c["incident_entity_id"] = [k[1] for k in keys]
    c = c.sort_values(["cleared_at", "entity_id", "partition_start"], kind="stable")
    return {k: g for k, g in c.groupby(["signal", "incident_entity_type", "incident_entity_id"], sort=True)}


ORDER = ["detected_at", "partition_start", "entity_id", "onset"]


def fold_group(signal, entity_type: str, entity_id: str, group: pd.DataFrame, spans, clearings: pd.DataFrame | None,
               lifecycle: Lifecycle = Lifecycle(), earlier=None) -> tuple[list[dict], list[dict]]:
    """The incidents and transitions of one (signal, entity) group: a pure function of the group's
    findings, its clearings and the signal's evaluated spans (`evaluated_spans(...)[signal]`).
    `earlier`: [(members, episode number, incident id)] of the group's episodes before these findings
    (a fold from a later episode on; the findings then start a new episode)."""
    incidents, transitions, earlier = [], [], list(earlier or [])
    for episode in _episodes(group.sort_values(ORDER, kind="stable"), lifecycle.gap):
        # an episode reopens the latest earlier one of the same members (ranks of a run): another
        # rank straggling later in the run is a new problem, episode 1, not a reopening
        members = set(episode["entity_id"])
        before = next((e for e in reversed(earlier) if e[0] & members), None)
        number, previous = (before[1] + 1, before[2]) if before else (1, None)
        last_seen = episode["last_seen"].max()
        clearing = None
        if clearings is not None and not clearings.empty:
            after = clearings[clearings["cleared_at"] >= last_seen]
            clearing = after.iloc[0] if not after.empty else None
        inc, trans = _incident(signal, entity_type, entity_id, episode, number, previous, spans, lifecycle, clearing)
        incidents.append(inc)
        transitions.extend(trans)
        earlier.append((members, number, inc["incident_id"]))
    return incidents, transitions


def _resolution(clearing) -> str:
    """The clearing evidence as one line: when the fault was seen over, and what showed it."""
    facts = clearing["evidence"]
    facts = json.loads(facts) if isinstance(facts, str) else dict(facts or {})
    why = facts.pop("why", "no longer flagged")
    shown = "; ".join(f"{k} {v}" for k, v in sorted(facts.items()) if v is not None)
    return (f"cleared at {pd.Timestamp(clearing['cleared_at']):%Y-%m-%d %H:%M:%S} on {clearing['entity_id']}: {why}"
            + (f" ({shown})" if shown else ""))


def _incident(signal, entity_type, entity_id, episode: pd.DataFrame, number: int, previous, spans, lifecycle: Lifecycle,
              clearing=None):
    gap = lifecycle.gap
    onset = episode["onset"].min()
    opened = episode["detected_at"].min()
    last_seen = episode["last_seen"].max()
    latest = episode.iloc[-1]
    gpus = sorted(set().union(*[g for g in episode["gpus"] if g is not None]))
    hosts = sorted(set().union(*[h for h in episode["hosts"] if h is not None]))
    ranks = sorted({int(r) for r in episode["rank"] if pd.notna(r)})
    members = sorted(set(episode["entity_id"]))
    grouped = entity_type == "run" and (episode["entity_type"] == "rank").any()
    evidence = json.loads(latest["evidence"]) if isinstance(latest["evidence"], str) else dict(latest["evidence"] or {})
    evidence["value_max"] = float(episode["value"].max())
    if grouped:
        evidence["ranks"] = ranks
    # a resolution needs both: evidence that the fault is over, and clean evaluated windows after it
    resolved = clearing is not None and _clean_through(spans, last_seen, last_seen + gap)
    resolved_at = max(last_seen + gap, pd.Timestamp(clearing["cleared_at"])) if resolved else pd.NaT
    resolution = _resolution(clearing) if resolved else None
    # a rank's fault stalls its whole synchronous run: the cost counts every GPU of the run (the check
    # records how many it saw, `run_gpus`), so escalation by cost can fire for a straggler on a large run
    run_gpus = [int(_evidence(e).get("run_gpus") or 0) for e in episode["evidence"]] if grouped else []
    at_risk = max([len(gpus), *run_gpus])
    if at_risk > len(gpus):
        evidence["gpus_at_risk"] = at_risk
    gpu_hours = at_risk * (last_seen - onset).total_seconds() / 3600
    checkpoint = episode["checkpoint"].dropna().iloc[0] if episode["checkpoint"].notna().any() else None
    iid = incident_id(signal.name, entity_id, onset)
    opened_tier, opened_reason, escalations = _tier_history(signal.tier, onset, opened, last_seen, at_risk, lifecycle,
                                                            signal.name)
    final_tier, final_reason = (escalations[-1][1], escalations[-1][2]) if escalations else (opened_tier, opened_reason)
    run_id = latest["run_id"] if isinstance(latest["run_id"], str) else None
    lineage = {c: _latest(episode, c) for c in ("endpoint", "model_version", "triage_class")}
    what = f"{entity_type} {entity_id}"
    if grouped:
        what += f" ({len(ranks)} rank{'s' if len(ranks) != 1 else ''}: {_ranks_text(ranks)})"
    facts = {
        **evidence,
        "run_id": run_id, "entity_id": entity_id, "ranks": _ranks_text(ranks) or "none",
        "hosts": ", ".join(hosts), "gpus": ", ".join(gpus), "gpu_count": len(gpus),
        "checkpoint": checkpoint or "none that passed its audit", "gpu_hours": round(gpu_hours, 2), "tier": final_tier,
        "episode": number, **{k: v or "none recorded" for k, v in lineage.items()},
    }
    record = {
        "incident_id": iid, "signal": signal.name, "family": signal.family, "tier": final_tier,
        "status": "resolved" if resolved else "open", "title": f"{signal.title}: {what}",
        "onset": onset, "opened": opened, "last_seen": last_seen, "resolved": resolved_at,
        "entity_type": entity_type, "entity_id": entity_id, "run_id": run_id,
        "rank": ranks[0] if len(ranks) == 1 else None, "hosts": hosts, "gpus": gpus,
        "endpoint": lineage["endpoint"], "model_version": lineage["model_version"], "checkpoint": checkpoint,
        "owner": signal.owner,
        "playbook": signal.playbook.render(facts) + f"\nOwner team: {signal.owner}",
        "evidence": json.dumps(evidence, sort_keys=True, default=str),
        "gpu_hours_at_risk": round(gpu_hours, 3), "triage_class": lineage["triage_class"], "correlation_id": None,
        "findings": len(episode), "default_tier": signal.tier, "tier_reason": final_reason,
        "escalated_at": escalations[-1][0] if escalations else pd.NaT, "episode": number,
        "previous_incident_id": previous, "ranks": ranks, "members": members, "resolution": resolution,
    }

    def cost_at(at):
        return round(at_risk * (at - onset).total_seconds() / 3600, 3)

    trans = [(iid, 0, "opened", opened, opened_tier, opened_reason, cost_at(opened))]
    for at, target, why in escalations:
        trans.append((iid, len(trans), "escalated", at, target, why, cost_at(at)))
    if resolved:
        trans.append((iid, len(trans), "resolved", resolved_at, final_tier,
                      f"{resolution}; no finding in {lifecycle.resolve_after_windows} clean evaluated window(s) "
                      f"after {last_seen:%Y-%m-%d %H:%M:%S}", cost_at(last_seen)))
    return record, [dict(zip(TRANSITION_COLUMNS, t)) for t in trans]


def _evidence(value) -> dict:
    return json.loads(value) if isinstance(value, str) else dict(value or {})


def _latest(episode: pd.DataFrame, column: str) -> str | None:
    """The episode's latest non-null value of a lineage column (older findings may lack it)."""
    if column not in episode.columns:
        return None
    known = episode[column].dropna()
    return str(known.iloc[-1]) if not known.empty else None


def _ranks_text(ranks: list[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:16])
    return shown + (f", … (+{len(ranks) - 16})" if len(ranks) > 16 else "")


def incidents_table_md(incidents: pd.DataFrame, limit: int = 20) -> str:
    if incidents.empty:
        return "No incidents."
    lines = ["| tier | status | incident | entity | onset | last seen | GPU-hours | owner |", "|---|---|---|---|---|---|---|---|"]
    ordered = incidents.sort_values(["status", "tier", "opened"], ascending=[False, True, True]).head(limit)
    for r in ordered.itertuples():
        lines.append(f"| {r.tier} | {r.status} | {r.title} | {r.entity_id} | {r.onset} | {r.last_seen} "
                     f"| {r.gpu_hours_at_risk:.2f} | {r.owner} |")
    return "\n".join(lines)
