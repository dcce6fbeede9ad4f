"""nvidia-smi logs -> GPU samples: `nvidia-smi --query-gpu=... --format=csv [-l N]` and `nvidia-smi -q`.

CSV (`nvidia-smi --help-query-gpu` lists the fields): a header line of the queried properties with
their units (`utilization.gpu [%]`, `memory.used [MiB]`; none with `nounits`), then one line per GPU
per loop: `2026/12/01 10:00:00.123, 0, GPU-..., 97 %, 71234 MiB, ...`. A driver reload or a lost
GPU shows as nvidia-smi's own error lines ("Unable to determine the device handle for GPU ...",
"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver", "No devices were
found") and, when the loop is restarted, a new header (maybe other fields): error lines are skipped
with their reason, each header re-read. Volatile ECC counters restart at the reload; the detectors
count a drop as a reset.

`-q` text: snapshots that start with `==============NVSMI LOG==============` and a `Timestamp :`
line (ctime), then one `GPU 00000000:18:00.0` section per GPU in index order, nested `Key : value`
lines (`FB Memory Usage` / `Used : 71234 MiB`, `Utilization` / `Gpu : 97 %`, `GPU Power Readings`
/ `Power Draw : 612.34 W`, `Clocks Event Reasons` / `SW Power Cap : Active`, `ECC Errors` /
`Volatile` / `DRAM Correctable : 0`; older drivers: `Power Readings`, `Clocks Throttle Reasons`,
`Single Bit` / `Total`).

nvidia-smi prints the node's local time; times are read as UTC (run nvidia-smi with TZ=UTC, as
clusters usually do).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from sources.importers.common import MIB, NO_VALUE, ImportErrorForUser, Parsed, bounded_time, finish, number
from sources.importers.gpu_common import THROTTLE_BITS, host_for, import_gpu_logs, sample

# --query-gpu property (unit suffix removed) -> (field, scale)
QUERY_FIELDS = {
    "index": ("gpu_index", 1), "uuid": ("gpu_uuid", None), "name": ("gpu_name", None),
    "utilization.gpu": ("utilization_ratio", 0.01),
    "memory.used": ("memory_used_bytes", MIB), "memory.total": ("memory_total_bytes", MIB),
    "power.draw": ("power_watts", 1), "power.draw.instant": ("power_watts", 1), "power.draw.average": ("power_watts", 1),
    "enforced.power.limit": ("power_limit_watts", 1), "power.limit": ("power_limit_watts", 1),
    "temperature.gpu": ("temperature_celsius", 1),
    "clocks.sm": ("sm_clock_hertz", 1e6), "clocks.current.sm": ("sm_clock_hertz", 1e6),
    "clocks_event_reasons.active": ("throttle_reasons", "hex"), "clocks_throttle_reasons.active": ("throttle_reasons", "hex"),
    "ecc.errors.corrected.volatile.total": ("ecc_corrected_errors_total", 1),
    "ecc.errors.uncorrected.volatile.total": ("ecc_uncorrected_errors_total", 1),
}
CSV_TIME = "%Y/%m/%d %H:%M:%S.%f"
SMI_ERRORS = ("NVIDIA-SMI has failed", "Unable to determine", "No devices were found", "Failed to initialize NVML")
LOST = ("gpu is lost", "unknown error", "gpu requires reset")


def _time(text: str, fmt: str) -> str:
    try:
        return bounded_time(datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc))
    except ValueError as error:
        raise ValueError(f"timestamp {text.strip()!r}: {error}") from None


def _value(text: str, scale):
    """A CSV / -q value in the agent's unit; None where nvidia-smi says it has none."""
    text = text.strip()
    if text.strip("[]").strip().upper() in NO_VALUE or not text:
        return None
    if scale is None:
        return text
    if scale == "hex":
        return int(text.strip("[]"), 16)
    value = number(text)
    return None if value is None else value * scale


def _banner(stripped: str) -> bool:
    """A `-q` snapshot's first line, `==============NVSMI LOG==============` (stripped)."""
    return stripped.startswith("=") and "NVSMI LOG" in stripped


