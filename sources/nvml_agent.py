"""The NVML agent: samples every local GPU through NVML and appends gpu_samples records to the raw zone.

One record per GPU per interval, with the fields of docs/design.md (utilization, memory, power and
limit, temperature, SM clock, clock-event (throttle) reasons, ECC counters, XID events through an
NVML event set, and the run the GPU works for). The NVML module is passed in (`import pynvml` from
nvidia-ml-py in production, a fake with pynvml's names and error classes in tests).

- A field the GPU does not support (NVMLError_NotSupported, NoPermission, FunctionNotFound, ...)
  is null; the agent goes on.
- No driver or no GPU: `AgentError` with one line saying so (the CLI exits non-zero).
- A GPU that falls off the bus (NVMLError_GpuIsLost) is recorded as `gpu_lost: true` on that GPU's
  samples from then on, and the agent keeps sampling the others.
- The run a GPU works for: the `GOODPUT_RUN_ID` in the environment of its compute processes
  (`/proc/<pid>/environ`), else a job-mapping folder like dcgm-exporter's (a file per GPU index or
  UUID whose first line is the job id).
- Its own cost: CPU seconds per sample (process time), kept in `stats()` and logged periodically.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sources.client import RawWriter, iso_utc

RUN_ID_VAR = b"GOODPUT_RUN_ID="


class AgentError(RuntimeError):
    """An expected condition the agent cannot run under (no driver, no GPU): one line for the user."""


@dataclass
class _Gpu:
    index: int
    handle: object
    uuid: str | None = None
    name: str | None = None
    lost: bool = False
    xid_supported: bool = False
    xid_count: int = 0
    last_xid: int | None = None


@dataclass
class AgentStats:
    samples: int = 0
    records: int = 0
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    unsupported: dict = field(default_factory=dict)   # field -> count of GPU samples where it was null
    lost_gpus: list = field(default_factory=list)

    @property
    def cpu_ms_per_sample(self) -> float:
        return 1000 * self.cpu_seconds / self.samples if self.samples else 0.0


class NvmlAgent:
    """Samples the GPUs of this host. `open()` first (raises AgentError), then `sample()` per tick."""

    def __init__(self, nvml, host: str | None = None, job_mapping_dir: str | os.PathLike | None = None,
                 proc_root: str | os.PathLike = "/proc", log=None):
        self.nvml = nvml
        self.host = host or socket.gethostname()
        self.job_mapping_dir = Path(job_mapping_dir) if job_mapping_dir else None
        self.proc_root = Path(proc_root)
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.gpus: list[_Gpu] = []
        self.event_set = None
        self.stats = AgentStats()
        self._soft = tuple(getattr(nvml, name) for name in (
            "NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound",
            "NVMLError_InvalidArgument", "NVMLError_NoData", "NVMLError_NotFound", "NVMLError_Unknown",
            "NVMLError_Timeout", "NVMLError_NotReady", "NVMLError_InsufficientSize", "NVMLError_ArgumentVersionMismatch",
        ) if hasattr(nvml, name))

    # -- start -------------------------------------------------------------------------------
    def open(self, progress=None) -> None:
        """Start NVML and find the GPUs. `progress(index, count, what)` is called as each GPU is
        opened (a status line for hosts where discovery is slow)."""
        nvml = self.nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError_LibraryNotFound:
            raise AgentError("no NVIDIA driver: libnvidia-ml.so could not be loaded; run the agent on a GPU host "
                             "with the NVIDIA driver installed") from None
        except nvml.NVMLError_DriverNotLoaded:
            raise AgentError("the NVIDIA driver is not loaded (nvmlInit: Driver Not Loaded); load it "
                             "(nvidia-smi should work) and start the agent again") from None
        except nvml.NVMLError as error:
            raise AgentError(f"NVML could not start: {error}; check that `nvidia-smi` works on this host") from None
        count = nvml.nvmlDeviceGetCount()
        if count == 0:
            raise AgentError("no NVIDIA GPU visible to NVML on this host (nvmlDeviceGetCount() == 0)")
        for index in range(count):
            if progress is not None:
                progress(index, count, f"opening GPU {index}")
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml.NVMLError as error:
                self.log(f"goodput agent: GPU {index} unusable at start ({error}); recording it as lost")
                gpu = _Gpu(index, None, lost=True)
                self.stats.lost_gpus.append(index)
                self.gpus.append(gpu)
                continue
            gpu = _Gpu(index, handle, uuid=self._text(self._field(None, "nvmlDeviceGetUUID", handle)),
                       name=self._text(self._field(None, "nvmlDeviceGetName", handle)))
            self.gpus.append(gpu)
        if progress is not None:
            progress(count, count, "registering for XID events")
        self._open_events()

    def _open_events(self) -> None:
        """XID events through an NVML event set, where the driver supports it for a GPU."""
        nvml = self.nvml
        try:
            self.event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError:
            self.event_set = None
            return
        for gpu in self.gpus:
            if gpu.handle is None:
                continue
            try:
                nvml.nvmlDeviceRegisterEvents(gpu.handle, nvml.nvmlEventTypeXidCriticalError, self.event_set)
                gpu.xid_supported = True
            except nvml.NVMLError:
                gpu.xid_supported = False

    def close(self) -> None:
        nvml = self.nvml
        try:
            if self.event_set is not None:
                nvml.nvmlEventSetFree(self.event_set)
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass

    # -- sampling ----------------------------------------------------------------------------
    @staticmethod
    def _text(value):
        return value.decode() if isinstance(value, bytes) else value

    def _field(self, gpu: _Gpu | None, function: str, *args):
        """Call one NVML function; None when unsupported; marks the GPU lost on GpuIsLost."""
        nvml = self.nvml
        fn = getattr(nvml, function, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except nvml.NVMLError_GpuIsLost:
            if gpu is not None and not gpu.lost:
                gpu.lost = True
                self.stats.lost_gpus.append(gpu.index)
                self.log(f"goodput agent: GPU {gpu.index} ({gpu.uuid}) fell off the bus (NVML: GPU is lost); "
                         "recording it as lost and sampling the others")
            return None
        except self._soft:
            return None
        except nvml.NVMLError:
            return None

    def _poll_xids(self) -> None:
        nvml = self.nvml
        if self.event_set is None:
            return
        by_uuid = {g.uuid: g for g in self.gpus}
        for _ in range(1000):   # bounded: a storm of events never stalls the sampling loop
            try:
                event = nvml.nvmlEventSetWait_v2(self.event_set, 0)
            except nvml.NVMLError_Timeout:
                return
            except nvml.NVMLError:
                return
            if event.eventType != nvml.nvmlEventTypeXidCriticalError:
                continue
            uuid = self._text(self._field(None, "nvmlDeviceGetUUID", event.device))
            gpu = by_uuid.get(uuid)
            if gpu is not None:
                gpu.xid_count += 1
                gpu.last_xid = int(event.eventData)

    def run_id_for(self, gpu: _Gpu, pids: list[int]) -> str | None:
        for pid in pids:
            try:
                environ = (self.proc_root / str(pid) / "environ").read_bytes()
            except OSError:
                continue   # another user's process, or it ended: try the job mapping
            for entry in environ.split(b"\0"):
                if entry.startswith(RUN_ID_VAR):
                    return entry[len(RUN_ID_VAR):].decode(errors="replace") or None
        if self.job_mapping_dir is not None:
            for name in (str(gpu.index), gpu.uuid or ""):
                path = self.job_mapping_dir / name
                try:
                    lines = [s.strip() for s in path.read_text().splitlines() if s.strip()]
                except OSError:
                    continue
                if lines:
                    return lines[0]
        return None

    def _sample_gpu(self, gpu: _Gpu, now: str) -> dict:
        nvml = self.nvml
        record = {"time": now, "host": self.host, "gpu_index": gpu.index, "gpu_uuid": gpu.uuid,
                  "gpu_name": gpu.name, "gpu_lost": gpu.lost}
        if gpu.lost or gpu.handle is None:
            return record
        h = gpu.handle
        util = self._field(gpu, "nvmlDeviceGetUtilizationRates", h)
        memory = self._field(gpu, "nvmlDeviceGetMemoryInfo", h)
        power = self._field(gpu, "nvmlDeviceGetPowerUsage", h)
        limit = self._field(gpu, "nvmlDeviceGetEnforcedPowerLimit", h)
        clocks_event = self._field(gpu, "nvmlDeviceGetCurrentClocksEventReasons", h)
        if clocks_event is None and not gpu.lost:
            clocks_event = self._field(gpu, "nvmlDeviceGetCurrentClocksThrottleReasons", h)
        processes = self._field(gpu, "nvmlDeviceGetComputeRunningProcesses", h) or []
        record.update({
            "utilization_ratio": util.gpu / 100.0 if util is not None else None,
            "memory_used_bytes": int(memory.used) if memory is not None else None,
            "memory_total_bytes": int(memory.total) if memory is not None else None,
            "power_watts": power / 1000.0 if power is not None else None,
            "power_limit_watts": limit / 1000.0 if limit is not None else None,
            "temperature_celsius": self._field(gpu, "nvmlDeviceGetTemperature", h, nvml.NVML_TEMPERATURE_GPU),
            "sm_clock_hertz": None,
            "throttle_reasons": int(clocks_event) if clocks_event is not None else None,
            "ecc_corrected_errors_total": self._field(
                gpu, "nvmlDeviceGetTotalEccErrors", h, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_VOLATILE_ECC),
            "ecc_uncorrected_errors_total": self._field(
                gpu, "nvmlDeviceGetTotalEccErrors", h, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC),
            "xid_errors_total": gpu.xid_count if gpu.xid_supported else None,
            "last_xid": gpu.last_xid,
            "run_id": self.run_id_for(gpu, [p.pid for p in processes]),
        })
        sm_clock = self._field(gpu, "nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_SM)
        record["sm_clock_hertz"] = sm_clock * 1_000_000.0 if sm_clock is not None else None
        # GpuIsLost can strike mid-sample: the record says so, and its fields stay null from then on.
        record["gpu_lost"] = gpu.lost
        for key, value in record.items():
            if value is None and key not in ("run_id", "last_xid"):
                self.stats.unsupported[key] = self.stats.unsupported.get(key, 0) + 1
        return record

    def sample(self) -> list[dict]:
        """One record per GPU, now. Never raises for a GPU-level NVML error."""
        cpu0, wall0 = time.process_time(), time.perf_counter()
        self._poll_xids()
        now = iso_utc()
        records = [self._sample_gpu(gpu, now) for gpu in self.gpus]
        self.stats.samples += 1
        self.stats.records += len(records)
        self.stats.cpu_seconds += time.process_time() - cpu0
        self.stats.wall_seconds += time.perf_counter() - wall0
        return records


def run_agent(agent: NvmlAgent, raw_root: str | os.PathLike, interval: float = 10.0, count: int | None = None,
              stats_every: int = 60, log=None, stop: threading.Event | None = None,
              on_sample=None) -> AgentStats:
    """Sample every `interval` seconds into `raw_root/gpu_samples/...` until `count` samples, SIGTERM/SIGINT
    or `stop` is set (from another thread). `on_sample(records)`, if given, sees each sample once written."""
    log = log or agent.log
    writer = RawWriter(raw_root, "gpu_samples", agent.host)
    signalled = {"now": False}   # a plain flag: Event.set() in a handler can deadlock on the Event's lock
    stop = stop or threading.Event()

    def stopping() -> bool:
        return signalled["now"] or stop.is_set()

    def on_signal(signum, frame):
        signalled["now"] = True

    previous = {}
    if threading.current_thread() is threading.main_thread():   # signal handlers only work there
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)
    try:
        next_tick = time.monotonic()
        while not stopping():
            records = agent.sample()
            cpu0 = time.process_time()
            for record in records:
                writer.write(record)
            agent.stats.cpu_seconds += time.process_time() - cpu0   # the cost per sample includes writing it
            if on_sample is not None:
                on_sample(records)
            s = agent.stats
            if stats_every and s.samples % stats_every == 0:
                log(f"goodput agent: {s.samples} samples of {len(agent.gpus)} GPU(s), "
                    f"CPU {s.cpu_ms_per_sample:.2f} ms per sample")
            if count is not None and s.samples >= count:
                break
            next_tick += interval
            while not stopping():
                left = next_tick - time.monotonic()
                if left <= 0:
                    break
                time.sleep(min(left, 0.5))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        writer.close()
        agent.close()
    return agent.stats
