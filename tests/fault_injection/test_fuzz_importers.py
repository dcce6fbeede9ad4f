"""Property-based fuzzing of every importer (issue 16, item 8): files of good records mixed with
hostile lines (random text, JSON scalars, impossible dates, out-of-range times, wrong types).

For each importer, whatever hypothesis throws at it:
- no exception escapes, other than the one-line ImportErrorForUser for a file with nothing of the
  importer's kind in it;
- every bad record has a reason that names its file (and line, where the format has lines);
- no good record is lost: each one planted comes out with its values.
"""

import json
import math
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sources.importers import (
    ImportErrorForUser,
    import_dcgmi,
    import_hf_trainer,
    import_kernel_xids,
    import_megatron,
    import_nvidia_smi,
    import_predictions,
    import_tensorboard,
)

pytestmark = pytest.mark.fault_injection
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
T0 = datetime(2026, 11, 29, 10, 0, tzinfo=timezone.utc)

# hostile lines: random printable text (pipes, colons, brackets: the formats' own separators), and
# near-misses of each format built below
junk_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
                    max_size=120)
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30))


def _raw(raw_root: Path, source: str) -> tuple[list[dict], list[dict]]:
    good, bad = [], []
    for path in sorted((raw_root / source).rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            (bad if "quarantine_reason" in record else good).append(record)
    return good, bad


def _run(importer, name: str, text: str | bytes, source: str, **kwargs):
    """Import one file; (good, bad, error) where error is the ImportErrorForUser text, if any."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
        try:
            importer([path], Path(tmp) / "raw", **kwargs)
        except ImportErrorForUser as error:
            assert "\n" not in str(error) and name in str(error)
            return [], [], str(error)
        good, bad = _raw(Path(tmp) / "raw", source)
        for record in bad:
            assert record["quarantine_reason"].startswith(f"{name}"), record
            assert record["quarantine_reason"].split(": ", 1)[1].strip()
        return good, bad, None


def _mix(draw, good: list[str], hostile) -> list[str]:
    """Good lines in order with hostile lines drawn in between."""
    out = []
    for line in good:
        out += draw(st.lists(hostile, max_size=2))
        out.append(line)
    return out + draw(st.lists(hostile, max_size=2))


# -- Megatron ------------------------------------------------------------------------------------
def megatron_line(when: datetime, iteration: int, loss: float) -> str:
    return (f" [{when:%Y-%m-%d %H:%M:%S}] iteration {iteration:8d}/ 1000000 | consumed samples: {iteration * 8:12d} |"
            f" elapsed time per iteration (ms): 1000.0 | learning rate: 3.000000E-04 | global batch size:     8 |"
            f" lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 |"
            f" number of nan iterations:   0 |")


megatron_hostile = st.one_of(
    junk_text,
    st.builds(lambda m, d, it: f" [2024-{m:02d}-{d:02d} 10:00:00] iteration {it:8d}/ 1000000 | lm loss: 1.0E+00 |",
              st.integers(13, 99), st.integers(32, 99), st.integers(0, 10**6)),            # impossible dates
    st.builds(lambda it, t: f" iteration {it}/ 10 | elapsed time per iteration (ms): {t} | lm loss: {t} |",
              st.integers(0, 10**20), junk_text),                                              # garbage values
    st.builds(lambda x: f"[before the start of training step] datetime: {x}", junk_text),
)


@st.composite
def megatron_files(draw):
    steps = draw(st.lists(st.integers(1, 10**6), unique=True, max_size=8).map(sorted))
    good = {s: (T0 + timedelta(seconds=s), draw(st.floats(0.01, 100.0))) for s in steps}
    lines = _mix(draw, [megatron_line(w, s, loss) for s, (w, loss) in good.items()], megatron_hostile)
    return "\n".join(lines), good


@FUZZ
@given(megatron_files())
def test_fuzz_megatron(case):
    text, planted = case
    good, bad, error = _run(import_megatron, "train.log", text, "training_steps", run_id="fuzz")
    if error:
        assert not planted and "not a Megatron" in error
        return
    by_step = {(r["step"], r["time"]): r for r in good}
    for step, (when, loss) in planted.items():
        record = by_step[(step, when.strftime("%Y-%m-%dT%H:%M:%S.000Z"))]
        assert math.isclose(record["loss"], float(f"{loss:.6E}"))


# -- nvidia-smi --query-gpu CSV -----------------------------------------------------------------
HEADER = "timestamp, index, uuid, utilization.gpu [%], memory.used [MiB], power.draw [W]"
csv_hostile = st.one_of(
    junk_text,
    st.builds(lambda a, b, c: f"2026/{a}/{b} 10:00:00.000, {c}, GPU-x, 50 %, 1 MiB, 1 W", st.integers(0, 99),
              st.integers(0, 99), junk_text),
    st.builds(lambda v: f"2026/11/29 10:00:00.000, 0, GPU-x, {v}, {v}, {v}", junk_text),
    st.builds(lambda v: f"2026/11/29 10:00:00.000, 0, GPU-x, {v} %, {v} MiB, 1 W", st.one_of(numbers, st.just(1e308))),
    st.just("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
)


@st.composite
def csv_files(draw):
    rows = draw(st.lists(st.tuples(st.integers(0, 7200), st.integers(0, 7), st.integers(0, 100)), max_size=8))
    good = [(T0 + timedelta(seconds=s), gpu, util) for s, gpu, util in rows]
    lines = _mix(draw, [f"{w:%Y/%m/%d %H:%M:%S}.000, {g}, GPU-{g}, {u} %, 1000 MiB, 300.5 W" for w, g, u in good], csv_hostile)
    return "\n".join([HEADER, *lines]), good


@FUZZ
@given(csv_files())
def test_fuzz_nvidia_smi_csv(case):
    text, planted = case
    good, bad, error = _run(import_nvidia_smi, "node.csv", text, "gpu_samples", host="n")
    assert error is None
    out = {(r["time"], r["gpu_index"], r["utilization_ratio"]) for r in good}
    for when, gpu, util in planted:
        assert (when.strftime("%Y-%m-%dT%H:%M:%S.000Z"), gpu, util * 0.01) in out


# -- nvidia-smi -q ---------------------------------------------------------------------------------
def q_snapshot(when: datetime, utils: list[int]) -> str:
    gpus = "".join(f"GPU 00000000:{18 + i:02X}:00.0\n    Product Name : NVIDIA H100\n    Utilization\n        Gpu : {u} %\n"
                   f"    FB Memory Usage\n        Used : 10 MiB\n" for i, u in enumerate(utils))
    return f"==============NVSMI LOG==============\n\nTimestamp : {when:%a %b %d %H:%M:%S %Y}\n\n{gpus}"


q_hostile = st.one_of(
    junk_text.map(lambda t: t.lstrip()),      # a top-level line (not inside a GPU section)
    st.builds(lambda t: f"Timestamp : {t}", junk_text),
    st.builds(lambda t: f"GPU 00000000:3B:00.0\n    Utilization\n        Gpu : {t}", junk_text),
)


@st.composite
def q_files(draw):
    snaps = draw(st.lists(st.tuples(st.integers(0, 7200), st.lists(st.integers(0, 100), min_size=1, max_size=3)), max_size=4))
    good = [(T0 + timedelta(seconds=s), utils) for s, utils in snaps]
    blocks = [q_snapshot(w, u) for w, u in good]
    return "\n".join(_mix(draw, blocks, q_hostile)) + "\n", good


@FUZZ
@given(q_files())
def test_fuzz_nvidia_smi_q(case):
    text, planted = case
    good, bad, error = _run(import_nvidia_smi, "node.txt", text, "gpu_samples", host="n")
    if error:
        assert not planted
        return
    out = {(r["time"], r["gpu_index"], r.get("utilization_ratio")) for r in good}
    for when, utils in planted:
        for i, u in enumerate(utils):
            assert (when.strftime("%Y-%m-%dT%H:%M:%S.000Z"), i, u * 0.01) in out


# -- dcgmi dmon ------------------------------------------------------------------------------------
dmon_hostile = st.one_of(junk_text, st.builds(lambda v: f"GPU 0     {v}   {v}", junk_text),
                         st.builds(lambda v: f"GPU 1     {v}   10", numbers))


@st.composite
def dmon_files(draw):
    utils = draw(st.lists(st.integers(0, 100), max_size=6))
    lines = ["#Entity   GPUTL  FBUSD", "ID", *_mix(draw, [f"GPU 0     {u}     10" for u in utils], dmon_hostile)]
    return "\n".join(lines), utils


@FUZZ
@given(dmon_files())
def test_fuzz_dcgmi(case):
    text, planted = case
    good, bad, error = _run(import_dcgmi, "dmon.txt", text, "gpu_samples", host="n", start_time=T0)
    assert error is None
    got = [r["utilization_ratio"] for r in good if r["gpu_index"] == 0 and r.get("memory_used_bytes") == 10 * 1024 * 1024]
    for u in planted:
        assert u * 0.01 in got


# -- kernel log XIDs -------------------------------------------------------------------------------
xid_hostile = st.one_of(
    junk_text,
    st.builds(lambda t, x: f"{t} host kernel: NVRM: Xid (PCI:0000:18:00): {x}, pid=1", junk_text, st.integers(0, 10**6)),
    st.builds(lambda b: f"2026-11-29T10:00:00+0000 host kernel: NVRM: Xid (PCI:0000:{b}:00): 79, x", st.sampled_from(["3b", "zz", "19"])),
)


@st.composite
def kernel_logs(draw):
    events = draw(st.lists(st.tuples(st.integers(0, 7200), st.sampled_from([13, 31, 48, 79])), max_size=6))
    good = [(T0 + timedelta(seconds=s), x) for s, x in events]
    lines = [f"{w:%Y-%m-%dT%H:%M:%S}+0000 host kernel: NVRM: Xid (PCI:0000:18:00): {x}, pid=1, name=python" for w, x in good]
    return "\n".join(["2026-11-29T09:00:00+0000 host kernel: Linux version 6.8", *_mix(draw, lines, xid_hostile)]), good


@FUZZ
@given(kernel_logs())
def test_fuzz_kernel_xid(case):
    text, planted = case
    good, bad, error = _run(import_kernel_xids, "kern.log", text, "gpu_samples", gpu_map_items=["0000:18:00=0"])
    assert error is None
    out = {(r["time"], r.get("last_xid")) for r in good if r["gpu_index"] == 0}
    for when, xid in planted:
        assert (when.strftime("%Y-%m-%dT%H:%M:%S.000Z"), xid) in out


# -- Hugging Face trainer_state.json ---------------------------------------------------------------
json_values = st.recursive(st.none() | st.booleans() | numbers | junk_text,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(junk_text, inner, max_size=3), max_leaves=6)
hf_hostile = st.one_of(json_values, st.fixed_dictionaries({"loss": json_values, "step": json_values}),
                       st.fixed_dictionaries({"loss": numbers, "step": st.integers(-10**20, 10**20)}))


@st.composite
def trainer_states(draw):
    steps = draw(st.lists(st.integers(1, 10**5), unique=True, max_size=6))
    good = {s: draw(st.floats(0.01, 50.0)) for s in steps}
    entries = []
    for s, loss in good.items():
        entries += draw(st.lists(hf_hostile, max_size=2))
        entries.append({"loss": loss, "learning_rate": 1e-4, "step": s})
    return json.dumps({"global_step": 10, "log_history": entries}), good


@FUZZ
@given(trainer_states())
def test_fuzz_hf_trainer(case):
    text, planted = case
    good, bad, error = _run(import_hf_trainer, "trainer_state.json", text, "training_steps", run_id="r", start_time=T0,
                            step_seconds=1.0)
    assert error is None
    out = {(r["step"], r["loss"]) for r in good}
    for step, loss in planted.items():
        assert (step, loss) in out


# -- prediction logs -------------------------------------------------------------------------------
pred_hostile = st.one_of(json_values.map(json.dumps), junk_text,
                         st.builds(lambda t: json.dumps({"time": t, "endpoint": "e", "request_id": "x", "prediction": 1}),
                                   st.one_of(junk_text, numbers, st.just("9999-12-31T23:59:59"), st.just("0001-01-01T00:00:00"))))


@st.composite
def prediction_logs(draw):
    ids = draw(st.lists(st.integers(0, 10**6), unique=True, max_size=6))
    good = [{"time": (T0 + timedelta(seconds=i)).isoformat(), "endpoint": "e", "request_id": f"r{i}", "prediction": i % 2}
            for i in ids]
    return "\n".join(_mix(draw, [json.dumps(g) for g in good], pred_hostile)), good


@FUZZ
@given(prediction_logs())
def test_fuzz_predictions(case):
    text, planted = case
    good, bad, error = _run(import_predictions, "preds.jsonl", text, "predictions")
    if error:
        assert not planted
        return
    out = {r["request_id"] for r in good if r.get("endpoint") == "e" and isinstance(r.get("request_id"), str)}
    assert {p["request_id"] for p in planted} <= out


@settings(max_examples=15, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_garbage_parquet_is_one_line(data):
    good, bad, error = _run(import_predictions, "preds.parquet", data, "predictions")
    assert error is not None and "not a readable Parquet file" in error


# -- TensorBoard ----------------------------------------------------------------------------------
@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                          st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e12, 0))), max_size=6),
       st.lists(st.tuples(st.integers(1, 10**6), st.floats(0.01, 100.0)), max_size=4, unique_by=lambda t: t[0]))
def test_fuzz_tensorboard(hostile, planted):
    import tensorboard.summary as tb

    with tempfile.TemporaryDirectory() as tmp:
        writer = tb.Writer(tmp)
        for step, loss in planted:
            writer.add_scalar("train/loss", loss, step=step, wall_time=(T0 + timedelta(seconds=step)).timestamp())
        for step, value, wall in hostile:
            writer.add_scalar("grad-norm", value, step=step + 2 * 10**6, wall_time=wall)   # steps apart from the planted
        writer.close()
        [event_file] = Path(tmp).glob("events.out.tfevents.*")
        good, bad, error = _run(import_tensorboard, event_file.name, event_file.read_bytes(), "training_steps", run_id="r")
    assert error is None
    out = {(r["step"], r.get("loss")) for r in good}
    for step, loss in planted:
        assert any(s == step and math.isclose(got, loss, rel_tol=1e-6) for s, got in out if got is not None)


@settings(max_examples=15, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_garbage_event_file_is_one_line(data):
    good, bad, error = _run(import_tensorboard, "events.out.tfevents.1", data, "training_steps", run_id="r")
    assert error is not None and "events.out.tfevents.1" in error


# -- issue 16 item 8, each input that gave a traceback or a silent "imported 0 records" ----------
def _event_file(path: Path, walls: list[float]) -> None:
    import tensorboard.summary as tb

    writer = tb.Writer(str(path))
    for step, wall in enumerate(walls, 1):
        writer.add_scalar("train/loss", 1.0, step=step, wall_time=wall)
    writer.close()


GOOD_PRED = json.dumps({"time": "2026-11-29T10:00:00Z", "endpoint": "e", "request_id": "ok", "prediction": 1})
GOOD_MEGATRON = megatron_line(T0, 10, 2.0)


@pytest.mark.parametrize("case, kind, make, extra, rc, imported, reason", [
    ("json line 5", "predictions", lambda d: (d / "p.jsonl").write_text(f"5\n{GOOD_PRED}\n"), [], 0, 1,
     "p.jsonl:1: not a JSON object with a time"),
    ("json line null", "predictions", lambda d: (d / "p.jsonl").write_text(f"{GOOD_PRED}\nnull\n"), [], 0, 1,
     "p.jsonl:2: not a JSON object with a time"),
    ("out-of-range time", "predictions",
     lambda d: (d / "p.jsonl").write_text(GOOD_PRED + "\n" + GOOD_PRED.replace("2026-11-29T10", "9999-12-31T23") + "\n"),
     [], 0, 1, "p.jsonl:2: time '9999-12-31T23:00:00Z' is not a usable ISO-8601 time"),
    ("garbage parquet", "predictions", lambda d: (d / "p.parquet").write_bytes(b"PAR1 garbage"), [], 2, 0,
     "not a readable Parquet file"),
    ("impossible date in a Megatron line", "megatron",
     lambda d: (d / "t.log").write_text(GOOD_MEGATRON.replace("2026-11-29", "2026-02-30") + "\n" + GOOD_MEGATRON + "\n"),
     ["--run-id", "r"], 0, 1, "t.log:1: malformed iteration line: timestamp '2026-02-30 10:00:00' is not a date"),
    ("negative TensorBoard wall time", "tensorboard", lambda d: _event_file(d, [-5.0, T0.timestamp()]),
     ["--run-id", "r"], 0, 1, "event 2: wall time 1969-12-31T23:59:55+00:00 is outside 2000..2100"),
    ("garbage event file", "tensorboard", lambda d: (d / "events.out.tfevents.9").write_bytes(b"\x00garbage" * 10),
     ["--run-id", "r"], 2, 0, "events.out.tfevents.9: no TensorBoard events in it"),
    ("empty event file", "tensorboard", lambda d: (d / "events.out.tfevents.9").write_bytes(b""),
     ["--run-id", "r"], 2, 0, "no TensorBoard events in it"),
    ("wrong file type", "predictions", lambda d: (d / "notes.txt").write_text("hello\n"), [], 2, 0,
     "not a prediction log"),
])
def test_issue_16_item_8_inputs(tmp_path, capsys, case, kind, make, extra, rc, imported, reason):
    from orchestration.cli import main

    logs = tmp_path / "logs"
    logs.mkdir()
    make(logs)
    assert main(["import", kind, str(logs), "--home", str(tmp_path / "home"), *extra]) == rc, case
    out, err = capsys.readouterr()
    if rc == 2:
        assert len(err.strip().splitlines()) == 1 and reason in err and "Traceback" not in err
        return
    assert f"imported {imported} record(s)" in out
    good, bad = _raw(tmp_path / "home" / "raw", "predictions" if kind == "predictions" else "training_steps")
    assert len(good) == imported and any(reason in r["quarantine_reason"] for r in bad), [r["quarantine_reason"] for r in bad]
