"""Goodput's training-side client: step records and lineage events from inside a training loop.

Standard library only (torch is optional and never imported unless already importable), so a
training job can use it without installing anything else; it is one file that may be copied.

    from sources.client import GoodputClient             # or copy this file next to train.py
    goodput = GoodputClient(run_id="llm-7b-001")          # rank/world size from RANK/WORLD_SIZE
    goodput.run_started(job="llm-7b", dataset="web-v1")
    for step, batch in enumerate(loader, 1):
        loss = train_step(batch); goodput.log_step(step, loss=loss.item(), grad_norm=gn)

Records land in the raw zone, `GOODPUT_HOME/raw/<source>/<YYYY-MM-DD>/<HH>/<producer>.jsonl`.
Each record is one `os.write` of one whole line to a file opened with O_APPEND: the kernel has it
as soon as `log_step` returns, so a SIGKILL of the trainer loses nothing already logged, and no
line is ever half written by this process. The client never raises into the training loop: an
I/O error is reported once on stderr and the record is counted as dropped.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import socket
import sys
import threading
import time as _time
from datetime import datetime, timezone
from pathlib import Path

STEP_FIELDS = (
    "world_size", "host", "gpu_index", "loss", "grad_norm", "learning_rate", "loss_scale", "tokens",
    "step_seconds", "data_seconds", "compute_seconds", "collective_seconds",
    "memory_allocated_bytes", "memory_reserved_bytes", "memory_inactive_split_bytes",
    "alloc_retries_total", "ooms_total",
    # model FLOPs (any one): a parameter count (6N rule), FLOPs per token, or the TFLOP/s a framework printed
    "parameters", "model_flops_per_token", "tflops",
)
MANIFEST_NAME = "goodput-manifest.json"

# torch.cuda.memory_stats() keys -> step-record fields (see PyTorch's CUDA caching allocator docs).
TORCH_ALLOCATOR_KEYS = {
    "allocated_bytes.all.current": "memory_allocated_bytes",
    "reserved_bytes.all.current": "memory_reserved_bytes",
    "inactive_split_bytes.all.current": "memory_inactive_split_bytes",
    "num_alloc_retries": "alloc_retries_total",
    "num_ooms": "ooms_total",
}


def iso_utc(moment: datetime | float | None = None) -> str:
    """UTC ISO-8601 with milliseconds and a Z, the raw zone's time format."""
    if moment is None:
        moment = datetime.now(timezone.utc)
    elif isinstance(moment, (int, float)):
        moment = datetime.fromtimestamp(moment, timezone.utc)
    elif moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _hour_of(iso_time: str) -> tuple[str, str]:
    moment = datetime.fromisoformat(iso_time.replace("Z", "+00:00")).astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%d"), moment.strftime("%H")


def _clean(value):
    """JSON-safe scalars: tensors and numpy scalars become Python numbers."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except Exception:  # noqa: BLE001 - a multi-element tensor is not a scalar; keep its text
            return str(value)
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    return str(value)


def dumps(record: dict) -> str:
    """One raw-zone line (no newline). Non-finite floats are written as the bare NaN/Infinity tokens
    the ingest accepts, so a diverging loss is recorded, not lost."""
    return json.dumps({k: _clean(v) for k, v in record.items()}, separators=(",", ":"), allow_nan=True)


def replace_hour_files(raw_root: str | os.PathLike, source: str, producer: str, records: list[dict],
                       rejects: list[dict] = ()) -> list[Path]:
    """Replace each touched hour's `<producer>.jsonl` atomically (temp file + rename) with `records`,
    plus `rejects` ({time, raw, reason}) as `quarantine_reason` lines that the ingest quarantines.
    For producers that rewrite a whole window (a Prometheus pull, a log import): running them again
    replaces their files instead of appending duplicates."""
    root = Path(raw_root)
    lines: dict[Path, list[str]] = {}
    for record in records:
        lines.setdefault(_hour_file(root, source, record["time"], producer), []).append(dumps(record))
    for reject in rejects:
        lines.setdefault(_hour_file(root, source, reject["time"], producer), []).append(
            dumps({"time": reject["time"], "quarantine_reason": reject["reason"], "raw": reject["raw"]}))
    for path, text in lines.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text("\n".join(text) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    return sorted(lines)


def _hour_file(root: Path, source: str, iso_time: str, producer: str) -> Path:
    day, hour = _hour_of(iso_time)
    return root / source / day / hour / f"{producer.replace(os.sep, '_')}.jsonl"


def _end_torn_line(fd: int) -> None:
    """Start on a new line when an earlier writer (killed mid-write) left the file's last line
    without its newline: otherwise our first record would be glued to the fragment and lost with it."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        os.write(fd, b"\n")


