"""Helpers the test modules share (import them from here, never from another test module): running the
real `detect` job, reading a check's evaluation, an in-memory Dagster instance, a command with stderr on
a terminal, `built_once` (an expensive artefact built once per test session for every pytest-xdist
worker), and, by section below, the hand-made data several test files use (incident findings, Megatron
logs, a lock holder, Chromium, the live board, a fake NVML, checkpoints on disk)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
import threading
import time
import types
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
import httpx
import numpy as np
import pandas as pd
import pynvml

from assets.ingest import SOURCES, ingest_partition
from orchestration.storage.warehouse import WarehouseResource, transaction
from simulator.checkpoint_files import safetensors_bytes as _safetensors_bytes
from simulator.checkpoint_files import torch_save_bytes
from sources import checkpoint_audit as ca
from sources.client import MANIFEST_NAME, file_manifest

REPO = Path(__file__).resolve().parent.parent
SMALL = REPO / "simulator" / "scenarios" / "small.yaml"
QUALITY = REPO / "simulator" / "scenarios" / "quality.yaml"
FAULTS = REPO / "simulator" / "scenarios" / "faults.yaml"
# faults.yaml (7 hosts x 8 GPUs, 10 h) is detected once per session (tests/conftest.py: faults_embedded):
# `goodput demo` over its first FAULTS_DEMO_HOURS (the embedded run the distributed stack must equal), then the
# same home's next hours up to FAULTS_FOLD_HOURS (the findings tests/test_fold_incremental.py folds).
FAULTS_DEMO_HOURS = 2    # a straggler, an idle GPU, loss plateaus, damaged checkpoints, drift, a latency regression
FAULTS_FOLD_HOURS = 5    # and GPU, serving and promotion faults, a rank dropout (its peers hang): the fold's cases
# Hour x shard partitions (tests/test_shards.py): 2 hosts x 4 GPUs
# for 2 hours, one run over both hosts, a GPU fault on each; split in two shards, one host each.
SHARDS = REPO / "tests" / "fixtures" / "shards.yaml"
SHARDS_HOURS = ("2026-11-30-00:00", "2026-11-30-01:00")
TWO_SHARDS = 'shards:\n  - name: a\n    hosts: ["node-0"]\n  - name: b\n    hosts: ["node-1"]\n'


def memory_instance() -> dg.DagsterInstance:
    """A Dagster instance whose runs and events live in memory (use it as a context manager).

    The tests that run jobs in process read their results from the run itself or from the warehouse;
    an instance on disk would add an SQLite file open and commit per event (a fifth of a small detect
    run's CPU). The tests of the persistent home instance (`goodput demo`, the daemon, the SIGKILL suite)
    keep theirs."""
    return dg.DagsterInstance.ephemeral()


def run_detect(home: Path, partition_key: str, instance) -> dg.ExecuteInProcessResult:
    """Run the real `detect` job (ingest, baselines, every signal's check) on one hour of `home`."""
    from orchestration.definitions import build_definitions

    result = build_definitions(home).resolve_job_def("detect").execute_in_process(
        partition_key=partition_key, instance=instance, raise_on_error=True)
    assert result.success
    return result


def detect_and_fold(home: Path, hours, fold: bool = True) -> None:
    """`hours` of `home` through its detect jobs in process, as `goodput demo` runs them (with shards: each
    shard's partition, then the hour), then the incidents fold."""
    from orchestration.definitions import build_definitions
    from orchestration.jobs import execute_detect
    from orchestration.shards import configured

    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    defs = build_definitions(home)
    with memory_instance() as instance:
        for key in hours:
            assert all(r.success for r in execute_detect(defs, configured(home), key, instance, run_config=quiet))
        if fold:
            assert defs.resolve_job_def("fold_incidents").execute_in_process(instance=instance, run_config=quiet).success


def run_ingest(home: Path, partition_key: str, instance, *more) -> dg.ExecuteInProcessResult:
    """The detect job's ingest assets, and `more` of its assets (e.g. the baselines), on one hour of `home`:
    for a test that reads only what those write, without the job's checks (most of its CPU)."""
    from assets.ingest import ingest_assets
    from orchestration.definitions import resources_for

    result = dg.materialize([*ingest_assets, *more], resources=resources_for(home), partition_key=partition_key,
                            instance=instance, raise_on_error=True)
    assert result.success
    return result


def check_and_fold(resources, instance, hours) -> None:
    """`hours` through ingest, the training baselines and every signal's check (the assets materialized, not the
    detect job), then the incidents fold, on one home's `resources`."""
    from assets.baselines import training_baselines
    from assets.incidents import incidents
    from assets.ingest import ingest_assets
    from checks.asset_checks import signal_checks

    for key in hours:
        assert dg.materialize([*ingest_assets, training_baselines, *signal_checks], resources=resources, partition_key=key,
                              instance=instance).success
    assert dg.materialize([incidents, *ingest_assets], selection=[incidents.key], resources=resources,
                          instance=instance).success


def run_baselines(home: Path, partition_key: str, instance) -> dg.ExecuteInProcessResult:
    """Ingest and the training and GPU baselines (run_minutes, rank_minutes, run_starts, gpu_minutes) on one hour."""
    from assets.baselines import gpu_baselines, training_baselines

    return run_ingest(home, partition_key, instance, training_baselines, gpu_baselines)


class RecordedRun:
    """What the tests read from a job run's result (its check evaluations and asset materializations), kept
    in a file with Dagster's serdes so that a run made once per session (`built_once`) reads the same in every
    xdist worker: `record(result, path)`, then `RecordedRun(path)` answers as the result did."""

    def __init__(self, path: Path):
        recorded = json.loads(path.read_text())
        self._evaluations = dg.deserialize_value(recorded["evaluations"])
        self._materializations = {node: dg.deserialize_value(text) for node, text in recorded["materializations"].items()}

    @staticmethod
    def record(result: dg.ExecuteInProcessResult, path: Path) -> None:
        nodes = {event.node_name for event in result.get_asset_materialization_events()}
        path.write_text(json.dumps({
            "evaluations": dg.serialize_value(list(result.get_asset_check_evaluations())),
            "materializations": {node: dg.serialize_value(list(result.asset_materializations_for_node(node)))
                                 for node in sorted(nodes)}}))

    def get_asset_check_evaluations(self) -> list:
        return list(self._evaluations)

    def asset_materializations_for_node(self, node_name: str) -> list:
        return list(self._materializations.get(node_name, []))


def check_evaluation(result: dg.ExecuteInProcessResult, name: str):
    """The evaluation of check `name` in a run's result."""
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return evaluation


def copy_home(home: Path, target: Path) -> Path:
    """A private copy of a shared home (its raw zone, warehouse and Dagster instance: the instance's
    dagster.yaml names no absolute path, so the copy is a home of its own)."""
    shutil.copytree(home, target, symlinks=True)
    return target


def shared_root(tmp_path_factory) -> Path:
    """A folder every xdist worker of this session sees (the parent of the workers' base temps)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """`build(folder)` once per test session, whichever worker asks first; the others wait on a file
    lock and reuse the folder. Treat it as read-only: copy it to change it. A failed build leaves no
    folder, so the next caller builds again and fails with the same error."""
    root = shared_root(tmp_path_factory) / "built-once"
    root.mkdir(exist_ok=True)
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder


def goodput_in_a_fresh_process(args: list[str]) -> tuple[int, list[str], list[str]]:
    """`goodput ARGS` run by `orchestration.cli.main` in a new Python process: (its exit status, its output lines,
    which of Dagster and pandas it had loaded when it returned). Its stderr is not captured."""
    import subprocess
    import sys

    probe = ("import json, sys; from orchestration.cli import main; status = main(sys.argv[1:]); "
             "print(json.dumps([status, [m for m in ('dagster', 'pandas') if m in sys.modules]]))")
    done = subprocess.run([sys.executable, "-c", probe, *args], cwd=REPO, stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    *lines, last = done.stdout.strip().splitlines()
    status, loaded = json.loads(last)
    return status, lines, loaded


def run_with_stderr_on_a_terminal(command: list[str], env: dict, timeout: float = 600) -> tuple[int, str, str]:
    """Run `command` with stderr on a pseudo-terminal (stdout piped), as a person at a terminal sees it.
    Returns (exit status, stdout, what the terminal showed)."""
    import pty
    import select
    import subprocess
    import time

    master, slave = pty.openpty()
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read()
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, out, seen.decode(errors="replace")


# ---------- incident findings and evaluation marks (tests/test_lifecycle.py and the alerting, board and facts tests)

LIFECYCLE_T0 = pd.Timestamp("2026-11-30 00:00")


def minutes(m: float) -> pd.Timestamp:
    return LIFECYCLE_T0 + pd.Timedelta(minutes=m)


def finding(signal, entity_type, entity_id, onset, detected, last, run_id=None, rank=None, hosts=(), gpus=(), value=1.0):
    return {
        "signal": signal, "entity_type": entity_type, "entity_id": entity_id,
        "partition_start": minutes(detected).floor("h"), "onset": minutes(onset), "detected_at": minutes(detected),
        "last_seen": minutes(last), "run_id": run_id, "rank": rank, "hosts": list(hosts), "gpus": list(gpus),
        "value": value, "baseline": 0.0, "threshold": 0.5, "evidence": json.dumps({"value": value}),
        "checkpoint": None, "checkpoint_step": None,
    }


def evaluated(signal, until_minute):
    """Evaluation marks: every hour partition from LIFECYCLE_T0 evaluated up to `until_minute` (data time)."""
    rows, start = [], LIFECYCLE_T0
    while start <= minutes(until_minute):
        rows.append({"signal": signal, "partition_start": start,
                     "evaluated_until": min(start + pd.Timedelta(minutes=59), minutes(until_minute))})
        start += pd.Timedelta(hours=1)
    return pd.DataFrame(rows)


def cleared(found, after_minutes=1.0):
    """The clearings the checks would record: each finding's entity seen unflagged a minute after it."""
    rows = [{"signal": f["signal"], "entity_type": f["entity_type"], "entity_id": f["entity_id"],
             "partition_start": f["partition_start"], "last_seen": f["last_seen"],
             "cleared_at": f["last_seen"] + pd.Timedelta(minutes=after_minutes),
             "evidence": json.dumps({"why": "value back under the threshold", "value": 0.1})} for f in found]
    return pd.DataFrame(rows, columns=["signal", "entity_type", "entity_id", "partition_start", "last_seen",
                                       "cleared_at", "evidence"])


def _hang(onset, detected, last):
    return finding("busy_not_progressing", "run", "llm-small", onset, detected, last, run_id="llm-small",
                   hosts=["node-0"], gpus=["node-0:0", "node-0:1"], value=(last - onset) * 60)


def _store(warehouse, findings: pd.DataFrame, marks: pd.DataFrame):
    """Write findings, their clearings and evaluation marks per partition as the checks do (delete the
    window, insert)."""
    with warehouse.connect() as con:
        for start in sorted(set(findings["partition_start"]) | set(marks["partition_start"])):
            part = findings[findings["partition_start"] == start].drop(columns=["checkpoint", "checkpoint_step"])
            mark = marks[marks["partition_start"] == start]
            clear = cleared(part.to_dict("records"))
            with transaction(con, new_findings=part, new_evaluations=mark, new_clearings=clear):
                _mark(con, start)   # the incident fold's marks, of the rows replaced and of the new ones
                if not part.empty:
                    con.execute("DELETE FROM findings WHERE partition_start = $s", {"s": start})
                    con.execute("INSERT INTO findings BY NAME SELECT * REPLACE (evidence::JSON AS evidence, "
                                "hosts::VARCHAR[] AS hosts, gpus::VARCHAR[] AS gpus) FROM new_findings")
                    con.execute("DELETE FROM clearings WHERE partition_start = $s", {"s": start})
                    con.execute("INSERT INTO clearings BY NAME SELECT * REPLACE (evidence::JSON AS evidence) FROM new_clearings")
                con.execute("DELETE FROM evaluations WHERE partition_start = $s", {"s": start})
                con.execute("INSERT INTO evaluations BY NAME SELECT *, 0 AS entities, 0 AS flagged FROM new_evaluations")
                _mark(con, start)


def _mark(con, start) -> None:
    """Mark every signal with rows in the partition for the incident fold (sql/detect/store_findings.sql does
    it per signal it writes)."""
    con.execute("INSERT INTO fold_marks SELECT DISTINCT signal, partition_start FROM ("
                " SELECT signal, partition_start FROM findings UNION ALL SELECT signal, partition_start FROM clearings"
                " UNION ALL SELECT signal, partition_start FROM evaluations) WHERE partition_start = $s", {"s": start})


# ---------- Megatron logs and ingesting a home by hand (tests/test_importers.py, tests/test_mfu.py)

# Megatron log lines in their real formats (hand-made, long lines kept as printed).
MEGATRON_FIXTURES = Path(__file__).parent / "fixtures" / "megatron"


def ingest_all(home: Path, table: str) -> dict:
    source = next(s for s in SOURCES if s.table == table)
    hours = sorted({datetime.strptime(f"{p.parent.parent.name} {p.parent.name}", "%Y-%m-%d %H")
                    for p in (home / "raw" / source.folder).glob("*/*/*.jsonl")})
    totals = {"rows_loaded": 0, "rows_quarantined": 0}
    with WarehouseResource(path=str(home / "warehouse.duckdb")).connect() as con:
        for hour in hours:
            files = sorted((home / "raw" / source.folder / hour.strftime("%Y-%m-%d") / hour.strftime("%H")).glob("*.jsonl"))
            result = ingest_partition(con, source, files, hour, hour + timedelta(hours=1))
            totals["rows_loaded"] += result["rows_loaded"]
            totals["rows_quarantined"] += result["rows_quarantined"]
    return totals


def query(home: Path, sql: str):
    with WarehouseResource(path=str(home / "warehouse.duckdb")).connect(read_only=True) as con:
        return con.execute(sql).fetchall()


MEGATRON_LM = (MEGATRON_FIXTURES / "megatron_lm.log").read_text()


# Megatron-DeepSpeed: no timestamp on the line, time per iteration in seconds, a launcher prefix.
MEGATRON_DEEPSPEED = (MEGATRON_FIXTURES / "megatron_deepspeed.log").read_text()


# ---------- a process holding the warehouse's write lock (tests/test_sql_cli.py, tests/test_progress.py, tests/test_board.py)

# Holds a write transaction on the file until a line arrives on stdin, then commits and exits.
HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("BEGIN TRANSACTION")
con.execute("INSERT INTO quarantine VALUES ('held', TIMESTAMP '2026-11-30 00:00:00', 'f', 1, 'raw', 'written while locked')")
print("locked", flush=True)
sys.stdin.readline()
con.execute("COMMIT")
con.close()
print("released", flush=True)
"""


# ---------- Debian's Chromium and loopback ports (the browser tests, tests/test_board.py)

CHROMIUM = Path("/usr/bin/chromium")


# Debian's Chromium, headless, and quiet on the network: nothing outside loopback is reachable in CI.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


WAIT_MS = 120_000  # generous: the first page load compiles the UI's bundles on a slow CI machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------- the incident board served on loopback (tests/test_board.py, tests/test_judgement.py)

class LiveBoard:
    """The board app under uvicorn on a free loopback port, in a thread; `url` is its base."""

    def __init__(self, home: Path, dagster_url: str = "http://127.0.0.1:3000"):
        import uvicorn

        from board.app import create_app

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(home, dagster_url), host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveBoard:
        self.thread.start()
        while not self.server.started:   # uvicorn sets it once the socket listens
            assert self.thread.is_alive(), "the board's server stopped while starting"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join()

    def get(self, path_or_url: str) -> httpx.Response:
        url = path_or_url if path_or_url.startswith("http") else self.url + path_or_url
        return httpx.get(url, timeout=60)


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


# ---------- a fake NVML shaped like pynvml (tests/test_nvml_agent.py, tests/test_agent_progress.py)

def nvml_error(code):
    """A real pynvml error: NVMLError(code) maps the code to its subclass (e.g. NVMLError_GpuIsLost)."""
    return pynvml.NVMLError(code)


class FakeGpu:
    def __init__(self, index, util=87, used=40 << 30, total=80 << 30, power_mw=612_345, limit_mw=700_000,
                 temp=71, sm_mhz=1980, reasons=0x4, ecc=(3, 0), pids=(), unsupported=(), xid_events=False):
        self.index, self.util, self.used, self.total = index, util, used, total
        self.power_mw, self.limit_mw, self.temp, self.sm_mhz = power_mw, limit_mw, temp, sm_mhz
        self.reasons, self.ecc, self.pids = reasons, ecc, list(pids)
        self.unsupported = set(unsupported)
        self.xid_events = xid_events
        self.lost = False
        self.uuid = f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd"


def make_fake_nvml(gpus, init_error=None):
    """A module shaped like pynvml: same function names, constants and error classes."""
    fake = types.ModuleType("pynvml")
    for name in dir(pynvml):
        if name.startswith(("NVMLError", "NVML_", "nvmlEventType", "nvmlClocksEventReason")):
            setattr(fake, name, getattr(pynvml, name))
    pending_events = []
    fake.pending_events = pending_events

    def guarded(name):
        def wrap(fn):
            def call(handle, *args):
                if handle.lost:
                    raise nvml_error(pynvml.NVML_ERROR_GPU_IS_LOST)
                if name in handle.unsupported:
                    raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
                return fn(handle, *args)
            call.__name__ = name
            setattr(fake, name, call)
            return call
        return wrap

    def nvmlInit():
        if init_error is not None:
            raise nvml_error(init_error)
    fake.nvmlInit = nvmlInit
    fake.nvmlShutdown = lambda: None
    fake.nvmlDeviceGetCount = lambda: len(gpus)
    fake.nvmlDeviceGetHandleByIndex = lambda i: gpus[i]

    guarded("nvmlDeviceGetUUID")(lambda h: h.uuid)
    guarded("nvmlDeviceGetName")(lambda h: "NVIDIA H100 80GB HBM3")
    guarded("nvmlDeviceGetUtilizationRates")(lambda h: pynvml.c_nvmlUtilization_t(gpu=h.util, memory=30))

    @guarded("nvmlDeviceGetMemoryInfo")
    def _mem(h):
        info = pynvml.c_nvmlMemory_t()
        info.total, info.used, info.free = h.total, h.used, h.total - h.used
        return info

    guarded("nvmlDeviceGetPowerUsage")(lambda h: h.power_mw)
    guarded("nvmlDeviceGetEnforcedPowerLimit")(lambda h: h.limit_mw)
    guarded("nvmlDeviceGetTemperature")(lambda h, sensor: h.temp)
    guarded("nvmlDeviceGetClockInfo")(lambda h, clock: h.sm_mhz)
    guarded("nvmlDeviceGetCurrentClocksEventReasons")(lambda h: h.reasons)
    guarded("nvmlDeviceGetCurrentClocksThrottleReasons")(lambda h: h.reasons)
    guarded("nvmlDeviceGetTotalEccErrors")(
        lambda h, kind, counter: h.ecc[0] if kind == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED else h.ecc[1])

    @guarded("nvmlDeviceGetComputeRunningProcesses")
    def _procs(h):
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=1 << 30) for pid in h.pids]

    fake.nvmlEventSetCreate = lambda: "event-set"
    fake.nvmlEventSetFree = lambda s: None

    def nvmlDeviceRegisterEvents(handle, types_, event_set):
        if not handle.xid_events:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED)
    fake.nvmlDeviceRegisterEvents = nvmlDeviceRegisterEvents

    def nvmlEventSetWait_v2(event_set, timeout_ms):
        if not pending_events:
            raise nvml_error(pynvml.NVML_ERROR_TIMEOUT)
        handle, xid = pending_events.pop(0)
        return types.SimpleNamespace(device=handle, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=xid)
    fake.nvmlEventSetWait_v2 = nvmlEventSetWait_v2
    return fake


# ---------- checkpoints written on disk in each format (tests/test_checkpoint_audit.py, the checkpoint signal and symlink tests)

def checkpoint_tensors(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w": rng.standard_normal((64, 32)).astype("<f4"), "b": rng.standard_normal(32).astype("<f4")}


def goodput_checkpoint(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for rank in range(2):
        (folder / f"model_rank{rank:03d}.safetensors").write_bytes(_safetensors_bytes(checkpoint_tensors(rank)))
        (folder / f"optim_rank{rank:03d}.pt").write_bytes(torch_save_bytes(checkpoint_tensors(10 + rank)))
    (folder / "metadata.json").write_text('{"step": 100}\n')
    (folder / MANIFEST_NAME).write_text(json.dumps({"run_id": "r1", "step": 100, **file_manifest(folder)}))
    return folder


def hf_checkpoint(folder: Path, shards: int = 3) -> Path:
    folder.mkdir(parents=True)
    weight_map = {}
    for i in range(1, shards + 1):
        name = f"model-{i:05d}-of-{shards:05d}.safetensors"
        tensors = {f"layers.{i}.{k}": v for k, v in checkpoint_tensors(i).items()}
        (folder / name).write_bytes(_safetensors_bytes(tensors))
        weight_map.update({t: name for t in tensors})
    (folder / ca.SAFETENSORS_INDEX).write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    (folder / "config.json").write_text("{}")
    return folder


def distcp_checkpoint(folder: Path, ranks: int = 4) -> Path:
    """A .distcp layout: torch.distributed.checkpoint's own writer when torch is here, else the same
    file names with a .metadata holding the shard names as the real pickle does."""
    try:
        import torch
        import torch.distributed.checkpoint as dcp
    except ImportError:
        folder.mkdir(parents=True)
        names = [f"__{r}_0.distcp" for r in range(ranks)]
        (folder / ".metadata").write_bytes(b"\x80\x04" + b"".join(b"\x8c" + bytes([len(n)]) + n.encode() for n in names) + b".")
        for n in names:
            (folder / n).write_bytes(os.urandom(256))
        return folder
    # one process writes one shard; the other ranks' files are that shard under the names the
    # metadata would give them, so the set is what a `ranks`-way save leaves
    dcp.save({"w": torch.ones(8, 8), "b": torch.zeros(8)}, checkpoint_id=str(folder))
    return folder


def torch_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(torch_save_bytes(checkpoint_tensors(7)))
    return path


def kinds(audit: ca.Audit) -> set[str]:
    return {p.kind for p in audit.problems}
