"""GPU-hardware detectors as pure functions on hand-made per-minute frames (a case each must flag,
cases it must not, and edges), plus their SQL on a real warehouse for the counter semantics."""

import pandas as pd
import pytest

import checks.signals  # noqa: F401
from checks import detectors_gpu as d
from checks import detectors_hang as hang
from checks.registry import REGISTRY
from tests.detector_frames import BOOST, LIMIT, T0, counter_findings, gpu_frame, samples, th


def run_frame(gpus=4, changes=()):
    """A run's GPUs' minutes; `changes` as in gpu_frame, plus a set of GPU indexes: (from, to, values, gpus)."""
    parts = []
    for g in range(gpus):
        mine = [(a, b, v) for a, b, v, which in changes if g in which]
        parts.append(gpu_frame(gpu=g, changes=mine))
    return pd.concat(parts, ignore_index=True)


HOT = {"throttle_reasons": 0x40 | 0x20, "sm_clock_hertz": 1.2e9, "temperature_celsius": 92.0}
CAPPED = {"throttle_reasons": 0x4, "sm_clock_hertz": 1.45e9, "power_watts": 0.62 * LIMIT}


# --- thermal and power throttling --------------------------------------------------------------

def test_thermal_throttle_flags_with_onset_detection_and_evidence():
    found = d.gpu_thermal_throttle(gpu_frame(changes=[(20, 40, HOT)]), th("gpu_thermal_throttle"))
    assert len(found) == 1
    row = found.iloc[0]
    assert row["entity_id"] == "node-0:0" and row["gpus"] == ["node-0:0"] and row["run_id"] == "run-a"
    assert row["onset"] == T0 + pd.Timedelta(minutes=20)
    assert row["detected_at"] == T0 + pd.Timedelta(minutes=23)     # 3 consecutive minutes
    assert row["last_seen"] == T0 + pd.Timedelta(minutes=40)
    ev = row["evidence"]
    assert ev["throttle_reasons"] == "SW_THERMAL_SLOWDOWN|HW_THERMAL_SLOWDOWN"
    assert ev["clock_drop_pct"] == pytest.approx(39.1, abs=0.1) and ev["temperature_max_celsius"] == 92.0


def test_thermal_throttle_stays_open_when_the_clock_baseline_catches_up():
    # a long throttle drags the GPU's own trailing clock median down; the reason bits keep it open
    frame = gpu_frame(changes=[(20, 55, HOT), (35, 55, {"sm_clock_baseline": 1.2e9})])
    found = d.gpu_thermal_throttle(frame, th("gpu_thermal_throttle"))
    assert len(found) == 1 and found.iloc[0]["last_seen"] == T0 + pd.Timedelta(minutes=55)


def test_power_throttle_flags_a_cap_with_clocks_down():
    found = d.gpu_power_throttle(gpu_frame(changes=[(10, 30, CAPPED)]), th("gpu_power_throttle"))
    assert len(found) == 1
    assert found.iloc[0]["evidence"]["throttle_reasons"] == "SW_POWER_CAP"
    assert d.gpu_thermal_throttle(gpu_frame(changes=[(10, 30, CAPPED)]), th("gpu_thermal_throttle")).empty


@pytest.mark.parametrize("detector, name, changes", [
    (d.gpu_thermal_throttle, "gpu_thermal_throttle", []),                                           # healthy
    (d.gpu_power_throttle, "gpu_power_throttle", [(0, 60, {"throttle_reasons": 0x4, "sm_clock_hertz": 0.96 * BOOST})]),
    # ^ at the power limit with a few % clock dip: how healthy GPUs run
    (d.gpu_thermal_throttle, "gpu_thermal_throttle", [(20, 40, {**HOT, "utilization_ratio": 0.0})]),   # idle GPU
    (d.gpu_thermal_throttle, "gpu_thermal_throttle", [(20, 22, HOT)]),                              # 2-minute blip
    (d.gpu_thermal_throttle, "gpu_thermal_throttle", [(-30, 60, {"baseline_minutes": 5}), (20, 40, HOT)]),  # no history
    (d.gpu_power_throttle, "gpu_power_throttle", [(20, 40, {**CAPPED, "sm_clock_baseline": None})]),  # no baseline
    (d.gpu_thermal_throttle, "gpu_thermal_throttle", [(-20, -5, HOT)]),                             # before the partition
])
def test_throttle_quiet(detector, name, changes):
    assert detector(gpu_frame(changes=changes), th(name)).empty


