"""The raw zone resource: finds a partition's hour-bucketed files and reads them as numbered lines.

Layout: `<root>/<source>/<YYYY-MM-DD>/<HH>/<producer>.jsonl`, one JSON object per line, UTC.
A partition reads only its own hour's folder, so a late file for an old hour is seen when that
hour is re-run, and a backfill re-derives everything from raw.

The listing takes only regular files that stay inside the raw zone: a symlink is followed only when
its target lies under the root (a `passwd.jsonl -> /etc/passwd` is never read), and a dangling link
or a file gone before it could be looked at is skipped. Each skipped file is reported in one line,
so one bad entry never fails the source-hour and never hides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

import dagster as dg
import pandas as pd

VERSION_TAG = "goodput/data_version"
"""The tag of a run the raw-zone sensor requested: the digest of its hour's files when it did (a
live run, which recomputes only what changed: assets/baselines.py)."""


def is_live_run(tags) -> bool:
    """A run the raw-zone sensor requested for new data (a live tick's, tagged VERSION_TAG), by its tags: not a
    backfill, the demo or a materialization from the UI."""
    return VERSION_TAG in tags


def hour_dir(root: Path, source: str, hour: datetime) -> Path:
    return root / source / hour.strftime("%Y-%m-%d") / hour.strftime("%H")


def read_raw_bytes(path: Path) -> bytes:
    """A raw file's bytes; a `.jsonl.zst` (an old hour the maintenance compressed) decompressed."""
    if path.name.endswith(".zst"):
        import zstandard

        with open(path, "rb") as fh:
            return zstandard.ZstdDecompressor().stream_reader(fh).read()
    return path.read_bytes()


def read_lines(files: list[Path]) -> pd.DataFrame:
    """Every line of `files` as rows (file, line, raw, complete, utf8), read in Python: the ingest
    uses it only for the files DuckDB's read_text cannot take (not UTF-8, or a glob-like name)."""
    return lines_frame((str(path), read_raw_bytes(path), 0) for path in files)


def lines_frame(parts: Iterable[tuple[str, bytes, int]]) -> pd.DataFrame:
    """The lines of each (file, bytes, lines before those bytes) as rows (file, line, raw, complete,
    utf8), numbered in the file. `complete` is False for a last line without its newline (a writer
    mid-append, or a truncated file), `utf8` is False for a line that is not valid UTF-8 (kept with
    replacement characters, for the quarantine). Blank lines are skipped, keeping the numbering."""
    files_col, lines_col, raw_col, complete_col, utf8_col = [], [], [], [], []
    for name, data, before in parts:
        if not data:
            continue
        chunks = data.split(b"\n")
        ends_with_newline = chunks[-1] == b""
        if ends_with_newline:
            chunks.pop()
        for number, chunk in enumerate(chunks, start=1):
            if not chunk.strip():
                continue
            files_col.append(name)
            lines_col.append(before + number)
            try:
                raw_col.append(chunk.decode("utf-8"))
                utf8_col.append(True)
            except UnicodeDecodeError:
                raw_col.append(chunk.decode("utf-8", errors="replace"))
                utf8_col.append(False)
            complete_col.append(ends_with_newline or number < len(chunks))
    return pd.DataFrame(
        {
            "file": pd.Series(files_col, dtype="object"),
            "line": pd.Series(lines_col, dtype="int32"),
            "raw": pd.Series(raw_col, dtype="object"),
            "complete": pd.Series(complete_col, dtype="bool"),
            "utf8": pd.Series(utf8_col, dtype="bool"),
        }
    )


class RawZoneResource(dg.ConfigurableResource):
    """The root of the raw zone (`GOODPUT_HOME/raw`)."""

    root: str

    def files(self, source: str, hour: datetime, report: Callable[[str], None] | None = None) -> list[Path]:
        """The hour's `*.jsonl` files to read; what is skipped, and why, goes to `report`."""
        files, skipped = self.listing(source, hour)
        for path, why in skipped:
            (report or (lambda _m: None))(f"raw zone: skipped {path}: {why}")
        return files

    def listing(self, source: str, hour: datetime) -> tuple[list[Path], list[tuple[Path, str]]]:
        """(files to read, [(file skipped, why)]) for one source-hour."""
        root = Path(self.root)
        folder = hour_dir(root, source, hour)
        if not folder.is_dir():
            return [], []
        real_root = root.resolve()
        files, skipped = [], []
        # `.jsonl.zst`: an hour compressed by the daily maintenance (issue 15)
        for path in sorted([*folder.glob("*.jsonl"), *folder.glob("*.jsonl.zst")]):
            try:
                target = path.resolve(strict=True)
                regular = target.is_file()
            except (OSError, RuntimeError):   # dangling link, a loop, gone since the glob
                skipped.append((path, "vanished or a dangling symlink"))
                continue
            if real_root not in target.parents:
                skipped.append((path, f"a symlink out of the raw zone (to {target}): not read"))
            elif not regular:
                skipped.append((path, "not a regular file"))
            else:
                files.append(path)
        return files, skipped
