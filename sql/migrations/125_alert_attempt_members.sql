-- One event, one page (issue 17 item 10): a grouped notification tells a sink about several
-- incidents at once, under its anchor's id. Each row: one delivery attempt of a grouped notification
-- and one member transition it was the first notification of, so an incident's page and
-- `goodput incidents show` can name the notification that carried its transition (its sink, time,
-- outcome and lead incident). Attempts of ungrouped alerts have no rows here.
CREATE TABLE alert_attempt_members (
    attempt_id                    VARCHAR   NOT NULL,   -- alert_attempts.attempt_id
    incident_id                   VARCHAR   NOT NULL,   -- the member whose transition it carried
    seq                           INTEGER,              -- incident_transitions.seq of that transition
    transition                    VARCHAR   NOT NULL,
    lead_incident_id              VARCHAR,              -- the member the notification was about (most urgent, earliest)
    group_size                    INTEGER               -- members listed in the notification
);
