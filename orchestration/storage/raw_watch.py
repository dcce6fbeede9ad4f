"""What changed in the raw zone since the last look: the pure half of the raw-zone sensor.

The raw zone is `<root>/<source>/<YYYY-MM-DD>/<HH>/<producer>.jsonl` (or `.jsonl.zst` once the
maintenance compressed an old hour). A file is keyed by its path relative to the root, so moving a
home re-runs nothing. A scan lists the hour folders of a set of days and stats their files (no
file is read); `changed_hours` compares that with what is known (the sensor's cursor, else the
warehouse's ingest log) and returns each hour that holds a new, grown, shrunk or rewritten file.
A file that disappeared is not a change (retention deleted it); a `.jsonl` that became a
`.jsonl.zst` is the same file (compression).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

HOUR_KEY = "%Y-%m-%d-%H:00"
RAW_SUFFIXES = (".jsonl", ".jsonl.zst")


def is_raw_file(name: str) -> bool:
    return name.endswith(RAW_SUFFIXES)


def plain_name(relative: str) -> str:
    """A file's key with any compression suffix removed: `a/b/c.jsonl.zst` and `a/b/c.jsonl` are one file."""
    return relative[:-4] if relative.endswith(".zst") else relative


@lru_cache(maxsize=1 << 16)   # every tick asks again for the same few thousand paths
def hour_key(relative: str) -> str | None:
    """`<source>/<YYYY-MM-DD>/<HH>/<file>` -> partition key, or None for a path that is not an hour file."""
    parts = relative.split("/")
    if len(parts) != 4:
        return None
    try:
        return datetime.strptime(f"{parts[1]} {parts[2]}", "%Y-%m-%d %H").strftime(HOUR_KEY)
    except ValueError:
        return None


def day_folders(root: Path) -> dict[str, int]:
    """`<source>/<YYYY-MM-DD>` -> the folder's mtime (ns), which changes when an hour folder appears in it."""
    found: dict[str, int] = {}
    if not root.is_dir():
        return found
    with os.scandir(root) as sources:
        for source in sources:
            if not source.is_dir():
                continue
            with os.scandir(source.path) as days:
                for day in days:
                    if day.is_dir():
                        found[f"{source.name}/{day.name}"] = day.stat().st_mtime_ns
    return found


def scan_days(root: Path, days: Iterable[str]) -> dict[str, int]:
    """relative path -> size in bytes, for every raw file under the given `<source>/<YYYY-MM-DD>` folders."""
    files: dict[str, int] = {}
    for day in days:
        folder = root / day
        try:
            hours = list(os.scandir(folder))
        except OSError:
            continue
        for hour in hours:
            if not hour.is_dir():
                continue
            with os.scandir(hour.path) as entries:
                for entry in entries:
                    if is_raw_file(entry.name) and entry.is_file():
                        try:
                            files[f"{day}/{hour.name}/{entry.name}"] = entry.stat().st_size
                        except OSError:   # deleted between the listing and the stat
                            continue
    return files


def recent_days(days: Iterable[str], now: datetime, keep_days: float) -> list[str]:
    """The `<source>/<YYYY-MM-DD>` folders whose day ends less than `keep_days` before `now`."""
    out = []
    for day in days:
        try:
            start = datetime.strptime(day.split("/", 1)[1], "%Y-%m-%d").replace(tzinfo=timezone.utc)
        except (IndexError, ValueError):
            continue
        if (now - start).total_seconds() < (keep_days + 1) * 86400:
            out.append(day)
    return out


def changed_hours(scanned: dict[str, int], known: dict[str, int]) -> dict[str, list[str]]:
    """partition key -> the relative paths of its files that differ from `known` (path -> size).

    A compressed file is compared by its plain name only for presence: once `c.jsonl` was known,
    `c.jsonl.zst` (another size) is the same data."""
    changed: dict[str, list[str]] = {}
    for relative, size in scanned.items():
        key = hour_key(relative)
        if key is None:
            continue
        if relative in known and known[relative] == size:
            continue
        if relative.endswith(".zst") and plain_name(relative) in known and relative not in known:
            continue
        changed.setdefault(key, []).append(relative)
    return changed


def by_hour(scanned: dict[str, int]) -> dict[str, dict[str, int]]:
    """partition key -> {relative path: size} of that hour's files."""
    hours: dict[str, dict[str, int]] = {}
    for relative, size in scanned.items():
        key = hour_key(relative)
        if key is not None:
            hours.setdefault(key, {})[relative] = size
    return hours


def version(hour_files: dict[str, int]) -> str:
    """A digest of one hour's files and sizes: the data version in the run key."""
    digest = hashlib.sha1()
    for relative in sorted(hour_files):
        digest.update(f"|{plain_name(relative)}:{hour_files[relative]}".encode())
    return digest.hexdigest()[:12]


def relative_key(path: str) -> str:
    """The last four parts of a raw file's path (`<source>/<day>/<HH>/<file>`): its key wherever the home lives."""
    return "/".join(Path(path).parts[-4:])