def test_hot_gpu_without_reason_bits_counts_as_thermal():
    frame = gpu_frame(changes=[(20, 40, {"sm_clock_hertz": 1.3e9, "temperature_celsius": 93.0})])
    assert len(d.gpu_thermal_throttle(frame, th("gpu_thermal_throttle"))) == 1


def test_a_stretch_from_the_previous_hour_keeps_its_onset():
    found = d.gpu_thermal_throttle(gpu_frame(changes=[(-10, 15, HOT)]), th("gpu_thermal_throttle"))
    assert len(found) == 1 and found.iloc[0]["onset"] == T0 - pd.Timedelta(minutes=10)


# --- XID, ECC, row remapping ---------------------------------------------------------------------

def xid(minute, code):
    return [(minute, minute + 1, {"xid_increase": 1, "event_xid": code, "xid_errors_total": 1,
                                  "event_time": lambda m: m + pd.Timedelta(seconds=17)})]


@pytest.mark.parametrize("code, fatal", [(79, True), (48, True), (95, True), (13, False), (31, False), (43, False)])
def test_xid_goes_to_exactly_one_tier(code, fatal):
    frame = gpu_frame(changes=xid(12, code))
    fatal_found = d.gpu_xid_fatal(frame, th("gpu_xid_fatal"))
    other_found = d.gpu_xid_error(frame, th("gpu_xid_error"))
    found, quiet = (fatal_found, other_found) if fatal else (other_found, fatal_found)
    assert quiet.empty and len(found) == 1
    assert found.iloc[0]["onset"] == T0 + pd.Timedelta(minutes=12, seconds=17)
    assert found.iloc[0]["evidence"]["xids"] == str(code)


def test_xid_quiet_without_increase_even_if_the_counter_is_high():
    frame = gpu_frame(changes=[(-30, 60, {"xid_errors_total": 7, "event_xid": 13})])
    assert d.gpu_xid_error(frame, th("gpu_xid_error")).empty and d.gpu_xid_fatal(frame, th("gpu_xid_fatal")).empty


@pytest.mark.parametrize("change, flagged", [
    ({"uncorrected_increase": 2, "ecc_uncorrected_errors_total": 2}, True),
    ({"remapped_uncorrectable_increase": 1}, True),
    ({"pending_raised": True, "row_remap_pending": True}, True),
    ({"corrected_increase": 40}, False),                     # corrected errors are handled by the hardware
    ({"row_remap_pending": True}, False),                     # pending since before: a level, not an event
    ({"remapped_uncorrectable_increase": 1, "row_remap_failure": True}, False),   # gpu_row_remap_failure's
])
def test_ecc(change, flagged):
    frame = gpu_frame(changes=[(30, 31, {**change, "event_time": lambda m: m})])
    assert len(d.gpu_ecc_error(frame, th("gpu_ecc_error"))) == (1 if flagged else 0)


def test_row_remap_failure_is_a_state_flagged_while_it_lasts():
    frame = gpu_frame(changes=[(5, 60, {"row_remap_failure": True, "failure_since": lambda m: m})])
    found = d.gpu_row_remap_failure(frame, th("gpu_row_remap_failure"))
    assert len(found) == 1 and found.iloc[0]["onset"] == T0 + pd.Timedelta(minutes=5)
    assert found.iloc[0]["last_seen"] == T0 + pd.Timedelta(minutes=60)
    assert d.gpu_row_remap_failure(gpu_frame(), th("gpu_row_remap_failure")).empty


