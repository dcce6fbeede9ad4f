"""Goodput's assets: ingest (raw zone -> DuckDB, hourly; the Prometheus pull into the raw zone),
baselines, badput, checkpoint audits, drift reports, serving baselines and SLOs, incidents (findings ->
incident records) and their plots, daily maintenance, and the hour x shard variants of the per-host
assets (sharded)."""
