"""Triage of serving and quality incidents: which version, from which run and checkpoint, and why.

Called by the incidents fold (assets/incidents.py) on the folded incidents, with the version
history of every endpoint (the `serving_versions` view). For each incident of the serving or
quality family it

- fills the lineage: the model version's training run and checkpoint (`run_id`, `checkpoint`,
  where the finding did not name them), from the version's model_version_registered event;
- sets a triage class, unless the detector already set one (then it is kept), by the first rule
  that holds (docs/signals.md, "Triage of serving and quality incidents"):

  1. infrastructure: a GPU-family incident on the endpoint's host, on a GPU no training run holds,
     overlaps the incident (onset - `slack` .. last seen); or the incident is a capacity signal
     (queue growth, batch saturation: the serving layer itself); or it is a latency signal and a
     capacity incident on the same endpoint overlaps it (the queue explains the wait);
  2. regression_after_promotion: the endpoint was promoted to a new version at most `window`
     before the onset (or up to `slack` after it: minute buckets) and the version it replaced had
     no incident of the same signal on that endpoint. The onset is the data's: when the
     incident's own version was promoted inside its evidence window (an hourly quality window
     starts at the hour, a promotion at :30), its data begins at the promotion (`data_onset`);
     undetermined: promoted within the window, but the replaced version had the same incident
     (the problem predates the promotion);
  3. infrastructure: an error-rate incident whose window holds a server restart (counter reset)
     with no promotion to explain it;
  4. drift_on_stable_version: no promotion within the window: the version did not change, what
     it serves did.

and records the reason in the evidence (`triage_reason`, `lineage`) and under the playbook.
Pure in its inputs, so the fold stays deterministic.
"""

from __future__ import annotations

import json

import pandas as pd

FAMILIES = ("serving", "quality")
CAPACITY_SIGNALS = frozenset({"serving_queue_growth", "serving_batch_saturation"})
LATENCY_SIGNALS = frozenset({"serving_latency_regression", "serving_latency_slo_breach"})
ERROR_SIGNALS = frozenset({"serving_error_rate"})
WINDOW_SECONDS = 2 * 3600.0     # a promotion explains an onset up to 2 hours later
SLACK = pd.Timedelta(minutes=5)  # minute buckets and rolling windows put onsets a few minutes early

CLASSES = ("regression_after_promotion", "drift_on_stable_version", "infrastructure", "undetermined")
VERSION_COLUMNS = ("endpoint", "model_version", "served_from", "served_until", "promoted_at", "previous_version",
                   "run_id", "checkpoint_step", "checkpoint_path", "registered_at")


def apply(incidents: pd.DataFrame, versions: pd.DataFrame | None, window_seconds: float = WINDOW_SECONDS,
          context: list[dict] | None = None) -> pd.DataFrame:
    """`incidents` with lineage and triage filled for its serving and quality incidents. `context`:
    the incidents (before triage, in the fold's order) their rules look at, when not `incidents`
    itself (the incremental fold triages a few against every incident they can reach)."""
    if incidents.empty:
        return incidents
    versions = pd.DataFrame(columns=list(VERSION_COLUMNS)) if versions is None else versions
    out = incidents.copy()
    rows = out.to_dict("records")
    others = rows if context is None else context
    window = pd.Timedelta(seconds=window_seconds)
    for i, inc in enumerate(rows):
        if inc["family"] not in FAMILIES:
            continue
        lineage = version_lineage(versions, inc["endpoint"], inc["model_version"], inc["onset"])
        if lineage is not None:
            if not _known(inc["run_id"]):
                out.at[out.index[i], "run_id"] = _text(lineage["run_id"])
            if not _known(inc["checkpoint"]):
                out.at[out.index[i], "checkpoint"] = _text(lineage["checkpoint_path"])
        if _known(inc["triage_class"]):
            triage, reason = inc["triage_class"], "set by the detector"
        else:
            triage, reason = classify(inc, others, versions, window)
        out.at[out.index[i], "triage_class"] = triage
        lineage_text = _lineage_text(inc, lineage)
        evidence = json.loads(inc["evidence"]) if isinstance(inc["evidence"], str) else dict(inc["evidence"] or {})
        evidence.update({"triage_class": triage, "triage_reason": reason, "lineage": lineage_text})
        out.at[out.index[i], "evidence"] = json.dumps(evidence, sort_keys=True, default=str)
        out.at[out.index[i], "playbook"] = f"{inc['playbook']}\nTriage: {triage}: {reason}\nLineage: {lineage_text}"
    return out


