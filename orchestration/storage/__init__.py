"""Storage: the warehouse (a DuckDB file, or DuckLake on PostgreSQL), the SQL files that read and write it,
the raw zone the sources write, and the home's Dagster instance (its event log, its `warehouse` pool)."""
