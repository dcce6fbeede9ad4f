"""Goodput's orchestration layer, by concern: `config` (the home's settings), `storage` (the warehouse, the SQL
loader, the raw zone, the Dagster instance), `alerting`, `sensors` with `jobs` and `definitions` (the Dagster
wiring), `evaluation` (scoring, replay), `service` (`goodput ui`, the distributed deployment), and the CLI
(`cli`, `commands`). pyproject's import-linter contracts say which may import which."""
