"""Two checks read when each step ended from `step_ends` (one row per step and minute, written by the training
baselines) instead of every rank's step records, and find exactly what they found from the records:
busy_not_progressing (its stall clock) and checkpoint_overdue (a run's progress per minute).

The references are the queries with their step CTEs as they were (tests/fixtures/*_from_step_records.sql;
busy_not_progressing's also with its ASOF join over every column, as it was): on scenarios with a hang, a rank
dropout whose peers stall, and a run restarted from a checkpoint (its step numbers computed again by a second
attempt), both give the same frame for every hour, row for row, with the default lookback and with one that begins
inside the data (the queries floor a lookback to whole minutes: every default is one). busy_not_progressing sums
its samples per GPU and minute before the ticks join them; the same frame as with every sample joined to each tick
(tests/fixtures/busy_not_progressing_samples_per_tick.sql), on the scenarios and on samples at any microsecond.

The badput asset takes each step's medians over its ranks from step_ends where the step lies in one minute
(sql/badput/scope.sql); its steps equal the ones grouped from every rank's records (the step CTEs as they were,
tests/fixtures/badput_steps_from_step_records.sql), also with ranks that straddle minutes and a mid-minute restart."""

import shutil
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from assets.badput import BadputConfig
from assets.baselines import training_baselines
from assets.ingest import ingest_assets
from checks.registry import REGISTRY
from orchestration.config.peak_flops import as_params, peak_table
from orchestration.definitions import resources_for
from orchestration.storage import sql
from orchestration.storage.warehouse import WarehouseResource
from simulator import load_scenario, simulate
from tests.detector_frames import warehouse_of
from tests.helpers import SMALL, memory_instance

REPO = Path(__file__).resolve().parent.parent
HOURS = ("2026-11-30-00:00", "2026-11-30-01:00")


def spliced(query: str, cut: str, resume: str | None, fixture: str) -> str:
    """`query` with the text from `cut` up to `resume` (or to its end) replaced by tests/fixtures/`fixture`."""
    text = (REPO / "tests" / "fixtures" / fixture).read_text()
    return query[:query.index(cut)] + text + (query[query.index(resume):] if resume else "")


@pytest.fixture(scope="module", params=[SMALL, REPO / "simulator" / "scenarios" / "badput.yaml"], ids=["small", "badput"])
def home(request, tmp_path_factory):
    """A scenario's two hours ingested, with their training baselines (step_ends among them)."""
    path = tmp_path_factory.mktemp(Path(request.param).stem)
    simulate(load_scenario(request.param), path)
    resources = resources_for(path)
    with memory_instance() as instance:
        for key in HOURS:
            assert dg.materialize([*ingest_assets, training_baselines], resources=resources, partition_key=key,
                                  instance=instance).success
    return request.param, resources["warehouse"]


def frames_alike(con, signal, reference: str, lookbacks) -> list[pd.DataFrame]:
    """The signal's frame for every hour and lookback, each equal to the reference's; the default lookback's."""
    frames = []
    for key in HOURS:
        start = datetime.strptime(key, "%Y-%m-%d-%H:%M")
        hour = {"start": start, "end": start + timedelta(hours=1), **signal.thresholds}
        for lookback in lookbacks:
            params = {**hour, "lookback_seconds": lookback}
            now = sql.frame(con, signal.query, params)
            pd.testing.assert_frame_equal(now, sql.execute_text(con, reference, params).df())
            if lookback == signal.thresholds["lookback_seconds"]:
                frames.append(now)
    return frames


