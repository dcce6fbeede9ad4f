"""What every importer shares: the one-line error, the per-file report, input discovery, time
parsing and bounds, and the write into the raw zone.

An importer turns one file into (records, rejects). A reject is a line or value that cannot be used:
it is written as a `quarantine_reason` line carrying its file and line, which the ingest moves to
the quarantine table; the good records around it are kept. A file that holds nothing of the
importer's kind is not a reject but an `ImportErrorForUser` (one line, exit 2), raised before any
file is written, so an import of the wrong files leaves the raw zone untouched.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from sources.client import iso_utc, replace_hour_files

# Times outside this range are a corrupt field, not history (and beyond Python's datetime range
# some would not even format): the record is rejected with the reason.
EARLIEST = datetime(2000, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(2100, 1, 1, tzinfo=timezone.utc)
MIB = 1024 * 1024
# What nvidia-smi / DCGM print for a value they could not read: null, never zero.
NO_VALUE = {"N/A", "NOT SUPPORTED", "UNKNOWN ERROR", "GPU IS LOST", "GPU REQUIRES RESET", "INSUFFICIENT PERMISSIONS",
            "NO DATA", "NOT AVAILABLE", "NOT FOUND"}


class ImportErrorForUser(ValueError):
    """An input that cannot be imported at all (missing file, wrong kind, missing flag): one line."""


@dataclass
class FileReport:
    """What one input file gave: records, lines skipped (reason -> count) and the time span covered."""

    path: Path
    records: int = 0
    skipped: Counter = field(default_factory=Counter)
    first: str | None = None
    last: str | None = None
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        span = f", {self.first[:19].replace('T', ' ')} .. {self.last[:19].replace('T', ' ')} UTC" if self.first else ""
        text = f"{self.path}: {self.records} record(s){span}"
        if self.skipped:
            text += f"; skipped {sum(self.skipped.values())} line(s): " + "; ".join(
                f"{n} {reason}" for reason, n in self.skipped.most_common())
        return text + "".join(f"; {note}" for note in self.notes)


@dataclass
class Parsed:
    """One file's parse: records for the raw zone, rejects ({line, raw, reason}), and a report."""

    records: list[dict]
    rejects: list[dict]
    report: FileReport
    outcomes: list[dict] = field(default_factory=list)   # predictions: late outcomes, another raw source


def finish(path: Path, records: list[dict], rejects: list[dict], notes: list[str] | None = None) -> Parsed:
    """Stamp rejects with a time (the nearest record's, for the hour file they land in) and with
    their file and line, and count what was skipped."""
    report = FileReport(path=path, records=len(records), notes=list(notes or []))
    times = sorted(r["time"] for r in records)
    if times:
        report.first, report.last = times[0], times[-1]
    # rejects of a file with no good record land in the current hour, which the next tick ingests
    fallback = times[0] if times else iso_utc(datetime.now(timezone.utc))
    for reject in rejects:
        report.skipped[_reason_kind(reject["reason"])] += 1
        reject.setdefault("time", fallback)
        where = f"{path.name}:{reject['line']}" if reject.get("line") else path.name
        reject["reason"] = f"{where}: {reject['reason']}"
        reject["raw"] = str(reject.get("raw", ""))[:2000]
    return Parsed(records, rejects, report)


def _reason_kind(reason: str) -> str:
    """A reason without the values in it, to count alike rejects together in the report."""
    return reason.split(" (")[0].split(": ")[0][:80]


def inputs(paths, pattern: str) -> list[Path]:
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.rglob(pattern) if f.is_file())
        elif p.is_file():
            files.append(p)
        else:
            raise ImportErrorForUser(f"{p}: no such file or folder")
    if not files:
        raise ImportErrorForUser(f"no input files matching {pattern!r} under {', '.join(map(str, paths))}")
    return files


def digest(path: Path) -> str:
    return hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]


def producer(run_id: str, rank: int, kind: str, path: Path) -> str:
    return f"{run_id}.rank-{rank}.{kind}-{digest(path)}"


def bounded_time(moment: datetime | float) -> str:
    """The raw zone's ISO time for a moment, or ValueError saying why it is not a usable time."""
    try:
        when = datetime.fromtimestamp(moment, timezone.utc) if isinstance(moment, (int, float)) else moment
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"time {moment!r} is out of range") from None
    if isinstance(moment, float) and not math.isfinite(moment):
        raise ValueError(f"time {moment!r} is not finite")
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    if not EARLIEST <= when < LATEST:
        raise ValueError(f"time {when.isoformat()} is outside {EARLIEST.year}..{LATEST.year}")
    return iso_utc(when)


def parse_time(text: str, flag: str = "--start-time") -> datetime:
    """An ISO-8601 time from the command line (UTC unless it says otherwise)."""
    try:
        when = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ImportErrorForUser(f"{flag} {text!r}: expected an ISO-8601 time, e.g. 2026-11-30T03:00:00Z") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def start_times(items: list[str] | None) -> tuple[datetime | None, dict[str, datetime]]:
    """`--start-time TIME` (every file) and `--start-time FILE=TIME` (one file's anchor)."""
    default, per_file = None, {}
    for item in items or []:
        name, sep, text = item.rpartition("=")
        if sep and name:
            per_file[str(Path(name).resolve())] = parse_time(text)
        else:
            default = parse_time(item)
    return default, per_file


def anchor_for(path: Path, default: datetime | None, per_file: dict[str, datetime]) -> datetime | None:
    return per_file.get(str(path.resolve()), default)


def write_all(raw_root, source: str, parsed: list[tuple[str, Parsed]]) -> dict:
    """Write every file's records (only once all parsed: a wrong file stops the import before any
    write) and sum what was done."""
    files = 0
    for name, p in parsed:
        # a re-import replaces everything the last import of this file wrote, in every hour
        for stale in Path(raw_root).glob(f"{source}/*/*/{name}.jsonl"):
            stale.unlink()
        files += len(replace_hour_files(raw_root, source, name, p.records, p.rejects))
    return {"inputs": len(parsed), "records": sum(len(p.records) for _, p in parsed), "files": files,
            "rejected": sum(len(p.rejects) for _, p in parsed), "reports": [p.report for _, p in parsed]}


def number(text: str) -> float | None:
    """A number as tools print it ('97 %', '612.34 W', '[N/A]', 'N/A'): the value, or None when the
    tool says it has none. ValueError for anything else."""
    text = text.strip().strip("[]").strip()
    if not text or text.upper() in NO_VALUE:
        return None
    value = float(text.split()[0])
    return value if math.isfinite(value) else None
