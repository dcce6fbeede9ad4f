"""Badput accounting on the badput shapes (simulator/scenarios/badput.yaml), through the real Dagster
materialize of the ingest assets, the `badput` asset, the checks that matter here and the incidents
fold: each category equals what the simulator injected (badput_truth.json) within one sample interval
per GPU, the categories sum to the allocated GPU-hours exactly, MFU from Megatron's TFLOPs and from
the 6N rule agree, the MFU-drop signal flags the regression, and a restart's cost lands on its
incident."""

from __future__ import annotations

import json
import random
import shutil
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from assets.badput import BadputConfig, badput, write_hour
from assets.baselines import training_baselines
from assets.incidents import incidents
from assets.ingest import ingest_assets
from checks.asset_checks import build_check
from checks.registry import REGISTRY
from orchestration.config.peak_flops import peak_table
from orchestration.definitions import resources_for
from orchestration.storage import sql
from orchestration.storage.warehouse import WarehouseResource, transaction
from simulator import load_scenario, simulate
from simulator.badput_shapes import CATEGORIES
from tests.helpers import memory_instance

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "simulator" / "scenarios" / "badput.yaml"
HOURS = ("2026-11-30-00:00", "2026-11-30-01:00")
CHECKS = [build_check(REGISTRY.get(name)) for name in ("mfu_drop", "rank_dropout", "busy_not_progressing")]


def q(warehouse, query: str, params: dict | None = None) -> pd.DataFrame:
    with warehouse.connect(read_only=True) as con:
        return con.execute(query, params or {}).df()


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    home = tmp_path_factory.mktemp("badput")
    scenario = load_scenario(SCENARIO)
    simulate(scenario, home)
    resources = resources_for(home)
    checks = {}
    with memory_instance() as instance:
        for key in HOURS:
            result = dg.materialize([*ingest_assets, training_baselines, badput, *CHECKS], resources=resources, partition_key=key,
                                    instance=instance)
            assert result.success
            checks[key] = {e.check_name: e for e in result.get_asset_check_evaluations()}
        assert dg.materialize([incidents, *ingest_assets], selection=[incidents.key], resources=resources,
                              instance=instance).success
    return {"home": home, "scenario": scenario, "warehouse": resources["warehouse"], "checks": checks,
            "truth": json.loads((home / "badput_truth.json").read_text()), "resources": resources}


def _measured(shapes) -> pd.DataFrame:
    sums = q(shapes["warehouse"], "SELECT run_id, sum(COLUMNS('.*_gpu_seconds')) FROM badput_minutes GROUP BY run_id")
    sums.columns = [c.removeprefix("sum(").removesuffix(")").removesuffix("_gpu_seconds") for c in sums.columns]
    return sums.set_index("run_id")


@pytest.mark.parametrize("run_id", ["crash-restart", "checkpoint-heavy", "data-starved", "eval-heavy", "straggler", "mfu-slow"])
def test_each_category_equals_the_injected_time_within_one_sample_interval(shapes, run_id):
    measured = _measured(shapes).loc[run_id]
    truth = shapes["truth"][run_id]
    interval = shapes["scenario"].cluster.sample_interval.total_seconds()
    gpus = 2
    for category in (*CATEGORIES, "allocated"):
        assert abs(measured[category] - truth[category]) <= gpus * interval, (category, measured[category], truth[category])
    # the shape each run was built for is there, and large against the tolerance
    shape = {"crash-restart": "wasted_progress", "checkpoint-heavy": "checkpoint_save", "data-starved": "data_stall",
             "eval-heavy": "evaluation", "straggler": "slow_steps", "mfu-slow": "slow_steps"}[run_id]
    assert truth[shape] > 5 * gpus * interval