def test_the_stall_frame_from_step_ends_equals_the_one_from_every_ranks_records(home):
    scenario, warehouse = home
    signal = REGISTRY.get("busy_not_progressing")
    reference = spliced(sql.sql_text(signal.query), "), bound AS (", "), progress AS (",
                        "busy_not_progressing_from_step_records.sql")
    reference = spliced(reference, "), tick_progress AS (", None, "busy_not_progressing_asof_over_every_column.sql")
    with warehouse.connect(read_only=True) as con:
        records, ends = con.execute("SELECT (SELECT count(*) FROM training_steps), (SELECT count(*) FROM step_ends)").fetchone()
        attempts = con.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM lineage_events "
                               "WHERE event = 'run_started' GROUP BY run_id)").fetchone()[0]
        # the default's 6 h; 30 min, inside the data
        frames = frames_alike(con, signal, reference, (signal.thresholds["lookback_seconds"], 1800.0))
    # a step ends once per run and minute where the records hold one row per rank: fewer rows to read
    assert 0 < ends < records / 1.5
    found = pd.concat([f for f in (signal.detector(frame, dict(signal.thresholds)) for frame in frames) if not f.empty])
    if scenario == SMALL:      # the small scenario's hang: found from the step ends, as from the records
        assert set(found["entity_id"]) == {"llm-small"}
    else:                      # badput.yaml restarts a run from its checkpoint after its rank drops out
        assert attempts >= 2 and "crash-restart" in set(found["entity_id"])


def per_sample(query: str) -> str:
    """busy_not_progressing's `query` with each sample joined to every tick again (the reference)."""
    return spliced(query, "), held AS (", "), runs AS (", "busy_not_progressing_samples_per_tick.sql")


def assert_same_ticks(con, params: dict) -> pd.DataFrame:
    """busy_not_progressing's frame equal to the per-sample reference's (utilization means to rounding: summed
    per GPU and minute first, the floating-point sum runs in another order)."""
    text = sql.sql_text("detect/busy_not_progressing")
    now, before = sql.execute_text(con, text, params).df(), sql.execute_text(con, per_sample(text), params).df()
    pd.testing.assert_frame_equal(now, before, rtol=1e-12, atol=0)
    return now


def test_the_stall_frame_sums_samples_per_gpu_and_minute_as_joining_each_to_its_ticks(home):
    signal = REGISTRY.get("busy_not_progressing")
    with home[1].connect(read_only=True) as con:
        for key in HOURS:
            start = datetime.strptime(key, "%Y-%m-%d-%H:%M")
            frame = assert_same_ticks(con, {"start": start, "end": start + timedelta(hours=1), **signal.thresholds})
            assert len(frame) > 50 and frame["samples"].gt(0).all()


@pytest.mark.parametrize("window", [300.0, 90.0, 37.5])
def test_the_stall_frame_sums_samples_at_any_time_as_joining_each_to_its_ticks(window):
    """Samples at random microseconds, on whole minutes, a microsecond either side of them, some without a
    utilization; windows of whole minutes and not."""
    rng = np.random.default_rng(7)
    start = datetime(2026, 11, 30, 1)
    spread = rng.integers(-600_000_000, 3_600_000_000, 3000)
    edges = np.repeat(np.arange(-10, 60) * 60_000_000, 3) + np.tile([-1, 0, 1], 70)
    offsets = np.concatenate([spread, edges])
    samples = pd.DataFrame({
        "time": [start + timedelta(microseconds=int(o)) for o in offsets], "run_id": "r",
        "host": rng.choice(["a", "b"], len(offsets)), "gpu_index": rng.integers(0, 4, len(offsets)),
        "utilization_ratio": np.where(rng.random(len(offsets)) < 0.05, np.nan, rng.random(len(offsets))),
        "source_file": "gpu.jsonl", "source_line": np.arange(len(offsets)),
    })
    signal = REGISTRY.get("busy_not_progressing")
    with warehouse_of(gpu_samples=samples) as con:
        frame = assert_same_ticks(con, {"start": start, "end": start + timedelta(hours=1),
                                        **{**signal.thresholds, "util_window_seconds": window}})
    assert len(frame) == 59   # 01:01 .. 01:59: the last tick, 02:00, is past the last sample


