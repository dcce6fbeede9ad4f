"""Checkpoint formats on disk and the checks of one file's own structure, for the checkpoint audit
(checkpoint_audit.py): which format a folder holds, whether a safetensors file or a torch.save zip is
cut short, and whether a path taken from a manifest (or a symlink) stays inside the checkpoint
folder. The standard library only; nothing is unpickled.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zipfile
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
DISTCP = re.compile(rb"__(\d+)_(\d+)\.distcp")
DISTCP_NAME = re.compile(r"^__(\d+)_(\d+)\.distcp$")
SHARD_OF = re.compile(r"-(\d{5})-of-(\d{5})\.")
TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
_MAX_SAFETENSORS_HEADER = 100 << 20   # the safetensors library's own limit



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


# --------------------------------------------------------------------------- formats


def detect_format(path: str | os.PathLike) -> str:
    """One of FORMATS, from the files present (a manifest wins: it is the strongest statement)."""
    p = Path(path)
    if p.is_file():
        return "safetensors" if p.suffix == ".safetensors" else "torch" if _is_zip(p) or p.suffix in TORCH_SUFFIXES else "unknown"
    if not p.is_dir():
        return "unknown"
    if (p / MANIFEST_NAME).exists():
        return "goodput"
    if (p / SAFETENSORS_INDEX).exists() or any(p.glob("*.safetensors")):
        return "safetensors"
    if (p / DISTCP_METADATA).exists() or any(p.glob("*.distcp")):
        return "distcp"
    if any(f.suffix in TORCH_SUFFIXES for f in p.iterdir() if f.is_file()):
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


def structure(path: Path, size: int) -> tuple[str, str] | None:
    """(kind, detail) when a file is empty or its own structure says it is cut short."""
    if size == 0:
        return "zero_byte", "file is empty"
    if path.suffix == ".safetensors":
        why = check_safetensors(path, size)
        return ("truncated", why) if why else None
    if path.suffix in TORCH_SUFFIXES and _is_zip(path):
        why = check_torch_zip(path, size)
        return ("truncated", why) if why else None
    if path.suffix in TORCH_SUFFIXES and size >= 4 and path.suffix != ".bin":
        with open(path, "rb") as fh:
            head = fh.read(2)
        if head[:1] != b"\x80":  # neither a zip nor a (legacy) pickle stream
            return "truncated", "neither a zip archive nor a pickle stream"
    return None
