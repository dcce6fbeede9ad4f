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

import hashlib
import json
import os
import re
import struct
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST_NAME = "goodput-manifest.json"
SAFETENSORS_INDEX = "model.safetensors.index.json"
DISTCP_METADATA = ".metadata"
FORMATS = ("goodput", "safetensors", "distcp", "torch", "unknown")

# Problem kinds; each is watched by one signal (checks/signals_checkpoint.py).
KINDS = ("missing", "extra", "size_mismatch", "sha256_mismatch", "manifest_invalid", "zero_byte", "truncated",
         "partial_write", "shards_incomplete", "path_escape")

# Leftovers of an interrupted write: `.x.tmp` (atomic writes that never got renamed), `x.partial`,
# `x.incomplete`, `x.part` (downloads), gsutil's `.gstmp` and `~` backups.
_PARTIAL = re.compile(r"(\.tmp|\.partial|\.incomplete|\.part|\.gstmp|~)$|^\.~tmp~", re.I)
_DISTCP = re.compile(rb"__(\d+)_(\d+)\.distcp")
_DISTCP_NAME = re.compile(r"^__(\d+)_(\d+)\.distcp$")
_SHARD_OF = re.compile(r"-(\d{5})-of-(\d{5})\.")
_TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
_BLOCK = 1 << 20
_MAX_SAFETENSORS_HEADER = 100 << 20   # the safetensors library's own limit


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


# --------------------------------------------------------------------------- hashing


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


# --------------------------------------------------------------------------- paths


def resolve_inside(root: Path, relative: str) -> Path | None:
    """`relative` resolved under `root`, or None when it leaves the root (.., absolute, a symlink out)."""
    if not isinstance(relative, str) or not relative or "\x00" in relative:
        return None
    if os.path.isabs(relative) or relative.startswith(("\\", "~")):
        return None
    root = root.resolve()
    target = (root / relative).resolve()
    return target if target == root or root in target.parents else None


def is_partial(name: str) -> bool:
    return bool(_PARTIAL.search(name))


def inside(root: Path, path: Path) -> Path | None:
    """`path` with its symlinks resolved, or None when that leaves `root` (or the link dangles)."""
    root = root.resolve()
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):   # dangling, a loop, unreadable: nothing to open
        return None
    return target if target == root or root in target.parents else None


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


# --------------------------------------------------------------------------- formats


def detect_format(path: str | os.PathLike) -> str:
    """One of FORMATS, from the files present (a manifest wins: it is the strongest statement)."""
    p = Path(path)
    if p.is_file():
        return "safetensors" if p.suffix == ".safetensors" else "torch" if _is_zip(p) or p.suffix in _TORCH_SUFFIXES else "unknown"
    if not p.is_dir():
        return "unknown"
    if (p / MANIFEST_NAME).exists():
        return "goodput"
    if (p / SAFETENSORS_INDEX).exists() or any(p.glob("*.safetensors")):
        return "safetensors"
    if (p / DISTCP_METADATA).exists() or any(p.glob("*.distcp")):
        return "distcp"
    if any(f.suffix in _TORCH_SUFFIXES for f in p.iterdir() if f.is_file()):
        return "torch"
    return "unknown"


def _is_zip(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def check_safetensors(path: Path, size: int) -> str | None:
    """Why a safetensors file is truncated or malformed, or None: the u64 header length, the JSON
    header and the end of the last tensor's `data_offsets` must match the file size exactly."""
    if size < 8:
        return f"{size} bytes: shorter than the 8-byte header length"
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        if n > _MAX_SAFETENSORS_HEADER or 8 + n > size:
            return f"header length {n} runs past the end of the file ({size} bytes)"
        try:
            header = json.loads(fh.read(n))
        except ValueError as exc:
            return f"header is not JSON ({exc.__class__.__name__})"
    if not isinstance(header, dict):
        return "header is not a JSON object"
    end = 0
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        offsets = spec.get("data_offsets") if isinstance(spec, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)
                and 0 <= offsets[0] <= offsets[1]):
            return f"tensor {name!r} has no valid data_offsets"
        end = max(end, offsets[1])
    expected = 8 + n + end
    if size < expected:
        return f"tensor data ends at byte {expected} but the file has {size} bytes"
    if size > expected:
        return f"{size - expected} bytes after the last tensor (expected {expected} bytes)"
    return None


def check_torch_zip(path: Path, size: int) -> str | None:
    """Why a torch.save zip is truncated or malformed, or None: its central directory must be
    readable and every member's data must end before the directory starts."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            start_dir = archive.start_dir
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return f"zip central directory unreadable ({exc})"
    if not infos:
        return "zip archive has no members"
    if not any(i.filename.endswith("data.pkl") for i in infos):
        return "no data.pkl member: not a torch.save archive"
    with open(path, "rb") as fh:
        for info in infos:
            fh.seek(info.header_offset)
            local = fh.read(30)
            if len(local) < 30 or local[:4] != b"PK\x03\x04":
                return f"member {info.filename!r}: local header missing at byte {info.header_offset}"
            name_len, extra_len = struct.unpack("<HH", local[26:30])
            end = info.header_offset + 30 + name_len + extra_len + info.compress_size
            if end > start_dir or end > size:
                return f"member {info.filename!r} ends at byte {end}, past the central directory at {start_dir}"
    return None


def _structure(path: Path, size: int) -> tuple[str, str] | None:
    """(kind, detail) when a file is empty or its own structure says it is cut short."""
    if size == 0:
        return "zero_byte", "file is empty"
    if path.suffix == ".safetensors":
        why = check_safetensors(path, size)
        return ("truncated", why) if why else None
    if path.suffix in _TORCH_SUFFIXES and _is_zip(path):
        why = check_torch_zip(path, size)
        return ("truncated", why) if why else None
    if path.suffix in _TORCH_SUFFIXES and size >= 4 and path.suffix != ".bin":
        with open(path, "rb") as fh:
            head = fh.read(2)
        if head[:1] != b"\x80":  # neither a zip nor a (legacy) pickle stream
            return "truncated", "neither a zip archive nor a pickle stream"
    return None


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
    bad = _structure(f, st.st_size)
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
        m = _SHARD_OF.search(name)
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
    present = {rel for rel in listing if _DISTCP_NAME.match(rel)}
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
        referenced = {m.group(0).decode() for m in _DISTCP.finditer(data)}
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
    ranks = sorted({int(_DISTCP_NAME.match(r)[1]) for r in present | referenced})
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
                if (name.endswith(_TORCH_SUFFIXES) or name.endswith(".safetensors")) and not is_partial(name):
                    found.append(here / name)
    return sorted(set(found))


def _is_checkpoint_dir(names: list[str]) -> bool:
    return (MANIFEST_NAME in names or SAFETENSORS_INDEX in names or DISTCP_METADATA in names
            or any(n.endswith((".distcp", ".safetensors")) for n in names))
