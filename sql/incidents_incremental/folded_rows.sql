-- The pickled rows and transitions (before correlation and triage) of the incidents in the registered `ids`.
SELECT i.incident_id, i.folded FROM fold_incidents i JOIN ids USING (incident_id);
