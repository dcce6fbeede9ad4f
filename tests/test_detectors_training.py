"""Training detectors as pure functions, on hand-made per-minute frames shaped like their SQL's.

Per detector: a case it must flag, a quiet healthy case, and edges (healthy noise that looks a
little like the fault; too little history). The frames mimic `run_minutes`: one row per minute
with records, the trailing 30-minute median/MAD baselines computed the way
sql/baselines/run_minutes.sql does, history rows (before the partition) with `in_window` false.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import checks.signals  # noqa: F401  (registers the signals)
from assets.baselines import replace_series
from checks.registry import FINDING_COLUMNS, REGISTRY
from tests.detector_frames import warehouse_of

T0 = pd.Timestamp("2026-11-30 00:00")
GIB = 2**30
MINUTES = 300          # five hours of history ...
PARTITION = 240        # ... the last of which is the evaluated partition (ticks set from here)


def th(name: str) -> dict:
    return dict(REGISTRY.get(name).thresholds)


def _trailing(values: pd.Series, minutes: pd.Series, how: str, window: int = 30) -> pd.Series:
    s = pd.Series(values.to_numpy(dtype=float), index=pd.DatetimeIndex(minutes))
    roll = s.rolling(f"{window}min", closed="left", min_periods=1)
    if how == "median":
        out = roll.median()
    else:
        out = roll.apply(lambda a: np.median(np.abs(a - np.median(a))), raw=True)
    return pd.Series(out.to_numpy(), index=values.index)


def run_frame(
    minutes: int = MINUTES,
    partition: int = PARTITION,
    seed: int = 1,
    step_seconds: float = 2.0,
    loss_noise: float = 0.002,
    loss_factor=None,
    step_factor=None,
    data_extra=None,
    collective_extra=None,
    grad_factor=None,
    grad_noise: float = 0.03,
    nonfinite=None,
    nan_counter=None,
    loss_scale=None,
    skipped=None,
    drop=(),
    start_step: int = 0,
    lr_factor=None,
) -> pd.DataFrame:
    """A healthy run's per-minute series (minute 0 = T0); the keyword callables of the minute
    index (an int array) bend it into a fault; `drop` removes minutes (evaluation pauses)."""
    rng = np.random.default_rng(seed)
    m = np.arange(minutes)
    per_min = 60.0 / step_seconds
    step = start_step + ((m + 1) * per_min).astype(int)
    curve = 2.0 + 7.0 * (1.0 + step / 100.0) ** -0.35
    loss = curve * np.exp(loss_noise * rng.standard_normal(minutes))
    if loss_factor is not None:
        loss = loss * loss_factor(m)
    grad = (0.25 + 1.75 * (1 + step / 500.0) ** -0.5) * np.exp(grad_noise * rng.standard_normal(minutes))
    if grad_factor is not None:
        grad = grad * grad_factor(m)
    steps_s = step_seconds * (1 + 0.005 * rng.standard_normal(minutes))
    if step_factor is not None:
        steps_s = steps_s * step_factor(m)
    data = 0.01 * step_seconds + (data_extra(m) if data_extra is not None else 0.0)
    collective = 0.19 * step_seconds + (collective_extra(m) if collective_extra is not None else 0.0)
    steps_s = steps_s + (data_extra(m) if data_extra is not None else 0.0) + (collective_extra(m) if collective_extra is not None else 0.0)
    f = pd.DataFrame({
        "run_id": "run-a",
        "minute": T0 + pd.to_timedelta(m, unit="min"),
        "world_size": 4, "ranks_reporting": 4,
        "steps_completed": int(per_min) if per_min >= 1 else 1,
        "last_step": step,
        "loss": loss, "loss_min": loss * 0.98, "loss_max": loss * 1.02,
        "nonfinite_losses": nonfinite(m) if nonfinite is not None else 0,
        "nan_iterations_total": nan_counter(m) if nan_counter is not None else 0,
        "skipped_iterations_total": skipped(m) if skipped is not None else (0 if loss_scale is not None else None),
        "grad_norm": grad, "grad_norm_max": grad * 1.4,
        "loss_scale": loss_scale(m) if loss_scale is not None else None,
        "learning_rate": 3e-4 * (lr_factor(m) if lr_factor is not None else 1.0),
        "tokens_per_second": 4 * 16384 / steps_s,
        "step_seconds": steps_s, "step_seconds_max": steps_s * 1.3,
        "data_seconds": data, "compute_seconds": 0.8 * step_seconds, "collective_seconds": collective,
        "hosts": [["node-0"]] * minutes, "gpus": [["node-0:0", "node-0:1", "node-0:2", "node-0:3"]] * minutes,
    })
    f = f.drop(index=[i for i in drop if i < minutes]).reset_index(drop=True)
    f["pace_seconds"] = f["step_seconds"]     # every rank steps together: the job's pace is its step
    for col in ("step_seconds", "pace_seconds", "tokens_per_second", "loss", "grad_norm", "collective_seconds"):
        f[f"{col}_baseline"] = _trailing(f[col], f["minute"], "median")
        f[f"{col}_mad"] = _trailing(f[col], f["minute"], "mad")
    f["baseline_window_minutes"] = 30
    f["baseline_minutes"] = f["minute"].map(lambda t: int(((f["minute"] < t) & (f["minute"] >= t - pd.Timedelta("30min"))).sum()))
    f["tick"] = f["minute"] + pd.Timedelta(minutes=1)
    f["in_window"] = f["minute"] >= T0 + pd.Timedelta(minutes=partition)
    return f


def memory_frame(minutes: int = MINUTES, partition: int = PARTITION, seed: int = 2,
                 growth=None, retries=None, inactive_growth=None) -> pd.DataFrame:
    """The worst rank's allocator figures per minute (the memory_fragmentation SQL's shape)."""
    rng = np.random.default_rng(seed)
    m = np.arange(minutes)
    reserved = 70 * GIB + (growth(m) if growth is not None else 0.0)
    allocated = 62 * GIB + rng.normal(0, 60e6, minutes)
    inactive = 1.5 * GIB + rng.normal(0, 300e6, minutes) + (inactive_growth(m) if inactive_growth is not None else 0.0)
    return pd.DataFrame({
        "run_id": "run-a",
        "minute": T0 + pd.to_timedelta(m, unit="min"),
        "tick": T0 + pd.to_timedelta(m + 1, unit="min"),
        "in_window": m >= partition,
        "gap_bytes": (reserved - allocated).astype(np.int64),
        "worst_rank": 3,
        "inactive_split_bytes": inactive.astype(np.int64),
        "alloc_retries_total": retries(m) if retries is not None else 0,
        "ooms_total": 0,
        "memory_reserved_bytes": np.asarray(reserved + np.zeros(minutes), dtype=np.int64),
        "memory_total_bytes": 80 * GIB,
        "ranks_reporting": 4,
        "hosts": [["node-0"]] * minutes, "gpus": [["node-0:3"]] * minutes,
    })


def at(minute: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(minutes=minute)


def ramp(start: int, end: int, top: float):
    """1 before `start`, growing geometrically to `top` at `end`, staying there after."""
    return lambda m: top ** np.clip((m - start) / (end - start), 0.0, 1.0)


def spike(start: int, length: int, height: float):
    """A jump to `height` at `start` decaying linearly back to 1 over `length` minutes."""
    return lambda m: 1.0 + (height - 1.0) * np.clip(1.0 - (m - start) / length, 0.0, 1.0) * (m >= start)


def decaying_spike(start: int, minutes: float, height: float):
    """A jump to `height` at `start` whose excess decays exponentially with time constant `minutes`."""
    return lambda m: 1.0 + (height - 1.0) * np.exp(-(m - start) / minutes) * (m >= start)


def step_up(start: int, factor: float, end: int | None = None):
    return lambda m: np.where((m >= start) & (m < (end if end is not None else 10**9)), factor, 1.0)


def plateau(start: int, share: float = 1.0):
    """Loss progress lost from `start` on: the curve's step advances only (1-share) per step."""
    def factor(m):
        step = (m + 1) * 30.0
        lost = np.clip(step - (start + 1) * 30.0, 0, None) * share
        slowed = 2.0 + 7.0 * (1.0 + (step - lost) / 100.0) ** -0.35
        return slowed / (2.0 + 7.0 * (1.0 + step / 100.0) ** -0.35)
    return factor


