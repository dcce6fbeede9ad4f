"""Checkpoint audits on disk: find the format, check every file, hash each file once.

Pure and dependency-light (the standard library only; a DuckDB connection is optional, for the
hash cache): it never imports torch and never unpickles anything. Formats:

- ``goodput``: a folder with ``goodput-manifest.json`` ({files: [{path, bytes, sha256}]}), as the
  training-side client writes it; every file is checked for presence, size and sha256, and files
  on disk that the manifest does not list are extra.
- ``safetensors``: Hugging Face shards, with ``model.safetensors.index.json`` (its ``weight_map``
  names the shard files) or a single ``*.safetensors``; each shard's header length and tensor
  ``data_offsets`` are checked against the file size; ``-NNNNN-of-MMMMM`` names must be complete.
- ``distcp``: PyTorch distributed checkpoints, ``.metadata`` plus ``__<rank>_<n>.distcp`` shards.
  ``.metadata`` is a pickle; rather than unpickle it (unsafe, and needs torch) the shard file names
  it references are read out of its bytes, so a missing or extra shard is still found.
- ``torch``: plain ``torch.save`` files (a zip archive since torch 1.6): the zip central directory
  must be intact and every member must end before it (the standard library's ``zipfile``).

A path taken from a manifest or index is resolved and refused when it leaves the checkpoint root
(``../../etc/passwd``, an absolute path, a symlink out): that is a ``path_escape`` problem, and the
file is never opened. Hashes stream in 1 MiB blocks and are cached by (path, size, mtime_ns), so a
second audit of unchanged files hashes nothing (``DuckDBHashCache`` keeps the cache in the
warehouse table ``checkpoint_hashes``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .checkpoint_formats import (
    DISTCP,
    DISTCP_METADATA,
    DISTCP_NAME,
    FORMATS,
    KINDS,
    MANIFEST_NAME,
    SAFETENSORS_INDEX,
    SHARD_OF,
    TORCH_SUFFIXES,
    detect_format,
    inside,
    is_partial,
    resolve_inside,
    structure,
)
from .checkpoint_hashing import DuckDBHashCache, HashCache, cached_sha256, sha256_file

__all__ = ["FORMATS", "KINDS", "MANIFEST_NAME", "SAFETENSORS_INDEX", "Audit", "DuckDBHashCache", "HashCache", "Problem",
           "audit_checkpoint", "detect_format", "discover", "resolve_inside", "sha256_file"]


@dataclass(frozen=True)
class Problem:
    kind: str
    file: str | None
    detail: str


@dataclass
class Audit:
    """What one audit of one checkpoint found."""

    path: str
    format: str
    files: int = 0
    bytes: int = 0
    hashed: int = 0            # files hashed now (a cache hit hashes nothing)
    hashed_bytes: int = 0
    problems: list[Problem] = field(default_factory=list)
    run_id: str | None = None
    step: int | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, kind: str, file: str | None, detail: str) -> None:
        self.problems.append(Problem(kind, file, detail))


def _listing(root: Path, audit: Audit) -> dict[str, Path]:
    """Every file under a checkpoint folder by its relative posix path. A symlink is followed only
    when its target stays inside the folder (the resolved path is what is opened); one that leads
    out is a `path_escape` and is never opened. Symlinked folders are not entered."""
    found = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if not p.is_symlink():
                found[rel] = p
            elif (target := inside(root, p)) is not None:
                found[rel] = target
            else:
                audit.add("path_escape", rel, "a symlink that leads out of the checkpoint folder (or nowhere): not read")
    return found


# --------------------------------------------------------------------------- the audit


def audit_checkpoint(path: str | os.PathLike, cache: HashCache | None = None,
                     expected: dict | None = None, hash_files: bool = True) -> Audit:
    """Audit one checkpoint (a folder, or a single torch/safetensors file).

    `expected`: the manifest lineage recorded at save time ({files: [{path, bytes, sha256}]}),
    used when the folder has no manifest of its own (or no longer exists)."""
    p = Path(path)
    if p.is_symlink() and p.is_file() and inside(p.parent, p) is None:
        # a single file linked from elsewhere: its folder is its root, and it leads out of it
        audit = Audit(path=str(p), format="unknown")
        audit.add("path_escape", p.name, "a symlink that leads out of its folder: not read")
        return audit
    fmt = detect_format(p)
    if fmt == "unknown" and expected and expected.get("files"):
        fmt = "goodput"
    audit = Audit(path=str(p), format=fmt)
    if not p.exists():
        files = (expected or {}).get("files") or []
        audit.add("missing", None, f"checkpoint {p} does not exist"
                  + (f" ({len(files)} file(s) recorded at save)" if files else ""))
        return audit
    if p.is_file():
        _audit_file(p, p.parent, p.name, audit, cache, None, hash_files)
        return audit
    listing = _listing(p, audit)
    for rel in sorted(listing):
        if is_partial(Path(rel).name):
            audit.add("partial_write", rel, "leftover of an interrupted write (temporary / partial file)")
    if fmt == "goodput" or (expected and isinstance(expected.get("files"), list)):
        # the folder's own manifest, else the one lineage recorded at save time: either names every file
        _audit_manifest(p, listing, audit, cache, expected, hash_files)
    elif fmt == "safetensors":
        _audit_safetensors(p, listing, audit, cache, hash_files)
    elif fmt == "distcp":
        _audit_distcp(p, listing, audit, cache, hash_files)
    else:
        for rel, f in sorted(listing.items()):
            if not is_partial(f.name):
                _audit_file(f, p, rel, audit, cache, None, hash_files)
    return audit


def _audit_file(f: Path, root: Path, rel: str, audit: Audit, cache: HashCache | None,
                entry: dict | None, hash_files: bool) -> None:
    st = f.stat()
    audit.files += 1
    audit.bytes += st.st_size
    if entry is not None and isinstance(entry.get("bytes"), int) and entry["bytes"] != st.st_size:
        audit.add("size_mismatch", rel, f"{st.st_size} bytes on disk, {entry['bytes']} in the manifest")
    bad = structure(f, st.st_size)
    if bad:
        audit.add(bad[0], rel, bad[1])
    want = entry.get("sha256") if entry else None
    if hash_files and isinstance(want, str) and not (entry and entry.get("bytes") not in (None, st.st_size)):
        got = cached_sha256(f, st, cache, audit)
        if got != want.lower():
            audit.add("sha256_mismatch", rel, f"sha256 {got[:12]}… on disk, {want[:12]}… in the manifest")


def _audit_manifest(root: Path, listing: dict[str, Path], audit: Audit, cache, expected, hash_files) -> None:
    manifest = expected or {}
    mpath = listing.get(MANIFEST_NAME)   # never one that leads out of the folder
    if mpath is not None:
        try:
            manifest = json.loads(mpath.read_text())
            if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
                raise ValueError("no 'files' list")
        except (ValueError, UnicodeDecodeError) as exc:
            audit.add("manifest_invalid", MANIFEST_NAME, f"unreadable manifest: {exc}")
            return
        audit.run_id = manifest.get("run_id") if isinstance(manifest.get("run_id"), str) else None
        audit.step = manifest.get("step") if isinstance(manifest.get("step"), int) else None
    listed: set[str] = set()
    for entry in manifest.get("files") or []:
        rel = entry.get("path") if isinstance(entry, dict) else None
        target = resolve_inside(root, rel) if isinstance(rel, str) else None
        if target is None:
            audit.add("path_escape", str(rel), "manifest path leaves the checkpoint folder: not read")
            continue
        key = target.relative_to(root.resolve()).as_posix()
        listed.add(key)
        if key not in listing:
            audit.add("missing", key, "listed in the manifest, not on disk")
            continue
        _audit_file(listing[key], root, key, audit, cache, entry, hash_files)
    for rel in sorted(set(listing) - listed - {MANIFEST_NAME}):
        if not is_partial(Path(rel).name):
            audit.add("extra", rel, "on disk, not in the manifest")
    _shard_names(listed, audit)


def _shard_names(names: Iterable[str], audit: Audit) -> None:
    """`…-00002-of-00004.…` names must all be there; so must distcp ranks 0..N-1 (seen as a set)."""
    groups: dict[tuple[str, int], set[int]] = {}
    for name in names:
        m = SHARD_OF.search(name)
        if m:
            groups.setdefault((name[:m.start()], int(m[2])), set()).add(int(m[1]))
    for (stem, total), have in sorted(groups.items()):
        lacking = sorted(set(range(1, total + 1)) - have)
        if lacking:
            audit.add("shards_incomplete", stem, f"{len(have)} of {total} shards; missing {', '.join(map(str, lacking[:8]))}")


def _audit_safetensors(root: Path, listing: dict[str, Path], audit: Audit, cache, hash_files) -> None:
    shards: set[str] = set()
    index = listing.get(SAFETENSORS_INDEX)
    if index is not None:
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
            if not isinstance(weight_map, dict):
                raise ValueError("weight_map is not an object")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            audit.add("manifest_invalid", SAFETENSORS_INDEX, f"unreadable index: {exc}")
            weight_map = {}
        for name in sorted(set(map(str, weight_map.values()))):
            target = resolve_inside(root, name)
            if target is None:
                audit.add("path_escape", name, "index path leaves the checkpoint folder: not read")
                continue
            key = target.relative_to(root.resolve()).as_posix()
            shards.add(key)
            if key not in listing:
                audit.add("missing", key, "named in the index's weight_map, not on disk")
                audit.add("shards_incomplete", key, "a shard the index needs is missing")
        for rel in sorted(r for r in listing if r.endswith(".safetensors") and r not in shards):
            audit.add("extra", rel, "a safetensors file the index does not name")
    else:
        shards = {r for r in listing if r.endswith(".safetensors")}
    _shard_names(shards | {r for r in listing if r.endswith(".safetensors")}, audit)
    for rel in sorted(shards & set(listing)):
        _audit_file(listing[rel], root, rel, audit, cache, None, hash_files)
    for rel in sorted(set(listing) - shards - {SAFETENSORS_INDEX}):
        if not is_partial(Path(rel).name) and not rel.endswith(".safetensors"):
            _audit_file(listing[rel], root, rel, audit, cache, None, hash_files)


def _audit_distcp(root: Path, listing: dict[str, Path], audit: Audit, cache, hash_files) -> None:
    present = {rel for rel in listing if DISTCP_NAME.match(rel)}
    meta = listing.get(DISTCP_METADATA)
    if meta is None:
        audit.add("missing", DISTCP_METADATA, "no .metadata: the shards cannot be loaded")
        audit.add("shards_incomplete", DISTCP_METADATA, "the checkpoint's metadata file is missing")
        referenced = set()
    else:
        data = meta.read_bytes()
        if not data:
            audit.add("zero_byte", DISTCP_METADATA, "file is empty")
        # the pickle names each shard's relative path as a plain string: read them, never unpickle
        referenced = {m.group(0).decode() for m in DISTCP.finditer(data)}
        for rel in re.findall(rb"[\x20-\x7e]*\.\./[\x20-\x7e]*\.distcp", data):
            audit.add("path_escape", rel.decode(), ".metadata names a shard outside the checkpoint: not read")
        audit.files += 1
        audit.bytes += len(data)
    for rel in sorted(referenced - present):
        audit.add("missing", rel, "named in .metadata, not on disk")
    if referenced - present:
        audit.add("shards_incomplete", None, f"{len(present & referenced)} of {len(referenced)} shards present")
    for rel in sorted(present - referenced) if referenced else ():
        audit.add("extra", rel, "a shard .metadata does not name")
    ranks = sorted({int(DISTCP_NAME.match(r)[1]) for r in present | referenced})
    if ranks and ranks != list(range(ranks[-1] + 1)) and not (referenced - present):
        lacking = sorted(set(range(ranks[-1] + 1)) - set(ranks))
        audit.add("shards_incomplete", None, f"no shard of rank(s) {', '.join(map(str, lacking[:8]))}")
    for rel in sorted(present):
        _audit_file(listing[rel], root, rel, audit, cache, None, hash_files)


# --------------------------------------------------------------------------- discovery


def discover(roots: Iterable[str | os.PathLike], max_depth: int = 4) -> list[Path]:
    """Checkpoints under `roots`: folders holding a manifest, an index, `.metadata`, `*.distcp` or
    `*.safetensors`, and single torch.save / safetensors files; sorted; never descends into one."""
    found: list[Path] = []
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        base = len(root.parts)
        for dirpath, dirs, names in os.walk(root):
            here = Path(dirpath)
            dirs.sort()
            if here != root and _is_checkpoint_dir(names):
                found.append(here)
                dirs[:] = []
                continue
            if len(here.parts) - base >= max_depth:
                dirs[:] = []
            for name in sorted(names):
                if (name.endswith(TORCH_SUFFIXES) or name.endswith(".safetensors")) and not is_partial(name):
                    found.append(here / name)
    return sorted(set(found))


def _is_checkpoint_dir(names: list[str]) -> bool:
    return (MANIFEST_NAME in names or SAFETENSORS_INDEX in names or DISTCP_METADATA in names
            or any(n.endswith((".distcp", ".safetensors")) for n in names))
