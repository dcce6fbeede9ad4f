"""Kernel logs (dmesg, journalctl, /var/log/kern.log) -> XID events as GPU samples.

The NVIDIA driver logs each XID as (NVIDIA's "Xid Errors" guide):

    NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.

with the time in the log's own form: `journalctl -k -o short-iso` (`2026-12-01T10:00:00+0000 host
kernel: ...`), syslog (`Dec  1 10:00:00 host kernel: ...`; the year from --start-time, else this
year), `dmesg -T` (`[Tue Dec  1 10:00:00 2026] ...`), or plain `dmesg` (`[12345.678901] ...`,
seconds since boot: pass the boot time as --start-time).

The line names the GPU by PCI bus id; --gpu-map maps bus ids to nvidia-smi indices (an
`nvidia-smi --query-gpu=index,pci.bus_id --format=csv` file, or `BUS=INDEX` pairs). Each XID is
written as the agent counts them: `xid_errors_total` (per GPU, counted along the log) and
`last_xid`, with the reading just before it, so that the counter's rise is seen in any window.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sources.importers.common import ImportErrorForUser, Parsed, bounded_time, digest, finish, inputs, write_all
from sources.importers.gpu_common import sample

XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.[0-9A-Fa-f])?\): (\d+),?\s*(.*)$")
ISO = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:?\d{2}|Z)?)\s+(\S+)\s+kernel:")
SYSLOG = re.compile(r"^([A-Z][a-z]{2}\s+\d{1,2} \d{2}:\d{2}:\d{2})\s+(\S+)\s+kernel:")
DMESG_T = re.compile(r"^\[([A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\]")
DMESG = re.compile(r"^\[\s*(\d+\.\d+)\]")
BUS = re.compile(r"([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})")


def bus_key(domain: str, bus: str, device: str) -> tuple[int, int, int]:
    return int(domain, 16), int(bus, 16), int(device, 16)


def gpu_map(items: list[str] | None) -> dict[tuple[int, int, int], int]:
    """--gpu-map: `BUS=INDEX` pairs, or nvidia-smi CSV files with index and pci.bus_id columns."""
    out = {}
    for item in items or []:
        if Path(item).is_file():
            lines = Path(item).read_text(errors="replace").splitlines()
            header = [h.strip().split(" ")[0].lower() for h in lines[0].split(",")] if lines else []
            if "index" not in header or "pci.bus_id" not in header:
                raise ImportErrorForUser(f"--gpu-map {item}: expected `nvidia-smi --query-gpu=index,pci.bus_id --format=csv` output")
            for line in lines[1:]:
                row = dict(zip(header, (c.strip() for c in line.split(","))))
                found = BUS.search(row.get("pci.bus_id", ""))
                if found and row.get("index", "").isdigit():
                    out[bus_key(*found.groups())] = int(row["index"])
            continue
        bus, sep, index = item.rpartition("=")
        found = BUS.search(bus)
        if not sep or not found or not index.isdigit():
            raise ImportErrorForUser(f"--gpu-map {item!r}: expected BUS=INDEX (e.g. 0000:3b:00=3) or an nvidia-smi CSV file")
        out[bus_key(*found.groups())] = int(index)
    return out


def _when(line: str, start_time: datetime | None) -> tuple[datetime, str | None]:
    """(time, host named by the line); ValueError saying what is missing."""
    if m := ISO.match(line):
        text = m.group(1).replace("Z", "+00:00")
        text = re.sub(r"([+-]\d{2})(\d{2})$", r"\1:\2", text)
        when = datetime.fromisoformat(text)
        return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)), m.group(2)
    if m := SYSLOG.match(line):
        year = (start_time or datetime.now(timezone.utc)).year
        return datetime.strptime(f"{year} {m.group(1)}", "%Y %b %d %H:%M:%S").replace(tzinfo=timezone.utc), m.group(2)
    if m := DMESG_T.match(line):
        return datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").replace(tzinfo=timezone.utc), None
    if m := DMESG.match(line):
        if start_time is None:
            raise ValueError("dmesg time is seconds since boot: pass the boot time as --start-time (or use dmesg -T)")
        return start_time + timedelta(seconds=float(m.group(1))), None
    raise ValueError("no time on the line (journalctl -o short-iso, syslog, dmesg or dmesg -T)")


def parse_kernel_log(path: Path, host: str | None, gpus: dict, run_id: str | None = None,
                     start_time: datetime | None = None) -> Parsed:
    records, rejects = [], []
    counts: dict[tuple[str, int], int] = {}
    seen_any = False
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number_, line in enumerate(fh, start=1):
            line = line.rstrip("\n")
            if "NVRM" not in line and "kernel:" not in line and not DMESG.match(line) and not DMESG_T.match(line):
                continue
            seen_any = True
            match = XID.search(line)
            if match is None:
                continue
            domain, bus, device, xid, detail = match.groups()
            try:
                when, named = _when(line, start_time)
                time = bounded_time(when)
                before = bounded_time(when - timedelta(milliseconds=1))
            except (ValueError, OverflowError) as error:
                rejects.append({"line": number_, "raw": line, "reason": f"XID line without a usable time: {error}"})
                continue
            index = gpus.get(bus_key(domain, bus, device))
            node = host or named
            if index is None or node is None:
                what = (f"PCI {domain}:{bus}:{device} has no GPU index: pass --gpu-map" if index is None
                        else "no host on the line: pass --host")
                rejects.append({"line": number_, "time": time, "raw": line, "reason": what})
                continue
            key = (node, index)
            total = counts.get(key, 0)
            records.append(sample(before, node, index, run_id, {"xid_errors_total": total}))
            counts[key] = total + 1
            records.append(sample(time, node, index, run_id, {"xid_errors_total": total + 1, "last_xid": int(xid)}))
    if not seen_any:
        raise ImportErrorForUser(f"{path}: not a kernel log (no kernel / NVRM line in it); pass dmesg or journalctl -k output")
    return finish(path, records, rejects, [f"{len(records) // 2} XID event(s)"])


def import_kernel_xids(paths, raw_root, host: str | None = None, gpu_map_items: list[str] | None = None,
                       run_id: str | None = None, start_time: datetime | None = None) -> dict:
    gpus = gpu_map(gpu_map_items)
    parsed = [(f"{host or 'kernel'}.xid-{digest(p)}", parse_kernel_log(p, host, gpus, run_id, start_time))
              for p in inputs(paths, "*")]
    return write_all(raw_root, "gpu_samples", parsed)
