"""The check that makes the Dagster UI tell the truth: an open SEV1 turns the `incidents` asset red
(the check fails with ERROR), an open SEV2 yellow (WARN), in the lineage and the catalog alike.

The check runs after each fold (it is on the `incidents` asset, so the fold job selects it). Its
description names the flagged entities; its metadata carries units (GPU-h, minutes) and links to
each incident's page on the incident board (`BoardResource`, GOODPUT_BOARD_URL).
"""

import dagster as dg
import pandas as pd

from orchestration.board_resource import BoardResource
from orchestration.storage import sql
from orchestration.storage.warehouse import POOL, WarehouseResource

CHECK_NAME = "no_open_sev1_sev2"
MAX_NAMED = 5


def open_gpu_hours_at_risk(con) -> float:
    """GPU-hours at risk of the open incidents with each correlated group counted once."""
    return float(sql.run(con, "incident_checks/gpu_hours_open").fetchone()[0])


def _entity(row) -> str:
    gpus = list(row.gpus) if row.gpus is not None else []
    where = f" on {len(gpus)} GPU(s)" if gpus else ""
    return f"{row.entity_type} {row.entity_id}{where}"


def verdict(open_: pd.DataFrame, gpu_hours: float, board: BoardResource) -> dg.AssetCheckResult:
    """Pass/fail from the open incidents: ERROR with an open SEV1, WARN with an open SEV2, pass otherwise."""
    urgent = open_[open_["tier"].isin(["SEV1", "SEV2"])]
    sev1 = urgent[urgent["tier"] == "SEV1"]
    severity = dg.AssetCheckSeverity.ERROR if not sev1.empty else dg.AssetCheckSeverity.WARN
    if urgent.empty:
        others = f"; {len(open_)} SEV3 open" if len(open_) else ""
        description = f"No open SEV1 or SEV2 incident{others}."
    else:
        named = "; ".join(f"[{r.tier}] {r.signal} on {_entity(r)} (owner {r.owner})" for r in urgent.head(MAX_NAMED).itertuples())
        more = f"; and {len(urgent) - MAX_NAMED} more" if len(urgent) > MAX_NAMED else ""
        description = f"{len(sev1)} SEV1 and {len(urgent) - len(sev1)} SEV2 open: {named}{more}. Open the board to act."
    lines = ["| tier | incident | entity | onset (UTC) | GPUs | GPU-hours at risk (GPU-h) | owner |", "|---|---|---|---|---|---|---|"]
    for r in open_.head(20).itertuples():
        gpus = len(r.gpus) if r.gpus is not None else 0
        lines.append(f"| {r.tier} | [{r.title}]({board.incident(r.incident_id)}) | {r.entity_type} {r.entity_id} | "
                     f"{pd.Timestamp(r.onset):%Y-%m-%d %H:%M:%S} | {gpus} | {float(r.gpu_hours_at_risk or 0):.2f} | {r.owner} |")
    metadata = {
        "open_sev1": dg.MetadataValue.int(len(sev1)),
        "open_sev2": dg.MetadataValue.int(len(urgent) - len(sev1)),
        "open_incidents": dg.MetadataValue.int(len(open_)),
        "gpu_hours_at_risk_open (GPU-h, each correlated group once)": dg.MetadataValue.float(round(gpu_hours, 3)),
        "open_incident_table": dg.MetadataValue.md("\n".join(lines) if len(open_) else "No open incidents."),
        "board": dg.MetadataValue.url(board.base()),
    }
    if not urgent.empty:
        metadata["most_urgent"] = dg.MetadataValue.url(board.incident(urgent.iloc[0]["incident_id"]))
    return dg.AssetCheckResult(passed=urgent.empty, severity=severity, description=description, metadata=metadata)


@dg.asset_check(asset="incidents", name=CHECK_NAME, blocking=False, pool=POOL,
                description="Fails while an incident is open: ERROR for an open SEV1 (page now), WARN for an open SEV2 "
                            "(within hours); names the flagged entities and links each incident's board page.")
def no_open_sev1_sev2(warehouse: WarehouseResource, board: BoardResource) -> dg.AssetCheckResult:
    with warehouse.connect() as con:
        open_ = sql.frame(con, "incident_checks/open")
        gpu_hours = open_gpu_hours_at_risk(con)
    return verdict(open_, gpu_hours, board)
