"""GPUs expected in an hour that sent no sample in it: "not judged (no samples this hour)".

A judgement lists the entities present in a signal's frame (checks/judgement.py), so a GPU whose
telemetry is missing for a whole hour would be absent from that hour's judgements, and its silence
read as health. Every GPU-entity evaluation therefore adds the GPUs the hour was expected to have
(seen in the hour before, or named by a live run's lineage: `sql/detect/absent_gpus.sql`) that it
has no minute of, as not judged for 0 minutes. A GPU gone from both is not expected, so a
decommissioned GPU is not listed forever. Pure: the caller runs the SQL.
"""

from __future__ import annotations

import pandas as pd

NO_SAMPLES = "no samples this hour"


def with_absent_gpus(judged: pd.DataFrame, absent: pd.DataFrame, entity: str) -> pd.DataFrame:
    """`judged` (checks/judgement.judge's rows) plus one not-judged row per absent GPU (`absent`:
    columns gpu, expected_because) that the judgements do not already name."""
    if entity != "gpu" or absent.empty:
        return judged
    named = set(judged["entity_id"].astype(str)) if not judged.empty else set()
    missing = absent[~absent["gpu"].astype(str).isin(named)]
    if missing.empty:
        return judged
    rows = pd.DataFrame({"entity_type": entity, "entity_id": missing["gpu"].astype(str).to_numpy(), "minutes": 0,
                         "judged_minutes": 0, "judged": False,
                         "reason": [f"{NO_SAMPLES} ({why})" for why in missing["expected_because"]]})
    return pd.concat([judged, rows], ignore_index=True) if not judged.empty else rows
