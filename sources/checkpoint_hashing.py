"""sha256 of checkpoint files, streamed in 1 MiB blocks and cached by (path, size, mtime_ns), so a
second audit of unchanged files hashes nothing (``DuckDBHashCache`` keeps the cache in the warehouse
table ``checkpoint_hashes``). Part of the checkpoint audit (checkpoint_audit.py)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .checkpoint_audit import Audit

_BLOCK = 1 << 20


class HashCache:
    """sha256 by (path, size, mtime_ns), in memory; `new` holds what this audit added."""

    def __init__(self, entries: Iterable[tuple[str, int, int, str]] = ()):
        self._known = {(p, int(s), int(m)): h for p, s, m, h in entries}
        self.new: list[tuple[str, int, int, str]] = []

    def get(self, path: str, size: int, mtime_ns: int) -> str | None:
        return self._known.get((path, size, mtime_ns))

    def put(self, path: str, size: int, mtime_ns: int, digest: str) -> None:
        self._known[(path, size, mtime_ns)] = digest
        self.new.append((path, size, mtime_ns, digest))


class DuckDBHashCache(HashCache):
    """The cache kept in the warehouse table `checkpoint_hashes(path, size_bytes, mtime_ns, sha256)`."""

    def __init__(self, con, prefixes: Iterable[str] | None = None):
        """Loads the entries under `prefixes` (the roots this audit reads), or all of them."""
        query = "SELECT path, size_bytes, mtime_ns, sha256 FROM checkpoint_hashes"
        if prefixes is None:
            rows = con.execute(query).fetchall()
        else:
            rows = [row for prefix in dict.fromkeys(prefixes)
                    for row in con.execute(query + " WHERE starts_with(path, ?)", [prefix]).fetchall()]
        super().__init__(rows)

    def save(self, con) -> int:
        """Store the entries this audit added (the caller owns the transaction)."""
        if self.new:   # delete, then insert: a DuckLake warehouse has no key for INSERT OR REPLACE (docs/deploy.md)
            latest = list({entry[0]: entry for entry in self.new}.values())   # one row per path, the newest
            con.executemany("DELETE FROM checkpoint_hashes WHERE path = ?", [(entry[0],) for entry in latest])
            con.executemany(
                "INSERT INTO checkpoint_hashes (path, size_bytes, mtime_ns, sha256, hashed_at) "
                "VALUES (?, ?, ?, ?, now())", latest)
        saved, self.new = len(self.new), []
        return saved


def sha256_file(path: str | os.PathLike) -> str:
    """The file's sha256, streamed in 1 MiB blocks into one reused buffer."""
    digest = hashlib.sha256()
    buffer = bytearray(_BLOCK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(buffer):
            digest.update(view[:n])
    return digest.hexdigest()


def cached_sha256(path: Path, stat: os.stat_result, cache: HashCache | None, audit: Audit) -> str:
    key = str(path)
    if cache is not None and (hit := cache.get(key, stat.st_size, stat.st_mtime_ns)) is not None:
        return hit
    digest = sha256_file(path)
    audit.hashed += 1
    audit.hashed_bytes += stat.st_size
    if cache is not None:
        cache.put(key, stat.st_size, stat.st_mtime_ns, digest)
    return digest