# --- allocation ----------------------------------------------------------------------------------

IDLE = {"utilization_ratio": 0.03, "power_watts": 68.0, "memory_used_bytes": 2**30, "tensor_active_ratio": 0.0}


def test_idle_allocated_flags_one_idle_gpu_among_busy_ones():
    found = d.gpu_idle_allocated(gpu_frame(changes=[(10, 60, IDLE)]), th("gpu_idle_allocated"))
    assert len(found) == 1 and found.iloc[0]["detected_at"] == T0 + pd.Timedelta(minutes=20)
    assert found.iloc[0]["evidence"]["other_gpus"] == 3


def test_idle_allocated_with_stray_kernels_survives_a_checkpoint_of_the_others():
    stray = {**IDLE, "utilization_ratio": 0.09}                         # a context and now and then a kernel
    frame = gpu_frame(changes=[(10, 60, stray), (30, 31, {"others_utilization": 0.04})])
    found = d.gpu_idle_allocated(frame, th("gpu_idle_allocated"))
    assert len(found) == 1 and found.iloc[0]["last_seen"] == T0 + pd.Timedelta(minutes=60)


@pytest.mark.parametrize("changes", [
    [(10, 11, {**IDLE, "others_utilization": 0.03})],                   # checkpoint pause: all idle together
    [(10, 13, {**IDLE, "others_utilization": 0.8})],                    # a 3-minute pause on one GPU
    [(10, 60, {**IDLE, "others_utilization": 0.1})],                    # startup: all low
    [(10, 60, {**IDLE, "run_id": None})],                               # idle between runs: no run holds it
    [(10, 60, {**IDLE, "other_gpus": 0, "others_utilization": None})],  # a one-GPU run
])
def test_idle_allocated_quiet(changes):
    assert d.gpu_idle_allocated(gpu_frame(changes=changes), th("gpu_idle_allocated")).empty


def test_idle_allocated_counts_through_the_others_checkpoint_saves():
    """The others save a checkpoint every 6 minutes (a minute each, all idle): those minutes cannot
    tell, so they neither count nor restart the idle GPU's 10 minutes."""
    saves = [(m, m + 1, {"others_utilization": 0.04}) for m in range(12, 60, 6)]
    found = d.gpu_idle_allocated(gpu_frame(changes=[(10, 60, IDLE), *saves]), th("gpu_idle_allocated"))
    assert len(found) == 1 and found.iloc[0]["detected_at"] == T0 + pd.Timedelta(minutes=22)


@pytest.mark.parametrize("changes", [
    # the whole run pauses for half an hour (a long evaluation, a data stall) with saves inside it
    [(10, 40, {**IDLE, "others_utilization": 0.04}), (20, 21, {"others_utilization": 0.8})],
    # the GPU computes a minute in every five: its own work restarts the count, saves or not
    [(10, 60, IDLE), *[(m, m + 1, {"utilization_ratio": 0.95}) for m in range(14, 60, 5)],
     *[(m, m + 1, {"others_utilization": 0.04}) for m in range(12, 60, 6)]],
])
def test_idle_allocated_quiet_around_saves(changes):
    assert d.gpu_idle_allocated(gpu_frame(changes=changes), th("gpu_idle_allocated")).empty


SPIN = {"utilization_ratio": 0.99, "power_watts": 0.4 * LIMIT, "tensor_active_ratio": 0.01, "sm_active_ratio": 0.9}
# A hang as nvidia-smi shows it (not profiled: no tensor or SM activity): full utilization at about a
# fifth of the power limit (issue 17's real capture of a hung multi-GPU job).
HUNG = {"utilization_ratio": 1.0, "power_watts": 0.2 * LIMIT, "tensor_active_ratio": None, "sm_active_ratio": None}


