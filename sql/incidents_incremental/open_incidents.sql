-- The open incidents the asset's metadata shows (assets/incident_fold.py incidents_table_md), most urgent first.
SELECT * FROM incidents WHERE status = 'open' ORDER BY tier, opened, incident_id LIMIT 20;
