"""Checkpoint faults. Damage (target ``checkpoint:<run>/step-NNNNNN``, a run with real files) is
applied to the files after the save, so the lineage manifest keeps what the run saved; freshness
(target ``run:<id>``) makes the run's saves fail silently."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from sources.client import MANIFEST_NAME

from ..common import atomic_write
from .registry import FaultEffect, register


def tensor_byte(shard: Path, data: bytes) -> int:
    """An offset inside the shard's tensor data, away from any header or zip record."""
    if shard.suffix == ".safetensors":
        return len(data) - 5  # the last tensor's bytes end the file
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = next(i for i in zf.infolist() if "/data/" in i.filename)
    return info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + 3


def _truncate(folder, shard, ext, f):
    data = shard.read_bytes()
    shard.write_bytes(data[:int(len(data) * (1 - min(f.magnitude, 1.0) / 2))])


def _bit_flip(folder, shard, ext, f):
    data = bytearray(shard.read_bytes())
    data[tensor_byte(shard, data)] ^= 0x10
    shard.write_bytes(bytes(data))


def _missing_shard(folder, shard, ext, f):
    shard.unlink()


def _partial_write(folder, shard, ext, f):
    partial = folder / f"optim_rank000{ext}"
    (folder / f".{partial.name}.tmp").write_bytes(partial.read_bytes()[: partial.stat().st_size // 2])


def _path_escape(folder, shard, ext, f):
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    manifest["files"].append({"path": "../../../../etc/passwd", "bytes": 1, "sha256": "0" * 64})
    atomic_write(folder / MANIFEST_NAME, json.dumps(manifest, indent=1).encode())


register(FaultEffect(
    "checkpoint_truncated", "checkpoint", ("checkpoint",),
    "one shard file is cut to (1 - magnitude / 2) of its bytes after the save", checkpoint=_truncate))
register(FaultEffect(
    "checkpoint_bit_flip", "checkpoint", ("checkpoint",),
    "one byte of one shard's tensor data is flipped after the save (same size, new sha256)", checkpoint=_bit_flip))
register(FaultEffect(
    "checkpoint_missing_shard", "checkpoint", ("checkpoint",),
    "one rank's model shard is deleted after the save", checkpoint=_missing_shard))
register(FaultEffect(
    "checkpoint_partial_write", "checkpoint", ("checkpoint",),
    "an interrupted save's temporary file (.<shard>.tmp, half written) is left in the folder",
    checkpoint=_partial_write))
register(FaultEffect(
    "checkpoint_path_escape", "checkpoint", ("checkpoint",),
    "the checkpoint's goodput-manifest.json gains an entry whose path climbs out of the folder "
    "(../../../../etc/passwd)", checkpoint=_path_escape))
register(FaultEffect(
    "checkpoint_weights_only", "checkpoint", ("checkpoint",),
    "the save writes the model shards only, no optimizer state (its manifest agrees): a much smaller "
    "checkpoint the run cannot resume from", weights_only=True))
register(FaultEffect(
    "checkpoint_overdue", "checkpoint", ("run",),
    "the run's saves from onset to end fail silently: the pause happens, nothing is written and no "
    "checkpoint_saved event is recorded", skips_saves=True))
