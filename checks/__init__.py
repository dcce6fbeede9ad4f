"""Goodput's checks: the signal registry, its small pure detectors, their playbooks, and the
Dagster asset checks built from the registry."""
