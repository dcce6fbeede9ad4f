"""Real (tiny) checkpoint files for runs with ``checkpoints:``: per rank a model and an optimizer
shard (safetensors, or torch.save's zip layout written without torch, both byte-for-byte
deterministic), metadata.json and the goodput-manifest.json the client writes; then the checkpoint
faults' registered damage."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np

from sources.client import MANIFEST_NAME, file_manifest

from .common import atomic_write, stream
from .faults import effect, effects_with
from .model import Run, Scenario

# Tiny stand-ins for a model shard and its optimizer state: (name, shape) of float32 tensors.
_CKPT_TENSORS = {
    "model": (("embed.weight", (16, 8)), ("layers.0.proj.weight", (8, 8)), ("layers.0.proj.bias", (8,))),
    "optim": (("exp_avg.embed.weight", (16, 8)), ("exp_avg_sq.embed.weight", (16, 8))),
}


def checkpoint_root(run: Run, out: Path) -> Path:
    folder = Path(run.checkpoint_files.dir)
    return (folder if folder.is_absolute() else out / folder) / run.id


def checkpoint_path(run: Run, step: int) -> str:
    """What lineage records: relative to the Goodput home for a relative ``dir`` (so the output
    does not depend on where it is written), absolute otherwise."""
    return (Path(run.checkpoint_files.dir) / run.id / f"step-{step:06d}").as_posix()


def write_checkpoint(scenario: Scenario, run: Run, step: int, out: Path, weights_only: bool = False) -> dict:
    """Write one checkpoint's files (per rank: model and optimizer shards, unless ``weights_only``;
    metadata.json) and its goodput-manifest.json, as ``GoodputClient.checkpoint_saved`` does;
    returns the manifest. ``torch`` files are torch.save's zip layout, written without torch so
    that they are byte-for-byte deterministic (torch.load reads them; tests check it)."""
    folder = checkpoint_root(run, out) / f"step-{step:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    fmt = run.checkpoint_files.format
    for rank in range(run.ranks):
        rng = stream(scenario.seed, "checkpoint", run.id, step, rank)
        for kind, specs in _CKPT_TENSORS.items():
            tensors = {name: rng.standard_normal(shape).astype("<f4") for name, shape in specs}
            if weights_only and kind == "optim":
                continue
            stem = f"{kind}_rank{rank:03d}"
            if fmt == "safetensors":
                atomic_write(folder / f"{stem}.safetensors", safetensors_bytes(tensors))
            else:
                atomic_write(folder / f"{stem}.pt", torch_save_bytes(tensors))
    metadata = {"run_id": run.id, "step": step, "world_size": run.ranks, "format": fmt}
    atomic_write(folder / "metadata.json", (json.dumps(metadata, indent=1) + "\n").encode())
    manifest = file_manifest(folder)
    atomic_write(folder / MANIFEST_NAME,
                  json.dumps({"run_id": run.id, "step": step, **manifest}, indent=1).encode())
    return manifest


def safetensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    """The safetensors format: u64 little-endian header size, a JSON header (padded with spaces
    to 8 bytes) giving each tensor's dtype, shape and byte offsets, then the raw bytes."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, array in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(a.tobytes() for a in tensors.values())


def torch_save_bytes(tensors: dict[str, np.ndarray], archive: str = "archive") -> bytes:
    """What ``torch.save({name: float32 tensor})`` writes, without torch: a stored (uncompressed) zip
    with ``data.pkl`` (a protocol-2 pickle of an OrderedDict of ``torch._utils._rebuild_tensor_v2``
    calls whose storages are persistent ids ``('storage', torch.FloatStorage, key, 'cpu', numel)``),
    one ``data/<key>`` record per storage, ``byteorder`` and ``version``. The pickle is assembled
    opcode by opcode because pickling torch globals needs torch itself."""
    def text(value: str) -> bytes:
        raw = value.encode()
        return b"X" + len(raw).to_bytes(4, "little") + raw

    def ints(values) -> bytes:
        return b"(" + b"".join(b"J" + int(v).to_bytes(4, "little", signed=True) for v in values) + b"t"

    pkl = b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01("
    records = []
    for key, (name, array) in enumerate(tensors.items()):
        shape = array.shape
        strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
        pkl += (text(name) + b"ctorch._utils\n_rebuild_tensor_v2\n("
                + b"(" + text("storage") + b"ctorch\nFloatStorage\n" + text(str(key)) + text("cpu")
                + b"J" + int(array.size).to_bytes(4, "little") + b"tQ"
                + b"J\x00\x00\x00\x00" + ints(shape) + ints(strides) + b"\x89"
                + b"ccollections\nOrderedDict\n)R" + b"tR")
        records.append((f"data/{key}", np.ascontiguousarray(array, dtype="<f4").tobytes()))
    pkl += b"u."
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in [("data.pkl", pkl), ("byteorder", b"little"), *records, ("version", b"3\n")]:
            info = zipfile.ZipInfo(f"{archive}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            zf.writestr(info, data)
    return buffer.getvalue()


def checkpoint_faults(scenario: Scenario, run: Run, step: int) -> list:
    target = f"checkpoint:{run.id}/step-{step:06d}"
    return [f for f in scenario.faults if f.target == target]


def overdue_windows(scenario: Scenario, run: Run) -> list[tuple[float, float]]:
    """Seconds from the scenario start during which the run's saves fail (``skips_saves`` effects)."""
    return [((f.onset - scenario.start).total_seconds(), (f.end - scenario.start).total_seconds())
            for f in scenario.faults if effect(f.type).skips_saves and f.target == f"run:{run.id}"]


def damage_checkpoint(scenario: Scenario, run: Run, step: int, out: Path, faults: list) -> None:
    """Apply the checkpoint faults to the files just written (the lineage manifest keeps what the
    run saved, so the audit can tell)."""
    folder = checkpoint_root(run, out) / f"step-{step:06d}"
    ext = ".safetensors" if run.checkpoint_files.format == "safetensors" else ".pt"
    shard = folder / f"model_rank{(run.ranks - 1):03d}{ext}"
    for f, damage in effects_with(faults, "checkpoint"):
        damage(folder, shard, ext, f)