@pytest.mark.parametrize("history", ["the hang", "none"])
def test_busy_low_power_opens_on_a_hang_already_in_progress_when_watching_starts(history):
    """Every minute Goodput has is the hang: the GPUs' trailing power is the hang's own (or there is
    none), so nothing can have fallen; the physics alone says spin."""
    baseline = 0.2 * LIMIT if history == "the hang" else None
    frame = run_frame(changes=[(-30, 60, {**HUNG, "power_watts_baseline": baseline}, {0, 1, 2, 3})])
    (finding,) = hang.gpu_busy_low_power(frame, th("gpu_busy_low_power")).to_dict("records")
    assert finding["entity_id"] == "run-a" and len(finding["gpus"]) == 4 and finding["last_seen"] == T0 + pd.Timedelta(minutes=60)
    assert finding["evidence"]["judged_by"].startswith("physics")


def test_busy_low_power_from_history_says_so():
    (finding,) = hang.gpu_busy_low_power(run_frame(changes=[(20, 50, SPIN, {0, 1, 2, 3})]), th("gpu_busy_low_power")).to_dict("records")
    assert finding["evidence"]["judged_by"].startswith("its GPUs' own history")


@pytest.mark.parametrize("changes", [
    # a GPU genuinely at low utilization and low power
    [(-30, 60, {"utilization_ratio": 0.3, "power_watts": 0.15 * LIMIT, "power_watts_baseline": 0.15 * LIMIT,
                "tensor_active_ratio": None, "sm_active_ratio": None}, {0, 1, 2, 3})],
    # a memory-bound job at full utilization and moderate power, always so (not profiled)
    [(-30, 60, {**HUNG, "power_watts": 0.45 * LIMIT, "power_watts_baseline": 0.45 * LIMIT}, {0, 1, 2, 3})],
    # the same, profiled: tensor pipes idle but most SMs active
    [(-30, 60, {**HUNG, "power_watts": 0.38 * LIMIT, "power_watts_baseline": 0.38 * LIMIT,
                "tensor_active_ratio": 0.02, "sm_active_ratio": 0.85}, {0, 1, 2, 3})],
    # the hang's numbers on boards whose power limit is unknown: watts alone have no scale (140 W is
    # an idle H100 and a loaded L4), so these GPUs are not judged
    [(-30, 60, {**HUNG, "power_watts_baseline": 0.2 * LIMIT, "power_limit_watts": None}, {0, 1, 2, 3})],
])
def test_busy_low_power_quiet_without_history_on_look_alikes(changes):
    assert hang.gpu_busy_low_power(run_frame(changes=changes), th("gpu_busy_low_power")).empty


def test_busy_low_power_is_one_run_level_finding():
    found = hang.gpu_busy_low_power(run_frame(changes=[(20, 50, SPIN, {0, 1, 2, 3})]), th("gpu_busy_low_power"))
    assert len(found) == 1
    row = found.iloc[0]
    assert row["entity_id"] == "run-a" and row["gpus"] == [f"node-0:{g}" for g in range(4)]
    assert row["detected_at"] == T0 + pd.Timedelta(minutes=23)
    assert row["evidence"]["power_pct_of_limit"] == pytest.approx(40.0)


def test_busy_low_power_flags_peers_spinning_after_a_dropout():
    frame = run_frame(changes=[(20, 50, SPIN, {0, 1, 3}), (20, 50, {**IDLE, "run_id": None}, {2})])
    found = hang.gpu_busy_low_power(frame, th("gpu_busy_low_power"))
    assert len(found) == 1 and found.iloc[0]["gpus"] == ["node-0:0", "node-0:1", "node-0:3"]