# --------------------------------------------------------------------------------------------- #
# Cases: (signal, frame builder, expected findings, expected onset minute or None)
# --------------------------------------------------------------------------------------------- #

FLAGGED = {
    "non_finite_loss": dict(frame=lambda: run_frame(nonfinite=lambda m: np.where((m >= 250) & (m < 253), 4, 0),
                                                      nan_counter=lambda m: np.clip(m - 249, 0, 3))),
    "loss_spike": dict(frame=lambda: run_frame(loss_factor=spike(250, 12, 1.4))),
    "loss_divergence": dict(frame=lambda: run_frame(loss_factor=ramp(245, 300, 1.8))),
    "loss_plateau": dict(frame=lambda: run_frame(loss_factor=plateau(200))),
    "step_time_regression": dict(frame=lambda: run_frame(data_extra=lambda m: np.where(m >= 250, 0.3, 0.0))),
    "grad_norm_spike": dict(frame=lambda: run_frame(grad_factor=step_up(250, 8.0, 253))),
    "loss_scale_collapse": dict(frame=lambda: run_frame(
        loss_scale=lambda m: np.where(m < 250, 65536.0, np.maximum(65536.0 / 2.0 ** (3 * (m - 249)), 1.0)),
        skipped=lambda m: np.clip(m - 249, 0, None) * 3)),
    "memory_fragmentation": dict(frame=lambda: memory_frame(
        growth=lambda m: np.clip(m - 230, 0, None) / 70 * 6 * GIB,
        retries=lambda m: np.clip(m - 250, 0, None) ** 2 // 10,
        inactive_growth=lambda m: np.clip(m - 230, 0, None) / 70 * 2 * GIB)),
}

