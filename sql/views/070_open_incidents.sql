-- open_incidents: incidents still open, most urgent first (tier, then the oldest), with every
-- column of `incidents` (new ones appear here when a migration adds them) plus how long each has
-- lasted in data time.
CREATE OR REPLACE VIEW open_incidents AS
SELECT *,
       last_seen - onset               AS lasted,
       epoch(last_seen - onset) / 60.0 AS lasted_minutes
FROM incidents
WHERE status = 'open'
ORDER BY tier, opened;
