"""The GPU capture's checkpoint check (`bench/gpu_capture.py --role ckpt`, CPU only, run during the hang):
torch.save, torch.distributed.checkpoint and safetensors checkpoints, intact and damaged, through
sources.checkpoint_audit -> DIR/checkpoint_audit.json."""

from __future__ import annotations

import json
import shutil
import traceback
from dataclasses import asdict
from pathlib import Path

from gpu_capture_common import RUN_ID, say, write_json  # first: puts the repo on sys.path

from sources.client import iso_utc  # stdlib only

# =============================================================================== checkpoint check (child)


def role_ckpt(args) -> int:
    out = Path(args.out)
    root = out / "ckpt"
    result: dict = {"started": iso_utc(), "cases": [], "errors": []}
    path = out / "checkpoint_audit.json"
    try:
        _ckpt_check(root, result)
    except Exception as error:  # noqa: BLE001 - recorded, never fatal to the capture
        result["errors"].append(f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
    result["ended"] = iso_utc()
    cases = result["cases"]
    result["summary"] = {"cases": len(cases), "as_expected": sum(c.get("as_expected") is True for c in cases),
                         "not_as_expected": [c["name"] for c in cases if c.get("as_expected") is not True],
                         "errors": len(result["errors"])}
    write_json(path, result)
    say(f"ckpt: {result['summary']}")
    return 0


def _ckpt_check(root: Path, result: dict) -> None:
    import torch

    from sources import checkpoint_audit as ca
    from sources.client import file_manifest

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    result["torch_version"] = torch.__version__
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512),
                                torch.nn.LayerNorm(512))
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}

    def record(name, target, expect_flagged, note=""):
        entry = {"name": name, "path": str(Path(target).relative_to(root.parent)), "expect_flagged": expect_flagged,
                 "note": note}
        try:
            audit = ca.audit_checkpoint(target)
            entry.update({"format": audit.format, "files": audit.files, "bytes": audit.bytes,
                          "flagged": not audit.ok, "kinds": sorted({p.kind for p in audit.problems}),
                          "problems": [asdict(p) for p in audit.problems]})
            entry["as_expected"] = entry["flagged"] == expect_flagged
        except Exception as error:  # noqa: BLE001
            entry.update({"error": f"{type(error).__name__}: {error}", "as_expected": False})
        result["cases"].append(entry)
        say(f"ckpt: {name}: format {entry.get('format')} flagged {entry.get('flagged')} {entry.get('kinds', '')}"
            f" (expected {expect_flagged})")

    def copy(src: Path, name: str) -> Path:
        dst = root / "damaged" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
        return dst

    def truncate(f: Path, keep: float = 0.5):
        data = f.read_bytes()
        f.write_bytes(data[: int(len(data) * keep)])

    def flip(f: Path, at: float = 0.5, index: int | None = None):
        data = bytearray(f.read_bytes())
        i = int(len(data) * at) if index is None else index
        data[i] ^= 0xFF
        f.write_bytes(bytes(data))

    # --- torch.save (zip) --------------------------------------------------------------------
    ts = root / "torch_save"
    ts.mkdir()
    pt = ts / "model.pt"
    torch.save(state, pt)
    loaded = torch.load(pt, weights_only=True)
    result["torch_save_roundtrip"] = all(torch.equal(loaded[k], state[k]) for k in state)
    record("torch_save intact (file)", pt, False)
    record("torch_save intact (folder)", ts, False)
    d = copy(pt, "torch_truncated.pt")
    truncate(d)
    record("torch_save truncated to half", d, True)
    d = copy(pt, "torch_flipped.pt")
    flip(d, 0.5)
    record("torch_save one byte flipped mid-file, no manifest", d, False,
           "no checksum without a manifest: a flipped data byte leaves the zip structure intact")
    d = copy(pt, "torch_flipped_central_dir.pt")
    flip(d, index=d.read_bytes().rfind(b"PK\x01\x02"))   # the last central-directory entry's signature
    record("torch_save one byte flipped in the zip central directory", d, True)
    # the same file with the client's goodput-manifest.json (sha256): now a flipped byte is caught
    gm = root / "goodput_manifest"
    gm.mkdir()
    shutil.copy2(pt, gm / "model.pt")
    (gm / ca.MANIFEST_NAME).write_text(json.dumps({"run_id": RUN_ID, "step": 1, **file_manifest(gm)}, indent=1))
    record("goodput manifest intact", gm, False)
    d = copy(gm, "goodput_flipped")
    flip(d / "model.pt", 0.5)
    record("goodput manifest, one byte flipped", d, True)
    d = copy(gm, "goodput_truncated")
    truncate(d / "model.pt")
    record("goodput manifest, truncated", d, True)

    # --- torch.distributed.checkpoint ---------------------------------------------------------
    try:
        import torch.distributed.checkpoint as dcp

        dc = root / "dcp"
        try:
            dcp.save(state, checkpoint_id=str(dc), no_dist=True)
            result["dcp_mode"] = "no_dist=True"
        except TypeError:
            dcp.save(state, checkpoint_id=str(dc))
            result["dcp_mode"] = "no process group"
        result["dcp_files"] = sorted(p.name for p in dc.iterdir())
        back = {k: torch.empty_like(v) for k, v in state.items()}
        try:
            dcp.load(back, checkpoint_id=str(dc), no_dist=True)
        except TypeError:
            dcp.load(back, checkpoint_id=str(dc))
        result["dcp_roundtrip"] = all(torch.equal(back[k], state[k]) for k in state)
        record("dcp intact", dc, False)
        shards = sorted(dc.glob("*.distcp"))
        d = copy(dc, "dcp_shard_deleted")
        (d / shards[0].name).unlink()
        record(f"dcp {shards[0].name} deleted ({len(shards)} shard(s))", d, True)
        d = copy(dc, "dcp_metadata_deleted")
        (d / ".metadata").unlink()
        record("dcp .metadata deleted", d, True)
        d = copy(dc, "dcp_shard_truncated")
        truncate(d / shards[0].name)
        record("dcp shard truncated, no manifest", d, False,
               "the audit reads shard names from .metadata, not sizes: a truncated shard needs a manifest")
    except Exception as error:  # noqa: BLE001
        result["errors"].append(f"dcp: {type(error).__name__}: {error}\n{traceback.format_exc()}")

    # --- safetensors, 2 shards + index -------------------------------------------------------
    try:
        from safetensors.torch import load_file, save_file

        st = root / "safetensors"
        st.mkdir()
        keys = sorted(state)
        half = len(keys) // 2
        weight_map, total = {}, 0
        for i, part in enumerate((keys[:half], keys[half:]), 1):
            name = f"model-{i:05d}-of-00002.safetensors"
            save_file({k: state[k] for k in part}, str(st / name), metadata={"format": "pt"})
            weight_map.update({k: name for k in part})
            total += sum(state[k].numel() * state[k].element_size() for k in part)
        (st / ca.SAFETENSORS_INDEX).write_text(json.dumps({"metadata": {"total_size": total},
                                                           "weight_map": weight_map}, indent=1))
        back = {}
        for name in sorted(set(weight_map.values())):
            back.update(load_file(str(st / name)))
        result["safetensors_roundtrip"] = all(torch.equal(back[k], state[k]) for k in state)
        record("safetensors 2 shards intact", st, False)
        record("safetensors shard file intact", st / "model-00001-of-00002.safetensors", False)
        d = copy(st, "st_shard_deleted")
        (d / "model-00002-of-00002.safetensors").unlink()
        record("safetensors shard 2 deleted", d, True)
        d = copy(st, "st_truncated")
        truncate(d / "model-00001-of-00002.safetensors")
        record("safetensors shard 1 truncated", d, True)
        d = copy(st, "st_header_flipped")
        flip(d / "model-00001-of-00002.safetensors", index=2)   # the u64 header length
        record("safetensors shard 1 byte flipped in the header length", d, True)
        d = copy(st, "st_data_flipped")
        flip(d / "model-00001-of-00002.safetensors", 0.7)
        record("safetensors shard 1 byte flipped in tensor data, no manifest", d, False,
               "safetensors has no checksum: a data byte flip is invisible without a manifest")
    except Exception as error:  # noqa: BLE001
        result["errors"].append(f"safetensors: {type(error).__name__}: {error}\n{traceback.format_exc()}")
