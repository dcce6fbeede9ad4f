-- Episodes end on evidence, not on the calendar (issue 22). A check records, per entity whose
-- flagged stretch ended (or whose open episode it carried in from the previous hour and found
-- over), WHEN the fault cleared and WHAT showed it (steps resumed, clock back, rank rejoined its
-- peers, the run released its GPUs). The incidents fold resolves an episode only on such a record.
CREATE TABLE clearings (
    signal                        VARCHAR   NOT NULL,
    entity_type                   VARCHAR   NOT NULL,
    entity_id                     VARCHAR   NOT NULL,
    partition_start               TIMESTAMP NOT NULL,
    last_seen                     TIMESTAMP NOT NULL,   -- the episode's last flagged tick the check saw
    cleared_at                    TIMESTAMP NOT NULL,   -- the first evaluated tick at which it was over
    evidence                      JSON                  -- {"why": "...", facts of that tick}
);

-- Why an incident resolved: the clearing evidence (null while open).
ALTER TABLE incidents ADD COLUMN resolution VARCHAR;

-- The ids of the entities a check evaluated and flagged in the partition (`entities` and `flagged`
-- count them), so "what was looked at" can be read back per family.
ALTER TABLE evaluations ADD COLUMN entity_ids VARCHAR[];
ALTER TABLE evaluations ADD COLUMN flagged_ids VARCHAR[];
