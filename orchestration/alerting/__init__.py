"""Alerting: incident transitions routed to sinks (Slack, PagerDuty Events API v2, a generic JSON
webhook, a file) and delivered dependably (docs/alerting.md states the guarantee per sink).

An alert is one incident transition (opened, escalated, resolved) as a JSON-safe dict; its dedup
key is `<incident_id>:<transition>`. The package, by concern:
- config: the routes file (`orchestration/alerting.yaml` or `$GOODPUT_ALERTING`), pydantic-validated;
  secrets only from the environment variables it names, never in logs, metadata or the journal.
- payloads: what each sink is sent (Slack text escaped, PagerDuty timestamps with their offset).
- grouping: one notification per event (correlated incidents grouped the Alertmanager way).
- journal: the fsynced attempt log that says what was delivered, torn-line safe.
- delivery: one httpx client, tenacity retries that cannot re-deliver what a sink took.
- resource: the Dagster resource of one home.
"""
