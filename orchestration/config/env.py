"""Settings named by an environment variable (a sink's URL, the board's, the routes file): read when used,
so that the Dagster UI shows the variable's name, never its value, and a change applies at the next use."""

from __future__ import annotations

import os


def env_or(name: str | None, fallback):
    """The environment variable `name` where it is set and not empty, else `fallback`."""
    return (os.environ.get(name) if name else None) or fallback
