"""Goodput's orchestration layer: Dagster definitions, resources, partitions, schedules, sensors, sinks and the CLI."""