def test_the_checkpoint_progress_frame_from_step_ends_equals_the_one_from_every_ranks_records(home):
    _, warehouse = home
    signal = REGISTRY.get("checkpoint_overdue")
    reference = spliced(sql.sql_text(signal.query), "minutes AS (", "cadence AS (", "checkpoint_overdue_from_step_records.sql")
    with warehouse.connect(read_only=True) as con:
        # the default's hour; 20 min, inside the data
        frames = frames_alike(con, signal, reference, (signal.thresholds["lookback_seconds"], 1200.0))
    both = pd.concat(frames)
    # not vacuous: minutes of progress that had a save before them, and a cadence of at least two saves
    assert len(both) > 60 and both["last_saved_at"].notna().any() and both["interval_steps"].notna().any()


def badput_steps(con, scope: str, hour: str) -> pd.DataFrame:
    """The badput asset's steps (bp_steps) of the hour, as sql/badput/scope.sql or `scope` builds them."""
    start = datetime.strptime(hour, "%Y-%m-%d-%H:%M")
    params = {"start": start, "end": start + timedelta(hours=1), **BadputConfig().model_dump(), **as_params(peak_table())}
    params["read_from"] = sql.run(con, "badput/extent", params).fetchone()[0]
    sql.execute_text(con, scope, params)
    return con.execute("SELECT * FROM bp_steps ORDER BY run_id, attempt, step").df()


@pytest.mark.parametrize("spread", [0.0, 2.0], ids=["as_simulated", "ranks_straddle_minutes"])
def test_badput_steps_from_step_ends_equal_the_ones_grouped_from_every_ranks_records(home, spread, tmp_path):
    """As simulated (badput.yaml: a run restarted from its checkpoint computes its steps again), and with ranks
    that report a step up to `spread` s apart (steps straddle minutes) and a run restarted inside a minute it
    reported steps in (its records there belong to two attempts): those steps are grouped from the records again."""
    _, warehouse = home
    copy = WarehouseResource(path=str(tmp_path / "warehouse.duckdb"))
    shutil.copy(warehouse.path, copy.path)
    scope = sql.sql_text("badput/scope")
    reference = spliced(scope, "WITH ends AS (", "placed AS (", "badput_steps_from_step_records.sql")
    with copy.connect() as con:
        if spread:
            con.execute("UPDATE training_steps SET time = time + to_microseconds(CAST($s * 1e6 * (rank % 5) / 4 AS BIGINT))",
                        {"s": spread})
            # and a run restarts in the middle of a minute it reports steps in: its records there are two attempts'
            con.execute("INSERT INTO lineage_events SELECT l.* REPLACE (e.minute + INTERVAL 30 SECOND AS time) "
                        "FROM lineage_events l, (SELECT run_id, minute FROM step_ends ORDER BY run_id, minute "
                        "                        LIMIT 1 OFFSET (SELECT count(*) // 2 FROM step_ends)) e "
                        "WHERE l.event = 'run_started' AND l.run_id = e.run_id")
            first, last = con.execute("SELECT min(minute), max(minute) FROM step_ends").fetchone()
            sql.run(con, "baselines/step_ends", {"from": first, "end": last + timedelta(minutes=2), "start": first})
        regrouped = con.execute("SELECT count(*) FROM (SELECT run_id, step FROM step_ends GROUP BY ALL HAVING count(*) > 1)"
                                ).fetchone()[0]
        restarted = con.execute("SELECT count(*) FROM step_ends e SEMI JOIN lineage_events l ON l.run_id = e.run_id "
                                "AND l.event = 'run_started' AND time_bucket(INTERVAL 1 MINUTE, l.time) = e.minute").fetchone()[0]
        for hour in HOURS:
            now = badput_steps(con, scope, hour)
            pd.testing.assert_frame_equal(now, badput_steps(con, reference, hour), check_exact=True)
            assert len(now) > 100
    if spread:   # not vacuous: steps straddle minutes, and a minute holds a restart and steps
        assert regrouped > 10 and restarted > 0
