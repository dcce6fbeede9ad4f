"""Baselines: per-minute series with trailing robust statistics, computed per partition on its own."""

import pandas as pd
import pytest

from tests.helpers import run_baselines

HOURS = ("2026-11-30-00:00", "2026-11-30-01:00")


def read(resources, query):
    with resources["warehouse"].connect(read_only=True) as con:
        return con.execute(query).df()


def assert_run_starts_are_the_runs_first_minutes(resources, hour: str) -> None:
    """run_starts (what the detect SQL reads for a run's age) holds each run's first minute in run_minutes,
    whatever order the hours were computed in."""
    kept = read(resources, "SELECT run_id, first_minute FROM run_starts ORDER BY run_id")
    scanned = read(resources, "SELECT run_id, min(minute) AS first_minute FROM run_minutes GROUP BY run_id ORDER BY run_id")
    pd.testing.assert_frame_equal(kept, scanned)
    assert not kept.empty and str(kept["first_minute"].min()).startswith(hour)


def test_run_minutes_follow_the_runs_own_clock(small_home, resources, instance):
    for key in HOURS:
        run_baselines(small_home, key, instance)
    runs = read(resources, "SELECT * FROM run_minutes WHERE run_id = 'llm-small' ORDER BY minute")
    steady = runs[runs["baseline_minutes"] >= 20]
    # small.yaml steps every 2 s: ~30 steps a minute, a 2 s median step and baseline, a small MAD
    assert steady["step_seconds_baseline"].median() == pytest.approx(2.0, rel=0.05)
    assert steady["steps_completed"].median() == pytest.approx(30, abs=3)
    assert (steady["step_seconds_mad"] < 0.2).all()
    assert (runs["baseline_window_minutes"] == 30).all()
    # the hang (00:50-01:10) leaves a gap of minutes without steps: no rows, not zeros
    hang = runs[(runs["minute"] > pd.Timestamp("2026-11-30 00:51")) & (runs["minute"] < pd.Timestamp("2026-11-30 01:09"))]
    assert hang.empty
    ranks = read(resources, "SELECT * FROM rank_minutes WHERE minute = TIMESTAMP '2026-11-30 00:30'")
    assert sorted(ranks["rank"]) == [0, 1] and (ranks["peer_ranks"] == 2).all()
    assert ranks["peer_compute_seconds"].iloc[0] == pytest.approx(ranks["compute_seconds"].median())
    gpus = read(resources, "SELECT * FROM gpu_minutes WHERE minute = TIMESTAMP '2026-11-30 00:30'")
    assert len(gpus) == 2 and (gpus["samples"] == 6).all() and (gpus["run_id"] == "llm-small").all()


def test_first_minutes_have_too_little_history(small_home, resources, instance):
    run_baselines(small_home, HOURS[0], instance)
    first = read(resources, "SELECT baseline_minutes, step_seconds_baseline FROM run_minutes ORDER BY minute LIMIT 1")
    assert first.loc[0, "baseline_minutes"] == 0 and pd.isna(first.loc[0, "step_seconds_baseline"])


def test_retention_keeps_a_run_s_start_while_any_of_its_minutes_are_kept(small_home, resources, instance):
    from orchestration.storage import sql

    run_baselines(small_home, HOURS[0], instance)
    starts = "SELECT run_id, first_minute FROM run_starts"
    with resources["warehouse"].connect() as con:
        (first,) = con.execute(starts).fetchall()
        sql.run(con, "maintenance/delete_minutes", {"minutes_before": pd.Timestamp("2026-11-30 00:30")})
        assert con.execute(starts).fetchall() == [first]   # the run still started then, though its first minutes are gone
        sql.run(con, "maintenance/delete_minutes", {"minutes_before": pd.Timestamp("2026-12-01")})
        assert con.execute(starts).fetchall() == []


def test_a_partition_reads_its_lookback_from_ingest_not_from_earlier_baselines(small_home, resources, instance):
    import dagster as dg

    from assets.ingest import ingest_assets

    for key in HOURS:
        dg.materialize(ingest_assets, resources=resources, partition_key=key, instance=instance)   # both hours ingested
    run_baselines(small_home, HOURS[1], instance)            # hour 1's baselines before hour 0's exist
    alone = read(resources, "SELECT * FROM run_minutes ORDER BY ALL")
    assert_run_starts_are_the_runs_first_minutes(resources, "2026-11-30 01:")
    run_baselines(small_home, HOURS[0], instance)
    assert_run_starts_are_the_runs_first_minutes(resources, "2026-11-30 00:")   # moved back by the older hour
    run_baselines(small_home, HOURS[1], instance)
    assert_run_starts_are_the_runs_first_minutes(resources, "2026-11-30 00:")
    after = read(resources, f"SELECT * FROM run_minutes WHERE minute >= TIMESTAMP '{HOURS[1][:10]} 01:00' ORDER BY ALL")
    pd.testing.assert_frame_equal(alone, after)


def test_baselines_depend_on_the_previous_hour_of_ingest():
    from orchestration.definitions import defs

    graph = defs.resolve_asset_graph()
    node = graph.get(dg_key("training_baselines"))
    assert dg_key("training_steps") in node.parent_keys
    mapping = graph.get_partition_mapping(dg_key("training_baselines"), dg_key("training_steps"))
    assert mapping.start_offset == -1 and mapping.end_offset == 0


def dg_key(name):
    import dagster as dg

    return dg.AssetKey(name)
