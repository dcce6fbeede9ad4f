"""busy_not_progressing reads when each step ended from `step_ends` (one row per step and minute, written by the
training baselines) instead of every rank's step records, and finds exactly what it found from the records.

The reference is the query with its step CTEs as they were (tests/fixtures/busy_not_progressing_from_step_records.sql): on scenarios
with a hang, a rank dropout whose peers stall, and a run restarted from a checkpoint (its step numbers computed
again by a second attempt), both give the same frame for every hour, row for row, with the default lookback and
with one that begins inside the data (the query floors a lookback to whole minutes: every default is one)."""

from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from assets.baselines import training_baselines
from assets.ingest import ingest_assets
from checks.registry import REGISTRY
from orchestration.definitions import resources_for
from orchestration.storage import sql
from simulator import load_scenario, simulate
from tests.helpers import SMALL, memory_instance

REPO = Path(__file__).resolve().parent.parent
HOURS = ("2026-11-30-00:00", "2026-11-30-01:00")


def records_reading(query: str) -> str:
    """The query with the CTEs that read step_ends replaced by the ones that read every rank's step records."""
    cut, resume = query.index("), bound AS ("), query.index("), progress AS (")
    return query[:cut] + (REPO / "tests" / "fixtures" / "busy_not_progressing_from_step_records.sql").read_text() + query[resume:]


@pytest.mark.parametrize("scenario", [SMALL, REPO / "simulator" / "scenarios" / "badput.yaml"], ids=["small", "badput"])
def test_the_stall_frame_from_step_ends_equals_the_one_from_every_ranks_records(tmp_path, scenario):
    simulate(load_scenario(scenario), tmp_path)
    resources = resources_for(tmp_path)
    with memory_instance() as instance:
        for key in HOURS:
            assert dg.materialize([*ingest_assets, training_baselines], resources=resources, partition_key=key,
                                  instance=instance).success
    signal = REGISTRY.get("busy_not_progressing")
    reference = records_reading(sql.sql_text(signal.query))
    with resources["warehouse"].connect(read_only=True) as con:
        records, ends = con.execute("SELECT (SELECT count(*) FROM training_steps), (SELECT count(*) FROM step_ends)").fetchone()
        attempts = con.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM lineage_events "
                               "WHERE event = 'run_started' GROUP BY run_id)").fetchone()[0]
        frames = []
        for key in HOURS:
            start = datetime.strptime(key, "%Y-%m-%d-%H:%M")
            hour = {"start": start, "end": start + timedelta(hours=1), **signal.thresholds}
            for lookback in (hour["lookback_seconds"], 1800.0):   # the default's 6 h; 30 min, inside the data
                params = {**hour, "lookback_seconds": lookback}
                now = sql.frame(con, signal.query, params)
                pd.testing.assert_frame_equal(now, sql.execute_text(con, reference, params).df())
                if lookback == signal.thresholds["lookback_seconds"]:
                    frames.append(now)
    # a step ends once per run and minute where the records hold one row per rank: fewer rows to read
    assert 0 < ends < records / 1.5
    found = pd.concat([f for f in (signal.detector(frame, dict(signal.thresholds)) for frame in frames) if not f.empty])
    if scenario == SMALL:      # the small scenario's hang: found from the step ends, as from the records
        assert set(found["entity_id"]) == {"llm-small"}
    else:                      # badput.yaml restarts a run from its checkpoint after its rank drops out
        assert attempts >= 2 and "crash-restart" in set(found["entity_id"])