def classify(inc: dict, incidents: list[dict], versions: pd.DataFrame, window: pd.Timedelta) -> tuple[str, str]:
    """(triage class, reason) of one serving or quality incident, by the rules in the module docstring."""
    onset, endpoint = inc["onset"], inc["endpoint"] or inc["entity_id"]
    hosts = set(inc["hosts"] if inc["hosts"] is not None else [])
    for other in incidents:
        if (other["family"] == "gpu" and not _known(other["run_id"]) and hosts & set(other["hosts"] or [])
                and _overlaps(other, inc)):
            return "infrastructure", (f"GPU incident {other['incident_id']} ({other['signal']} on "
                                      f"{', '.join(other['gpus'] or other['hosts'])}, no training run on it) "
                                      f"overlaps it on the endpoint's host")
    if inc["signal"] in CAPACITY_SIGNALS:
        return "infrastructure", f"{inc['signal']} is the serving layer's capacity, not the model"
    if inc["signal"] in LATENCY_SIGNALS:
        for other in incidents:
            if (other["signal"] in CAPACITY_SIGNALS and (other["endpoint"] or other["entity_id"]) == endpoint
                    and _overlaps(other, inc)):
                return "infrastructure", (f"capacity incident {other['incident_id']} ({other['signal']}) on {endpoint} "
                                          f"overlaps it: the requests wait in the serving layer")
    onset, moved = data_onset(inc, versions, endpoint)
    promotion = last_promotion(versions, endpoint, onset, window)
    if promotion is not None:
        before = pd.Timestamp(onset) - pd.Timestamp(promotion["promoted_at"])
        when = (f"{endpoint} was promoted to {promotion['model_version']} at {promotion['promoted_at']}, "
                f"{_minutes(before)} before the onset" + (f" ({moved})" if moved else ""))
        previous = _text(promotion["previous_version"])
        earlier = [o for o in incidents
                   if previous is not None and o["signal"] == inc["signal"] and o["model_version"] == previous
                   and (o["endpoint"] or o["entity_id"]) == endpoint and o["onset"] < promotion["promoted_at"]]
        if earlier:
            return "undetermined", (f"{when}, but the version it replaced ({previous}) already had {inc['signal']} "
                                    f"incident {earlier[-1]['incident_id']}: the problem predates the promotion")
        return "regression_after_promotion", (f"{when}; the version it replaced ({previous or 'none recorded'}) "
                                               f"had no {inc['signal']} incident")
    if inc["signal"] in ERROR_SIGNALS and _restarted(inc):
        return "infrastructure", "the server restarted (its request counters reset) in the window, with no promotion"
    serving = version_lineage(versions, endpoint, inc["model_version"], onset)
    since = f" (serving since {serving['served_from']})" if serving is not None else ""
    return "drift_on_stable_version", (f"no promotion of {endpoint} within {_minutes(window)} before the onset; "
                                       f"{inc['model_version'] or 'its version'}{since} did not change, what it serves did")


def data_onset(inc: dict, versions: pd.DataFrame, endpoint: str) -> tuple[pd.Timestamp, str | None]:
    """When the incident's data begins: its onset, unless its own model version was promoted after
    that onset and before its last evidence. An hourly quality window (or a version registered
    before it served) puts the onset at the hour's start, but the promoted version's data, the data
    the finding judged, starts at the promotion. (onset, why it moved or None)"""
    onset = pd.Timestamp(inc["onset"])
    if versions.empty or not _known(inc["model_version"]):
        return onset, None
    own = versions[(versions["endpoint"] == endpoint) & (versions["model_version"] == inc["model_version"])
                   & versions["promoted_at"].notna()]
    promoted = pd.to_datetime(own["promoted_at"])
    inside = promoted[(promoted > onset + SLACK) & (promoted <= pd.Timestamp(inc["last_seen"]))]
    if inside.empty:
        return onset, None
    start = inside.min()
    return start, (f"the finding's window starts {onset}, but {inc['model_version']}'s data, which it judged, "
                   f"begins at its promotion")


def last_promotion(versions: pd.DataFrame, endpoint: str, onset, window: pd.Timedelta):
    """The endpoint's latest promotion in [onset - window, onset + SLACK], or None."""
    if versions.empty:
        return None
    onset = pd.Timestamp(onset)
    hit = versions[(versions["endpoint"] == endpoint) & versions["promoted_at"].notna()]
    promoted = pd.to_datetime(hit["promoted_at"])
    hit = hit[(promoted <= onset + SLACK) & (promoted >= onset - window)]
    return None if hit.empty else hit.sort_values("promoted_at").iloc[-1]


def version_lineage(versions: pd.DataFrame, endpoint, model_version, onset):
    """The `serving_versions` row of `model_version` on `endpoint` serving at `onset` (else its latest)."""
    if versions.empty or model_version is None:
        return None
    rows = versions[versions["model_version"] == model_version]
    on_endpoint = rows[rows["endpoint"] == endpoint]
    rows = on_endpoint if not on_endpoint.empty else rows
    if rows.empty:
        return None
    started = rows[pd.to_datetime(rows["served_from"]) <= pd.Timestamp(onset)]
    return (started if not started.empty else rows).sort_values("served_from").iloc[-1]


def _lineage_text(inc: dict, lineage) -> str:
    version = inc["model_version"] or "unknown version"
    if lineage is None:
        return f"{inc['endpoint'] or inc['entity_id']} serves {version}; no registration on record"
    promoted = f", promoted {lineage['promoted_at']}" if _known(lineage["promoted_at"]) else ""
    step = f" step {int(lineage['checkpoint_step'])}" if _known(lineage["checkpoint_step"]) else ""
    return (f"{lineage['endpoint']} serves {version} (since {lineage['served_from']}{promoted}) <- run "
            f"{_text(lineage['run_id']) or 'unknown'} <- checkpoint{step} {_text(lineage['checkpoint_path']) or 'unknown'}")


def _overlaps(other: dict, inc: dict) -> bool:
    return other["onset"] <= inc["last_seen"] and other["last_seen"] >= inc["onset"] - SLACK


def _restarted(inc: dict) -> bool:
    evidence = json.loads(inc["evidence"]) if isinstance(inc["evidence"], str) else dict(inc["evidence"] or {})
    return bool(evidence.get("counter_resets"))


def _known(value) -> bool:
    try:
        return not pd.isna(value)
    except (TypeError, ValueError):   # a list or array is a value
        return True


def _text(value) -> str | None:
    return str(value) if _known(value) else None


def _minutes(delta: pd.Timedelta) -> str:
    return f"{int(round(pd.Timedelta(delta).total_seconds() / 60))} min"