@pytest.mark.parametrize("changes", [
    [],                                                                                         # training
    [(20, 23, {"utilization_ratio": 0.8, "power_watts": 0.55 * LIMIT, "tensor_active_ratio": 0.2}, {0, 1, 2, 3})],  # eval
    [(20, 21, {**IDLE, "power_watts": 0.17 * LIMIT}, {0, 1, 2, 3})],                            # checkpoint save
    [(20, 60, SPIN, {0})],                                                                      # one GPU of four
    [(20, 22, SPIN, {0, 1, 2, 3})],                                                             # two minutes
    [(-30, 60, {**SPIN, "power_watts_baseline": 0.4 * LIMIT}, {0, 1, 2, 3})],                   # always like that
])
def test_busy_low_power_quiet(changes):
    assert hang.gpu_busy_low_power(run_frame(changes=changes), th("gpu_busy_low_power")).empty


def test_empty_frames_give_no_findings():
    for name in ("gpu_thermal_throttle", "gpu_power_throttle", "gpu_xid_error", "gpu_xid_fatal", "gpu_ecc_error",
                 "gpu_row_remap_failure", "gpu_idle_allocated", "gpu_busy_low_power"):
        signal = REGISTRY.get(name)
        assert signal.detector(gpu_frame().iloc[0:0], signal.thresholds).empty


def test_throttle_names_decode_nvml_bits():
    assert d.throttle_names(0x4 | 0x80) == ["SW_POWER_CAP", "HW_POWER_BRAKE_SLOWDOWN"]
    assert d.throttle_names(None) == [] and d.throttle_names(0) == []


# --- the counter SQL on a real warehouse: increases against the previous reading, not levels ----

def test_xid_sql_alarms_on_increases_only(tmp_path):
    frames = [
        samples("n", 0, xid_errors_total=lambda s: 3, last_xid=lambda s: 79),                        # old XIDs: a level
        samples("n", 1, xid_errors_total=lambda s: 0 if s < 1215 else 1, last_xid=lambda s: None if s < 1215 else 79),
        samples("n", 2, xid_errors_total=lambda s: 5 if s < 600 else 0, last_xid=lambda s: 13),      # reset by a reboot
        samples("n", 3, xid_errors_total=lambda s: 2 if s < 2400 else 4, last_xid=lambda s: 13 if s < 2400 else 31),
        samples("n", 4, xid_errors_total=lambda s: None, last_xid=lambda s: None),                  # exporter without XIDs
    ]
    fatal = counter_findings(tmp_path, "gpu_xid_fatal", frames)
    assert fatal["entity_id"].tolist() == ["n:1"]
    assert fatal.iloc[0]["onset"] == T0 + pd.Timedelta(seconds=1220)       # the first sample that showed it
    other = counter_findings(tmp_path, "gpu_xid_error", frames)
    assert other["entity_id"].tolist() == ["n:3"] and other.iloc[0]["evidence"]["xid_events"] == 2


def test_ecc_sql_ignores_old_levels_and_corrected_errors(tmp_path):
    frames = [
        samples("n", 0, ecc_uncorrected_errors_total=lambda s: 4, ecc_corrected_errors_total=lambda s: 1000 + s // 60,
                row_remap_pending=lambda s: True),                               # old errors, pending since before
        samples("n", 1, ecc_uncorrected_errors_total=lambda s: 0 if s < 1800 else 1,
                ecc_corrected_errors_total=lambda s: 0 if s < 1800 else 2,
                remapped_rows_uncorrectable_total=lambda s: 0 if s < 1800 else 1,
                row_remap_pending=lambda s: s >= 1800),
        samples("n", 2, ecc_uncorrected_errors_total=lambda s: None),           # no ECC (e.g. consumer GPU)
    ]
    found = counter_findings(tmp_path, "gpu_ecc_error", frames)
    assert found["entity_id"].tolist() == ["n:1"]
    ev = found.iloc[0]["evidence"]
    assert ev["uncorrected_new"] == 1 and ev["remapped_rows_uncorrectable_new"] == 1 and ev["row_remap_pending"]


# --- every GPU and distributed signal through the real baselines on the small scenario ----------

