"""What the GPU-log importers share: one GPU sample in the NVML agent's shape and units
(sources/nvml_agent.py): ratios 0-1, bytes, watts, degrees C, hertz, a throttle bitmask, counters
as totals; a value the tool could not read ("[N/A]", "[Not Supported]", "[Unknown Error]") is null,
never zero. Host and run come from flags (these logs name neither)."""

from __future__ import annotations

import math

from sources.importers.common import Parsed, digest, inputs, write_all

# clocks_event_reasons bits (NVML nvmlClocksEventReason*; `nvidia-smi -q` names them in words)
THROTTLE_BITS = {
    "idle": 0x1, "applications clocks setting": 0x2, "sw power cap": 0x4, "hw slowdown": 0x8, "sync boost": 0x10,
    "sw thermal slowdown": 0x20, "hw thermal slowdown": 0x40, "hw power brake slowdown": 0x80,
    "display clock setting": 0x100,
}
GPU_FIELDS = ("utilization_ratio", "memory_used_bytes", "memory_total_bytes", "power_watts", "power_limit_watts",
              "temperature_celsius", "sm_clock_hertz", "throttle_reasons", "ecc_corrected_errors_total",
              "ecc_uncorrected_errors_total", "xid_errors_total", "last_xid", "sm_active_ratio", "tensor_active_ratio")
INTEGER_FIELDS = {"memory_used_bytes", "memory_total_bytes", "throttle_reasons", "ecc_corrected_errors_total",
                  "ecc_uncorrected_errors_total", "xid_errors_total", "last_xid"}
COUNTERS = {"ecc_corrected_errors_total", "ecc_uncorrected_errors_total", "xid_errors_total"}


def sample(time: str, host: str, gpu_index: int, run_id: str | None, values: dict) -> dict:
    """A gpu_samples record: integers where the column is one, nulls kept as nulls."""
    record = {"time": time, "host": host, "gpu_index": gpu_index}
    if run_id:
        record["run_id"] = run_id
    for key, value in values.items():
        if value is None or key not in (*GPU_FIELDS, "gpu_uuid", "gpu_name", "gpu_lost"):
            record[key] = value
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{key} is out of range")
        if key in INTEGER_FIELDS:
            value = int(value)
            if abs(value) >= 2**63:
                raise ValueError(f"{key} {value} is out of range")
        if (key in COUNTERS or key.endswith("_bytes") or key.endswith("_watts") or key.endswith("_hertz")) and value < 0:
            raise ValueError(f"{key} {value} is negative")
        if key.endswith("_ratio") and not 0 <= value <= 1:
            raise ValueError(f"{key} {value} is outside 0..1")
        record[key] = value
    return record


def host_for(path, host: str | None) -> str:
    return host or path.stem


def import_gpu_logs(paths, raw_root, kind: str, parse, pattern: str = "*", **options) -> dict:
    """Parse every file with `parse(path, **options)`, then write them all as gpu_samples."""
    parsed: list[tuple[str, Parsed]] = []
    for path in inputs(paths, pattern):
        result = parse(path, **options)
        parsed.append((f"{host_for(path, options.get('host'))}.{kind}-{digest(path)}", result))
    return write_all(raw_root, "gpu_samples", parsed)

