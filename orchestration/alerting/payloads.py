"""What each sink is sent for one incident transition: a Slack Block Kit message, a PagerDuty Events
API v2 event, the generic webhook's envelope. Pure functions of the alert dict."""

import json
from collections.abc import Mapping
from datetime import datetime, timezone

PAGERDUTY_SEVERITY = {"SEV1": "critical", "SEV2": "error", "SEV3": "warning"}   # anything else: info
TRANSITION_EMOJI = {"opened": ":rotating_light:", "escalated": ":arrow_double_up:", "updated": ":heavy_plus_sign:",
                    "resolved": ":white_check_mark:"}
# An incident's transitions in the order they happen: a sink never gets an earlier one after a later one.
# `updated`: a grouped notification's later batch (orchestration/alerting/grouping.py).
TRANSITION_ORDER = {"opened": 0, "escalated": 1, "updated": 1, "resolved": 2}


def dedup_key(alert: Mapping) -> str:
    """What a sink hears once: an incident's transition, or a grouped notification's own key."""
    return alert.get("notification_key") or f"{alert['incident_id']}:{alert['transition']}"


def member_lines(alert: Mapping, limit: int = 20) -> list[str]:
    """A grouped notification's members, most urgent first: `[SEV1] open: title (incident id)`."""
    members = alert.get("group_members") or []
    lines = [f"[{m.get('tier')}] {m.get('status')}{' (new)' if m.get('new') else ''}: {m.get('title')} ({m['incident_id']})"
             for m in members]
    return lines[:limit] + ([f"… {len(lines) - limit} more"] if len(lines) > limit else [])


def summary(alert: Mapping) -> str:
    return f"[{alert['tier']}] {alert['transition']}: {alert['title']}"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slack_escape(text: object) -> str:
    """Slack's three control characters as entities, so a run id like `<!channel>` or
    `<https://x|click>` is shown, never acted on (api.slack.com: formatting, escaping text)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _evidence_lines(alert: Mapping, limit: int = 12) -> list[str]:
    evidence = alert.get("evidence") or {}
    lines = [f"{k}: {json.dumps(v, default=str) if isinstance(v, dict | list) else v}" for k, v in sorted(evidence.items())]
    return lines[:limit] + ([f"… {len(lines) - limit} more"] if len(lines) > limit else [])


def _lineage_lines(alert: Mapping) -> list[str]:
    pairs = [
        ("run", alert.get("run_id")), ("ranks", ", ".join(str(r) for r in alert.get("ranks") or []) or None),
        ("hosts", ", ".join(alert.get("hosts") or []) or None), ("GPUs", ", ".join(alert.get("gpus") or []) or None),
        ("last checkpoint", alert.get("checkpoint")), ("model version", alert.get("model_version")),
        ("endpoint", alert.get("endpoint")), ("correlation", alert.get("correlation_id")),
    ]
    return [f"{name}: {value}" for name, value in pairs if value not in (None, "")]


def slack_message(alert: Mapping) -> dict:
    """A Slack incoming-webhook message: a text fallback plus Block Kit blocks (header, fields,
    evidence, lineage, playbook, a button to the Dagster run, and the incident id). Every value
    from the alert is escaped (`&`, `<`, `>`); only Goodput's own markup is left to Slack."""
    e = slack_escape
    emoji = TRANSITION_EMOJI.get(alert["transition"], ":bell:")
    run_url = alert.get("dagster_run_url")
    fields = [
        f"*Tier*\n{e(alert['tier'])}", f"*Transition*\n{e(alert['transition'])} at {e(alert.get('transition_at'))}",
        f"*Owner*\n{e(alert.get('owner'))}", f"*Signal*\n`{e(alert.get('signal'))}`",
        f"*Onset*\n{e(alert.get('onset'))}", f"*GPU-hours at risk*\n{e(alert.get('gpu_hours_at_risk'))}",
    ]
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": _short(e(f"[{alert['tier']}] {alert['title']}"), 150), "emoji": True}},
        {"type": "section",
         "text": {"type": "mrkdwn", "text": _short(f"{emoji} *{e(alert['transition'])}* · {e(alert.get('tier_reason') or '')}", 3000)},
         "fields": [{"type": "mrkdwn", "text": _short(f, 2000)} for f in fields]},
        {"type": "section", "text": {"type": "mrkdwn", "text": _short("*Evidence*\n" + e("\n".join(_evidence_lines(alert))), 3000)}},
        {"type": "section", "text": {"type": "mrkdwn",
                                     "text": _short("*Lineage*\n" + (e("\n".join(_lineage_lines(alert))) or "none"), 3000)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _short(f"*Playbook*\n```{e(alert.get('playbook') or 'none')}```", 3000)}},
    ]
    if alert.get("group_members"):
        blocks.insert(2, {"type": "section", "text": {"type": "mrkdwn", "text": _short(
            f"*One event, {len(alert['group_members'])} correlated incidents*\n" + e("\n".join(member_lines(alert))), 3000)}})
    if alert.get("board_url"):
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"<{alert['board_url']}|Open the incident on the board>"}})
    if run_url:
        blocks.append({"type": "actions", "elements": [
            {"type": "button", "text": {"type": "plain_text", "text": "Open the Dagster run"}, "url": run_url},
        ]})
    blocks.append({"type": "context", "elements": [
        {"type": "mrkdwn", "text": f"incident `{e(alert['incident_id'])}` · dedup `{e(dedup_key(alert))}`"},
    ]})
    return {"text": _short(e(summary(alert)), 3000), "blocks": blocks}


