"""Jobs: `detect` ingests an hour, computes its baselines and runs every signal's check on it;
`fold_incidents` folds findings into incidents.

Both run in one process (`in_process_executor`): every step writes the one DuckDB file, so the
`warehouse` pool runs them one at a time anyway, and the multiprocess executor's fresh Python
process per step (~1-2 s of imports each) was most of a quiet tick's cost. The checks on one asset run as
one step (checks/asset_checks.py): 20 steps a detect run, not 52
(BENCHMARKS.md, section "Service").
"""

import dagster as dg

from orchestration.partitions import hourly

detect_job = dg.define_asset_job(
    "detect",
    selection=dg.AssetSelection.groups("ingest", "baselines", "checkpoints"),
    partitions_def=hourly,
    executor_def=dg.in_process_executor,
    description="Ingest one hour of the raw zone, compute its baselines, audit its checkpoints and run every signal's asset check on it.",
)

incidents_job = dg.define_asset_job(
    "fold_incidents",
    selection=dg.AssetSelection.assets("incidents", "incident_plots"),
    executor_def=dg.in_process_executor,
    description="Fold all findings into incident records (and redraw the plots of runs with open incidents).",
)
