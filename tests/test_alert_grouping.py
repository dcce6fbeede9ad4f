"""One event, one page (issue 17 item 10): correlated incidents' transitions reach a sink as one
notification per event with its members listed, against real HTTP sinks on loopback; each incident
keeps its own record. Unrelated events page separately."""

import pandas as pd

from orchestration.alerting.config import Grouping
from orchestration.alerting.grouping import notifications, pages
from tests.alerting_harness import _fold, _xid_event, clock, home, loopback, resources, table, tick  # noqa: F401  (fixtures)
from tests.helpers import memory_instance

GPU = ["node-0:3"]
GPUS8 = [f"node-0:{i}" for i in range(8)]


def test_one_event_pages_once_with_its_members_and_an_unrelated_event_pages_again(home, loopback, clock):
    # event 1 at minute 0 on node-0 / run llm; event 2 at minute 60 on node-5 / run other: unrelated
    with memory_instance() as instance:
        _fold(home, instance, _xid_event(0) + _xid_event(60, run="other", host="node-5"))
        tick(home, instance)
        tick(home, instance)          # nothing is sent twice
    recorded = table(home, "SELECT incident_id, correlation_id, signal FROM incidents ORDER BY incident_id")
    assert len(recorded) == 6 and recorded["correlation_id"].nunique() == 2      # each keeps its own record
    triggers = [e for e in loopback.accepted("/pagerduty") if e["event_action"] == "trigger"]
    # one page per event: the hang found 5 minutes later updates the event's page (same dedup_key)
    assert len({e["dedup_key"] for e in triggers}) == 2 and len(triggers) == 4
    first, update = {}, {}
    for event in triggers:
        (update if event["dedup_key"] in first else first)[event["dedup_key"]] = event
    for event in first.values():
        assert len(event["payload"]["custom_details"]["members"]) == 2   # the XID and the dropout, within group_wait
    for event in update.values():
        members = event["payload"]["custom_details"]["members"]
        assert len(members) == 3 and all("] open" in m for m in members) and members[0].startswith("[SEV1]")
        assert "(+2 correlated)" in event["payload"]["summary"] and sum("(new)" in m for m in members) == 1
    listed = {m.rsplit("(", 1)[1].rstrip(")") for e in triggers for m in e["payload"]["custom_details"]["members"]}
    assert listed == set(recorded["incident_id"])
    resolves = [e for e in loopback.accepted("/pagerduty") if e["event_action"] == "resolve"]
    assert sorted(e["dedup_key"] for e in resolves) == sorted(first)   # resolved once, all members done
    slack = loopback.accepted("/slack")
    assert len(slack) == 6 and all("correlated incidents" in str(m["blocks"]) for m in slack)


def _t(iid, transition, minute, tier="SEV1", cor="cor-a"):
    return {"incident_id": iid, "transition": transition, "transition_at": (pd.Timestamp("2026-11-30") +
            pd.Timedelta(minutes=minute)).isoformat(), "tier": tier, "title": iid, "correlation_id": cor,
            "signal": "s", "entity_id": iid}


NOW = pd.Timestamp("2026-12-01", tz="UTC").timestamp()
G = Grouping(group_wait_seconds=60, group_interval_seconds=300)


def test_a_late_member_updates_the_same_page_and_a_lone_incident_is_sent_as_itself():
    alerts = [_t("inc-a", "opened", 0), _t("inc-b", "opened", 0.5), _t("inc-c", "opened", 5),
              _t("inc-a", "resolved", 20), _t("inc-b", "resolved", 21), _t("inc-c", "resolved", 22),
              _t("inc-z", "opened", 3, tier="SEV2", cor="cor-z"), _t("inc-z", "resolved", 30, tier="SEV2", cor="cor-z")]
    notes, held = notifications(alerts, G, NOW)
    assert held == 0
    keys = [n.get("notification_key") or f"{n['incident_id']}:{n['transition']}" for n in notes]
    assert keys == ["inc-a:opened", "inc-z:opened", "inc-a:updated:inc-c:opened", "inc-a:resolved", "inc-z:resolved"]
    assert [len(n.get("group_members") or []) for n in notes] == [2, 0, 3, 3, 0]
    assert notes[1] == alerts[6]                      # a group of one: the incident's own alert, untouched
    assert pages(notes) == 2                          # the late member folds into the first page
    # grouping switched off: every incident pages on its own (the look-alike of the old behaviour)
    assert pages(notifications(alerts, Grouping(group_by="incident"), NOW)[0]) == 4


def test_group_wait_holds_the_first_notification_until_its_members_can_join():
    alerts = [_t("inc-a", "opened", 0)]
    start = pd.Timestamp("2026-11-30", tz="UTC").timestamp()
    assert notifications(alerts, G, start + 30) == ([], 1)
    notes, held = notifications(alerts + [_t("inc-b", "opened", 0.75)], G, start + 61)
    assert held == 0 and [n["notification_key"] for n in notes] == ["inc-a:opened"]
    # an anchor this sink has already heard of stays the anchor when an earlier member turns up late
    late = [_t("inc-0", "opened", -1)] + alerts
    assert notifications(late, G, NOW, notified={"inc-a"})[0][0]["incident_id"] == "inc-a"


def test_a_member_resolving_alone_sends_nothing_and_a_new_member_after_the_end_is_a_new_page():
    alerts = [_t("inc-a", "opened", 0), _t("inc-b", "opened", 0.5), _t("inc-a", "resolved", 10),
              _t("inc-b", "resolved", 40), _t("inc-c", "opened", 50)]
    notes, _ = notifications(alerts, G, NOW)
    assert [n["transition"] for n in notes] == ["opened", "resolved", "opened"]
    assert [n["incident_id"] for n in notes] == ["inc-a", "inc-a", "inc-c"]
    assert pages(notes) == 2


def test_a_correlated_incident_beginning_long_after_is_a_new_event_and_pages_again():
    """The same run: a checkpoint went bad at 00:00 and stays open; a hang begins at 02:00 (another
    event on the same correlation group). Members of one event begin within the event window."""
    bad = dict(_t("inc-ckpt", "opened", 1), onset="2026-11-30T00:00:00")
    hang = dict(_t("inc-hang", "opened", 125), onset="2026-11-30T02:00:00")
    peers = dict(_t("inc-peers", "opened", 125.5), onset="2026-11-30T02:00:30")
    notes, _ = notifications([bad, hang, peers], G, NOW)
    assert [n["incident_id"] for n in notes] == ["inc-ckpt", "inc-hang"] and pages(notes) == 2
    assert {m["incident_id"] for m in notes[1]["group_members"]} == {"inc-hang", "inc-peers"}