def utc_timestamp(value) -> str | None:
    """An ISO-8601 time with its UTC offset (the warehouse keeps naive UTC; PagerDuty wants the offset)."""
    if value in (None, ""):
        return None
    try:
        moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None   # PagerDuty then stamps the event with its own receipt time
    moment = moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)
    return moment.isoformat()


def pagerduty_event(alert: Mapping, routing_key: str) -> dict:
    """A PagerDuty Events API v2 event: trigger (opened, escalated) or resolve, dedup_key = incident id."""
    run_url = alert.get("dagster_run_url")
    if alert["transition"] == "resolved":
        return {"routing_key": routing_key, "event_action": "resolve", "dedup_key": alert["incident_id"]}
    event = {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": alert["incident_id"],
        "payload": {
            "summary": _short(summary(alert), 1024),
            "source": alert.get("run_id") or alert.get("entity_id") or "goodput",
            "severity": PAGERDUTY_SEVERITY.get(alert["tier"], "info"),
            "timestamp": utc_timestamp(alert.get("transition_at")),
            "component": alert.get("entity_id"),
            "group": alert.get("family"),
            "class": alert.get("signal"),
            "custom_details": {
                "tier": alert["tier"], "tier_reason": alert.get("tier_reason"), "owner": alert.get("owner"),
                "transition": alert["transition"], "gpu_hours_at_risk": alert.get("gpu_hours_at_risk"),
                "evidence": alert.get("evidence") or {}, "lineage": _lineage_lines(alert),
                "playbook": alert.get("playbook"),
                **({"members": member_lines(alert, limit=50)} if alert.get("group_members") else {}),
            },
        },
        "client": "Goodput",
    }
    links = [{"href": run_url, "text": "Dagster run"}] if run_url else []
    if alert.get("board_url"):
        links.append({"href": alert["board_url"], "text": "Incident on the Goodput board"})
    if links:
        event["client_url"] = links[0]["href"]
        event["links"] = links
    return event


def webhook_body(alert: Mapping) -> dict:
    """The generic webhook's JSON: a versioned envelope around the whole alert."""
    return {"version": 1, "type": f"goodput.incident.{alert['transition']}", "dedup_key": dedup_key(alert),
            "run_url": alert.get("dagster_run_url"), "alert": dict(alert)}
