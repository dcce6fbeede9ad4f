"""`dcgmi dmon` output -> GPU samples.

`dcgmi dmon -e <field ids> [-d <delay ms>]` (DCGM's command-line reference, dcgmi dmon) prints a
header of the fields' short names, a second line of units/`ID`, then one row per entity per sample,
and repeats the header from time to time:

    #Entity   GPUTL  FBUSD  POWER   TMPTR  SMCLK  SMACT  TENSO
    ID
    GPU 0     97     71234  612.3   64     1980   0.912  0.487
    GPU 1     N/A    71230  608.9   63     1980   0.905  0.482

Rows carry no time: the samples are `--start-time` (when dmon was started) plus one `--interval`
(dmon's `-d`, default 1 s) per sample; a sample ends when an entity repeats. Values in DCGM's
units are converted to the agent's (MiB -> bytes, MHz -> Hz, % -> ratio); `N/A` is null. Rows of
other entities (MIG instances, NVSwitches) are skipped. XIDER is DCGM's last XID: each change to a
new XID counts one in `xid_errors_total`.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

from sources.importers.common import MIB, ImportErrorForUser, Parsed, bounded_time, finish, number
from sources.importers.gpu_common import host_for, import_gpu_logs, sample

SHORT_NAMES = {   # DCGM field short name -> (field, scale)
    "GPUTL": ("utilization_ratio", 0.01), "FBUSD": ("memory_used_bytes", MIB), "FBTTL": ("memory_total_bytes", MIB),
    "POWER": ("power_watts", 1), "PMLMT": ("power_limit_watts", 1), "TMPTR": ("temperature_celsius", 1),
    "GTEMP": ("temperature_celsius", 1), "SMCLK": ("sm_clock_hertz", 1e6), "SMACT": ("sm_active_ratio", 1),
    "TENSO": ("tensor_active_ratio", 1), "ESVTL": ("ecc_corrected_errors_total", 1),
    "EDVTL": ("ecc_uncorrected_errors_total", 1), "XIDER": ("last_xid", 1),
}
ROW = re.compile(r"^\s*GPU\s+(\d+)\s+(.*)$")


def parse_dmon(path: Path, host: str | None = None, run_id: str | None = None, start_time: datetime | None = None,
               interval: float = 1.0) -> Parsed:
    host = host_for(path, host)
    records, rejects = [], []
    columns: list[str] | None = None
    headers, samples, seen = 0, -1, set()
    last_xid: dict[int, int] = {}
    xids: dict[int, int] = {}
    ignored: set[str] = set()
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.readlines()
    if not any(line.lstrip().startswith("#") and "Entity" in line for line in lines):
        raise ImportErrorForUser(f"{path}: not `dcgmi dmon` output (no `#Entity` header line in it)")
    if start_time is None:
        raise ImportErrorForUser(f"{path}: dcgmi dmon rows carry no time: pass --start-time (when dmon was started) "
                                 "and --interval (its -d delay in seconds)")
    for number_, line in enumerate(lines, start=1):
        line = line.rstrip("\n")
        stripped = line.strip()
        if not stripped or stripped.upper() in ("ID", "IDS") or stripped.upper().startswith("ID "):
            continue
        if stripped.startswith("#") and "Entity" in stripped:
            names = stripped.lstrip("#").split()[1:]
            columns, headers = names, headers + 1
            ignored |= {n for n in names if n not in SHORT_NAMES}
            continue
        row = ROW.match(line)
        if row is None:
            reason = "dcgmi error" if "error" in stripped.lower() else "not a GPU row"
            rejects.append({"line": number_, "raw": line, "reason": f"{reason}: {stripped[:120]}"})
            continue
        gpu, cells = int(row.group(1)), row.group(2).split()
        if columns is None or len(cells) != len(columns):
            rejects.append({"line": number_, "raw": line, "reason": f"{len(cells)} values for {len(columns or [])} header fields"})
            continue
        if gpu in seen or samples < 0:
            samples, seen = samples + 1, set()
        seen.add(gpu)
        try:
            time = bounded_time(start_time + timedelta(seconds=samples * interval))
            values = {}
            for name, cell in zip(columns, cells):
                if name in SHORT_NAMES:
                    field, scale = SHORT_NAMES[name]
                    value = number(cell)
                    values[field] = None if value is None else value * scale
            xid = values.get("last_xid")
            if xid is not None:
                if xid and xid != last_xid.get(gpu):
                    xids[gpu] = xids.get(gpu, 0) + 1
                last_xid[gpu] = int(xid)
                values["xid_errors_total"] = xids.get(gpu, 0)
                values["last_xid"] = int(xid) or None
            records.append(sample(time, host, gpu, run_id, values))
        except (ValueError, OverflowError) as error:
            rejects.append({"line": number_, "raw": line, "reason": f"unusable GPU row: {error}"})
    notes = [f"fields not mapped: {', '.join(sorted(ignored))}"] if ignored else []
    return finish(path, records, rejects, notes)


def import_dcgmi(paths, raw_root, host: str | None = None, run_id: str | None = None, start_time: datetime | None = None,
                 interval: float = 1.0) -> dict:
    if interval <= 0:
        raise ImportErrorForUser(f"--interval must be positive seconds, got {interval}")
    return import_gpu_logs(paths, raw_root, "dcgmi", parse_dmon, host=host, run_id=run_id, start_time=start_time,
                           interval=interval)
