"""One event, one page: the transitions of correlated incidents become one notification per event,
the way Alertmanager groups alerts (group key, group_wait, group_interval), while every incident
keeps its own record and lifecycle in the warehouse.

Per sink, after routing: the group key is the incident's correlation id (`assets/correlation.py`;
an incident without one and an alert about Goodput itself are groups of their own), split into
events by onset (incidents whose onsets follow each other within `event_window` are one event: an
XID 79, the rank it killed, the peers hung behind it; a hang hours after a checkpoint of the same
run went bad is another event and pages on its own). An event's member transitions, in data-time
order, make its notifications:

- the first takes every member transition within `group_wait` of the group's first one: it is sent
  under the group's anchor (the first member's incident id, or the member this sink already heard
  of), so PagerDuty's dedup_key, hence the page, is the event's;
- later batches (a member opened or escalated), each its first transition plus what follows within
  `group_interval`, are `updated` notifications under the same anchor: PagerDuty folds a trigger
  with the same dedup_key into the open incident (no second page), Slack gets one follow-up;
- a member resolved while others are open sends nothing (the next notification lists it resolved);
  the last member resolved sends `resolved` under the anchor. A member opening after that starts a
  new episode of the group, with its own anchor.

A group of one is sent exactly as its incident's own transitions (the same alert and dedup keys
as without grouping); a grouped notification carries `group_members` (each incident, its signal, tier,
status, entity), its own `notification_key`, and `carried` (the member transitions it is the first
notification of). Pure functions of the alert dicts and the clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from orchestration.alerting.config import Grouping

TIER_RANK = {"SEV1": 0, "SEV2": 1, "SEV3": 2}


def group_key(alert: Mapping, grouping: Grouping) -> str:
    """The key an alert is grouped by: its correlation id (`group_by: correlation`), else its incident."""
    if grouping.group_by == "correlation" and alert.get("correlation_id"):
        return str(alert["correlation_id"])
    return str(alert["incident_id"])


def _at(alert: Mapping) -> float:
    value = pd.Timestamp(alert.get("transition_at") or 0)
    return (value.tz_localize("UTC") if value.tzinfo is None else value).timestamp()


def notifications(alerts: Iterable[Mapping], grouping: Grouping, now: float,
                  notified: set[str] | frozenset[str] = frozenset()) -> tuple[list[dict], int]:
    """(the notifications due now, oldest first; the number of transitions held back by group_wait).

    `alerts`: one sink's routed transitions, oldest first. `notified`: incident ids this sink already
    has a notification under (an anchor stays the anchor when an earlier member turns up later)."""
    groups: dict[str, list[Mapping]] = {}
    for alert in alerts:
        groups.setdefault(group_key(alert, grouping), []).append(alert)
    groups = {f"{key}#{n}": members for key, group in groups.items()
              for n, members in enumerate(_events(group, grouping.event_window_seconds))}
    due: list[tuple[float, str, dict]] = []
    held = 0
    for members in groups.values():
        for episode in _episodes(sorted(members, key=lambda a: (_at(a), a["incident_id"]))):
            sent, waiting = _episode_notifications(episode, grouping, now, notified)
            due.extend((_at(n), n["incident_id"], n) for n in sent)
            held += waiting
    return [n for _, _, n in sorted(due, key=lambda d: (d[0], d[1]))], held


def _onset(alert: Mapping) -> float:
    return _at({"transition_at": alert.get("onset") or alert.get("transition_at")})


def _events(group: list[Mapping], window: float) -> list[list[Mapping]]:
    """A correlation group's transitions split into events: incidents whose onsets follow each other
    within `window` are one event (an XID 79, the rank it killed, the peers hung behind it); one that
    begins later is a new event on the same run or GPU (a hang long after a checkpoint went bad), and
    pages on its own."""
    onsets = sorted({(_onset(a), a["incident_id"]) for a in group})
    event_of: dict[str, int] = {}
    last = None
    for onset, incident in onsets:
        if incident in event_of:
            continue
        number = max(event_of.values(), default=-1) + (last is None or onset - last > window)
        event_of[incident] = number
        last = onset if last is None or onset - last > window else max(last, onset)
    events: dict[int, list[Mapping]] = {}
    for alert in group:
        events.setdefault(event_of[alert["incident_id"]], []).append(alert)
    return [events[n] for n in sorted(events)]


def _episodes(transitions: list[Mapping]) -> Iterable[list[Mapping]]:
    """Split a group's transitions where every member so far has resolved."""
    episode: list[Mapping] = []
    open_: set[str] = set()
    for t in transitions:
        if episode and not open_ and t["transition"] != "resolved":
            yield episode
            episode = []
        episode.append(t)
        if t["transition"] == "resolved":
            open_.discard(t["incident_id"])
        else:
            open_.add(t["incident_id"])
    if episode:
        yield episode