def test_the_categories_sum_to_the_allocated_gpu_hours_exactly(shapes):
    minutes = q(shapes["warehouse"], "SELECT * FROM badput_minutes")
    parts = minutes[[f"{c}_gpu_seconds" for c in CATEGORIES]].sum(axis=1)
    assert (parts - minutes["allocated_gpu_seconds"]).abs().max() < 1e-9
    assert (minutes[[f"{c}_gpu_seconds" for c in CATEGORIES]] >= -1e-9).all().all()
    # one row per run and minute; every held GPU sample is in it
    assert not minutes.duplicated(["run_id", "minute"]).any()
    held = q(shapes["warehouse"], "SELECT count(*) AS n FROM gpu_samples WHERE run_id IS NOT NULL").iloc[0, 0]
    assert minutes["allocated_gpu_seconds"].sum() == pytest.approx(held * 10.0)


def test_a_restart_rewrites_the_minutes_it_computed_again(shapes):
    run = q(shapes["warehouse"], "SELECT * FROM badput_by_run WHERE run_id = 'crash-restart'").iloc[0]
    assert run["restarts"] == 1 and run["wasted_progress_gpu_hours"] > 0 and run["hang_gpu_hours"] > 0
    (cost,) = q(shapes["warehouse"], "SELECT * FROM restart_badput").to_dict("records")
    assert cost["resumed_from_checkpoint"] == "/checkpoints/crash-restart/step-000900"
    truth = shapes["truth"]["crash-restart"]
    assert cost["wasted_progress_gpu_hours"] * 3600 == pytest.approx(truth["wasted_progress"], abs=20)
    assert cost["gpu_hours_lost"] == pytest.approx(cost["wasted_progress_gpu_hours"] + cost["startup_gpu_hours"])
    # the restart attempt's start-up only (the first attempt's start-up is not the restart's cost)
    first_startup = q(shapes["warehouse"], "SELECT sum(startup_gpu_seconds) FROM badput_minutes "
                                           "WHERE run_id = 'crash-restart' AND attempt = 0").iloc[0, 0]
    assert cost["startup_gpu_hours"] * 3600 == pytest.approx(truth["startup"] - first_startup, abs=20)


def test_the_restart_cost_is_on_the_disruption_incident(shapes):
    cost = q(shapes["warehouse"], "SELECT * FROM incident_restart_cost WHERE run_id = 'crash-restart'")
    assert not cost.empty and set(cost["signal"]) <= {"rank_dropout", "busy_not_progressing"}
    row = cost.iloc[0]
    assert row["resumed_from_checkpoint"] == "/checkpoints/crash-restart/step-000900"
    assert row["gpu_hours_lost"] > 0


def test_rerunning_a_partition_leaves_the_same_rows(shapes, tmp_path):
    before = q(shapes["warehouse"], "SELECT * FROM badput_minutes ORDER BY run_id, minute")
    copy = tmp_path / "home"
    shutil.copytree(shapes["home"], copy, ignore=shutil.ignore_patterns("raw", "checkpoints"))
    (copy / "raw").symlink_to(shapes["home"] / "raw")
    resources = resources_for(copy)
    with memory_instance() as instance:
        for key in reversed(HOURS):  # the later hour first, then the earlier one again
            assert dg.materialize([*ingest_assets, badput], selection=[badput.key], resources=resources,
                                  partition_key=key, instance=instance).success
    after = q(resources["warehouse"], "SELECT * FROM badput_minutes ORDER BY run_id, minute")
    pd.testing.assert_frame_equal(before, after)


def test_ettr_counts_the_downtime_between_crash_and_restart(shapes):
    runs = q(shapes["warehouse"], "SELECT * FROM badput_by_run").set_index("run_id")
    crash = runs.loc["crash-restart"]
    assert crash["ettr"] < crash["goodput_ratio"]     # the 3 minutes released count against ETTR only
    assert crash["downtime_gpu_hours"] == pytest.approx(2 * 3 / 60)   # 00:45 -> 00:48 on both GPUs
    assert crash["ettr"] == pytest.approx(crash["productive_gpu_hours"] / (crash["allocated_gpu_hours"] + 0.1))
    steady = runs.loc["straggler"]
    assert steady["ettr"] == pytest.approx(steady["goodput_ratio"], rel=1e-9)
    day = q(shapes["warehouse"], "SELECT * FROM badput_by_team_day WHERE team = 'crash-restart'").iloc[0]
    assert day["ettr"] == pytest.approx(crash["ettr"])


