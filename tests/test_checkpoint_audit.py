"""The checkpoint audit library (sources/checkpoint_audit.py) on real files the tests write and damage.

Each format (Goodput manifest folder, safetensors shards + index, torch.distributed .distcp, plain
torch.save zip) is written intact and must pass; then each kind of damage (truncate, flip a byte,
delete a shard, leave a .tmp, a manifest path escaping the root, an extra file, an empty file)
must be flagged with the right kind. The sha256 cache must make a second audit hash nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import numpy as np
import pytest

from sources import checkpoint_audit as ca
from sources.client import MANIFEST_NAME, file_manifest
from tests.helpers import checkpoint_tensors, distcp_checkpoint, goodput_checkpoint, hf_checkpoint, kinds, torch_file


def flip_byte(path: Path, offset: int = -3) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


# --------------------------------------------------------------------------- intact checkpoints pass


@pytest.mark.parametrize("build,fmt", [
    (lambda t: goodput_checkpoint(t / "ck"), "goodput"),
    (lambda t: hf_checkpoint(t / "ck"), "safetensors"),
    (lambda t: distcp_checkpoint(t / "ck"), "distcp"),
    (lambda t: torch_file(t / "ck" / "step-1.pt"), "torch"),
])
def test_an_intact_checkpoint_of_each_format_passes(tmp_path, build, fmt):
    path = build(tmp_path)
    assert ca.detect_format(path) == fmt
    audit = ca.audit_checkpoint(path, ca.HashCache())
    assert audit.ok, audit.problems
    assert audit.files >= 1 and audit.bytes > 0


def test_a_real_torch_save_file_passes_and_our_torch_files_load_with_torch(tmp_path):
    torch = pytest.importorskip("torch")
    real = tmp_path / "real.pt"
    torch.save({"w": torch.arange(6.0).reshape(2, 3)}, real)
    assert ca.audit_checkpoint(real).ok
    ours = torch_file(tmp_path / "ours.pt")
    state = torch.load(ours, weights_only=True)
    assert np.array_equal(state["w"].numpy(), checkpoint_tensors(7)["w"])


# --------------------------------------------------------------------------- Goodput manifest folders


def test_manifest_folder_flags_each_damage(tmp_path):
    cache = ca.HashCache()
    ck = goodput_checkpoint(tmp_path / "flip")
    flip_byte(ck / "model_rank001.safetensors")
    assert kinds(ca.audit_checkpoint(ck, cache)) == {"sha256_mismatch"}

    ck = goodput_checkpoint(tmp_path / "cut")
    truncate(ck / "model_rank001.safetensors")
    assert kinds(ca.audit_checkpoint(ck, cache)) == {"size_mismatch", "truncated"}

    ck = goodput_checkpoint(tmp_path / "cut-torch")
    truncate(ck / "optim_rank000.pt", 0.9)
    found = ca.audit_checkpoint(ck, cache)
    assert kinds(found) == {"size_mismatch", "truncated"}
    assert "zip central directory" in [p for p in found.problems if p.kind == "truncated"][0].detail

    ck = goodput_checkpoint(tmp_path / "gone")
    (ck / "model_rank000.safetensors").unlink()
    found = ca.audit_checkpoint(ck, cache)
    assert kinds(found) == {"missing"} and found.problems[0].file == "model_rank000.safetensors"

    ck = goodput_checkpoint(tmp_path / "tmp")
    (ck / ".optim_rank000.pt.tmp").write_bytes(b"half a file")
    assert kinds(ca.audit_checkpoint(ck, cache)) == {"partial_write"}

    ck = goodput_checkpoint(tmp_path / "extra")
    (ck / "stray.bin").write_bytes(b"x")
    assert kinds(ca.audit_checkpoint(ck, cache)) == {"extra"}

    ck = goodput_checkpoint(tmp_path / "empty")
    (ck / "metadata.json").write_bytes(b"")
    assert kinds(ca.audit_checkpoint(ck, cache)) == {"size_mismatch", "zero_byte"}  # the manifest said 14 bytes

    ck = goodput_checkpoint(tmp_path / "bad-manifest")
    (ck / MANIFEST_NAME).write_text("{not json")
    assert kinds(ca.audit_checkpoint(ck, cache)) == {"manifest_invalid"}


def test_a_manifest_path_escaping_the_root_is_a_finding_not_a_read(tmp_path, monkeypatch):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read me")
    ck = goodput_checkpoint(tmp_path / "ckpts" / "run" / "step-1")
    manifest = json.loads((ck / MANIFEST_NAME).read_text())
    manifest["files"] += [
        {"path": "../../../secret.txt", "bytes": 14, "sha256": "0" * 64},
        {"path": "../../../../../../etc/passwd", "bytes": 1, "sha256": "0" * 64},
        {"path": str(secret), "bytes": 14, "sha256": "0" * 64},
    ]
    (ck / MANIFEST_NAME).write_text(json.dumps(manifest))
    opened = []
    real_open = open

    def spy(path, *args, **kwargs):
        opened.append(Path(path).resolve())
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", spy)
    audit = ca.audit_checkpoint(ck, ca.HashCache())
    monkeypatch.undo()
    escapes = [p for p in audit.problems if p.kind == "path_escape"]
    assert [p.file for p in escapes] == ["../../../secret.txt", "../../../../../../etc/passwd", str(secret)]
    assert kinds(audit) == {"path_escape"}
    assert secret.resolve() not in opened and Path("/etc/passwd") not in opened


def test_a_symlink_out_of_the_checkpoint_is_an_escape(tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"elsewhere")
    ck = goodput_checkpoint(tmp_path / "ck")
    (ck / "link.bin").symlink_to(outside)
    manifest = json.loads((ck / MANIFEST_NAME).read_text())
    manifest["files"].append({"path": "link.bin", "bytes": 9, "sha256": "0" * 64})
    (ck / MANIFEST_NAME).write_text(json.dumps(manifest))
    assert "path_escape" in kinds(ca.audit_checkpoint(ck))


def test_a_checkpoint_that_vanished_is_missing_and_lineage_manifest_is_the_fallback(tmp_path):
    ck = goodput_checkpoint(tmp_path / "ck")
    recorded = file_manifest(ck)
    (ck / MANIFEST_NAME).unlink()
    (ck / "metadata.json").write_text('{"step": 101}\n')  # same size, new bytes
    assert kinds(ca.audit_checkpoint(ck, expected=recorded)) == {"sha256_mismatch"}
    found = ca.audit_checkpoint(tmp_path / "nowhere", expected=recorded)
    assert kinds(found) == {"missing"} and "5 file(s) recorded" in found.problems[0].detail


# --------------------------------------------------------------------------- safetensors


def test_safetensors_index_flags_each_damage(tmp_path):
    ck = hf_checkpoint(tmp_path / "cut")
    truncate(ck / "model-00002-of-00003.safetensors", 0.7)
    found = ca.audit_checkpoint(ck)
    assert kinds(found) == {"truncated"} and "ends at byte" in found.problems[0].detail

    ck = hf_checkpoint(tmp_path / "long")
    with open(ck / "model-00001-of-00003.safetensors", "ab") as fh:
        fh.write(b"\0" * 16)
    assert kinds(ca.audit_checkpoint(ck)) == {"truncated"}  # bytes past the last tensor: not what was written

    ck = hf_checkpoint(tmp_path / "header")
    data = bytearray((ck / "model-00001-of-00003.safetensors").read_bytes())
    data[0:8] = (10**6).to_bytes(8, "little")
    (ck / "model-00001-of-00003.safetensors").write_bytes(bytes(data))
    assert "header length" in ca.audit_checkpoint(ck).problems[0].detail

    ck = hf_checkpoint(tmp_path / "gone")
    (ck / "model-00003-of-00003.safetensors").unlink()
    assert kinds(ca.audit_checkpoint(ck)) == {"missing", "shards_incomplete"}

    ck = hf_checkpoint(tmp_path / "empty")
    (ck / "model-00001-of-00003.safetensors").write_bytes(b"")
    assert kinds(ca.audit_checkpoint(ck)) == {"zero_byte"}

    ck = hf_checkpoint(tmp_path / "escape")
    index = json.loads((ck / ca.SAFETENSORS_INDEX).read_text())
    index["weight_map"]["evil"] = "../../../etc/passwd"
    (ck / ca.SAFETENSORS_INDEX).write_text(json.dumps(index))
    assert kinds(ca.audit_checkpoint(ck)) == {"path_escape"}

    ck = hf_checkpoint(tmp_path / "tmp")
    (ck / "model-00002-of-00003.safetensors.partial").write_bytes(b"xx")
    assert kinds(ca.audit_checkpoint(ck)) == {"partial_write"}


def test_safetensors_shards_without_an_index_must_be_a_complete_set(tmp_path):
    ck = hf_checkpoint(tmp_path / "ck", shards=4)
    (ck / ca.SAFETENSORS_INDEX).unlink()
    assert ca.audit_checkpoint(ck).ok
    (ck / "model-00002-of-00004.safetensors").unlink()
    found = ca.audit_checkpoint(ck)
    assert kinds(found) == {"shards_incomplete"} and "missing 2" in found.problems[0].detail


# --------------------------------------------------------------------------- distcp


def test_distcp_flags_a_deleted_shard_and_a_missing_metadata(tmp_path):
    ck = distcp_checkpoint(tmp_path / "gone")
    shards = sorted(ck.glob("*.distcp"))
    shards[-1].unlink()
    assert {"missing", "shards_incomplete"} <= kinds(ca.audit_checkpoint(ck))

    ck = distcp_checkpoint(tmp_path / "meta")
    (ck / ".metadata").unlink()
    assert {"missing", "shards_incomplete"} <= kinds(ca.audit_checkpoint(ck))

    ck = distcp_checkpoint(tmp_path / "tmp")
    (ck / "__0_0.distcp.tmp").write_bytes(b"x")
    assert kinds(ca.audit_checkpoint(ck)) == {"partial_write"}


def test_distcp_rank_hole_without_metadata_names_is_incomplete(tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / ".metadata").write_bytes(b"\x80\x04no names here.")
    for r in (0, 1, 3):
        (ck / f"__{r}_0.distcp").write_bytes(b"data")
    found = ca.audit_checkpoint(ck)
    assert kinds(found) == {"shards_incomplete"} and "rank(s) 2" in found.problems[0].detail


# --------------------------------------------------------------------------- torch.save files


def test_torch_files_flag_truncation_and_empty_files(tmp_path):
    f = torch_file(tmp_path / "a.pt")
    truncate(f, 0.95)
    assert kinds(ca.audit_checkpoint(f)) == {"truncated"}
    empty = tmp_path / "b.pt"
    empty.write_bytes(b"")
    assert kinds(ca.audit_checkpoint(empty)) == {"zero_byte"}
    folder = tmp_path / "dir"
    torch_file(folder / "model.pt")
    torch_file(folder / "optim.pt")
    truncate(folder / "optim.pt", 0.5)
    assert [p.file for p in ca.audit_checkpoint(folder).problems] == ["optim.pt"]


# --------------------------------------------------------------------------- hashing and the cache


def test_sha256_matches_hashlib_on_a_multi_block_file(tmp_path):
    import hashlib

    f = tmp_path / "big.bin"
    data = os.urandom(3 * (1 << 20) + 12345)
    f.write_bytes(data)
    assert ca.sha256_file(f) == hashlib.sha256(data).hexdigest()


def test_second_audit_of_unchanged_files_hashes_nothing_and_a_change_rehashes(tmp_path):
    ck = goodput_checkpoint(tmp_path / "ck")
    cache = ca.HashCache()
    first = ca.audit_checkpoint(ck, cache)
    assert first.ok and first.hashed == 5
    second = ca.audit_checkpoint(ck, cache)
    assert second.ok and second.hashed == 0
    flip_byte(ck / "model_rank000.safetensors")
    os.utime(ck / "model_rank000.safetensors", ns=(1, 1))   # a new mtime, as any write gives
    third = ca.audit_checkpoint(ck, cache)
    assert third.hashed == 1 and kinds(third) == {"sha256_mismatch"}


def test_the_hash_cache_persists_in_duckdb(tmp_path):
    from orchestration.storage.warehouse import WarehouseResource

    ck = goodput_checkpoint(tmp_path / "ck")
    warehouse = WarehouseResource(path=str(tmp_path / "warehouse.duckdb"))
    with warehouse.connect() as con:
        cache = ca.DuckDBHashCache(con)
        assert ca.audit_checkpoint(ck, cache).hashed == 5
        assert cache.save(con) == 5
    with warehouse.connect() as con:
        again = ca.audit_checkpoint(ck, ca.DuckDBHashCache(con))
    assert again.ok and again.hashed == 0
    assert isinstance(duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True)
                      .execute("SELECT count(*) FROM checkpoint_hashes").fetchone()[0], int)


# --------------------------------------------------------------------------- discovery


def test_discover_finds_every_format_and_not_inside_one(tmp_path):
    goodput_checkpoint(tmp_path / "root" / "run-a" / "step-000100")
    hf_checkpoint(tmp_path / "root" / "run-b" / "hf")
    distcp_checkpoint(tmp_path / "root" / "run-c" / "dcp")
    torch_file(tmp_path / "root" / "run-d" / "step-5.pt")
    (tmp_path / "root" / "run-d" / ".step-6.pt.tmp").write_bytes(b"x")
    found = [p.relative_to(tmp_path / "root").as_posix() for p in ca.discover([tmp_path / "root", tmp_path / "nope"])]
    assert found == ["run-a/step-000100", "run-b/hf", "run-c/dcp", "run-d/step-5.pt"]


@pytest.mark.parametrize("rel,inside", [
    ("a/b.bin", True), ("./a", True), ("../x", False), ("a/../../x", False), ("/etc/passwd", False),
    ("", False), ("~/x", False), ("a\x00b", False),
])
def test_resolve_inside(tmp_path, rel, inside):
    assert (ca.resolve_inside(tmp_path, rel) is not None) == inside


def test_bench_hash_quick_mode_runs_and_the_second_audit_hashes_nothing(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "hash.json"
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, str(root / "bench" / "bench_hash.py"), "--quick", "--out", str(out)],
                          cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["first_audit_files_hashed"] == 3 and result["second_audit_files_hashed"] == 0
    assert result["second_audit_bytes_hashed"] == 0 and result["audits_ok"] and result["ratio"] > 0
    assert "ratio to sha256sum" in done.stdout and "Machine:" in done.stdout