def test_small_scenario_hang_is_the_only_finding(small_home, resources, instance):
    """1 host x 2 GPUs for 2 h: startup, checkpoints, idle GPUs between runs and one 20-min hang.
    Only gpu_busy_low_power speaks (of the hang); every other GPU/distributed signal stays quiet."""
    import dagster as dg

    from assets.baselines import gpu_baselines, training_baselines
    from assets.ingest import ingest_assets
    from checks.asset_checks import evaluate

    mine = [s for s in REGISTRY if s.family in ("distributed", "gpu")]
    found = []
    for hour, start in (("2026-11-30-00:00", pd.Timestamp("2026-11-30 00:00")), ("2026-11-30-01:00", pd.Timestamp("2026-11-30 01:00"))):
        dg.materialize([*ingest_assets, training_baselines, gpu_baselines], resources=resources,
                       partition_key=hour, instance=instance)
        with resources["warehouse"].connect() as con:
            for signal in mine:
                _, f = evaluate(con, signal, start.to_pydatetime(), (start + pd.Timedelta("1h")).to_pydatetime())
                found += [(signal.name, row.entity_id, row.onset, row.detected_at) for row in f.itertuples()]
    assert {(name, entity) for name, entity, *_ in found} == {("gpu_busy_low_power", "llm-small")}
    onset, detected = found[0][2], found[0][3]
    # 2 minutes: every GPU at a spin's draw and the steps stopped (tests/test_busy_low_power_fast.py)
    assert onset == pd.Timestamp("2026-11-30 00:50") and detected == pd.Timestamp("2026-11-30 00:52")


# --- only the GPUs (ranks, runs) a stretch can flag are prepared: the same findings as with every one ----

def test_suspects_change_no_finding_or_clearing_on_the_faults_scenario(faults_embedded, tmp_path, monkeypatch):
    """faults.yaml's hours (GPU faults, a hang, a straggler, a rank dropout, episodes carried across hours) judged
    by every GPU and distributed signal as the check step judges them, with the detectors preparing only the
    suspects (toolkit.suspects) and with every GPU, rank and run: the same findings and clearings, and some of
    each kind."""
    import shutil

    from checks import detectors_distributed, toolkit
    from checks.asset_checks import judge_signal
    from orchestration.storage.warehouse import WarehouseResource
    from tests.helpers import FAULTS_FOLD_HOURS

    path = tmp_path / "w.duckdb"
    shutil.copy(faults_embedded["warehouse"], path)

    def everyone(frame, entry, keys):
        return frame.assign(_entry=entry.fillna(False).astype(bool))

    def judged(con, signal, start) -> tuple[list, list]:
        e = judge_signal(con, signal, start, start + pd.Timedelta("1h"))
        found = e.rows["new_findings"]
        return (found.drop(columns="evidence").astype(str).values.tolist() + found["evidence"].tolist(),
                e.rows["new_clearings"].astype(str).values.tolist())

    signals = [s for s in REGISTRY if s.family in ("gpu", "distributed")]
    flagged: set[str] = set()
    with WarehouseResource(path=str(path)).connect() as con:
        first = con.execute("SELECT min(minute) FROM gpu_minutes").fetchone()[0]
        for hour in range(FAULTS_FOLD_HOURS):
            start = pd.Timestamp(first).floor("h") + pd.Timedelta(hours=hour)
            for signal in signals:
                with monkeypatch.context() as patched:
                    for module in (toolkit, hang, detectors_distributed):
                        patched.setattr(module, "suspects", everyone)
                    whole = judged(con, signal, start)
                assert judged(con, signal, start) == whole, (signal.name, start)
                if whole[0]:
                    flagged.add(signal.name)
    assert {"gpu_busy_low_power", "gpu_idle_allocated", "gpu_ecc_error", "gpu_row_remap_failure", "gpu_thermal_throttle",
            "gpu_power_throttle", "straggler_rank", "rank_dropout"} <= flagged, flagged
