-- Incident lifecycle and alert delivery: tiers with their reason, episodes, grouped ranks,
-- the transitions an alert sink hears about, and the log of every delivery attempt.

ALTER TABLE incidents ADD COLUMN default_tier VARCHAR;          -- the signal's tier in the catalogue
ALTER TABLE incidents ADD COLUMN tier_reason VARCHAR;           -- why the incident has its tier
ALTER TABLE incidents ADD COLUMN escalated_at TIMESTAMP;        -- data time of the last escalation
ALTER TABLE incidents ADD COLUMN episode INTEGER;               -- 1 for the first episode of this signal on this entity
ALTER TABLE incidents ADD COLUMN previous_incident_id VARCHAR;  -- the episode this one reopens
ALTER TABLE incidents ADD COLUMN ranks INTEGER[];               -- ranks of the run flagged (grouped rank findings)
ALTER TABLE incidents ADD COLUMN members VARCHAR[];             -- entity ids of the findings folded in

-- Every transition of every incident (opened, escalated, resolved), replaced with each fold.
-- `transition_at` is data time; `tier` the tier the incident had from that transition on.
CREATE TABLE incident_transitions (
    incident_id                   VARCHAR   NOT NULL,
    seq                           INTEGER   NOT NULL,   -- 0 = opened, then escalations, resolved last
    transition                    VARCHAR   NOT NULL,
    transition_at                 TIMESTAMP NOT NULL,
    tier                          VARCHAR   NOT NULL,
    reason                        VARCHAR   NOT NULL,
    gpu_hours_at_risk             DOUBLE,
    PRIMARY KEY (incident_id, seq)
);

-- One row per delivery attempt to one sink (wall-clock time). Mirrored from the alert journal
-- (GOODPUT_HOME/alerts/attempts.jsonl), which is written first; see docs/alerting.md.
CREATE TABLE alert_attempts (
    attempt_id                    VARCHAR   PRIMARY KEY,
    sink                          VARCHAR   NOT NULL,
    dedup_key                     VARCHAR   NOT NULL,   -- <incident_id>:<transition>
    incident_id                   VARCHAR   NOT NULL,
    transition                    VARCHAR   NOT NULL,
    attempt                       INTEGER   NOT NULL,   -- 1, 2, ... within one delivery try
    attempted_at                  TIMESTAMP NOT NULL,
    outcome                       VARCHAR   NOT NULL,   -- delivered | failed | rejected
    status_code                   INTEGER,
    error                         VARCHAR,
    elapsed_seconds               DOUBLE
);