class RawWriter:
    """Appends records to one producer's hour-bucketed files of one raw source.

    Each record is written with a single os.write on an O_APPEND descriptor (whole lines, in
    order, durable against a kill of this process). Errors never propagate: they are counted.
    """

    def __init__(self, root: str | os.PathLike, source: str, producer: str):
        self.root = Path(root)
        self.source = source
        self.producer = producer.replace(os.sep, "_")
        self._fds: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.written = 0
        self.dropped = 0
        self._warned = False

    def path_for(self, day: str, hour: str) -> Path:
        return self.root / self.source / day / hour / f"{self.producer}.jsonl"

    def write(self, record: dict) -> bool:
        try:
            data = (dumps(record) + "\n").encode("utf-8")
            key = _hour_of(record["time"])
            with self._lock:
                fd = self._fds.get(key)
                if fd is None:
                    path = self.path_for(*key)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                    _end_torn_line(fd)
                    # Hours only move forward: close older hours' files so descriptors don't pile up.
                    for old in [k for k in self._fds if k < key]:
                        os.close(self._fds.pop(old))
                    self._fds[key] = fd
                os.write(fd, data)
                self.written += 1
            return True
        except Exception as error:  # noqa: BLE001 - never crash the training loop
            self.dropped += 1
            if not self._warned:
                self._warned = True
                print(f"goodput: could not write {self.source} record to {self.root}: {error} "
                      "(further errors counted, not printed)", file=sys.stderr)
            return False

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                try:
                    os.fsync(fd)
                    os.close(fd)
                except OSError:
                    pass
            self._fds.clear()


def allocator_figures(stats: dict) -> dict:
    """Step-record allocator fields from a `torch.cuda.memory_stats()` dict (missing keys -> absent)."""
    return {field: int(stats[key]) for key, field in TORCH_ALLOCATOR_KEYS.items() if key in stats}


def torch_allocator_figures(device=None) -> dict:
    """Allocator fields from torch's CUDA caching allocator; {} when torch or CUDA is absent."""
    try:
        import torch  # optional: only when the training job has it
    except Exception:  # noqa: BLE001
        return {}
    try:
        if not torch.cuda.is_available():
            return {}
        return allocator_figures(torch.cuda.memory_stats(device))
    except Exception:  # noqa: BLE001 - never crash training for a statistic
        return {}


def file_manifest(path: str | os.PathLike) -> dict:
    """{files: [{path, bytes, sha256}]} for a checkpoint file or every file under a checkpoint folder."""
    root = Path(path)
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST_NAME)
    files = []
    for p in paths:
        digest = hashlib.sha256()
        with open(p, "rb") as fh:
            for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                digest.update(chunk)
        files.append({"path": p.name if root.is_file() else str(p.relative_to(root)),
                      "bytes": p.stat().st_size, "sha256": digest.hexdigest()})
    return {"files": files}


