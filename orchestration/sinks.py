"""Alert sinks. Each delivers an alert (one incident transition) at most once per dedup key.

The file sink appends JSON lines to `GOODPUT_HOME/alerts/alerts.jsonl`; it is the path the real
sinks (Slack, PagerDuty, webhooks) will follow, and the demo's and tests' witness.
"""

import json
import os
from pathlib import Path

import dagster as dg


def dedup_key(alert: dict) -> str:
    return f"{alert['incident_id']}:{alert['transition']}"


class FileSinkResource(dg.ConfigurableResource):
    """A JSONL file of delivered alerts; an alert whose key is already in the file is not written again."""

    path: str

    def delivered_keys(self) -> set[str]:
        path = Path(self.path)
        if not path.exists():
            return set()
        keys = set()
        for line in path.read_text().splitlines():
            try:
                keys.add(dedup_key(json.loads(line)))
            except (ValueError, KeyError):
                continue  # a torn last line from a crash: its alert was not delivered
        return keys

    def deliver(self, alerts: list[dict]) -> list[dict]:
        """Append the alerts not yet delivered, in order, in one write; returns those written."""
        seen = self.delivered_keys()
        fresh = []
        for alert in alerts:
            key = dedup_key(alert)
            if key not in seen:
                seen.add(key)
                fresh.append(alert)
        if fresh:
            path = Path(self.path)
            path.parent.mkdir(parents=True, exist_ok=True)
            payload = "".join(json.dumps(a, sort_keys=True, default=str) + "\n" for a in fresh)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
        return fresh
