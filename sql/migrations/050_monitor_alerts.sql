-- Alerts about Goodput itself (a failed run, stale detect runs, stale raw data), mirrored from the
-- monitor outbox (GOODPUT_HOME/alerts/monitor.jsonl) by the sensors that raise them. One row per
-- transition (opened, resolved); the view `monitor_incidents` folds them into incident records with
-- the same columns as `incidents`, and `open_incidents` lists the open ones among the rest.
-- Times are wall-clock UTC (when the monitor noticed), the monitor's data time.
CREATE TABLE monitor_alerts (
    incident_id                   VARCHAR   NOT NULL,
    transition                    VARCHAR   NOT NULL,   -- opened | resolved
    transition_at                 TIMESTAMP NOT NULL,
    signal                        VARCHAR   NOT NULL,   -- goodput_run_failed, goodput_stale_detect, goodput_stale_raw
    tier                          VARCHAR   NOT NULL,
    owner                         VARCHAR,
    title                         VARCHAR   NOT NULL,
    tier_reason                   VARCHAR,
    evidence                      VARCHAR,              -- JSON object
    playbook                      VARCHAR,
    dagster_run_url               VARCHAR,
    PRIMARY KEY (incident_id, transition)
);