class GoodputClient:
    """Writes one rank's step records and lineage events into the raw zone.

    run_id: `GOODPUT_RUN_ID` if not given; rank / world size / GPU from the launcher's RANK,
    WORLD_SIZE and LOCAL_RANK; home from GOODPUT_HOME (default ./.goodput).
    """

    def __init__(self, run_id: str | None = None, rank: int | None = None, world_size: int | None = None,
                 home: str | os.PathLike | None = None, host: str | None = None, gpu_index: int | None = None,
                 torch_memory_stats: bool = False):
        env = os.environ
        self.run_id = run_id or env.get("GOODPUT_RUN_ID") or "unnamed-run"
        self.rank = int(rank if rank is not None else env.get("RANK", 0))
        self.world_size = int(world_size if world_size is not None else env.get("WORLD_SIZE", 1))
        local_rank = env.get("LOCAL_RANK")
        self.gpu_index = gpu_index if gpu_index is not None else (int(local_rank) if local_rank is not None else None)
        self.host = host or socket.gethostname()
        self.torch_memory_stats = torch_memory_stats
        root = Path(home or env.get("GOODPUT_HOME", ".goodput")) / "raw"
        producer = f"{self.run_id}.rank-{self.rank}"
        self.steps = RawWriter(root, "training_steps", producer)
        self.lineage = RawWriter(root, "lineage", producer)
        self._last_step_time: float | None = None
        self._threads: list[threading.Thread] = []
        atexit.register(self.close)

    # -- steps ------------------------------------------------------------------------------
    def log_step(self, step: int, loss=None, grad_norm=None, learning_rate=None, time: float | datetime | None = None,
                 **fields) -> bool:
        """Record that `step` ended now (or at `time`). Unknown keyword fields are written too; the
        ingest keeps the ones the warehouse knows. `step_seconds` defaults to the time since the
        previous call. Returns False (and counts a drop) instead of raising."""
        try:
            now = _time.time() if time is None else (time.timestamp() if isinstance(time, datetime) else float(time))
            record = {"time": iso_utc(now), "run_id": self.run_id, "rank": self.rank, "step": int(step),
                      "world_size": self.world_size, "host": self.host, "gpu_index": self.gpu_index,
                      "loss": loss, "grad_norm": grad_norm, "learning_rate": learning_rate}
            if "step_seconds" not in fields and self._last_step_time is not None:
                record["step_seconds"] = round(now - self._last_step_time, 6)
            self._last_step_time = now
            if self.torch_memory_stats:
                record.update(torch_allocator_figures(self.gpu_index))
            record.update(fields)
            return self.steps.write(record)
        except Exception:  # noqa: BLE001 - a bad argument must not stop training
            self.steps.dropped += 1
            return False

    # -- lineage ----------------------------------------------------------------------------
    def _event(self, event: str, time: str | None = None, **fields) -> bool:
        return self.lineage.write({"time": time or iso_utc(), "event": event, "run_id": self.run_id, **fields})

    def run_started(self, job: str | None = None, git_sha: str | None = None, config_hash: str | None = None,
                    dataset: str | None = None, hosts: list[str] | None = None, **fields) -> bool:
        return self._event("run_started", job=job, git_sha=git_sha, config_hash=config_hash, dataset=dataset,
                           world_size=self.world_size, hosts=hosts or [self.host], **fields)

    def run_ended(self, status: str = "completed", **fields) -> bool:
        self._join()   # checkpoints saved before the end are recorded before it
        return self._event("run_ended", status=status, **fields)

    def checkpoint_saved(self, step: int, path: str | os.PathLike, background: bool = True,
                         save_seconds: float | None = None) -> None:
        """Hash every file of the checkpoint, write `goodput-manifest.json` next to them (atomically)
        and a `checkpoint_saved` event with the manifest. Hashing runs on a thread by default so the
        loop goes on; `close()` (also at exit) waits for it. The event's time is the call's.
        `save_seconds`: how long training stood still for the save (the badput accounting's
        checkpoint-save time; without it, the time since the last step)."""
        saved_at = iso_utc()
        timing = {} if save_seconds is None else {"save_seconds": round(float(save_seconds), 3)}

        def work():
            try:
                manifest = file_manifest(path)
                target = Path(path) if Path(path).is_dir() else Path(path).parent
                tmp = target / f".{MANIFEST_NAME}.tmp"
                tmp.write_text(json.dumps({"run_id": self.run_id, "step": int(step), **manifest}, indent=1))
                os.replace(tmp, target / MANIFEST_NAME)
                self._event("checkpoint_saved", time=saved_at, step=int(step), checkpoint_path=str(path),
                            checkpoint_bytes=sum(f["bytes"] for f in manifest["files"]), manifest=manifest, **timing)
            except Exception as error:  # noqa: BLE001
                self._event("checkpoint_saved", time=saved_at, step=int(step), checkpoint_path=str(path),
                            manifest_error=f"{type(error).__name__}: {error}", **timing)
        if background:
            thread = threading.Thread(target=work, name="goodput-manifest", daemon=True)
            thread.start()
            self._threads.append(thread)
        else:
            work()

    def evaluation_done(self, eval_seconds: float, step: int | None = None, **fields) -> bool:
        """An evaluation pause of `eval_seconds` ended now: the badput accounting counts it as evaluation
        rather than unexplained time."""
        return self._event("evaluation", eval_seconds=round(float(eval_seconds), 3), step=step, **fields)

    def model_version_registered(self, model_version: str, step: int | None = None,
                                 checkpoint_path: str | None = None, **fields) -> bool:
        return self._event("model_version_registered", model_version=model_version, step=step,
                           checkpoint_path=checkpoint_path, **fields)

    def model_version_promoted(self, model_version: str, endpoint: str, **fields) -> bool:
        return self._event("model_version_promoted", model_version=model_version, endpoint=endpoint, **fields)

    def _join(self) -> None:
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def close(self) -> None:
        self._join()
        self.steps.close()
        self.lineage.close()


_default: GoodputClient | None = None


def log_step(step: int, **fields) -> bool:
    """Module-level shortcut: one client per process, configured from the environment."""
    global _default
    if _default is None:
        _default = GoodputClient()
    return _default.log_step(step, **fields)
