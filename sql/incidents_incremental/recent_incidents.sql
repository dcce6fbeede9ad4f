-- The incidents the asset's metadata shows as recent (assets/incident_fold.py incidents_table_md's order).
SELECT * FROM incidents ORDER BY status DESC, tier, opened, incident_id LIMIT 20;
