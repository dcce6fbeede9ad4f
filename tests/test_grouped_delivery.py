"""Where a member of a grouped page was delivered (issue 17 item 10): correlated incidents reach a sink
as one notification per event under the event's anchor, and `goodput incidents show` and the board's
incident page name, for each member's transition, the grouped notification that carried it (its key,
sink, delivery time and lead incident). A transition no notification has carried yet (group_interval
still holds it) says so. Real HTTP sinks on loopback, the real alert sensor, the real CLI and board."""

import html
from datetime import datetime

from orchestration.cli import main as goodput
from tests.alerting_harness import _fold, _xid_event, clock, home, loopback, table, tick  # noqa: F401  (fixtures)
from tests.helpers import LiveBoard, memory_instance, text_of


def _show(home, incident_id, capsys) -> str:
    capsys.readouterr()
    assert goodput(["incidents", "show", incident_id, "--home", str(home)]) == 0
    return capsys.readouterr().out


def _transition_block(shown: str, transition: str) -> str:
    """The lines of `incidents show` for one transition: its line and the delivery lines under it."""
    lines = shown.split("\nTransitions\n", 1)[1].split("\nPlaybook", 1)[0].splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[2:3] == [transition])
    block = [lines[at]]
    for line in lines[at + 1:]:
        if not line.startswith("      "):
            break
        block.append(line)
    return "\n".join(block)


def test_a_member_names_the_grouped_notification_that_carried_it_and_an_undelivered_one_says_so(
        home, loopback, clock, capsys):
    # data: an XID 79 on node-0:3 (opened 00:01), its rank gone (00:02), the run's peers hung (00:06)
    clock.now = datetime.fromisoformat("2026-11-30T00:08:00+00:00").timestamp()
    with memory_instance() as instance:
        _fold(home, instance, _xid_event(0))
        tick(home, instance)       # 00:08: the XID and the dropout in one page; the hang waits for group_interval
        ids = dict(table(home, "SELECT signal, incident_id FROM incidents").itertuples(index=False))
        xid, dropout, hang = ids["gpu_xid_error"], ids["rank_dropout"], ids["busy_not_progressing"]
        hooks = loopback.accepted("/hook")
        assert [h["dedup_key"] for h in hooks] == [f"{xid}:opened"]
        lead = hooks[0]["alert"]["lead_incident_id"]
        assert lead in (xid, dropout)

        opened = _transition_block(_show(home, dropout, capsys), "opened")
        assert f"delivered in the grouped notification {xid}:opened" in opened
        assert "2 members" in opened and (f"lead {lead} [" in opened if lead != dropout else "lead this incident" in opened), opened
        for sink in ("file", "slack", "pagerduty", "webhook"):
            assert f"{sink} at 2026-11-30T00:08:00" in opened, sink
        assert "no sink yet" not in opened
        # the hang's opening is in no notification yet: it says so, and names no grouped notification
        pending = _transition_block(_show(home, hang, capsys), "opened")
        assert "delivered to no sink yet" in pending and "grouped" not in pending

        clock.now = datetime.fromisoformat("2026-11-30T03:00:00+00:00").timestamp()
        tick(home, instance)       # the update carrying the hang, then the event's resolve
    shown = _show(home, hang, capsys)
    update = next(h["alert"] for h in loopback.accepted("/hook") if h["dedup_key"] == f"{xid}:updated:{hang}:opened")
    assert update["lead_incident_id"] != hang      # the lead is the event's most urgent, earliest member
    carried = _transition_block(shown, "opened")
    assert f"delivered in the grouped notification {xid}:updated:{hang}:opened" in carried
    assert f"lead {update['lead_incident_id']} [SEV1]" in carried and "3 members" in carried
    assert "pagerduty at 2026-11-30T03:00:00" in _transition_block(shown, "opened")
    assert f"delivered in the grouped notification {xid}:resolved" in _transition_block(shown, "resolved")
    # every transition of every member reached the sinks in some notification
    for incident in (xid, dropout, hang):
        assert "no sink yet" not in _show(home, incident, capsys)
    triggers = {e["dedup_key"] for e in loopback.accepted("/pagerduty") if e["event_action"] == "trigger"}
    assert triggers == {xid}       # one page for the event

    with LiveBoard(home) as board:
        page = html.unescape(text_of(board.get(f"/incidents/{dropout}").text))
        raw = board.get(f"/incidents/{dropout}").text
    assert f"grouped {xid}:opened" in page and "its own alert" not in page
    assert (f'href="/incidents/{lead}"' in raw) if lead != dropout else "lead this incident" in page