def _header(line: str) -> list[str] | None:
    names = [re.sub(r"\s*\[.*\]$", "", part.strip()).lower() for part in line.split(",")]
    return names if "timestamp" in names and "index" in names else None


def parse_query_csv(path: Path, host: str | None = None, run_id: str | None = None) -> Parsed:
    host = host_for(path, host)
    records, rejects = [], []
    columns: list[str] | None = None
    headers = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number_, line in enumerate(fh, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            header = _header(line)
            if header is not None:
                columns, headers = header, headers + 1
                continue
            if columns is None:
                rejects.append({"line": number_, "raw": line, "reason": "no header line (timestamp, index, ...) before it"})
                continue
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != len(columns):
                reason = (f"nvidia-smi error: {line.strip()[:120]}" if "," not in line
                          else f"{len(parts)} values for {len(columns)} header fields")
                rejects.append({"line": number_, "raw": line, "reason": reason})
                continue
            try:
                row = dict(zip(columns, parts))
                values = {}
                for name, text in row.items():
                    if name in QUERY_FIELDS:
                        field, scale = QUERY_FIELDS[name]
                        values[field] = _value(text, scale)
                if values.get("gpu_index") is None:
                    raise ValueError("no GPU index")
                index = int(values.pop("gpu_index"))
                values["gpu_lost"] = any(word in line.lower() for word in LOST)
                records.append(sample(_time(row["timestamp"], CSV_TIME), host, index, run_id, values))
            except ValueError as error:
                rejects.append({"line": number_, "raw": line, "reason": f"unusable GPU line: {error}"})
    if headers == 0:
        raise ImportErrorForUser(f"{path}: not an nvidia-smi --query-gpu CSV log (no header line with timestamp and index; "
                                 "log with --format=csv, not noheader)")
    notes = [f"{headers} header(s): nvidia-smi restarted {headers - 1} time(s)"] if headers > 1 else []
    return finish(path, records, rejects, notes)


# -- nvidia-smi -q -----------------------------------------------------------------------------------
Q_TIME = "%a %b %d %H:%M:%S %Y"
Q_FIELDS = {   # (section path, key) -> (field, scale); the first match per field wins
    ("", "product name"): ("gpu_name", None), ("", "gpu uuid"): ("gpu_uuid", None),
    ("fb memory usage", "used"): ("memory_used_bytes", MIB), ("fb memory usage", "total"): ("memory_total_bytes", MIB),
    ("utilization", "gpu"): ("utilization_ratio", 0.01),
    ("temperature", "gpu current temp"): ("temperature_celsius", 1),
    ("gpu power readings", "power draw"): ("power_watts", 1), ("power readings", "power draw"): ("power_watts", 1),
    ("gpu power readings", "instantaneous power draw"): ("power_watts", 1),
    ("gpu power readings", "current power limit"): ("power_limit_watts", 1),
    ("gpu power readings", "enforced power limit"): ("power_limit_watts", 1),
    ("power readings", "enforced power limit"): ("power_limit_watts", 1), ("power readings", "power limit"): ("power_limit_watts", 1),
    ("clocks", "sm"): ("sm_clock_hertz", 1e6),
}
GPU_SECTION = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


def _q_gpu(lines: list[tuple[int, str]]) -> dict:
    """One GPU section's values, by indentation path."""
    values: dict = {}
    stack: list[tuple[int, str]] = []
    throttle = None
    ecc = {"ecc_corrected_errors_total": None, "ecc_uncorrected_errors_total": None}
    for _, line in lines:
        indent = len(line) - len(line.lstrip())
        key, sep, text = line.strip().partition(":")
        key = key.strip().lower()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if not sep or not text.strip():
            stack.append((indent, key))
            continue
        path = [name for _, name in stack]
        section = path[0] if path else ""
        if (section, key) in Q_FIELDS:
            field, scale = Q_FIELDS[(section, key)]
            if values.get(field) is None:
                values[field] = _value(text, scale)
        elif section in ("clocks event reasons", "clocks throttle reasons") and key in THROTTLE_BITS:
            throttle = (throttle or 0) | (THROTTLE_BITS[key] if text.strip().lower() == "active" else 0)
        elif section == "ecc errors" and len(path) >= 2 and path[1] == "volatile":
            old = len(path) >= 3 and key == "total"   # older drivers: Single Bit / Double Bit -> Total
            if old:
                field = {"single bit": "ecc_corrected_errors_total", "double bit": "ecc_uncorrected_errors_total"}.get(path[2])
            elif "uncorrectable" in key:
                field = "ecc_uncorrected_errors_total"
            elif "correctable" in key:
                field = "ecc_corrected_errors_total"
            else:
                continue
            value = number(text)
            if field is not None and value is not None:
                ecc[field] = (ecc[field] or 0) + value
    values["throttle_reasons"] = throttle
    values.update(ecc)
    return values


def parse_query_text(path: Path, host: str | None = None, run_id: str | None = None) -> Parsed:
    host = host_for(path, host)
    records, rejects, notes = [], [], []
    snapshots = 0
    time = None
    gpu_lines: list[tuple[int, str]] | None = None
    index = 0
    drivers: list[str] = []

    def flush():
        nonlocal gpu_lines, index
        if gpu_lines is None:
            return
        first = gpu_lines[0][0]
        try:
            if time is None:
                raise ValueError("no Timestamp line before it")
            values = _q_gpu(gpu_lines[1:])
            values["gpu_lost"] = any(w in text.lower() for _, text in gpu_lines for w in LOST)
            records.append(sample(time, host, index, run_id, values))
        except ValueError as error:
            rejects.append({"line": first, "raw": gpu_lines[0][1], "reason": f"unusable GPU section: {error}"})
        gpu_lines, index = None, index + 1

    with open(path, encoding="utf-8", errors="replace") as fh:
        for number_, line in enumerate(fh, start=1):
            line = line.rstrip("\n")
            stripped = line.strip()
            if _banner(stripped):
                flush()
                snapshots, time, index = snapshots + 1, None, 0
                continue
            if GPU_SECTION.match(stripped) and not line.startswith(" "):
                flush()
                gpu_lines = [(number_, stripped)]
                continue
            if gpu_lines is not None and line.startswith((" ", "\t")):
                gpu_lines.append((number_, line))
                continue
            flush()
            key, _, text = stripped.partition(":")
            if key.strip() == "Timestamp":
                try:
                    time = _time(text.strip(), Q_TIME)
                except ValueError as error:
                    rejects.append({"line": number_, "raw": line, "reason": f"unusable snapshot: {error}"})
            elif key.strip() == "Driver Version":
                if not drivers or drivers[-1] != text.strip():
                    drivers.append(text.strip())
            elif stripped.startswith(SMI_ERRORS):
                rejects.append({"line": number_, "raw": line, "reason": f"nvidia-smi error: {stripped[:120]}"})
        flush()
    if snapshots == 0:
        raise ImportErrorForUser(f"{path}: not an `nvidia-smi -q` log (no ==NVSMI LOG== snapshot in it)")
    if len(drivers) > 1:
        notes.append(f"driver changed mid-log: {' -> '.join(drivers)}")
    return finish(path, records, rejects, notes)


def _is_query_text(head: list[str]) -> bool:
    """Whether a file whose first lines are `head` is `-q` text: a snapshot banner comes before any CSV header."""
    for line in head:
        if _banner(line.strip()):
            return True
        if _header(line) is not None:
            return False
    return False


def import_nvidia_smi(paths, raw_root, host: str | None = None, run_id: str | None = None) -> dict:
    """Either form, told apart per file by its content: the first line of the file's head that is a `-q`
    snapshot banner or a CSV header decides (a CSV line that merely mentions NVSMI LOG keeps it a CSV)."""
    def parse(path: Path, host=None, run_id=None) -> Parsed:
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.read(4096).splitlines()
        return (parse_query_text if _is_query_text(head) else parse_query_csv)(path, host, run_id)

    return import_gpu_logs(paths, raw_root, "nvidia-smi", parse, host=host, run_id=run_id)