def test_goodput_view_agrees_with_the_badput_breakdown(shapes):
    good = q(shapes["warehouse"], "SELECT run_id, sum(productive_gpu_hours) AS p, sum(allocated_gpu_hours) AS a, "
                                  "sum(busy_not_progressing_gpu_hours) AS h, sum(lost_to_restarts_gpu_hours) AS l "
                                  "FROM goodput GROUP BY run_id").set_index("run_id")
    runs = q(shapes["warehouse"], "SELECT * FROM badput_by_run").set_index("run_id")
    assert good["p"].to_dict() == pytest.approx(runs["productive_gpu_hours"].to_dict())
    assert good["a"].to_dict() == pytest.approx(runs["allocated_gpu_hours"].to_dict())
    assert good.loc["crash-restart", "h"] == pytest.approx(runs.loc["crash-restart", "hang_gpu_hours"])
    assert good.loc["crash-restart", "l"] > runs.loc["crash-restart", "wasted_progress_gpu_hours"]


def test_slow_steps_are_attributed_to_the_incident_that_explains_them(shapes):
    causes = q(shapes["warehouse"], "SELECT * FROM badput_by_cause WHERE run_id = 'mfu-slow' AND category = 'slow_steps'")
    by = causes.groupby("cause")["gpu_hours"].sum()
    assert by.get("mfu_drop", 0) > 0.8 * by.sum()    # the regression's slow steps, under its incident


def test_mfu_from_megatron_tflops_and_from_the_6n_rule_agree_within_5_percent(shapes):
    mfu = q(shapes["warehouse"], "SELECT * FROM badput_minutes WHERE run_id = 'mfu-slow' AND steps_completed > 0")
    ratio = (mfu["mfu_from_reported_tflops"] / mfu["mfu_from_model_flops"]).median()
    assert abs(ratio - 1) < 0.05
    # and both are the physics: 2048 tokens x 6 x 64.7 B parameters per 2 s step on a 989.4 TFLOP/s H100
    healthy = mfu[mfu["minute"] < pd.Timestamp("2026-11-30 00:40")]
    n = 12 * 80 * 8192**2 + 32000 * 8192
    assert healthy["mfu_from_model_flops"].median() == pytest.approx(2048 * 6 * n / 2.0 / 989.4e12, rel=0.02)
    assert (healthy["peak_flops_per_gpu"] == 989.4e12).all() and (healthy["precision"] == "bf16").all()


def test_the_mfu_drop_check_flags_the_regression(shapes):
    evaluation = shapes["checks"][HOURS[0]]["mfu_drop"]
    assert not evaluation.passed
    findings = q(shapes["warehouse"], "SELECT * FROM findings WHERE signal = 'mfu_drop'")
    assert set(findings["entity_id"]) == {"mfu-slow"}
    onset = findings["onset"].min()
    assert pd.Timestamp("2026-11-30 00:40") <= onset <= pd.Timestamp("2026-11-30 00:42")
    assert (findings["detected_at"].min() - pd.Timestamp("2026-11-30 00:40")).total_seconds() <= 8 * 60
    (incident,) = q(shapes["warehouse"], "SELECT * FROM incidents WHERE signal = 'mfu_drop'").to_dict("records")
    assert incident["run_id"] == "mfu-slow" and "MFU" in incident["playbook"]


RAW = {"gpu_samples": "time", "training_steps": "time", "lineage_events": "time"}
LATE = (pd.Timestamp("2026-11-30T00:57"), pd.Timestamp("2026-11-30T01:00"), pd.Timestamp("2026-11-30T01:20"))
"""Hour 0's GPU samples from 00:57 to 01:00 arrive late: with the first tick after 01:20."""


