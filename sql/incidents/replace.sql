-- Empty the incident records and their transitions for a fresh deterministic fold (inside the caller's
-- transaction; incidents/insert.sql then inserts it).
DELETE FROM incidents;
DELETE FROM incident_transitions;
