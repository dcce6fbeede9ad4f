"""Jobs: `detect` ingests an hour, computes its baselines and runs every signal's check on it;
`fold_incidents` folds findings into incidents."""

import dagster as dg

from orchestration.partitions import hourly

detect_job = dg.define_asset_job(
    "detect",
    selection=dg.AssetSelection.groups("ingest", "baselines", "checkpoints"),
    partitions_def=hourly,
    description="Ingest one hour of the raw zone, compute its baselines, audit its checkpoints and run every signal's asset check on it.",
)

incidents_job = dg.define_asset_job(
    "fold_incidents",
    selection=dg.AssetSelection.assets("incidents", "incident_plots"),
    description="Fold all findings into incident records (and redraw the plots of runs with open incidents).",
)
