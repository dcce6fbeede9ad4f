"""Goodput's assets: ingest (raw zone -> DuckDB, hourly) and incidents (findings -> incident records)."""