EXPECTED_ONSET = {   # minute the fault began, and how late (minutes) the detector may put it
    "non_finite_loss": (250, 0), "loss_spike": (250, 0), "loss_divergence": (245, 15), "loss_plateau": (200, 15),
    "step_time_regression": (250, 0), "grad_norm_spike": (250, 0), "loss_scale_collapse": (250, 2),
    "memory_fragmentation": (230, 25),
}

QUIET = {
    "non_finite_loss": lambda: run_frame(),
    "loss_spike": lambda: run_frame(),
    "loss_divergence": lambda: run_frame(),
    "loss_plateau": lambda: run_frame(),
    "step_time_regression": lambda: run_frame(),
    "grad_norm_spike": lambda: run_frame(),
    "loss_scale_collapse": lambda: run_frame(loss_scale=lambda m: np.where((m // 20) % 2 == 0, 65536.0, 32768.0),
                                             skipped=lambda m: m // 40),
    "memory_fragmentation": lambda: memory_frame(),
}

EDGES = {
    # noisy but healthy, or a look-alike another signal owns, or too little history
    "non_finite_loss": {
        "nonfinite only before the partition": lambda: run_frame(nonfinite=lambda m: np.where(m == 100, 4, 0)),
        "counter reset by a restart": lambda: run_frame(nan_counter=lambda m: np.where(m < 245, 7, 0)),
    },
    "loss_spike": {
        "warm-up noise, too little history": lambda: run_frame(minutes=60, partition=0, loss_noise=0.03),
        "learning-rate drop": lambda: run_frame(loss_factor=step_up(250, 0.9)),
        "a divergence is not a spike": lambda: run_frame(loss_factor=ramp(245, 300, 1.8)),
        "jump that stays is not a spike": lambda: run_frame(loss_factor=step_up(250, 1.5)),
        "evaluation pauses": lambda: run_frame(drop=range(250, 253)),
    },
    "loss_divergence": {
        "warm-up noise, too little history": lambda: run_frame(minutes=60, partition=0, loss_noise=0.03),
        "a recovering spike is not a divergence": lambda: run_frame(loss_factor=spike(250, 12, 1.4)),
        "noisy healthy run": lambda: run_frame(loss_noise=0.02, seed=5),
    },
    "loss_plateau": {
        "too little history": lambda: run_frame(minutes=60, partition=0, loss_factor=plateau(25)),
        "converged run": lambda: run_frame(start_step=3_000_000, loss_noise=0.002),
        "learning-rate drop": lambda: run_frame(loss_factor=step_up(250, 0.9)),
        "settling after an LR drop": lambda: run_frame(loss_factor=lambda m: 1 - 0.08 * (1 - np.exp(-np.clip(m - 200, 0, None) / 8)),
                                                       lr_factor=step_up(200, 0.3)),
        "noisy healthy run": lambda: run_frame(loss_noise=0.02, seed=7),
        "a divergence is not a plateau": lambda: run_frame(loss_factor=ramp(245, 300, 1.8)),
        # a spike whose loss decays back over minutes: the tail is the spike's setback, not a plateau
        "a spike's decaying tail": lambda: run_frame(loss_factor=decaying_spike(250, 5, 1.2)),
        "a higher spike's slower tail": lambda: run_frame(loss_factor=decaying_spike(230, 10, 1.2)),
    },
    "step_time_regression": {
        "single slow minutes": lambda: run_frame(step_factor=lambda m: np.where(np.isin(m, [250, 262, 275]), 2.5, 1.0)),
        "evaluation and checkpoint pauses": lambda: run_frame(drop=[*range(250, 253), *range(270, 272)]),
        "slowdown is collective wait (straggler)": lambda: run_frame(collective_extra=lambda m: np.where(m >= 250, 0.4, 0.0)),
        "too little history": lambda: run_frame(minutes=14, partition=0, data_extra=lambda m: np.where(m >= 5, 0.4, 0.0)),
        "compilation warm-up": lambda: run_frame(minutes=60, partition=0, step_factor=lambda m: np.where(m < 4, 3.0, 1.0)),
    },
    "grad_norm_spike": {
        "one slow step per minute": lambda: run_frame(step_seconds=60.0, grad_factor=step_up(250, 8.0, 251)),
        "loss spike raises the grad norm too": lambda: run_frame(loss_factor=spike(250, 12, 1.4), grad_factor=step_up(250, 4.0, 254)),
        "warm-up, too little history": lambda: run_frame(minutes=60, partition=0, grad_factor=step_up(3, 5.0, 6)),
        "noisy healthy grad norm": lambda: run_frame(grad_noise=0.15, seed=11),
    },
    "loss_scale_collapse": {
        "bf16 run": lambda: run_frame(),
        "start-up search from 2^32": lambda: run_frame(minutes=60, partition=0,
                                                       loss_scale=lambda m: np.maximum(2.0**32 / 4.0**m, 65536.0),
                                                       skipped=lambda m: np.minimum(m, 8) * 2),
    },
    "memory_fragmentation": {
        "growth without fragmentation symptoms": lambda: memory_frame(growth=lambda m: np.clip(m - 230, 0, None) / 70 * 1.5 * GIB),
        "too little history": lambda: memory_frame(minutes=14, partition=0, growth=lambda m: m / 14 * 6 * GIB,
                                                   retries=lambda m: m // 2),
        "allocator warm-up": lambda: memory_frame(minutes=60, partition=0, growth=lambda m: np.minimum(m, 3) * GIB,
                                                  retries=lambda m: np.minimum(m, 2)).assign(first_minute=T0),
    },
}

EDGE_CASES = [(name, label, build) for name, cases in EDGES.items() for label, build in cases.items()]


def detect(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    signal = REGISTRY.get(name)
    found = signal.detector(frame, signal.thresholds)
    assert list(found.columns) == list(FINDING_COLUMNS)
    return found


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_flags_the_fault(name):
    found = detect(name, FLAGGED[name]["frame"]())
    assert len(found) == 1, found
    row = found.iloc[0]
    onset, slack = EXPECTED_ONSET[name]
    assert at(onset) - pd.Timedelta(minutes=2) <= row["onset"] <= at(onset + slack), row["onset"]
    assert at(PARTITION) < row["detected_at"] <= row["last_seen"] <= at(MINUTES)
    assert row["entity_id"] == "run-a" and row["run_id"] == "run-a" and row["gpus"]
    for key in ("value", "baseline", "threshold"):
        assert row[key] is not None and np.isfinite(float(row[key])), key
    assert "window" in row["evidence"]


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_playbook_fills_from_the_evidence(name):
    row = detect(name, FLAGGED[name]["frame"]()).iloc[0]
    facts = {**row["evidence"], "run_id": row["run_id"], "entity_id": row["entity_id"], "hosts": "node-0",
             "gpus": ", ".join(row["gpus"]), "gpu_count": len(row["gpus"]), "checkpoint": "ckpt", "gpu_hours": 1.0}
    text = REGISTRY.get(name).playbook.render(facts)
    assert not re.findall(r"\{[a-z_]+\}", text), text


@pytest.mark.parametrize("name", sorted(QUIET))
def test_quiet_on_a_healthy_run(name):
    assert detect(name, QUIET[name]()).empty


@pytest.mark.parametrize("name,label,build", EDGE_CASES, ids=[f"{n}-{label}" for n, label, _ in EDGE_CASES])
def test_quiet_on_healthy_noise_and_look_alikes(name, label, build):
    assert detect(name, build()).empty, label


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_quiet_on_no_data(name):
    assert detect(name, FLAGGED[name]["frame"]().iloc[0:0]).empty


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_history_rows_are_never_reported(name):
    """The same fault entirely before the partition: the earlier hour reported it, this one must not."""
    frame = FLAGGED[name]["frame"]()
    frame["in_window"] = False
    assert detect(name, frame).empty


def test_spike_and_divergence_are_told_apart():
    spiky, diverging = FLAGGED["loss_spike"]["frame"](), FLAGGED["loss_divergence"]["frame"]()
    assert len(detect("loss_spike", spiky)) == 1 and detect("loss_divergence", spiky).empty
    assert len(detect("loss_divergence", diverging)) == 1 and detect("loss_spike", diverging).empty
    stuck = run_frame(loss_factor=step_up(250, 1.5))           # a jump that never comes down: worse than a spike
    assert len(detect("loss_divergence", stuck)) == 1


def test_plateau_flags_a_partial_stall_and_reports_the_shortfall():
    found = detect("loss_plateau", run_frame(loss_factor=plateau(200, share=0.8)))
    assert len(found) == 1
    ev = found.iloc[0]["evidence"]
    assert ev["observed_improvement_pct"] < ev["threshold_pct"] < ev["predicted_improvement_pct"]


def test_step_time_regression_stays_open_after_the_trailing_median_absorbs_it():
    found = detect("step_time_regression", FLAGGED["step_time_regression"]["frame"]())
    # the 30-min trailing median catches up by minute ~265; the 2-hour reference keeps it visible
    assert found.iloc[0]["last_seen"] == at(MINUTES)
    assert found.iloc[0]["evidence"]["collective_share_pct"] < 50


def test_non_finite_loss_counts_nan_iterations_without_loss_values():
    frame = run_frame(nan_counter=lambda m: np.where(m >= 260, 6 + (m - 260), 5))
    found = detect("non_finite_loss", frame)
    assert len(found) == 1 and found.iloc[0]["onset"] == at(260)


def test_loss_scale_collapse_to_the_floor_without_skip_counter():
    frame = run_frame(loss_scale=lambda m: np.where(m < 250, 65536.0, 1.0))
    frame["skipped_iterations_total"] = None
    found = detect("loss_scale_collapse", frame)
    assert len(found) == 1 and found.iloc[0]["value"] == 1.0


def test_memory_fragmentation_reports_oom_headroom():
    row = detect("memory_fragmentation", FLAGGED["memory_fragmentation"]["frame"]()).iloc[0]
    ev = row["evidence"]
    assert ev["gpu_memory_gib"] == 80.0 and 0 < ev["headroom_gib"] < 10 and ev["alloc_retries_in_window"] > 0


# --------------------------------------------------------------------------------------------- #
# The real checks on a simulated run: SQL shape, check results, evidence metadata
# --------------------------------------------------------------------------------------------- #

TRAINING_FAULTS = {
    "name": "training-faults", "seed": 5, "start": "2026-11-30T00:00:00Z", "duration": "2h",
    "cluster": {"hosts": 1, "gpus_per_host": 2, "sample_interval": "10s"},
    "runs": [{
        "id": "ft-a", "start": "5m", "duration": "1h50m", "hosts": [0], "ranks": 2, "step_time": "2s",
        "precision": "fp16", "ordinary_noise": True, "eval_interval_steps": 700,
        "loss": {"initial": 3.2, "floor": 1.4, "decay": 0.5, "noise": 0.03},
        "learning_rate": {"peak": 2.0e-5, "warmup_steps": 100, "min_ratio": 0.0},
        "checkpoint_interval_steps": 1000,
    }],
    "faults": [
        {"type": "nan_loss", "target": "run:ft-a", "onset": "1h05m", "duration": "10m", "magnitude": 0.1},
        {"type": "step_time_regression", "target": "run:ft-a", "onset": "1h25m", "duration": "25m", "magnitude": 0.3},
    ],
}


@pytest.fixture(scope="module")
def faulty_home(tmp_path_factory):
    from simulator import simulate
    from simulator.scenario import scenario_from_dict
    from tests.helpers import memory_instance, run_detect

    home = tmp_path_factory.mktemp("training-faults")
    simulate(scenario_from_dict(TRAINING_FAULTS), home)
    results = {}
    with memory_instance() as instance:
        for key in ("2026-11-30-00:00", "2026-11-30-01:00"):
            results[key] = run_detect(home, key, instance)
    return home, results


def test_checks_flag_the_simulated_faults_with_evidence(faulty_home):
    from tests.helpers import check_evaluation

    _, results = faulty_home
    first, second = results["2026-11-30-00:00"], results["2026-11-30-01:00"]
    for name in ("non_finite_loss", "step_time_regression"):
        assert check_evaluation(first, name).passed, f"{name} flagged a healthy hour"
        evaluation = check_evaluation(second, name)
        assert not evaluation.passed, name
        meta = evaluation.metadata
        assert {"value", "threshold", "baseline", "evidence", "window"} <= set(meta), sorted(meta)
        assert "window" in meta["evidence"].value
    assert check_evaluation(second, "non_finite_loss").severity.value == "ERROR"      # SEV1 pages
    ev = check_evaluation(second, "step_time_regression").metadata["evidence"].value
    assert ev["increase_pct"] >= 20 and ev["collective_share_pct"] < 50 and ev["data_seconds_change"] > 0.4
    for name in ("loss_spike", "loss_divergence", "loss_plateau", "grad_norm_spike", "loss_scale_collapse",
                 "memory_fragmentation"):
        for key, result in results.items():
            assert check_evaluation(result, name).passed, f"{name} false alarm in {key}"


def test_sql_marks_history_rows_out_of_the_window(faulty_home):
    from orchestration.definitions import resources_for
    from orchestration.storage import sql

    home, _ = faulty_home
    start, end = pd.Timestamp("2026-11-30 01:00"), pd.Timestamp("2026-11-30 02:00")
    with resources_for(home)["warehouse"].connect(read_only=True) as con:
        for name in ("non_finite_loss", "memory_fragmentation"):
            signal = REGISTRY.get(name)
            frame = sql.frame(con, signal.query, {"start": start.to_pydatetime(), "end": end.to_pydatetime(),
                                                  **signal.thresholds})
            ticks = frame.loc[frame["in_window"], "tick"]
            assert not ticks.empty and ticks.min() > start and ticks.max() <= end
            history = frame[~frame["in_window"]]
            assert (history["tick"] <= start).all()
            assert not history.empty and (history["minute"] < start).all()
            assert frame["gpus"].map(len).min() == 2 and frame["hosts"].map(list).iloc[-1] == ["node-0"]


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_quiet_without_crashing_when_a_source_lacks_the_fields(name):
    """Only run id, rank, step and time are required: a source without losses, norms, step
    times, scales or allocator figures gives no finding rather than an error."""
    if name == "memory_fragmentation":
        frame = memory_frame().assign(gap_bytes=None, inactive_split_bytes=None, alloc_retries_total=None)
    else:
        frame = run_frame()
        for col in ("loss", "grad_norm", "step_seconds", "loss_scale", "learning_rate", "nan_iterations_total",
                    "skipped_iterations_total", "grad_norm_baseline", "step_seconds_baseline", "nonfinite_losses",
                    "pace_seconds", "pace_seconds_baseline"):
            frame[col] = None
    assert detect(name, frame).empty


# --------------------------------------------------------------------------------------------- #
# Mixed-speed jobs: the pace of a synchronous job is its slowest rank (issue 17, item 5)
# --------------------------------------------------------------------------------------------- #


def _mixed_speed_findings(pace_after: float, crossing: bool) -> pd.DataFrame:
    """A synchronous 8-rank job, ranks 0-3 on fast GPUs (1.0 s of own work a step), ranks 4-7 on slow
    ones (2.0 s: the job's pace), through the real baselines and detect SQL. From minute 150 the pace
    becomes `pace_after` (the slow ranks' data loading slows), and with `crossing` rank 3 joins the
    slow group (its GPU swapped for a slow one): the median across ranks jumps, the pace does not."""

    from orchestration.storage import sql

    rng = np.random.default_rng(3)
    change, end = 150 * 60.0, 180 * 60.0
    t = np.concatenate([np.arange(0.0, change, 2.0), np.arange(change, end, pace_after)])
    late = t >= change
    ranks = np.arange(8)
    slow = (ranks[None, :] >= 4) | (crossing & late[:, None] & (ranks[None, :] == 3))
    data = np.where(slow & late[:, None], 0.02 + (pace_after - 2.0), 0.02)
    own = np.where(slow, 2.0, 1.0) * (1 + 0.005 * rng.standard_normal((len(t), 8))) + (data - 0.02)
    steps = pd.DataFrame({
        "time": np.repeat(T0 + pd.to_timedelta(t, unit="s"), 8), "run_id": "mix", "rank": np.tile(ranks, len(t)),
        "world_size": 8, "host": "node-0", "gpu_index": np.tile(ranks, len(t)), "step": np.repeat(np.arange(len(t)), 8),
        "step_seconds": own.ravel(), "data_seconds": data.ravel(), "collective_seconds": 0.28,
        "compute_seconds": (own - data - 0.28).ravel(), "source_file": "mix.jsonl", "source_line": 1,
    })
    thresholds = th("step_time_regression")
    with warehouse_of(training_steps=steps) as con:
        for hour in range(3):
            start = T0 + pd.Timedelta(hours=hour)
            replace_series(con, "training_steps", ("run_minutes",), start, start + pd.Timedelta(hours=1), 30, live=False)
        start = T0 + pd.Timedelta(hours=2)
        minutes = sql.frame(con, "detect/training_run_minutes",
                            {"start": start, "end": start + pd.Timedelta(hours=1), **thresholds})
    return detect("step_time_regression", minutes)


def test_a_rank_crossing_between_the_fast_and_slow_groups_is_not_a_regression():
    assert _mixed_speed_findings(pace_after=2.0, crossing=True).empty


def test_a_slower_pace_of_a_mixed_speed_job_is_a_regression():
    (finding,) = _mixed_speed_findings(pace_after=2.6, crossing=False).to_dict("records")
    assert finding["onset"] == at(150) and finding["evidence"]["step_seconds"] == pytest.approx(2.6, rel=0.02)
    assert finding["evidence"]["step_seconds_baseline"] == pytest.approx(2.0, rel=0.02)


def test_a_plateau_after_a_spike_is_still_a_plateau():
    """The look-alike of the spike's tail: a spike, long over, then the curve really flattens. (A spike
    within the fit's span before the plateau still hides it, with or without the tail rule.)"""
    frame = run_frame(loss_factor=lambda m: decaying_spike(100, 5, 1.2)(m) * plateau(200)(m))
    (finding,) = detect("loss_plateau", frame).to_dict("records")
    assert at(200) <= finding["onset"] <= at(215)


def test_a_stall_longer_than_the_lookback_names_the_runs_last_step_however_far_back_it_was():
    """busy_not_progressing's frame carries each run's last step before its lookback, so a stall longer
    than the lookback keeps its true onset. It is looked for in the hour before the lookback, and further
    back only for a run that made no step in that hour (sql/detect/busy_not_progressing.sql: near, far):
    the last step by time, also when a restart from a checkpoint numbered its steps lower again."""
    from orchestration.storage import sql
    from tests.detector_frames import T0, th

    thresholds = th("busy_not_progressing", lookback_seconds=600.0)   # the lookback: 09:50 to the partition
    steps = [("run-near", s, T0 - pd.Timedelta(minutes=40 - s)) for s in range(1, 11)]        # 09:21 .. 09:30
    steps += [("run-far", s, pd.Timestamp("2026-11-30 05:00") + pd.Timedelta(minutes=s)) for s in range(1, 51)]
    steps += [("run-far", s, pd.Timestamp("2026-11-30 06:40") + pd.Timedelta(minutes=s)) for s in range(1, 6)]
    training = pd.DataFrame([{"run_id": r, "rank": 0, "host": f"node-{r}", "gpu_index": 0, "step": s, "time": t,
                              "step_seconds": 60.0, "source_file": "steps.jsonl", "source_line": i}
                             for i, (r, s, t) in enumerate(steps)])
    samples = pd.DataFrame([{"run_id": r, "host": f"node-{r}", "gpu_index": 0, "time": T0 + pd.Timedelta(seconds=10 * i),
                             "utilization_ratio": 1.0, "source_file": "gpu.jsonl", "source_line": i + 30}
                            for r in ("run-near", "run-far") for i in range(-30, 30)])
    started = pd.DataFrame([{"event": "run_started", "run_id": r, "time": t, "payload": "{}", "source_file": "x", "source_line": i}
                            for i, (r, t) in enumerate([("run-near", T0 - pd.Timedelta(hours=2)),
                                                        ("run-far", pd.Timestamp("2026-11-30 04:59")),
                                                        ("run-far", pd.Timestamp("2026-11-30 06:30"))])])
    with warehouse_of(training_steps=training, gpu_samples=samples, lineage_events=started) as con:
        frame = sql.frame(con, "detect/busy_not_progressing",
                          {"start": T0, "end": T0 + pd.Timedelta(hours=1), **thresholds})
    first = frame.sort_values("tick").groupby("run_id").first()
    assert first.loc["run-near", "last_progress"] == T0 - pd.Timedelta(minutes=30)   # the hour before the lookback
    assert first.loc["run-near", "last_step"] == 10
    assert first.loc["run-far", "last_progress"] == pd.Timestamp("2026-11-30 06:45")   # further back
    assert first.loc["run-far", "last_step"] == 5   # after the restart, not the 50 it reached before
