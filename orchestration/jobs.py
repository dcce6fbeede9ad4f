"""Jobs: `detect` ingests an hour and runs every signal's check on it; `fold_incidents` folds findings."""

import dagster as dg

from assets.ingest import SOURCES
from orchestration.partitions import hourly

detect_job = dg.define_asset_job(
    "detect",
    selection=dg.AssetSelection.assets(*[s.table for s in SOURCES]),
    partitions_def=hourly,
    description="Ingest one hour of the raw zone and run every signal's asset check on it.",
)

incidents_job = dg.define_asset_job(
    "fold_incidents",
    selection=dg.AssetSelection.assets("incidents"),
    description="Fold all findings into incident records.",
)