def arrive(con, since: pd.Timestamp, cut: pd.Timestamp) -> set:
    """Move the held-back rows before `cut` (less hour 0's late samples before their time) into the tables; write
    the step ends of the minutes from `since` (the last cut) as the training baselines do. The hours that received
    rows."""
    hours = set()
    for table, column in RAW.items():
        rows, params = f"{column} < $cut", {"cut": cut.to_pydatetime()}
        if table == "gpu_samples" and cut < LATE[2]:
            rows += f" AND NOT ({column} >= $late AND {column} < $until)"
            params |= {"late": LATE[0].to_pydatetime(), "until": LATE[1].to_pydatetime()}
        hours |= {h for (h,) in con.execute(f"SELECT DISTINCT time_bucket(INTERVAL 1 HOUR, {column}) FROM pending_{table} "
                                            f"WHERE {rows}", params).fetchall()}
        con.execute(f"INSERT INTO {table} SELECT * FROM pending_{table} WHERE {rows}", params)
        con.execute(f"DELETE FROM pending_{table} WHERE {rows}", params)
    first = since.floor("min").to_pydatetime()
    sql.run(con, "baselines/step_ends", {"from": first, "end": cut.ceil("min").to_pydatetime(), "start": first})
    return hours


def test_live_ticks_write_from_the_first_changed_minute_and_leave_what_whole_hours_do(shapes, tmp_path):
    """The badput shapes' rows arrive as a live cluster's do: each tick brings the rows up to a random second
    (the step ends of their minutes written as the training baselines write them), and hour 0's last samples
    arrive late, after hour 1 began. At each tick the hours that received rows are written the live way (from the
    first minute whose inputs changed: assets/badput.write_hour) and, on a copy of the warehouse as it was, whole:
    the rows and marks are the same every time, and the live ticks wrote less than whole hours."""
    live = WarehouseResource(path=str(tmp_path / "live.duckdb"))
    shutil.copy(shapes["warehouse"].path, live.path)
    with live.connect() as con:
        for table in RAW:
            con.execute(f"CREATE TABLE pending_{table} AS SELECT * FROM {table}; DELETE FROM {table}")
        con.execute("DELETE FROM step_ends; DELETE FROM badput_minutes; DELETE FROM badput_marks")
    rng = random.Random(7)
    begin = pd.Timestamp("2026-11-30T00:00")
    cuts = sorted({begin + pd.Timedelta(seconds=rng.randrange(60, 7200)) for _ in range(14)}) + [begin + pd.Timedelta(hours=2)]
    written = []
    for tick, cut in enumerate(cuts):
        with live.connect() as con:
            hours = arrive(con, cuts[tick - 1] if tick else begin, cut)
        for hour in sorted(hours):
            whole = WarehouseResource(path=str(tmp_path / f"whole_{tick}.duckdb"))
            shutil.copy(live.path, whole.path)
            for warehouse, is_live in ((whole, False), (live, True)):
                with warehouse.connect() as con, transaction(con):
                    done = write_hour(con, hour, hour + timedelta(hours=1), BadputConfig(), peak_table(), live=is_live)
            written.append((tick, hour, pd.Timestamp(done["written_from"])))
            for table, order in (("badput_minutes", "run_id, minute"), ("badput_marks", "partition_start, run_id, minute")):
                pd.testing.assert_frame_equal(q(live, f"SELECT * FROM {table} ORDER BY {order}"),
                                              q(whole, f"SELECT * FROM {table} ORDER BY {order}"),
                                              check_exact=True, obj=f"{table} at {written[-1]}")
            Path(whole.path).unlink()
    # not vacuous: every run and minute of the shapes written; hour 0 written again for its late samples, not whole
    assert len(q(live, "SELECT 1 FROM badput_minutes")) == len(q(shapes["warehouse"], "SELECT 1 FROM badput_minutes")) > 400
    again = [w for t, h, w in written if h == begin and cuts[t] > LATE[2]]
    assert again and again[0] > begin
    assert sum(1 for _, h, w in written if w > h) >= len(written) // 2, written