def _episode_notifications(episode: list[Mapping], grouping: Grouping, now: float, notified) -> tuple[list[dict], int]:
    ids = list(dict.fromkeys(t["incident_id"] for t in episode))
    anchor = next((i for i in ids if i in notified), ids[0])
    out: list[dict] = []
    i = reported = 0   # reported: the episode's transitions some notification has carried so far
    while i < len(episode):
        first = episode[i]
        window = grouping.group_wait_seconds if i == 0 else grouping.group_interval_seconds
        if grouping.group_by != "correlation" or not first.get("correlation_id"):
            window = 0.0    # nothing to wait for: an alert about Goodput itself, or grouping switched off
        if first["transition"] == "resolved" and not _all_resolved(episode[: i + 1]):
            i += 1          # a member resolved while others are open: the next notification lists it
            continue
        if _at(first) + window > now:
            return out, len(episode) - i
        j = i + 1
        while j < len(episode) and _at(episode[j]) <= _at(first) + window:
            j += 1
        seen = episode[:j]
        batch = episode[i:j]
        if {t["incident_id"] for t in seen} == {anchor}:
            out.extend(dict(t) for t in batch if t["transition"] != "resolved" or _all_resolved(seen))
            reported = j
        elif i == 0 or _all_resolved(seen) or any(t["transition"] != "resolved" for t in batch):
            out.append(_grouped(anchor, seen, batch, first_of_episode=i == 0, carried=episode[reported:j]))
            reported = j
        i = j
    return out, 0


def _all_resolved(transitions: list[Mapping]) -> bool:
    state: dict[str, str] = {}
    for t in transitions:
        state[t["incident_id"]] = t["transition"]
    return all(s == "resolved" for s in state.values())


def _grouped(anchor: str, seen: list[Mapping], batch: list[Mapping], first_of_episode: bool,
             carried: list[Mapping]) -> dict:
    """One notification for a batch: the lead member's alert (most urgent tier, then earliest) under
    the anchor's id, its members listed with their state as of the batch's last transition.
    `carried`: the member transitions it is the first notification of (the batch, and a member's
    resolve that was held for it), journaled with each attempt so that `goodput incidents show`
    and the board can say which notification told a sink about a member's transition."""
    latest: dict[str, Mapping] = {}
    for t in seen:
        latest[t["incident_id"]] = t
    open_members = [t for t in latest.values() if t["transition"] != "resolved"]
    pool = open_members or list(latest.values())
    lead = min(pool, key=lambda t: (TIER_RANK.get(t.get("tier"), 9), _at(t), t["incident_id"]))
    if _all_resolved(seen):
        transition, key = "resolved", f"{anchor}:resolved"
    elif first_of_episode:
        transition, key = "opened", f"{anchor}:opened"
    else:
        transition, key = "updated", f"{anchor}:updated:{batch[0]['incident_id']}:{batch[0]['transition']}"
    members = [{
        "incident_id": t["incident_id"], "signal": t.get("signal"), "tier": t.get("tier"),
        "status": "resolved" if t["transition"] == "resolved" else "open", "title": t.get("title"),
        "entity_id": t.get("entity_id"), "last_transition": t["transition"], "transition_at": t.get("transition_at"),
        "new": t["incident_id"] in {b["incident_id"] for b in batch},
    } for t in sorted(latest.values(), key=lambda t: (TIER_RANK.get(t.get("tier"), 9), t["incident_id"]))]
    count = len(members)
    return {
        **dict(lead),
        "incident_id": anchor,
        "transition": transition,
        "transition_at": batch[-1].get("transition_at"),
        "tier": lead.get("tier"),
        "title": f"{lead.get('title')} (+{count - 1} correlated)",
        "notification_key": key,
        "group_key": lead.get("correlation_id") or anchor,
        "group_size": count,
        "group_members": members,
        "lead_incident_id": lead["incident_id"],
        "carried": [{"incident_id": t["incident_id"], "transition": t["transition"], "seq": None if t.get("seq") is None else int(t["seq"])}
                    for t in carried],
    }


def pages(notes: Iterable[Mapping]) -> int:
    """Pages a paging sink raises for these notifications: one per dedup key it triggers (updates and
    escalations under a key already triggered fold into that page)."""
    return len({n["incident_id"] for n in notes if n["transition"] != "resolved"})
